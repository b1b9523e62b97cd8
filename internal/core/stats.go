package core

import "sync/atomic"

// Stats are one PE's counters in shared memory, in a control-block area
// of their own: written by their PE only (Bump, or Add where a statistic
// must not lose an increment), read by symheap stat through a read-only
// attachment to the job's segment.
type Stats struct {
	SymAllocs, SymFrees       atomic.Uint64
	SharedAllocs, SharedFrees atomic.Uint64
	RemoteFrees               atomic.Uint64 // frees into another PE's shared heap
	Puts, Gets, Atomics       atomic.Uint64
	MsgEager, MsgSingleCopy   atomic.Uint64
	MsgKernel, MsgBounce      atomic.Uint64
	RCacheHits, RCacheMisses  atomic.Uint64
	RCacheRegs, RCacheDeregs  atomic.Uint64
	RCacheEvicts, RCacheInv   atomic.Uint64
	RCacheBytes               atomic.Uint64
	RCacheStale               atomic.Uint64 // entries of Go memory retired when their object was collected
	// MonFlags is the memory monitor's self-test result (memhook.Flags)
	// plus MonTested, with MonCHooks when the C library's hooks were
	// its source; 0 before a self-test. Written at Init.
	MonFlags atomic.Uint64
	// SharedFront is the offset of the small-block front end's header in
	// the PE's local shared heap, plus one; 0 when the heap has none
	// (alloc/small). Written once, before Init's closing barrier.
	SharedFront atomic.Uint64
	// The C library's shared malloc (capi/smalloc.c): the bytes of the
	// PE's arena (0: off), and the blocks it served from the system
	// allocator because the arena was full. Written by the PE's C front
	// end only.
	CMallocArena, CMallocFallbacks atomic.Uint64
}

// Bits of Stats.MonFlags above memhook's flags.
const (
	MonTested = 1 << 31 // a self-test ran
	MonCHooks = 1 << 30 // the C library's hooks were its source
)

var statsArea = RegisterArea("stats", func(int) uint64 { return SizeOf[Stats]() })

// Stats returns PE pe's counters.
func (s *Space) Stats(pe int) *Stats { return View[Stats](s.Bytes(statsArea, pe)) }
