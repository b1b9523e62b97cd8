package memcopy

import "unsafe"

// moveGo is Move but for the vector copy, which Move (in assembly on
// amd64, memcopy_amd64.s) takes itself, to spare the copies it makes a
// call of Go's: the first test of the rule below is useRep's.
func moveGo(dst, src unsafe.Pointer, n uintptr) {
	if useRep && n >= Large && apart(dst, src, n) {
		switch {
		case n >= streamFrom:
			// Larger than this thread's share of the cache: straight to
			// memory, as glibc's memcpy does (the runtime's memmove keeps
			// REP MOVSQ for an aligned destination at every size).
			ntMove(dst, src, n)
			return
		case uintptr(dst)&15 != 0:
			// As glibc does: the first 64 bytes by the runtime, then REP
			// MOVSB from the first 64-byte boundary of the destination on
			// (string moves run faster into an aligned destination). The
			// head and the string move overlap by less than 64 bytes,
			// which is harmless because the blocks are apart.
			head := -uintptr(dst) & 63
			copy(unsafe.Slice((*byte)(dst), 64), unsafe.Slice((*byte)(src), 64))
			repMovsb(unsafe.Add(dst, head), unsafe.Add(src, head), n-head)
			return
		}
	}
	copy(unsafe.Slice((*byte)(dst), n), unsafe.Slice((*byte)(src), n))
}

// apart reports whether the n-byte blocks at dst and src do not overlap.
func apart(dst, src unsafe.Pointer, n uintptr) bool {
	d, s := uintptr(dst), uintptr(src)
	return d-s >= n && s-d >= n
}

func moveBytes(dst, src []byte, n int) {
	Move(unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(unsafe.SliceData(src)), uintptr(n))
}
