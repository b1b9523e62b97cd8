package alloctest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/symheap/symheap/alloc"
)

// testUnfree checks a component that implements alloc.Unfreer: a
// FreeUndoable then Unfree of any block, whatever its neighbours, leaves a
// heap that Check accepts, the block live with its contents, and figures,
// blocks and every later call's result the same as in a twin heap that
// never freed it.
func testUnfree(t *testing.T, c alloc.Component) {
	if _, ok := newHeap(t, c, 64<<10).a.(alloc.Unfreer); !ok {
		t.Skipf("%s does not implement alloc.Unfreer", c.Name)
	}
	// Free neighbours on both sides, on one side, on none.
	h := newHeap(t, c, 1<<20)
	var offs []alloc.Off
	for range 9 {
		offs = append(offs, h.alloc(48, 0))
	}
	h.free(offs[0])
	h.free(offs[2])
	h.free(offs[5])
	for _, i := range []int{1, 3, 4, 6, 8} {
		h.unfree(offs[i], fmt.Sprintf("block %d of 9", i))
	}

	// Random heaps: the twin gets the same calls except the undone free.
	const size = 2 << 20
	tw, h := newHeap(t, c, size), newHeap(t, c, size)
	rt, rh := rand.New(rand.NewPCG(21, 22)), rand.New(rand.NewPCG(21, 22))
	randomOps(tw, rt, 400, 24<<10)
	randomOps(h, rh, 400, 24<<10)
	pick := rand.New(rand.NewPCG(23, 24))
	for round := range 60 {
		offs := h.liveOffs()
		if len(offs) == 0 {
			break
		}
		h.unfree(offs[pick.IntN(len(offs))], fmt.Sprintf("round %d", round))
		if ws, wt := h.walk(), tw.walk(); !slices.Equal(ws, wt) {
			t.Fatalf("round %d: after Unfree the blocks differ from the twin heap's", round)
		}
		st, sw := h.a.Stats(), tw.a.Stats()
		st.Failed, sw.Failed = 0, 0
		if st != sw {
			t.Fatalf("round %d: after Unfree the figures differ from the twin heap's:\n%+v\n%+v", round, st, sw)
		}
		if got, want := randomOps(h, rh, 20, 24<<10), randomOps(tw, rt, 20, 24<<10); !slices.Equal(got, want) {
			t.Fatalf("round %d: after Unfree the heap returned %#x, the twin heap %#x", round, got, want)
		}
	}

	// Unfree with nothing to take back, or after another call, fails and
	// changes nothing; a bad FreeUndoable changes nothing either.
	u := h.a.(alloc.Unfreer)
	h.expectErr(alloc.ErrBadFree, "Unfree without FreeUndoable", u.Unfree)
	off := h.alloc(100, 0)
	h.expectErr(alloc.ErrBadFree, "FreeUndoable of an interior offset", func() error { return u.FreeUndoable(off + 16) })
	h.expectErr(alloc.ErrBadFree, "Unfree after a failed FreeUndoable", u.Unfree)
	if err := u.FreeUndoable(off); err != nil {
		t.Fatalf("FreeUndoable(%#x): %v", off, err)
	}
	delete(h.live, off)
	h.check("FreeUndoable")
	h.alloc(100, 0)
	h.expectErr(alloc.ErrBadFree, "Unfree after an Alloc", u.Unfree)
	h.freeAll(pick)
}

// unfree frees a live block with FreeUndoable, checks that it is gone,
// takes the free back and checks that it is live again, contents intact.
func (h *heap) unfree(off alloc.Off, what string) {
	h.t.Helper()
	u := h.a.(alloc.Unfreer)
	b := h.live[off]
	h.verifyBlock(off, b, true)
	if err := u.FreeUndoable(off); err != nil {
		h.t.Fatalf("%s: %s: FreeUndoable(%#x): %v", h.c.Name, what, off, err)
	}
	if _, err := h.a.UsableSize(off); err == nil {
		h.t.Fatalf("%s: %s: block %#x still live after FreeUndoable", h.c.Name, what, off)
	}
	if err := u.Unfree(); err != nil {
		h.t.Fatalf("%s: %s: Unfree of %#x: %v", h.c.Name, what, off, err)
	}
	if us, err := h.a.UsableSize(off); err != nil || us != b.usable {
		h.t.Fatalf("%s: %s: after Unfree block %#x has usable size %d (%v), want %d", h.c.Name, what, off, us, err, b.usable)
	}
	h.verifyBlock(off, b, true)
	h.check(fmt.Sprintf("%s: Unfree(%#x)", what, off))
}
