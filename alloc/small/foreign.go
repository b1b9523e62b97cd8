package small

import (
	"fmt"
	"sync/atomic"

	"github.com/symheap/symheap/alloc"
)

// The C front end's arena (capi/smalloc.c, the C library's shared
// malloc), as this package sees it.
//
// A C program that replaces malloc with the local shared heap cannot call
// the wrapped allocator from inside malloc (that is Go code, and malloc
// runs on threads and at moments the Go runtime forbids a call into it).
// Its PE therefore takes, once at shmem_init, one block of the wrapped
// allocator, the arena, and publishes its offset + 1 in the front end's
// header (header.foreign). Inside the arena the C front end keeps the
// formats of this package: its small blocks are slots of spans laid out
// exactly as spanHdr says and published in the same span table, owned by
// owner words with a handle id of their own (header.handles) and a
// thread's number for the P. So any PE, Go or C, frees a C small block as
// it frees any slot of another handle (freeRemote), and C frees a Go
// small block the same way. The C front end's large blocks (above
// MaxSmall, and spans) are runs of pages of the arena:
//
//	arenaHdr    the first page(s): magic, size, the remote-free stack of
//	            large blocks, counters, then the page map, one word a page
//	page map    at a run's first page: npages<<2 | head | used; at its
//	            last page (if it has more than one): npages<<2 | used;
//	            0 inside a run
//	runs        from page arenaHdr.first on: spans (8 pages: their headers
//	            coloured as the front end's) and large blocks, each run
//	            starting on a page
//
// A C span counts in the header's spansTaken and spansGiven as any span
// (its colour comes from spansTaken), and in the arena's spans and
// spansBack, which Stats uses to tell the arena's spans from inner's
// blocks. Its use word is SpanSize.
//
// Who writes what: the page map and the owner's fields of the arena are
// written by the owning PE's C front end under its process lock; any
// other PE (or a Go handle: freeForeign) frees a large block by pushing
// its first page on the stack (its first word links to the next page +
// 1, CAS on stack, as the span stacks), which the owner takes whole
// (Swap) before its next allocation of pages.

const (
	arenaMagic = 0x4341_5245_4e41_0001 // "CARENA" + version
	arenaFixed = 128                   // bytes of arenaHdr before the page map
	pageUsed   = 1                     // page map: the run is allocated
	pageHead   = 2                     // page map: the run's first page
)

// arenaHdr opens the C front end's arena.
type arenaHdr struct {
	magic atomic.Uint64 // arenaMagic once formatted
	pages uint64        // pages of the arena, its header's included
	first uint64        // the first page runs may use (after the header and page map)
	stack atomic.Uint64 // large blocks freed by other PEs: first page + 1, 0 empty
	// Counters, by the owner (allocs, spans, fallbacks) or by freers
	// (rfrees), for symheap stat.
	large     atomic.Uint64 // large blocks allocated, ever
	spans     atomic.Uint64 // spans taken, ever
	spansBack atomic.Uint64 // spans given back, ever
	rfrees    atomic.Uint64 // large blocks pushed on the stack, ever
	_         [8]uint64
	// the page map follows
}

// Foreign returns the offset of the C front end's arena and whether the
// region has one.
func (h *Heap) Foreign() (alloc.Off, bool) {
	v := h.hdr.foreign.Load() // acquire: pairs with SetForeign's store
	return alloc.Off(v - 1), v != 0
}

// SetForeign records that the block at off of inner, of size bytes
// (page aligned), is the C front end's arena, and formats its header.
func (h *Heap) SetForeign(off alloc.Off, size uint64) error {
	if off%(1<<PageShift) != 0 || size < SpanSize || uint64(off)+size > uint64(len(h.mem)) {
		return fmt.Errorf("small: arena of %d bytes at %#x: not %d-byte pages of the region", size, uint64(off), 1<<PageShift)
	}
	pages := size >> PageShift
	first := (arenaFixed + 8*pages + 1<<PageShift - 1) >> PageShift
	if first+spanPages > pages {
		return fmt.Errorf("small: arena of %d bytes: %w (no room for a span after its page map)", size, alloc.ErrOutOfMemory)
	}
	a := h.v.arena(uint64(off))
	a.pages, a.first = pages, first
	for _, w := range []*atomic.Uint64{&a.stack, &a.large, &a.spans, &a.spansBack, &a.rfrees} {
		w.Store(0)
	}
	m := h.v.words(uint64(off)+arenaFixed, pages)
	for i := range m {
		m[i].Store(0)
	}
	// One free run over the pages after the map.
	n := pages - first
	m[first].Store(n<<2 | pageHead)
	if n > 1 {
		m[pages-1].Store(n << 2)
	}
	a.magic.Store(arenaMagic)
	h.hdr.foreign.Store(uint64(off) + 1) // release: other PEs find the arena formatted
	return nil
}

// inForeign reports whether off lies in the C front end's arena, and
// where the arena is.
func (h *Heap) inForeign(off alloc.Off) (uint64, *arenaHdr, bool) {
	v := h.hdr.foreign.Load()
	if v == 0 {
		return 0, nil, false
	}
	base := v - 1
	a := h.v.arena(base)
	if a.magic.Load() != arenaMagic || uint64(off) < base || uint64(off)-base >= a.pages<<PageShift {
		return 0, nil, false
	}
	return base, a, true
}

// freeForeign frees a large block of the C front end's arena: pushes it
// on the arena's stack for its owner to take back.
func (h *Heap) freeForeign(off alloc.Off, base uint64, a *arenaHdr) error {
	rel := uint64(off) - base
	page := rel >> PageShift
	if rel%(1<<PageShift) != 0 || page < a.first {
		return h.fail(fmt.Errorf("small: free of %#x, inside the C front end's arena but not a block's start: %w", uint64(off), alloc.ErrBadFree))
	}
	if w := h.v.word(base + arenaFixed + 8*page).Load(); w&(pageHead|pageUsed) != pageHead|pageUsed {
		return h.fail(fmt.Errorf("small: free of %#x, not an allocated block of the C front end's arena (a double free?): %w", uint64(off), alloc.ErrBadFree))
	}
	if h.sink != nil && h.sink.Listening() {
		w := h.v.word(base + arenaFixed + 8*page).Load()
		h.sink.Released(alloc.ReleaseFree, off, (w>>2)<<PageShift)
	}
	a.rfrees.Add(1)
	link := h.v.plain(uint64(off))
	for {
		top := a.stack.Load()
		*link = top
		if a.stack.CompareAndSwap(top, page+1) { // release: the link, to the owner's Swap
			return nil
		}
	}
}

// ClassTable returns the size classes as the C front end reads them:
// per class its slot size, slots, bitmap words, the offset of slot 0 in a
// span, the reciprocal of the size and the colours.
func ClassTable() [][6]uint64 {
	t := make([][6]uint64, nClasses)
	for c, ci := range classes {
		t[c] = [6]uint64{ci.size, ci.nslots, ci.nwords, ci.slots, ci.inv, ci.colours}
	}
	return t
}
