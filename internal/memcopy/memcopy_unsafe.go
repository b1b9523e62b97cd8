package memcopy

import "unsafe"

// Move copies n bytes from src to dst (overlap allowed, as copy).
func Move(dst, src unsafe.Pointer, n uintptr) {
	if useRep && n >= Large && n < repBelow && uintptr(dst)&15 != 0 && uintptr(dst)-uintptr(src) >= n {
		repMovsb(dst, src, n)
		return
	}
	copy(unsafe.Slice((*byte)(dst), n), unsafe.Slice((*byte)(src), n))
}

func moveBytes(dst, src []byte, n int) {
	Move(unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(unsafe.SliceData(src)), uintptr(n))
}
