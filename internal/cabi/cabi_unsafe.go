// Package cabi is the seam between the runtime (the root package) and the
// C library (capi, built only by `make build` with the symheap_capi tag).
// The C library's fast paths read the segment directly; this package
// carries, once at shmem_init, what they need to know of a PE's view of
// it, in plain values, and the few runtime actions the C side must ask
// of the root that its public API does not offer. The root fills Describe
// and its companions from an init function.
//
// It also holds the registry of the formats the C library shares with the
// runtime (format.go): the root and the layers that own such a format
// register its Go type, from which capi/gen generates the C declarations.
package cabi

import "unsafe"

// Layout is what the C fast paths read: where the segment is, where each
// partition and control block lies, the pacing of waits and this PE's
// counters. What lies where inside a control block is not here: the
// formats are the Go types themselves, generated into
// capi/shmemi_formats.h (format.go).
type Layout struct {
	Base, WBase                unsafe.Pointer // the segment as mapped here; where the runtime writes other PEs' heaps
	PartOff, PartStride        uint64         // partition p begins at Base+PartOff+p*PartStride, with its symmetric heap
	HeapSize                   uint64
	CBBase                     unsafe.Pointer // PE 0's control block; PE p's is CBStride bytes further per PE
	CBStride                   uint64
	StatPuts, StatGets, StatAt unsafe.Pointer
	Rank, NPEs                 int
	MembarrierReady            bool // puts need no fence (wait.go)
	PostRelaxed                bool // the world barrier's post lines are published with release stores (team.Layer.Relaxed)
	SameAddress, Protected     bool
	Far                        bool  // some PE is on another node: the C fast path reaches it through Remote
	FarPEs                     []int // the PEs on other nodes, when Far
	NodeOf                     []int // the node of every PE, numbered from 0, when Far
	Polls, Yields              int   // the pacing of waits for other processes (shmsync.Pace)
	YieldNs                    int64 // the yields go on this long at least (shmsync.YieldSpan; 0: just count them)
	LongYieldNs                int64 // a yield this long lasted (shmsync, "A yield that lasts")
	HandOverNs                 int64 // a yield this long handed the core over (shmsync, "Placement"; 0: none can)
	Settle                     int   // pauses between a pair barrier's publication and its first look (shmsync.SettlePolls)
	// This PE's counts of collective allocations and frees.
	StatSymAllocs, StatSymFrees unsafe.Pointer
	// Calls is the offset in a control block of the call words' area
	// (internal/calls), where the C library publishes its collective
	// calls as the runtime does.
	Calls uint64
	// Barrier is the offset in a control block of the full barrier's
	// area (internal/team, dissem.go), BarrierRounds the round lines of
	// each team id there: the world barrier of the C library is the
	// runtime's, on the same words.
	Barrier       uint64
	BarrierRounds int
	SegPath       string
	// CBlock is this PE's copy of the C library's symmetric block
	// (CBlockSize bytes: its world post lines and collectives' scratch),
	// which Init allocates on every PE of a job that has a C PE; nil
	// otherwise.
	CBlock unsafe.Pointer
	// GoPEs is the number of Go PEs in the job (PEs of a Go program, as
	// opposed to a C program hosting the runtime): the C library routes
	// its collectives through the runtime when it is not 0. Each PE's
	// language is in its control block (lang, LangGo or LangC).
	GoPEs int
}

// What a PE runs, in its control block's lang word: a Go program, or a C
// program that hosts the runtime (Hosted). 0: not yet published.
const (
	LangGo = 1
	LangC  = 2
)

// CBlockSize is the size of the C library's symmetric block (Layout.CBlock),
// 64-byte aligned. The C library checks that what it keeps there fits.
const CBlockSize = 8192

// StaticWindow is a C PE's static data window (the C library's
// static.c), which Init publishes in the PE's control block before its
// barrier, for the other C PEs to map.
type StaticWindow struct {
	PID, FD int64
	Size    uint64
	// Mem is the window's memory in this process (the program's static
	// data, outside the Go heap), which a job on several nodes registers
	// with its transport (transport.RegionStatic).
	Mem []byte
}

// SharedMallocArena is what the C library's shared malloc needs to know:
// where the local shared heaps are, where each PE's small-block front
// end is found, and its own arena.
type SharedMallocArena struct {
	SharedOff, SharedSize uint64 // PE p's shared heap is its partition (Layout.PartOff + p*PartStride) + SharedOff
	// FrontWord is the offset from a PE's control block of the word
	// that holds its front end's header offset + 1 (core.Stats.SharedFront).
	FrontWord uint64
	Arena     uint64 // this PE's arena: its offset in the shared heap
	ArenaSize uint64
	Fallbacks unsafe.Pointer // this PE's core.Stats.CMallocFallbacks
	Classes   [][6]uint64    // the size classes (small.ClassTable)
}

// Static is set by the C library before its Init (Size 0: no window).
var Static StaticWindow

func init() {
	RegisterConst("LANG_GO", LangGo, "a control block's lang: the PE runs a Go program")
	RegisterConst("LANG_C", LangC, "a control block's lang: the PE runs a C program (libsymheap)")
	RegisterConst("CBLOCK_SIZE", CBlockSize, "bytes of the C library's symmetric block, allocated by Init in a job with a C PE")
}

// Hooks the root fills (see package comment). p is the root's *PE.
var (
	Describe   func(p any) Layout
	CheckPeers func(p any) error // nil, or the error naming a lost PE
	// ShareRecords tells the runtime that the C library publishes
	// allocation records of this PE too (its shmem_free, and its
	// shmem_malloc from the cache of freed blocks). nums, in C's memory,
	// then holds this PE's last phase and call numbers: the runtime sets
	// them now, and both sides read them before a call and write them as
	// they publish (reading them back from the PE's own records in shared
	// memory cost a cache miss a call: the other PEs poll those lines).
	ShareRecords func(p any, nums *[2]uint64)
	// FreeExchanged gives back to the allocator blocks whose Free the C
	// library has exchanged already (the offsets in the heap).
	FreeExchanged func(p any, offs []uint64) error
	// Diverged words the error of this PE's last allocation phase, which
	// the C library exchanged and found different on some PE (out
	// compared only if withOut); nil if no record differs.
	Diverged func(p any, withOut bool) error
	// Differs is the runtime's Tracker.Differs (internal/calls): this
	// PE's call of record mine met PE q's of record theirs in the C
	// library's barrier.
	Differs func(p any, mine, theirs uint64, q int) error
	// SyncInCall is the barrier of team t (a root *Team) as a step of
	// the C library's collective call on it, which the C library entered:
	// its lines carry that call's record (internal/team, SyncInCall).
	SyncInCall func(t any) error
	// ReduceFold reduces n elements of esz bytes at dst and src over
	// team t (a root *Team) with the C library's fold: its reductions in
	// a job with Go PEs (Layout.GoPEs), which take the runtime's steps.
	ReduceFold func(t any, dst, src unsafe.Pointer, n int, esz uint64, fold func(acc, x unsafe.Pointer, n int)) error
	// Far returns the transport to the PEs on other nodes of a job that
	// spans nodes (Layout.Far), nil otherwise: the C library's put, get,
	// atomics, fence and quiet to those PEs go through it, as the
	// runtime's own do (internal/far).
	Far func(p any) Remote
	// BeforeExit, when set (by the C library), runs before the runtime
	// ends the process on a GlobalExit (this PE's or another's): it
	// flushes C's stdio.
	BeforeExit func()
	// MonitorTested records the C library's memory-monitor self-test
	// (its hooks' flags, memhook.Flags) in the PE's figures, where
	// symheap stat shows them.
	MonitorTested func(p any, flags uint32)
	// SharedMalloc takes the C library's shared malloc arena of about
	// size bytes (0: three quarters of the local shared heap) from this PE's local shared heap (capi/smalloc.c,
	// alloc/small's foreign.go) and says where everything it needs is.
	SharedMalloc func(p any, size uint64) (SharedMallocArena, error)
	// Hosted is set by the C library before its Init: the process is a
	// C program that hosts the Go runtime, whose threads are not in the
	// order a Go program's are (the root then leaves the runtime's
	// monitor thread alone: shmsync.QuietMonitor).
	Hosted bool
)

// Remote is the multi-node layer as the C library uses it: one-sided
// operations on region r (transport.RegionHeap, RegionStatic) of a PE on
// another node, by offset. op is a transport.AMO.
type Remote interface {
	PutAt(r, target int, off uint64, src []byte, nbi bool) error
	GetAt(r int, dst []byte, source int, off uint64) error
	AtomicAt(r int, op uint8, target int, off uint64, size int, v, cmp uint64) (uint64, error)
	Fence() error
	Quiet() error
}
