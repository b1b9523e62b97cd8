package release

import "unsafe"

const areaSize = uint64(unsafe.Sizeof(Area{}))

// areaOf views the start of b, a PE's release area in its control block
// (8-byte aligned, AreaSize bytes), as an Area.
func areaOf(b []byte) *Area {
	if uint64(len(b)) < areaSize || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%8 != 0 {
		panic("release: area too small or misaligned")
	}
	return (*Area)(unsafe.Pointer(unsafe.SliceData(b)))
}
