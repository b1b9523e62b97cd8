package tlsf

import (
	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/alloc/internal/region"
)

var _ alloc.Unfreer = (*Allocator)(nil)

// undoFree is what Unfree needs to take back a FreeUndoable: the block and
// its free neighbours as they were, and the count of changing calls right
// after the free (any later change to the region changes it, and Unfree
// refuses).
type undoFree struct {
	ok     bool
	u, w   uint64    // the block and its size word
	words  [3]uint64 // its payload words that Free may overwrite: u, u+8, u+s-16
	p, ps  uint64    // the free block before it and its size (p == 0: none)
	pNext  uint64    // p's list links; Free's insert overwrites the first
	pPrev  uint64
	n, ns  uint64 // the free block after it and its size (n == 0: none)
	change uint64 // changes(), right after the free
}

// changes counts the calls that changed the region.
func (a *Allocator) changes() uint64 { return a.c.C.Allocs + a.c.C.Frees + a.c.C.Reallocs }

// FreeUndoable is Free, remembering what Unfree needs to take it back.
func (a *Allocator) FreeUndoable(off alloc.Off) error {
	a.undo.ok = false
	if err := a.freeBlock(off, true); err != nil {
		return err
	}
	a.undo.ok, a.undo.change = true, a.changes()
	return nil
}

// saveUndo records used block u (size word w), before free releases it.
func (a *Allocator) saveUndo(u, w uint64) {
	d := &a.undo
	s := w &^ fMask
	d.u, d.w = u, w
	d.words = [3]uint64{*a.m.U64(u), *a.m.U64(u + 8), *a.m.U64(u + s - 16)}
	d.p, d.n = 0, 0
	if w&fPrev != 0 {
		d.p = *a.m.U64(u - 16)
		d.ps = a.size(d.p)
		d.pNext, d.pPrev = *a.m.U64(d.p), *a.m.U64(d.p + 8)
	}
	if nw := *a.sw(u + s); nw&fFree != 0 {
		d.n, d.ns = u+s, nw&^fMask
	}
}

// Unfree takes back the last FreeUndoable. Free removed the free
// neighbours from their lists (p, then n), merged them with the block and
// inserted the result at the head of its list; Unfree removes the merged
// block and relinks n, then p, each where it was: a removal leaves the
// removed entry's own links as they were, so relinking in the reverse
// order restores every list exactly (as in Knuth's dancing links), and
// later calls find the same blocks they would have found.
func (a *Allocator) Unfree() error {
	d := &a.undo
	if !d.ok || a.changes() != d.change {
		d.ok = false
		a.c.C.Failed++
		return region.BadFree(Name, "unfree", alloc.Off(d.u), "no FreeUndoable to take back (or the heap changed since)")
	}
	d.ok = false
	c := &a.c.C
	u, s := d.u, d.w&^fMask
	f := u
	if d.p != 0 {
		f = d.p
	}
	a.remove(f, a.size(f))
	if d.n != 0 {
		a.relink(d.n, d.ns, *a.m.U64(d.n), *a.m.U64(d.n + 8))
		a.setFree(d.n, d.ns)
		c.Blocks++
	} else {
		*a.sw(u + s) &^= fPrev
	}
	if d.p != 0 {
		a.relink(d.p, d.ps, d.pNext, d.pPrev)
		a.setFree(d.p, d.ps)
		c.Blocks++
	}
	*a.sw(u) = d.w
	*a.m.U64(u), *a.m.U64(u + 8), *a.m.U64(u + s - 16) = d.words[0], d.words[1], d.words[2]
	a.starts.Set(u / bitsGran)
	c.InUse += s - hdrWord
	c.Frees--
	if region.Verify {
		region.MustCheck(Name, "Unfree", a.Check)
	}
	return nil
}

// relink puts free block x of size s back into its list between the
// entries its links name, as remove(x, s) took it out: x was the head
// exactly when the list's head is now its successor.
func (a *Allocator) relink(x, s, next, prev uint64) {
	fl, sl := mapping(s)
	fl &= flCount - 1
	sl &= slCount - 1
	h := a.h
	*a.m.U64(x), *a.m.U64(x + 8) = next, prev
	if h.heads[fl][sl] == next {
		h.heads[fl][sl] = x
	} else {
		*a.m.U64(prev) = x
	}
	*a.m.U64(a.backLink(next)) = x
	h.slMap[fl] |= 1 << sl
	h.flMap |= 1 << fl
}
