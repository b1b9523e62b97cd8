package alloctest

import (
	"fmt"
	"unsafe"
)

// Word64 returns the 8-byte word at off in mem (a shared mapping), for
// tests that lay out their own control words next to a heap and access
// them with sync/atomic. off must be 8-byte aligned and inside mem.
func Word64(mem []byte, off uint64) *uint64 {
	if off%8 != 0 || off+8 > uint64(len(mem)) {
		panic(fmt.Sprintf("alloctest: word at %#x outside a %d-byte mapping or misaligned", off, len(mem)))
	}
	return (*uint64)(unsafe.Pointer(&mem[off]))
}
