package small

import (
	"errors"
	"testing"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/alloc/alloctest"
	"github.com/symheap/symheap/alloc/tlsf"
)

// The C front end's arena as Go sees it (foreign.go; the C side is
// capi/smalloc.c, checked by capi/tests/m_malloc.c): SetForeign formats
// one free run, Free of a large block of the arena pushes it on the
// arena's stack and refuses a double free and an interior pointer, and
// the heap's Check and Stats hold with the arena in it.
func TestForeignArena(t *testing.T) {
	mem := alloctest.NewRegion(t, 4<<20)
	in, err := tlsf.Format(mem)
	if err != nil {
		t.Fatal(err)
	}
	h, err := Format(in, mem, nil)
	if err != nil {
		t.Fatal(err)
	}
	const size = 1 << 20
	off, err := in.Alloc(size, 1<<PageShift)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.SetForeign(off, size); err != nil {
		t.Fatal(err)
	}
	if got, ok := h.Foreign(); !ok || got != off {
		t.Fatalf("Foreign() = %#x, %v; want %#x", got, ok, off)
	}
	a := h.v.arena(uint64(off))
	pages := uint64(size) >> PageShift
	first := (arenaFixed + 8*pages + 1<<PageShift - 1) >> PageShift
	if a.pages != pages || a.first != first {
		t.Fatalf("arena: %d pages from %d; want %d from %d", a.pages, a.first, pages, first)
	}
	pm := h.v.words(uint64(off)+arenaFixed, pages)
	if w := pm[first].Load(); w != (pages-first)<<2|pageHead {
		t.Fatalf("page map at the first page: %#x, want one free run of %d pages", w, pages-first)
	}
	// A run of 3 pages allocated as the C front end does: head and tail
	// words, the rest of the arena one free run after it.
	pm[first].Store(3<<2 | pageHead | pageUsed)
	pm[first+2].Store(3<<2 | pageUsed)
	pm[first+3].Store((pages-first-3)<<2 | pageHead)
	blk := off + alloc.Off(first<<PageShift)
	if err := h.Free(blk + 16); !errors.Is(err, alloc.ErrBadFree) {
		t.Fatalf("Free of an interior pointer of an arena block: %v, want ErrBadFree", err)
	}
	if err := h.Free(blk); err != nil {
		t.Fatalf("Free of an arena block: %v", err)
	}
	if top := a.stack.Load(); top != first+1 || a.rfrees.Load() != 1 {
		t.Fatalf("arena stack %d, rfrees %d; want page %d + 1 and 1", top, a.rfrees.Load(), first)
	}
	// The owner has not taken it yet: the page map still says used, so
	// a second free is pushed again only if the map changed; the C side
	// refuses it when it takes the stack. Here a free of a page that is
	// not a run's head is refused at once.
	if err := h.Free(blk + 1<<PageShift); !errors.Is(err, alloc.ErrBadFree) {
		t.Fatalf("Free of a page inside an arena run: %v, want ErrBadFree", err)
	}
	if err := h.Check(); err != nil {
		t.Fatalf("Check with an arena: %v", err)
	}
	st := h.Stats()
	if st.Live != 1 { // the arena's block
		t.Fatalf("Stats().Live = %d with only the arena allocated, want 1", st.Live)
	}
}

// TestClassTable: the rows the C front end reads are the classes.
func TestClassTable(t *testing.T) {
	tab := ClassTable()
	if len(tab) != nClasses {
		t.Fatalf("%d rows, want %d", len(tab), nClasses)
	}
	for c, r := range tab {
		ci := classes[c]
		if r != [6]uint64{ci.size, ci.nslots, ci.nwords, ci.slots, ci.inv, ci.colours} {
			t.Fatalf("class %d: %v", c, r)
		}
		if got, ok := ClassSize(r[0]); !ok || got != r[0] {
			t.Fatalf("class %d: ClassSize(%d) = %d", c, r[0], got)
		}
	}
}
