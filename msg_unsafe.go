package symheap

import (
	"sync/atomic"
	"unsafe"
)

// Views of the message area's shared words (msg_queue.go describes the
// layout). Offsets are multiples of 8, and the areas start on cache lines.

// u64At views the 8 bytes at b[off:] as an atomic word.
func u64At(b []byte, off uint64) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(unsafe.SliceData(b[off : off+8])))
}

// bellAt views the first line of b as a doorbell.
func bellAt(b []byte) *bell {
	return (*bell)(unsafe.Pointer(unsafe.SliceData(b[:unsafe.Sizeof(bell{})])))
}

// slotAt views the first line of b as a split slot.
func slotAt(b []byte) *splitSlot {
	return (*splitSlot)(unsafe.Pointer(unsafe.SliceData(b[:unsafe.Sizeof(splitSlot{})])))
}

// The doorbell and the split slots are exactly one cache line.
var _ [cellSize - unsafe.Sizeof(splitSlot{})]byte
var _ [unsafe.Sizeof(splitSlot{}) - cellSize]byte
var _ [cellSize - unsafe.Sizeof(bell{})]byte
var _ [unsafe.Sizeof(bell{}) - cellSize]byte

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
