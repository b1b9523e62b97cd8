package msg

import (
	"sync/atomic"
	"unsafe"
)

// The views of the message area's shared words that the hot paths take
// (queue.go describes the layout), and the runtime hooks of msgLock.

// u64At views the 8 bytes at b[off:] as an atomic word. Offsets are
// multiples of 8, and the areas start on cache lines. (core.View checks
// the alignment on every call; the rings poll through this.)
func u64At(b []byte, off uint64) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(unsafe.SliceData(b[off : off+8])))
}

// cellAt is the address of the 8 bytes at b[off:], for a prefetch.
func cellAt(b []byte, off uint64) unsafe.Pointer {
	return unsafe.Pointer(unsafe.SliceData(b[off : off+8]))
}

// The doorbell and the split slots are exactly one cache line.
var _ [lineSize - unsafe.Sizeof(splitSlot{})]byte
var _ [unsafe.Sizeof(splitSlot{}) - lineSize]byte
var _ [lineSize - unsafe.Sizeof(bell{})]byte
var _ [unsafe.Sizeof(bell{}) - lineSize]byte

// procPin pins the calling goroutine to its P (the scheduler's processor:
// it is not preempted until procUnpin) and returns the P's id; procUnpin
// undoes it. The runtime keeps both reachable by linkname for sync.Pool's
// imitators (go.dev/issue/67401); msgLock uses them to let a goroutine on
// the P a lock is parked for claim it without a locked instruction.
//
//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()
