package symheap

import "sync/atomic"

// control is the fixed part of a PE's control block, the first bytes of
// the block (the rest is carved by the layers: see cbSize). Every field is
// touched by several processes and only through sync/atomic.
type control struct {
	// Global words, used in PE 0's block only.
	exitCode atomic.Uint32 // exitSet|code once some PE called GlobalExit

	// This PE's exit watcher.
	exitWord     atomic.Uint32 // futex word, bumped to wake the watcher
	exitSleepers atomic.Uint32
	watchStop    atomic.Uint32 // set by this PE's Close to end its watcher

	_ [48]byte

	// The records of this PE's latest collective allocations, compared by
	// every PE at the allocation's barrier (divergence check). Call k
	// writes record k%2: a PE can run at most one call ahead of the
	// slowest reader, because every call contains a barrier.
	allocRec [2]allocRecord

	// Counters that symheap stat shows.
	stats peStats
}

// peStats are per-PE counters in shared memory, written by their PE only.
type peStats struct {
	symAllocs, symFrees      atomic.Uint64
	sharedAllocs, sharedFree atomic.Uint64
	remoteFrees              atomic.Uint64
	puts, gets, atomics      atomic.Uint64
	msgEager, msgSingleCopy  atomic.Uint64
	msgKernel, msgBounce     atomic.Uint64
	rcacheHits, rcacheMisses atomic.Uint64
	rcacheRegs, rcacheDeregs atomic.Uint64
	rcacheEvicts, rcacheInv  atomic.Uint64
	rcacheBytes              atomic.Uint64
	heartbeat                atomic.Uint64
}

// controlSize is the bytes reserved for control; the layers' areas follow.
const controlSize = 4096

// cbSize is the size of each PE's control block in a job of npes PEs.
func cbSize(npes int) uint64 {
	return controlSize + teamAreaSize(npes) + msgAreaSize(npes)
}

// Offsets of the layers' areas inside a control block.
func teamAreaOff() uint64        { return controlSize }
func msgAreaOff(npes int) uint64 { return controlSize + teamAreaSize(npes) }

// allocRecord describes one collective allocation call on one PE.
type allocRecord struct {
	seq   atomic.Uint64 // call number, from 1
	kind  atomic.Uint64 // callMalloc, callFree, ...
	size  atomic.Uint64 // bytes asked for
	align atomic.Uint64 // alignment or hints
	in    atomic.Uint64 // offset passed in (Free, Realloc), or noOff
	out   atomic.Uint64 // resulting offset, or noOff on failure
	_     [16]byte
}
