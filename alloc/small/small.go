// Package small is a small-block front end for a region managed by an
// allocator component: size classes over 32 KiB spans, each span owned by
// one allocating handle and one processor (P) of its process, so that the
// owner's allocations and frees take no lock and no atomic
// read-modify-write; frees by anyone else (another PE, or another P of
// the owner) go through a lock-free remote-free stack that the owner
// collects. Requests above MaxSmall bytes, or aligned above
// alloc.MinAlign, go to the wrapped allocator as before, and so do the
// spans themselves.
//
// It is the front end of symheap's local shared heap, where any PE may
// free any block; the symmetric heap keeps its component unchanged (it
// must be deterministic across PEs, and its frees happen after a barrier).
// The front end's offsets depend on the P each call runs on, so it is
// deterministic only on one P (the conformance suite runs it there).
//
// # Region layout
//
// The region is the wrapped allocator's (inner). The front end adds:
//
//	header      the first block inner hands out (Format allocates it,
//	            Attach is told its offset): magic, region size, counters,
//	            then the span table, one word per 4 KiB page of the region:
//	            0, or the page's span (its header's offset<<8 | class+1)
//	span        a 32 KiB block of inner, 4 KiB aligned (so that no page
//	            holds parts of two spans, and a block's span is found from
//	            its offset with a shift and a load): the span's colour
//	            (below), a span header (spanHdr), the allocated bitmap A,
//	            the remote-freed bitmap R, then nslots slots of the class's
//	            size, all within the block whatever the colour
//
// # Colours
//
// A span's header, and everything after it, starts colour bytes into its
// block: a whole number of cache lines, the count of spans taken so far
// modulo the class's colours. Page-aligned headers all fell into the same
// few sets of the L1 cache (an L1 set recurs every 4 KiB), so with a few
// dozen spans live, each pair of Alloc and Free missed there on the
// headers and bitmaps it touched, and the bench's small workload took
// longer a pair than with colours (measured:
// docs/bench/design-measurements.md, «alloc/small, span colours»). A
// class has as many colours as
// the room its slots leave in a span allows, 6 to 16; classes of 448
// bytes and less give up at most 1/64 of their slots to have 6.
//
// # Who writes what
//
//	A, owner words   (free-list head, bump, used, allocs) written
//	                 only by the span's owner: the handle whose id and the P
//	                 number are in the span's owner word, while pinned to
//	                 that P (runtime.procPin: no other goroutine runs on the
//	                 P meanwhile). A is stored with release order and read
//	                 by every freer.
//	R                set by remote freers (atomic Or), cleared by the owner
//	                 (atomic And) when it collects.
//	stack            remote freers push (CAS), the owner takes the whole
//	                 stack (Swap).
//	rfrees           remote freers add (a counter for Stats).
//
// A slot is free (A=0, R=0: on the owner's free list, or above bump), live
// (A=1, R=0), or freed remotely and not yet collected (A=1, R=1, on the
// stack).
//
// # Paths
//
//	Alloc (owner)  1. class from the size; pin; the P's current span of
//	                  the class: pop its free list, else collect its stack
//	                  (below) and pop, else take the slot at bump
//	               2. set the slot's A bit; used++; unpin
//	               3. (slow) another span of the P's in the class with room,
//	                  else a new span from inner (unpinned: inner may take a
//	                  lock), formatted and published in the span table; if
//	                  inner has no room for a span, the block itself from
//	                  inner, like a large one
//	Free (owner)   1. span table: not a span → inner.Free; else the slot
//	                  (an offset between slots or in the header is
//	                  ErrBadFree)
//	               2. pin; the span is this handle's and this P's: check
//	                  A=1, and R=0 unless the stack is empty (R is set only
//	                  for slots on the stack, or on their way there); else
//	                  ErrBadFree, nothing changed; clear A, push on the free
//	                  list, used--; unpin
//	               3. used == 0 and nothing on the stack: the span goes back
//	                  to inner (table entry cleared first)
//	Free (remote)  1. as above
//	               2. A=1 (else ErrBadFree); R.Or(bit): already set is
//	                  ErrBadFree; nothing was changed either way
//	               3. report the release; link the slot to the stack head
//	                  and CAS it in
//	Collect        the owner Swaps the stack out whole; for each slot on it:
//	                  clear A (so a further free of it is refused), then R,
//	                  push on the free list, used--
//
// # Why the lock-free parts are correct
//
//   - The stack has one kind of pop: the owner's Swap of the whole list.
//     A push reads head h, writes h into its slot, and CASes h → slot.
//     If the CAS succeeds the head was h at that moment, so the list the
//     slot links to is the current one, whatever happened in between
//     (ABA is harmless without single-element pops). The owner reads the
//     links only after its Swap, which orders after every push it
//     returns (the CAS of each push is a release, the Swap an acquire).
//   - Double frees are refused exactly, sequentially: a remote free
//     needs A=1 and wins R with an atomic Or, so of two remote frees of one
//     block one gets ErrBadFree; an owner free needs A=1 and R=0; the
//     collection clears A before R, so from the moment a slot leaves the
//     stack every free of it sees A=0. The owner sets A with a release
//     store before returning the block, and a block reaches another PE
//     only through a later synchronising store, so a freer sees it live.
//   - A span is given back only by its owner, when used == 0 (no slot has
//     A=1) and its stack is empty: a legitimate remote free is of a live
//     block (A=1, so used > 0) and its push, its last access to the span,
//     happens before the owner can see used drop for that block.
//   - What is not covered: two frees of one block at the same moment by
//     different parties (a race in the program): a remote free that read
//     A=1 just before the owner freed the block locally can still push it.
//     The collection then finds A=0 and drops it (no double use), unless
//     the owner has reallocated the block in between; and if that local
//     free emptied the span and the owner gave it back before the remote
//     free's Or and push, those land in memory that is no longer a span.
//     Sequential double frees, in any order of owner and other PEs, are
//     all refused.
//
// # Release events
//
// A free reports its block to Sink (alloc.ReleaseSink) before the slot
// can be handed out again: a remote free before its push (the owner can
// reuse it only after collecting it), an owner free before it touches the
// span (validate, report unpinned, then free; a concurrent double free
// that wins in between costs a spurious event, never a missed one). A span
// given back to inner is reported by inner's own Reporting wrapper, if any.
//
// # Concurrency inside a process
//
// Alloc and Free may be called from any goroutine. Per-P state (the P's
// current span and span list per class) lives in Go memory and is touched
// only while pinned to its P; slow paths that call inner unpin first.
//
// The price of per-P spans: a goroutine that moves to another P starts
// spans of its own there, and frees it makes of blocks from its old P's
// spans go through their remote-free stacks. A span whose blocks were all
// freed that way is reused when its P next allocates in its class, and
// given back to inner only when an allocation on that P finds inner full
// (reclaim); until then its memory stays with its P.
//
// Under the race detector pinning is a mutex (the detector cannot see the
// exclusion that pinning gives). Stats, Check and Walk read the owner
// words unlocked: call them when the heap is quiet (at the end of a test,
// in the inspector's snapshot).
package small

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/alloc/internal/region"
)

const (
	// SpanShift is log2 of the span size.
	SpanShift = 15
	// SpanSize is the bytes of one span.
	SpanSize = 1 << SpanShift
	// MaxSmall is the largest request served from a size class.
	MaxSmall = 4096
	// PageShift is log2 of the span table's granularity, and of the
	// spans' alignment.
	PageShift = 12
	spanPages = SpanSize >> PageShift

	magic      = 0x534d_414c_4c31_0002 // "SMALL1" + version (2: coloured spans, the table holds header offsets)
	spanMagic  = 0x5350_414e << 32     // "SPAN", high half of spanHdr.class
	hdrFixed   = 128                   // bytes of header before the span table
	spanFixed  = 128                   // bytes of spanHdr before the bitmaps
	colourStep = 64                    // spans' colours ("Colours"): multiples of a cache line
	maxColours = 16
	minColours = 6
	maxClasses = 32
)

// classSizes are the slot sizes: 16-byte steps to 128, then four per
// doubling (at most 25% lost to rounding).
var classSizes = [...]uint64{16, 32, 48, 64, 80, 96, 112, 128,
	160, 192, 224, 256, 320, 384, 448, 512, 640, 768, 896, 1024,
	1280, 1536, 1792, 2048, 2560, 3072, 3584, 4096}

const nClasses = len(classSizes)

// classInfo is a class's layout in a span.
type classInfo struct {
	size   uint64
	nslots uint64
	nwords uint64 // of each bitmap
	slots  uint64 // offset of slot 0 in the span
	inv    uint64 // 2^32/size rounded up: n/size == n*inv>>32 for n < SpanSize
	// colours: how many the room left in a span allows ("Colours")
	colours uint64
}

// spanBytes is the bytes of a span of n slots of sz bytes from its
// header's start: the header, the bitmaps A and R, and the slots (from a
// 16-byte boundary).
func spanBytes(n, sz uint64) uint64 {
	return (spanFixed+16*((n+63)/64)+15)&^15 + n*sz
}

var (
	classes [nClasses]classInfo
	classOf [MaxSmall/16 + 1]uint8 // by (size+15)/16
)

func init() {
	for c, sz := range classSizes {
		// The most slots that fit; then, while the room left is short of
		// minColours colours, give up slots, but at most 1/64 of them
		// ("Colours").
		n := (SpanSize - spanFixed) / sz
		for spanBytes(n, sz) > SpanSize {
			n--
		}
		most := n
		for SpanSize-spanBytes(n, sz) < (minColours-1)*colourStep && (most-n+1)*64 <= most {
			n--
		}
		w := (n + 63) / 64
		classes[c] = classInfo{size: sz, nslots: n, nwords: w, slots: spanBytes(n, sz) - n*sz, inv: 1<<32/sz + 1,
			colours: min(maxColours, (SpanSize-spanBytes(n, sz))/colourStep+1)}
	}
	c := 0
	for i := range classOf {
		for classSizes[c] < uint64(i)*16 {
			c++
		}
		classOf[i] = uint8(c)
	}
}

// ClassSize returns the usable size of a block of size bytes served from a
// size class, and whether it would be.
func ClassSize(size uint64) (uint64, bool) {
	if size > MaxSmall {
		return 0, false
	}
	return classSizes[classOf[(size+15)>>4]], true
}

// ClassSize is ClassSize, for alloctest.SizeClassed.
func (h *Heap) ClassSize(size uint64) (uint64, bool) { return ClassSize(size) }

// header is the front end's block at the start of the region.
type header struct {
	magic      atomic.Uint64
	size       atomic.Uint64 // the region's bytes
	chunks     atomic.Uint64 // span table entries
	handles    atomic.Uint64 // the last handle id given out
	retAllocs  atomic.Uint64 // allocs and frees of spans given back
	retFrees   atomic.Uint64
	spansTaken atomic.Uint64 // spans ever taken from inner / given back
	spansGiven atomic.Uint64
	failed     atomic.Uint64 // calls of the front end that failed
	reallocs   atomic.Uint64 // Realloc calls on small blocks
	retried    atomic.Uint64 // failed inner calls that were attempts, retried: not failed calls
	hdrUse     atomic.Uint64 // inner's usable size of this header block (Stats asks inner nothing)
	foreign    atomic.Uint64 // the C front end's arena (foreign.go): its offset + 1, 0 none; set once by its PE
	_          [3]uint64
	// the span table follows
}

// spanHdr opens every span.
type spanHdr struct {
	class  atomic.Uint64 // spanMagic | class; set before the table entry
	owner  atomic.Uint64 // handle id<<32 | P+1; set before the table entry
	free   uint64        // owner: first slot of the free list + 1, 0 none
	bump   uint64        // owner: slots below it have been handed out once
	used   uint64        // owner: slots with A set
	allocs uint64        // owner: slots handed out, ever (for Stats)
	stack  atomic.Uint64 // remote-free stack: top slot + 1, 0 empty
	use    atomic.Uint64 // inner's usable size of the span's block, set when taken (Stats asks inner nothing)
	rfrees atomic.Uint64 // remote frees, ever: on a line of its own
	link   uint64        // a C owner's list of its spans of the class (capi/smalloc.c): the next span + 1; Go's owners leave it
	_      [6]uint64
	// A (nwords words), R (nwords words), then the slots
}

// pheap is one P's state in one handle, in Go memory: touched only while
// pinned to its P.
type pheap struct {
	cur   [nClasses]uint64   // span offset + 1 of the class's current span
	spans [nClasses][]uint64 // every span of the class this P owns
}

// Heap is a handle on a region with the front end. It implements
// alloc.Allocator. Any number of handles, in any processes, may be open
// on one region; each allocates into spans of its own.
type Heap struct {
	inner alloc.Allocator
	sink  alloc.ReleaseSink // nil: releases are not reported
	mem   []byte
	v     view // mem's first byte, for the typed views of mem_unsafe.go
	hdr   *header
	hoff  alloc.Off // the header block
	table []atomic.Uint64

	id  atomic.Uint64 // this handle's id once it allocates; 0 before
	mu  sync.Mutex    // guards growing phs and giving out id
	phs atomic.Pointer[[]*pheap]
	pinState
}

var _ alloc.Allocator = (*Heap)(nil)

// Format puts a fresh front end over inner, a freshly formatted allocator
// over mem, and returns the allocating handle. sink, if not nil, hears of
// every small block freed through the handle.
func Format(inner alloc.Allocator, mem []byte, sink alloc.ReleaseSink) (*Heap, error) {
	if !aligned(mem, SpanSize) {
		return nil, fmt.Errorf("small: region not aligned to %d bytes", SpanSize)
	}
	chunks := uint64(len(mem)) >> PageShift
	off, err := inner.Alloc(hdrFixed+8*chunks, 0)
	if err != nil {
		return nil, fmt.Errorf("small: header of %d bytes: %w", hdrFixed+8*chunks, err)
	}
	h := open(inner, mem, off, sink)
	for i := range h.table[:chunks] {
		h.table[i].Store(0)
	}
	hd := h.hdr
	for _, w := range []*atomic.Uint64{&hd.handles, &hd.retAllocs, &hd.retFrees, &hd.spansTaken, &hd.spansGiven, &hd.failed, &hd.reallocs} {
		w.Store(0)
	}
	hd.size.Store(uint64(len(mem)))
	hd.chunks.Store(chunks)
	us, _ := inner.UsableSize(off)
	hd.hdrUse.Store(us)
	hd.magic.Store(magic) // last: Attach checks it
	h.id.Store(hd.handles.Add(1))
	return h, nil
}

// Attach opens the front end whose header is the block at hdr of inner
// (Format's first allocation: Header tells its offset). It writes nothing
// until the handle allocates, so an inspector may Attach to a read-only
// mapping for Stats and Walk.
func Attach(inner alloc.Allocator, mem []byte, hdr alloc.Off, sink alloc.ReleaseSink) (*Heap, error) {
	if !aligned(mem, SpanSize) {
		return nil, fmt.Errorf("small: region not aligned to %d bytes", SpanSize)
	}
	chunks := uint64(len(mem)) >> PageShift
	if hdr%8 != 0 || uint64(hdr) > uint64(len(mem)) || hdrFixed+8*chunks > uint64(len(mem))-uint64(hdr) {
		return nil, fmt.Errorf("small: no front-end header at %#x of a %d-byte region", uint64(hdr), len(mem))
	}
	h := open(inner, mem, hdr, sink)
	if h.hdr.magic.Load() != magic || h.hdr.size.Load() != uint64(len(mem)) || h.hdr.chunks.Load() != chunks {
		return nil, fmt.Errorf("small: no front-end header at %#x of the region (magic %#x, size %d)", uint64(hdr), h.hdr.magic.Load(), h.hdr.size.Load())
	}
	// Reads only (an inspector's mapping may be read-only).
	if us, err := inner.UsableSize(hdr); err != nil || us < hdrFixed+8*chunks {
		return nil, fmt.Errorf("small: the front-end header at %#x is not a live block of the region: %v", uint64(hdr), err)
	}
	return h, nil
}

// Header returns the offset of the front end's header, which Attach needs.
func (h *Heap) Header() alloc.Off { return h.hoff }

// SpanOf returns the span that holds off (its header's offset), if off
// lies in one.
func (h *Heap) SpanOf(off alloc.Off) (alloc.Off, bool) {
	s, _, _, in, _ := h.locate(off)
	return alloc.Off(s), in
}

// Spans returns the number of spans taken from inner and not given back.
func (h *Heap) Spans() uint64 { return h.hdr.spansTaken.Load() - h.hdr.spansGiven.Load() }

// Inner returns the wrapped allocator.
func (h *Heap) Inner() alloc.Allocator { return h.inner }

func open(inner alloc.Allocator, mem []byte, hoff alloc.Off, sink alloc.ReleaseSink) *Heap {
	h := &Heap{inner: inner, sink: sink, mem: mem, v: viewOf(mem), hoff: hoff}
	h.hdr = h.v.header(uint64(hoff))
	h.table = h.v.words(uint64(hoff)+hdrFixed, uint64(len(mem))>>PageShift)
	phs := []*pheap{}
	h.phs.Store(&phs)
	return h
}

// Name is the wrapped component's name.
func (h *Heap) Name() string { return h.inner.Name() }

// LockWord is the wrapped allocator's, if it has one.
func (h *Heap) LockWord() *uint32 {
	if lw, ok := h.inner.(alloc.LockWorder); ok {
		return lw.LockWord()
	}
	return nil
}

// ---- addresses ----

func (h *Heap) span(off uint64) *spanHdr { return h.v.span(off) }

// colour is the distance of the header of the span of class ci taken
// n-th from its block's start ("Colours").
func colour(n uint64, ci *classInfo) uint64 { return n % ci.colours * colourStep }

// blockOf is the block of inner that holds the span whose header is at s:
// the page s lies in (a colour is less than a page).
func blockOf(s uint64) uint64 { return s &^ (1<<PageShift - 1) }

// aWord and rWord are word w of span s's bitmaps A and R.
func (h *Heap) aWord(s uint64, w uint64) *atomic.Uint64 { return h.v.word(s + spanFixed + 8*w) }

func (h *Heap) rWord(s uint64, ci *classInfo, w uint64) *atomic.Uint64 {
	return h.v.word(s + spanFixed + 8*ci.nwords + 8*w)
}

// link is the word at the start of a free slot: the next slot + 1. Only
// the slot's owner reads it (plain), and a remote freer writes it before
// the CAS that publishes it.
func (h *Heap) link(s uint64, ci *classInfo, slot uint64) *uint64 {
	return h.v.plain(s + ci.slots + slot*ci.size)
}

// locate finds the span of off. ok is false when off is not in a span;
// when it is, slot is valid only if good.
func (h *Heap) locate(off alloc.Off) (s uint64, ci *classInfo, slot uint64, inSpan, good bool) {
	page := uint64(off) >> PageShift
	if page >= uint64(len(h.table)) {
		return 0, nil, 0, false, false
	}
	e := h.table[page].Load() // acquire: pairs with the publishing Store in allocSlow
	if e == 0 {
		return 0, nil, 0, false, false
	}
	s = e >> 8
	ci = &classes[e&0xff-1]
	rel := uint64(off) - s
	if rel < ci.slots {
		return s, ci, 0, true, false
	}
	slot = (rel - ci.slots) * ci.inv >> 32 // exact: (rel-slots)*(inv*size-2^32) < 2^15*2^12 < 2^32
	return s, ci, slot, true, slot < ci.nslots && ci.slots+slot*ci.size == rel
}

// ownerWord is the owner word of spans this handle allocates on P pid.
func ownerWord(id uint64, pid int) uint64 { return id<<32 | uint64(pid+1) }

// ---- Alloc ----

// Alloc returns a block of at least size bytes aligned to align.
func (h *Heap) Alloc(size, align uint64) (alloc.Off, error) {
	if size > MaxSmall || align > alloc.MinAlign || align&(align-1) != 0 {
		return h.allocInner(size, align)
	}
	c := classOf[(size+15)>>4]
	pid := h.pin()
	if phs := *h.phs.Load(); pid < len(phs) {
		if s := phs[pid].cur[c]; s != 0 {
			// take's first case, written out: the common path.
			s--
			ci := &classes[c]
			sp := h.span(s)
			if f := sp.free; f != 0 {
				slot := f - 1
				next := *h.link(s, ci, slot)
				a := h.aWord(s, slot/64)
				av, bit := a.Load(), uint64(1)<<(slot%64)
				if next <= ci.nslots && av&bit == 0 {
					sp.free = next
					setA(a, av|bit) // release: a freer that is handed the block sees it live
					sp.used++
					sp.allocs++
					if region.Verify {
						h.verify("Alloc", s, ci)
					}
					h.unpin()
					return alloc.Off(s + ci.slots + slot*ci.size), nil
				}
			}
			if off, ok := h.take(s, ci); ok {
				h.unpin()
				return off, nil
			}
		}
	}
	h.unpin()
	return h.allocSlow(int(c), size)
}

// allocInner is an Alloc of inner; when inner is full it collects what
// remote frees emptied, and tries once more. The first failure was an
// attempt, not the call's: Stats does not count it (retried).
func (h *Heap) allocInner(size, align uint64) (alloc.Off, error) {
	off, err := h.inner.Alloc(size, align)
	if err != nil && errors.Is(err, alloc.ErrOutOfMemory) && h.reclaim() {
		h.hdr.retried.Add(1)
		return h.inner.Alloc(size, align)
	}
	return off, err
}

// take hands out a slot of span s, the pinned P's: the free list first,
// then what remote frees left on the stack (reused before fresh memory),
// then bump.
func (h *Heap) take(s uint64, ci *classInfo) (alloc.Off, bool) {
	sp := h.span(s)
	var slot uint64
	switch {
	case sp.free != 0 && (sp.free > ci.nslots || h.aWord(s, (sp.free-1)/64).Load()&(1<<((sp.free-1)%64)) != 0):
		// A link on the free list was overwritten (a write after free)
		// and led here: drop the list rather than hand out a live block
		// (its slots are lost until the span is given back).
		sp.free = 0
		return h.take(s, ci)
	case sp.free != 0:
		slot = sp.free - 1
		sp.free = *h.link(s, ci, slot) // checked when it is popped
	case sp.stack.Load() != 0 && h.collect(s, ci):
		return h.take(s, ci)
	case sp.bump < ci.nslots:
		slot = sp.bump
		sp.bump++
	default:
		return 0, false
	}
	a := h.aWord(s, slot/64)
	setA(a, a.Load()|1<<(slot%64)) // release: a freer that is handed the block sees it live
	sp.used++
	sp.allocs++
	if region.Verify {
		h.verify("Alloc", s, ci)
	}
	return alloc.Off(s + ci.slots + slot*ci.size), true
}

// collect moves span s's remotely freed slots onto its free list (the
// pinned owner only). It reports whether it found any.
func (h *Heap) collect(s uint64, ci *classInfo) bool {
	sp := h.span(s)
	top := sp.stack.Swap(0) // acquire: pairs with the pushes' CAS; the links below are complete
	got := false
	for n := uint64(0); top != 0 && n < ci.nslots; n++ {
		slot := top - 1
		if slot >= sp.bump {
			break // a corrupted link: stop here (the rest stays unreachable)
		}
		next := *h.link(s, ci, slot)
		w, bit := slot/64, uint64(1)<<(slot%64)
		a := h.aWord(s, w)
		if a.Load()&bit != 0 {
			setA(a, a.Load()&^bit) // A before R: from here every free of it is refused
			*h.link(s, ci, slot) = sp.free
			sp.free = slot + 1
			sp.used--
			got = true
		}
		// A already clear: the owner freed it too, at the same moment (see
		// the package comment); it is on the free list once.
		h.rWord(s, ci, w).And(^bit)
		top = next
	}
	return got
}

// allocSlow finds the pinned P another span of class c with room, or
// takes a new one from inner.
func (h *Heap) allocSlow(c int, size uint64) (alloc.Off, error) {
	ci := &classes[c]
	pid := h.pin()
	ph, ok := h.pheap(pid)
	if !ok {
		h.unpin()
		h.grow(pid)
		return h.allocSlow(c, size)
	}
	for _, s := range ph.spans[c] {
		if off, ok := h.take(s, ci); ok {
			ph.cur[c] = s + 1
			h.unpin()
			return off, nil
		}
	}
	h.unpin()
	s, err := h.allocInner(SpanSize, 1<<PageShift)
	if err != nil {
		if !errors.Is(err, alloc.ErrOutOfMemory) {
			return 0, err
		}
		// No room for a span, but maybe for the block: inner serves it
		// as it serves large ones (a heap smaller than a span per class
		// still fills up). The span's failure was an attempt.
		h.hdr.retried.Add(1)
		return h.allocInner(size, 0)
	}
	us, _ := h.inner.UsableSize(s) // before pinning: inner may take a lock
	base := uint64(s)
	s += alloc.Off(colour(h.hdr.spansTaken.Load(), ci))
	if h.id.Load() == 0 {
		h.mu.Lock()
		if h.id.Load() == 0 {
			h.id.Store(h.hdr.handles.Add(1))
		}
		h.mu.Unlock()
	}
	sp := h.span(uint64(s))
	for {
		pid = h.pin()
		if ph, ok = h.pheap(pid); ok {
			break
		}
		h.unpin()
		h.grow(pid)
	}
	// The span's memory was inner's: clear what the front end reads.
	sp.free, sp.bump, sp.used, sp.allocs = 0, 0, 0, 0
	sp.stack.Store(0)
	sp.rfrees.Store(0)
	for w := uint64(0); w < 2*ci.nwords; w++ {
		h.v.word(uint64(s) + spanFixed + 8*w).Store(0)
	}
	sp.use.Store(us)
	sp.class.Store(spanMagic | uint64(c))
	sp.owner.Store(ownerWord(h.id.Load(), pid))
	h.hdr.spansTaken.Add(1)
	for p, e := base>>PageShift, uint64(s)<<8|uint64(c+1); p < (base+SpanSize)>>PageShift; p++ {
		h.table[p].Store(e) // release: publishes the formatted span to freers
	}
	ph.spans[c] = append(ph.spans[c], uint64(s))
	ph.cur[c] = uint64(s) + 1
	off, _ := h.take(uint64(s), ci)
	h.unpin()
	return off, nil
}

// pheap returns P pid's state, if it exists yet.
func (h *Heap) pheap(pid int) (*pheap, bool) {
	phs := *h.phs.Load()
	if pid < len(phs) {
		return phs[pid], true
	}
	return nil, false
}

// grow makes room for P pid's state (unpinned: it takes a lock).
func (h *Heap) grow(pid int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := *h.phs.Load()
	if pid < len(old) {
		return
	}
	phs := make([]*pheap, pid+1)
	copy(phs, old)
	for i := len(old); i <= pid; i++ {
		phs[i] = &pheap{}
	}
	h.phs.Store(&phs)
}

// reclaim collects the remote frees of every span of the pinned P and gives
// back the spans left empty. It reports whether it gave any back.
func (h *Heap) reclaim() bool {
	var empty []uint64
	pid := h.pin()
	if ph, ok := h.pheap(pid); ok {
		for c := range ph.spans {
			ci := &classes[c]
			for _, s := range ph.spans[c] {
				if h.span(s).stack.Load() != 0 {
					h.collect(s, ci)
				}
				if h.span(s).used == 0 && h.span(s).stack.Load() == 0 {
					empty = append(empty, s)
				}
			}
		}
		for _, s := range empty {
			h.detach(ph, s)
		}
	}
	h.unpin()
	for _, s := range empty {
		h.giveBack(s)
	}
	return len(empty) > 0
}

// detach removes empty span s from the pinned P's state and from the span
// table; giveBack then returns it to inner, unpinned.
func (h *Heap) detach(ph *pheap, s uint64) {
	sp := h.span(s)
	c := int(sp.class.Load() &^ spanMagic)
	if ph.cur[c] == s+1 {
		ph.cur[c] = 0
	}
	l := ph.spans[c]
	for i, x := range l {
		if x == s {
			l[i] = l[len(l)-1]
			ph.spans[c] = l[:len(l)-1]
			break
		}
	}
	for p := blockOf(s) >> PageShift; p < (blockOf(s)+SpanSize)>>PageShift; p++ {
		h.table[p].Store(0) // from here frees of it go to inner, which refuses them
	}
	h.hdr.retAllocs.Add(sp.allocs)
	h.hdr.retFrees.Add(sp.allocs) // empty: every slot handed out was freed
	sp.class.Store(0)
}

func (h *Heap) giveBack(s uint64) {
	h.hdr.spansGiven.Add(1)
	if err := h.inner.Free(alloc.Off(blockOf(s))); err != nil {
		// inner handed it out: it cannot refuse it back but for a
		// corrupted heap, which Check reports.
		h.hdr.failed.Add(1)
	}
}

// ---- Free ----

// Free releases the block at off.
func (h *Heap) Free(off alloc.Off) error {
	// locate, written out.
	page := uint64(off) >> PageShift
	if page >= uint64(len(h.table)) {
		return h.freeOther(off)
	}
	e := h.table[page].Load() // acquire: pairs with the publishing Store in allocSlow
	if e == 0 {
		return h.freeOther(off)
	}
	s := e >> 8
	ci := &classes[e&0xff-1]
	rel := uint64(off) - s
	slot := (rel - ci.slots) * ci.inv >> 32
	if rel < ci.slots || slot >= ci.nslots || ci.slots+slot*ci.size != rel {
		return h.freeOther(off)
	}
	// The common case in one piece: the owner's P, a live slot, nothing
	// on the stack (so R is clear: see freeSlot), nobody listening for
	// releases.
	sp := h.span(s)
	w, bit := slot/64, uint64(1)<<(slot%64)
	pid := h.pin()
	if sp.owner.Load() == ownerWord(h.id.Load(), pid) && sp.stack.Load() == 0 && !region.Verify && (h.sink == nil || !h.sink.Listening()) {
		a := h.aWord(s, w)
		if av := a.Load(); av&bit != 0 {
			setA(a, av&^bit)
			*h.link(s, ci, slot) = sp.free
			sp.free = slot + 1
			if sp.used--; sp.used != 0 {
				h.unpin()
				return nil
			}
			h.emptied(pid, s) // unpins
			return nil
		}
	}
	h.unpin()
	return h.freeSlot(off, s, ci, slot)
}

// freeOther is Free of an offset that is not a slot's: a large block,
// or a bad free.
func (h *Heap) freeOther(off alloc.Off) error {
	_, ci, _, inSpan, _ := h.locate(off)
	switch {
	case inSpan:
		return h.fail(fmt.Errorf("small: free of %#x, inside a span of %d-byte blocks but not at a block's start: %w", uint64(off), ci.size, alloc.ErrBadFree))
	case off == h.hoff:
		return h.fail(fmt.Errorf("small: free of %#x, the front end's header: %w", uint64(off), alloc.ErrBadFree))
	}
	if base, a, ok := h.inForeign(off); ok {
		return h.freeForeign(off, base, a)
	}
	return h.inner.Free(off)
}

// freeSlot is Free of a slot in every case: the owner's (reporting the
// release first if anyone listens), or another handle's or P's.
func (h *Heap) freeSlot(off alloc.Off, s uint64, ci *classInfo, slot uint64) error {
	sp := h.span(s)
	w, bit := slot/64, uint64(1)<<(slot%64)
	reported := false
	for {
		pid := h.pin()
		if sp.owner.Load() != ownerWord(h.id.Load(), pid) {
			h.unpin()
			return h.freeRemote(s, ci, slot, reported)
		}
		// R can hold the bit only while the slot is on the stack (or a
		// remote free of it is between its Or and its push, which is a
		// double free racing this one): skip its line when the stack is
		// empty.
		if h.aWord(s, w).Load()&bit == 0 || (sp.stack.Load() != 0 && h.rWord(s, ci, w).Load()&bit != 0) {
			h.unpin()
			return h.badFree(off, s, ci, slot)
		}
		if !reported && h.sink != nil && h.sink.Listening() {
			h.unpin()
			h.sink.Released(alloc.ReleaseFree, off, ci.size)
			reported = true
			continue // validate again: the P may have changed
		}
		a := h.aWord(s, w)
		setA(a, a.Load()&^bit)
		*h.link(s, ci, slot) = sp.free
		sp.free = slot + 1
		sp.used--
		if region.Verify {
			h.verify("Free", s, ci)
		}
		if sp.used != 0 || sp.stack.Load() != 0 {
			h.unpin()
			return nil
		}
		h.emptied(pid, s) // unpins
		return nil
	}
}

// emptied gives back span s, which the pinned P pid owns and which has
// no slot allocated and nothing on its stack; it unpins.
func (h *Heap) emptied(pid int, s uint64) {
	ph, _ := h.pheap(pid)
	h.detach(ph, s)
	h.unpin()
	h.giveBack(s)
}

// freeRemote frees a slot of a span that another handle or P owns.
func (h *Heap) freeRemote(s uint64, ci *classInfo, slot uint64, reported bool) error {
	w, bit := slot/64, uint64(1)<<(slot%64)
	off := alloc.Off(s + ci.slots + slot*ci.size)
	if h.aWord(s, w).Load()&bit == 0 { // acquire: pairs with the owner's release store
		return h.badFree(off, s, ci, slot)
	}
	if h.rWord(s, ci, w).Or(bit)&bit != 0 { // the one atomic claim of the free
		return h.badFree(off, s, ci, slot)
	}
	if !reported && h.sink != nil && h.sink.Listening() {
		h.sink.Released(alloc.ReleaseFree, off, ci.size)
	}
	sp := h.span(s)
	sp.rfrees.Add(1)
	link := h.link(s, ci, slot)
	for {
		top := sp.stack.Load()
		*link = top
		if sp.stack.CompareAndSwap(top, slot+1) { // release: the link above, to the owner's Swap
			return nil
		}
	}
}

func (h *Heap) badFree(off alloc.Off, s uint64, ci *classInfo, slot uint64) error {
	w, bit := slot/64, uint64(1)<<(slot%64)
	why := "not allocated (a double free, or never handed out)"
	if h.aWord(s, w).Load()&bit != 0 && h.rWord(s, ci, w).Load()&bit != 0 {
		why = "already freed by another PE (a double free)"
	}
	return h.fail(fmt.Errorf("small: free of %#x, a %d-byte block %s: %w", uint64(off), ci.size, why, alloc.ErrBadFree))
}

func (h *Heap) fail(err error) error {
	h.hdr.failed.Add(1)
	return err
}

// live reports whether off is a live small block (A=1, R=0).
func (h *Heap) live(s uint64, ci *classInfo, slot uint64) bool {
	w, bit := slot/64, uint64(1)<<(slot%64)
	return h.aWord(s, w).Load()&bit != 0 && h.rWord(s, ci, w).Load()&bit == 0
}

// ---- Realloc, UsableSize ----

// Realloc resizes the block at off. A small block stays in place while
// size fits its class; otherwise it moves.
func (h *Heap) Realloc(off alloc.Off, size uint64) (alloc.Off, error) {
	s, ci, slot, inSpan, good := h.locate(off)
	if !inSpan {
		if off == h.hoff {
			return 0, h.fail(fmt.Errorf("small: realloc of %#x, the front end's header: %w", uint64(off), alloc.ErrBadFree))
		}
		return h.inner.Realloc(off, size)
	}
	if !good || !h.live(s, ci, slot) {
		return 0, h.fail(fmt.Errorf("small: realloc of %#x, not a live block: %w", uint64(off), alloc.ErrBadFree))
	}
	if size <= ci.size {
		h.hdr.reallocs.Add(1)
		return off, nil
	}
	n, err := h.Alloc(size, 0)
	if err != nil {
		return 0, err
	}
	copy(h.mem[n:uint64(n)+ci.size], h.mem[off:uint64(off)+ci.size])
	if err := h.Free(off); err != nil {
		return 0, err // cannot happen: off was live and is ours to free
	}
	h.hdr.reallocs.Add(1)
	return n, nil
}

// UsableSize returns the bytes the caller may use at off.
func (h *Heap) UsableSize(off alloc.Off) (uint64, error) {
	s, ci, slot, inSpan, good := h.locate(off)
	if !inSpan {
		if off == h.hoff {
			return 0, h.fail(fmt.Errorf("small: usable size of %#x, the front end's header: %w", uint64(off), alloc.ErrBadFree))
		}
		return h.inner.UsableSize(off)
	}
	if !good || !h.live(s, ci, slot) {
		return 0, h.fail(fmt.Errorf("small: usable size of %#x, not a live block: %w", uint64(off), alloc.ErrBadFree))
	}
	return ci.size, nil
}

// popcount of a word
func ones(v uint64) uint64 { return uint64(bits.OnesCount64(v)) }
