package symheap

import (
	"errors"
	"fmt"
	"sync"

	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/release"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/alloc/small"
	"github.com/symheap/symheap/internal/segment"
)

// The local shared heap (HMPI's shared-memory heap).
//
// Each PE's partition ends with a local shared heap (segment.Layout:
// [SharedOff, SharedOff+SharedSize)), managed by the job's allocator
// component like the symmetric heap but used without any collective call:
// a block belongs to the PE that allocated it, lies in that PE's pool, and
// is visible to every PE of the node at the same address (in same-address
// mode; by offset translation otherwise).
//
// # Pools and locks
//
//	PE p's pool   the allocator over segment.Shared(p), formatted by p in
//	              Init (format), wrapped in alloc.Locked: every call, by
//	              whichever PE, takes the robust lock word of the region
//	              header, tagged with the caller's rank. Over it, unless
//	              SYMHEAP_SHARED_SMALL=0, the small-block front end
//	              (alloc/small): blocks of up to small.MaxSmall bytes come
//	              from size-class spans that p owns, with no lock; larger
//	              ones, and the spans, from the locked allocator. The front
//	              end's header offset is in p's core.Stats (SharedFront),
//	              where other PEs and symheap stat find it
//	own           pools[rank], set in Init: the fast paths read it without
//	              a lock
//	pools[q]      this PE's handle on PE q's pool, attached on the first
//	              free into it (Init's closing barrier guarantees q has
//	              formatted it by then)
//
// # Paths
//
//	SharedAlloc   1. validate (pointer-free T, n >= 0, size overflow)
//	              2. Alloc from this PE's own pool: a small block from the
//	                 front end (no lock), any other under the pool's lock,
//	                 aligned to T's alignment (at least alloc.MinAlign)
//	              3. return the block as a []T at its address here
//	SharedFree    1. locate the slice's first element: which PE's pool
//	                 (sharedOffset), at which offset; anything outside every
//	                 pool is ErrBadFree, naming what it is instead
//	              2. Free into that pool: a small block of this PE's own
//	                 spans onto their free list, one of another PE's onto
//	                 its span's remote-free stack, any other block under
//	                 the pool's lock; the allocator and the front end refuse
//	                 double frees and interior offsets (ErrBadFree) without
//	                 changing anything
//
// Every release reaches the job's release log before the block can be
// handed out again (package release): the locked allocator's through
// alloc.Reporting under the lock, the front end's small blocks through
// the same sink, before the block goes back on a free list or stack.
//
// The allocator's lock is owner-tagged: a PE that dies holding it turns
// the waiters' calls into ErrPeerLost (alloc.Lock), and the heap may then
// be inconsistent, which is acceptable because the job is going down.

// sharedHeap is the local shared heap layer: this PE's view of every PE's
// shared heap. Its fields but pools are set once, at Init.
type sharedHeap struct {
	sp        *core.Space
	rank      int
	component alloc.Component
	log       *release.Log      // where the pools report their releases
	alive     func(pe int) bool // the liveness of a lock holder
	stats     *core.Stats       // this PE's counters
	small     bool              // put the small-block front end over this PE's pool

	own    alloc.Allocator // pools[rank], set in format
	front  *small.Heap     // own, when it is the front end: called directly
	ownMem []byte          // this PE's shared heap, where front's offsets are

	mu    sync.Mutex        // guards pools
	pools []alloc.Allocator // by owner: *small.Heap or *alloc.Locked; pools[rank] is formatted in Init, others attached on use
}

// formatShared writes fresh allocator metadata into this PE's shared heap.
// A job may run without one (SYMHEAP_SHARED_SIZE=0).
func (h *sharedHeap) format() error {
	h.pools = make([]alloc.Allocator, h.sp.NPEs)
	if h.sp.Lay.SharedSize == 0 {
		return nil
	}
	a, err := h.component.Format(h.sp.Shared(h.rank))
	if err != nil {
		return fmt.Errorf("symheap: format the local shared heap (%s) with %s: %w (raise SYMHEAP_SHARED_SIZE or Config.SharedSize)",
			segment.FormatSize(h.sp.Lay.SharedSize), h.component.Name, err)
	}
	l, err := alloc.NewLocked(h.reporting(a, h.rank), uint32(h.rank), h.holderAlive)
	if err != nil {
		return fmt.Errorf("symheap: local shared heap: %w", err)
	}
	h.own = l
	if h.small {
		// A heap too small for the front end's header (a few bytes per
		// 4 KiB) goes without it.
		f, err := small.Format(l, h.sp.Shared(h.rank), h.sink(h.rank))
		switch {
		case err == nil:
			h.own, h.front, h.ownMem = f, f, h.sp.Shared(h.rank)
			h.stats.SharedFront.Store(uint64(f.Header()) + 1) // before Init's barrier, after which other PEs read it
		case !errors.Is(err, ErrOutOfMemory):
			return fmt.Errorf("symheap: the local shared heap's small-block front end: %w", err)
		}
	}
	h.pools[h.rank] = h.own
	return nil
}

// sink is where the releases of PE owner's shared heap go.
func (h *sharedHeap) sink(owner int) alloc.ReleaseSink {
	return h.log.Sink(uint64(h.sp.SharedSeg(owner, 0)))
}

// reporting wraps the allocator of PE owner's shared heap so that its
// releases, by whichever PE, reach every PE's monitor (package release).
// The wrapper sits inside the lock: a release is in the log before the
// block can be handed out again.
func (h *sharedHeap) reporting(a alloc.Allocator, owner int) alloc.Allocator {
	return alloc.Report(a, h.sink(owner))
}

// holderAlive tells the shared heaps' locks whether a holder still lives.
func (h *sharedHeap) holderAlive(holder uint32) bool {
	return int(holder) < h.sp.NPEs && h.alive(int(holder))
}

// pool returns the allocator over PE owner's shared heap, attaching to it
// on first use.
func (h *sharedHeap) pool(owner int) (alloc.Allocator, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p := h.pools[owner]; p != nil {
		return p, nil
	}
	if h.sp.Lay.SharedSize == 0 {
		return nil, fmt.Errorf("symheap: the local shared heap is empty: %w (SYMHEAP_SHARED_SIZE is 0; raise it or set Config.SharedSize)", ErrOutOfMemory)
	}
	a, err := h.component.Attach(h.sp.Shared(owner))
	if err != nil {
		return nil, fmt.Errorf("symheap: attach PE %d's local shared heap: %w", owner, err)
	}
	l, err := alloc.NewLocked(h.reporting(a, owner), uint32(h.rank), h.holderAlive)
	if err != nil {
		return nil, fmt.Errorf("symheap: local shared heap of PE %d: %w", owner, err)
	}
	var p alloc.Allocator = l
	// Set by owner before Init's closing barrier, which this PE passed.
	if hdr := h.sp.Stats(owner).SharedFront.Load(); hdr != 0 {
		f, err := small.Attach(l, h.sp.Shared(owner), alloc.Off(hdr-1), h.sink(owner))
		if err != nil {
			return nil, fmt.Errorf("symheap: local shared heap of PE %d: %w", owner, err)
		}
		p = f
	}
	h.pools[owner] = p
	return p, nil
}

// SharedAlloc allocates n elements of T in this PE's local shared heap. It
// is not collective. The block is visible to every PE of the job at the
// same address (SameAddress; else through SharedPtrOf and SharedAt) and
// any PE may free it with SharedFree. T must hold no pointers
// (ErrPointerType). n == 0 returns nil. When the heap is full the error
// wraps ErrOutOfMemory and names SYMHEAP_SHARED_SIZE.
func SharedAlloc[T any](pe *PE, n int) ([]T, error) {
	if pe != nil && !pe.closed.Load() && n > 0 && basic[T]() && core.SizeOf[T]() > 0 && uint64(n) <= small.MaxSmall/core.SizeOf[T]() {
		// The common case, in one call: a small block of a plain type
		// from this PE's front end (elemBytes has nothing to refuse).
		if p, err := pe.ext.shared.allocSmall(uint64(n) * core.SizeOf[T]()); err != nil {
			return nil, err
		} else if p != nil {
			return core.SliceAt[T](p, n), nil
		}
	}
	if err := pe.check(); err != nil {
		return nil, err
	}
	size, err := elemBytes[T](n)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	off, err := pe.ext.shared.alloc(size, core.AlignOf[T]())
	if err != nil {
		return nil, err
	}
	return core.SliceAt[T](pe.sp.SharedAddr(pe.rank, core.SharedOff(off)), n), nil
}

// allocSmall is SharedAlloc's common case: size bytes, 0 < size <=
// small.MaxSmall, aligned to alloc.MinAlign, from this PE's front end. It
// returns nil and no error, having done nothing, when there is no front
// end (the general path then says why, or serves the block).
func (h *sharedHeap) allocSmall(size uint64) (core.Ptr, error) {
	f := h.front
	if f == nil {
		return nil, nil
	}
	off, err := f.Alloc(size, alloc.MinAlign)
	if err != nil {
		return nil, h.allocErr(size, err)
	}
	core.Bump(&h.stats.SharedAllocs) // a statistic: written by this PE only; symheap stat reads it
	return core.AtOff(h.ownMem, uint64(off)), nil
}

// sharedAlloc takes size bytes aligned to align from this PE's pool and
// returns the offset in its shared heap. Small blocks of plain types come
// through allocSmall, which calls the front end directly; here h.own is
// the front end, when there is one.
func (h *sharedHeap) alloc(size, align uint64) (uint64, error) {
	p := h.own
	if p == nil {
		_, err := h.pool(h.rank) // the error that says why there is none
		return 0, fmt.Errorf("symheap: SharedAlloc of %d bytes: %w", size, err)
	}
	if align < alloc.MinAlign {
		align = alloc.MinAlign
	}
	off, err := p.Alloc(size, align)
	if err != nil {
		return 0, h.allocErr(size, err)
	}
	core.Bump(&h.stats.SharedAllocs) // a statistic: written by this PE only; symheap stat reads it
	return uint64(off), nil
}

// allocErr is the error of a failed SharedAlloc of size bytes.
func (h *sharedHeap) allocErr(size uint64, err error) error {
	if errors.Is(err, ErrOutOfMemory) {
		st := h.own.Stats()
		return fmt.Errorf("symheap: SharedAlloc of %d bytes: %w (local shared heap %s per PE, %s free, largest free block %s; raise SYMHEAP_SHARED_SIZE or Config.SharedSize)",
			size, ErrOutOfMemory, segment.FormatSize(h.sp.Lay.SharedSize), segment.FormatSize(st.Free), segment.FormatSize(st.LargestFree))
	}
	return fmt.Errorf("symheap: SharedAlloc of %d bytes: %w", size, err)
}

// SharedFree releases a block of any PE's local shared heap; any PE may
// free any block. s must be the slice SharedAlloc returned (or a reslice
// that starts at its first element). A nil s does nothing. A double free,
// a slice that starts inside a block, and memory outside every shared
// heap are ErrBadFree, and change nothing.
func SharedFree[T any](pe *PE, s []T) error {
	p, _ := core.SliceData(s)
	if pe != nil && !pe.closed.Load() && s != nil {
		// The common case, in one call: a block of this PE's own heap.
		if done, err := pe.ext.shared.freeOwn(p); done {
			return err
		}
	}
	if err := pe.check(); err != nil {
		return err
	}
	if s == nil {
		return nil
	}
	off, owner, ok := pe.sp.SharedOffset(p, 0)
	if !ok {
		what := "ordinary Go memory"
		if _, hOwner, in := pe.sp.HeapOffset(p, 0); in {
			what = fmt.Sprintf("PE %d's symmetric heap (free it with Free, collectively)", hOwner)
		} else if _, in := pe.sp.SegOffset(p); in {
			what = "the segment, outside every heap"
		}
		return fmt.Errorf("symheap: SharedFree of %p: %w (it lies in %s, not in a local shared heap)", p, ErrBadFree, what)
	}
	return pe.ext.shared.free(owner, uint64(off))
}

// freeOwn is SharedFree's common case: the block at p in this PE's own
// shared heap, which has the front end. It reports false, having done
// nothing, for any other p (the general path then frees it or says why).
func (h *sharedHeap) freeOwn(p core.Ptr) (bool, error) {
	f := h.front
	if f == nil {
		return false, nil
	}
	off, in := core.Within(h.ownMem, p)
	if !in {
		return false, nil
	}
	if err := f.Free(alloc.Off(off)); err != nil {
		return true, h.freeErr(h.rank, off, err)
	}
	core.Bump(&h.stats.SharedFrees) // a statistic: written by this PE only; symheap stat reads it
	return true, nil
}

// sharedFree frees the block at off in PE owner's shared heap.
func (h *sharedHeap) free(owner int, off uint64) error {
	// This PE's own blocks, when it has the front end, went through
	// freeOwn; here h.own is that front end anyway.
	var err error
	pool := h.own
	if owner != h.rank || pool == nil {
		if pool, err = h.pool(owner); err != nil {
			return fmt.Errorf("symheap: SharedFree: %w", err)
		}
	}
	if err = pool.Free(alloc.Off(off)); err != nil {
		return h.freeErr(owner, off, err)
	}
	c := h.stats // statistics: written by this PE only; symheap stat reads them
	core.Bump(&c.SharedFrees)
	if owner != h.rank {
		c.RemoteFrees.Add(1)
	}
	return nil
}

// freeErr is the error of a failed SharedFree.
func (h *sharedHeap) freeErr(owner int, off uint64, err error) error {
	return fmt.Errorf("symheap: SharedFree of offset %#x in PE %d's local shared heap: %w", off, owner, err)
}

// SharedOwner reports whether s lies entirely in some PE's local shared
// heap, and which PE's. It says nothing about whether s is a live block.
func SharedOwner[T any](pe *PE, s []T) (owner int, ok bool) {
	if pe.check() != nil || s == nil {
		return 0, false
	}
	p, n := core.SliceData(s)
	_, owner, ok = pe.sp.SharedOffset(p, n)
	return owner, ok
}

// SharedPtr names a place in the local shared heaps by a plain value that
// means the same place in every PE of the job, so that PEs can pass
// pointers to shared blocks to each other as data (in a message, in a
// symmetric variable). With the same-address mapping (SameAddress) it is
// the address itself, as uintptr(unsafe.Pointer(&s[0])) would give it in
// any PE; otherwise it is an offset in the job's segment.
type SharedPtr uint64

// SharedPtrOf returns the SharedPtr of s's first element. s must lie in a
// local shared heap (else ErrBadArg).
func SharedPtrOf[T any](pe *PE, s []T) (SharedPtr, error) {
	if err := pe.check(); err != nil {
		return 0, err
	}
	p, n := core.SliceData(s)
	if _, _, ok := pe.sp.SharedOffset(p, n); !ok || s == nil {
		return 0, fmt.Errorf("symheap: SharedPtrOf %p (%d bytes): %w (not in a local shared heap: allocate it with SharedAlloc)", p, n, ErrBadArg)
	}
	so, _ := pe.sp.SegOffset(p)
	return SharedPtr(uint64(so) + pe.seg.AgreedBase()), nil
}

// SharedAt returns the n elements of T at ptr, as this PE sees them. The
// whole range must lie in one local shared heap and ptr must be aligned
// for T (else ErrBadArg); T must hold no pointers (ErrPointerType).
func SharedAt[T any](pe *PE, ptr SharedPtr, n int) ([]T, error) {
	if err := pe.check(); err != nil {
		return nil, err
	}
	size, err := elemBytes[T](n)
	if err != nil {
		return nil, err
	}
	base := pe.seg.AgreedBase()
	so := uint64(ptr) - base
	if uint64(ptr) < base || so >= uint64(len(pe.sp.Mem())) {
		return nil, fmt.Errorf("symheap: SharedAt(%#x): %w (not a SharedPtr of this job)", uint64(ptr), ErrBadArg)
	}
	p := pe.sp.Addr(core.SegOff(so))
	if _, _, ok := pe.sp.SharedOffset(p, size); !ok {
		return nil, fmt.Errorf("symheap: SharedAt(%#x, %d elements of %d bytes): %w (the range is not inside one local shared heap)", uint64(ptr), n, core.SizeOf[T](), ErrBadArg)
	}
	if a := core.AlignOf[T](); so%a != 0 {
		return nil, fmt.Errorf("symheap: SharedAt(%#x): %w (misaligned for a %d-byte aligned type)", uint64(ptr), ErrBadArg, a)
	}
	if n == 0 {
		return nil, nil
	}
	return core.SliceAt[T](p, n), nil
}

// cArena takes the C library's shared malloc arena (cabi.SharedMalloc;
// alloc/small's foreign.go): one page-aligned block of about size bytes
// of this PE's pool, under the front end, which then lets every PE free
// the C front end's blocks. When the pool has less room, the arena is
// what it has, halved until it fits, down to a quarter of a MiB.
func (h *sharedHeap) cArena(size uint64) (uint64, uint64, error) {
	if h.front == nil {
		return 0, 0, fmt.Errorf("symheap: shared malloc: the local shared heap has no small-block front end: %w (SYMHEAP_SHARED_SIZE is %s and SYMHEAP_SHARED_SMALL must not be 0)",
			ErrOutOfMemory, segment.FormatSize(h.sp.Lay.SharedSize))
	}
	if _, ok := h.front.Foreign(); ok {
		return 0, 0, fmt.Errorf("symheap: shared malloc: %w (this PE's arena exists already)", ErrBadArg)
	}
	const least = 256 << 10
	size = max(size&^(small.SpanSize-1), least)
	var err error
	for ; size >= least; size = size / 2 &^ (small.SpanSize - 1) {
		var off alloc.Off
		if off, err = h.front.Inner().Alloc(size, 1<<small.PageShift); err != nil {
			continue
		}
		if err = h.front.SetForeign(off, size); err != nil {
			h.front.Inner().Free(off)
			return 0, 0, fmt.Errorf("symheap: shared malloc: %w", err)
		}
		h.stats.CMallocArena.Store(size) // a statistic: written by this PE only; symheap stat reads it
		return uint64(off), size, nil
	}
	return 0, 0, fmt.Errorf("symheap: shared malloc: an arena of %s: %w", segment.FormatSize(least), h.allocErr(least, err))
}
