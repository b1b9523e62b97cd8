package shmsync

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"
)

// addrOf returns the address of an atomic word for the futex syscall.
func addrOf(w *atomic.Uint32) unsafe.Pointer { return unsafe.Pointer(w) }

// Low32 views the low half of a 64-bit word: the futex word of a counter
// (WaitCounter), which every add moves.
func Low32(w *atomic.Uint64) *atomic.Uint32 {
	p := unsafe.Pointer(w)
	if bigEndian {
		p = unsafe.Add(p, 4)
	}
	return (*atomic.Uint32)(p)
}

var bigEndian = binary.NativeEndian.Uint16([]byte{0, 1}) == 1
