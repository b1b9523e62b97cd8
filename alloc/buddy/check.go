package buddy

import (
	"fmt"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/internal/errs"
)

// This file holds the read-only side: Stats, Walk and the checker.

// Stats returns the figures kept in the region header; O(1).
func (a *Allocator) Stats() alloc.Stats {
	return a.c.Stats(a.end-a.data-a.c.C.InUse, Overhead(a.c.Size), a.largest())
}

// leaves calls fn for every leaf of the tree (node that is not split) that
// starts inside the heap, in offset order; fn returns false to stop.
// Metadata leaves and nodes past the end are skipped.
func (a *Allocator) leaves(fn func(k, b uint64) bool) bool {
	var rec func(k, b uint64) bool
	rec = func(k, b uint64) bool {
		if b >= a.end {
			return true
		}
		if a.split(k, b) {
			return rec(k-1, b) && rec(k-1, b+1<<(k-1))
		}
		if b < a.data {
			return true
		}
		return fn(k, b)
	}
	return rec(a.root, 0)
}

// Walk calls fn for every block in offset order.
func (a *Allocator) Walk(fn func(off alloc.Off, size uint64, used bool) bool) error {
	a.leaves(func(k, b uint64) bool { return fn(alloc.Off(b), 1<<k, !a.free(k, b)) })
	return nil
}

// Check verifies every invariant listed in the package comment.
func (a *Allocator) Check() error {
	h := a.h
	if h.root != a.root || h.data != a.data || h.end != a.end || a.c.Size != a.m.Len() {
		return fmt.Errorf("buddy: header layout changed under us")
	}
	var freeLeaves, splits [64]uint64
	var live, inUse, free, blocks uint64
	var err error
	// Split nodes, counted by a walk over the whole tree.
	var rec func(k, b uint64)
	rec = func(k, b uint64) {
		if b >= a.end || err != nil {
			return
		}
		if !a.split(k, b) {
			if a.free(k, b) && b < a.data {
				err = fmt.Errorf("buddy: node (%d, %#x) in the metadata is marked free", k, b)
			}
			return
		}
		if a.free(k, b) {
			err = fmt.Errorf("buddy: node (%d, %#x) is both split and free", k, b)
			return
		}
		splits[k]++
		rec(k-1, b)
		rec(k-1, b+1<<(k-1))
	}
	rec(a.root, 0)
	if err != nil {
		return err
	}
	a.leaves(func(k, b uint64) bool {
		if b+1<<k > a.end {
			err = fmt.Errorf("buddy: block (%d, %#x) runs past the end %#x", k, b, a.end)
			return false
		}
		blocks++
		if !a.free(k, b) {
			live++
			inUse += 1 << k
			return true
		}
		freeLeaves[k]++
		free += 1 << k
		if bud := b ^ 1<<k; k < a.root && a.exists(k, bud) && !a.split(k, bud) && a.free(k, bud) {
			err = fmt.Errorf("buddy: buddies %#x and %#x of order %d are both free (missed merge)", b, bud, k)
			return false
		}
		return true
	})
	if err != nil {
		return err
	}
	for k := uint64(MinOrder); k <= a.root; k++ {
		if n := a.freeMap(k).Count(nodes(a.end, k)); n != freeLeaves[k] {
			return fmt.Errorf("buddy: order %d: free bitmap has %d bits, tree has %d free blocks", k, n, freeLeaves[k])
		}
		if k > MinOrder {
			if n := a.splitMap(k).Count(nodes(a.end, k)); n != splits[k] {
				return fmt.Errorf("buddy: order %d: split bitmap has %d bits, tree has %d split nodes", k, n, splits[k])
			}
		}
		if h.count[k] != freeLeaves[k] {
			return fmt.Errorf("buddy: order %d: count %d, tree has %d free blocks", k, h.count[k], freeLeaves[k])
		}
		if (h.nonEmpty&(1<<k) != 0) != (h.count[k] != 0) || (h.head[k] != 0) != (h.count[k] != 0) {
			return fmt.Errorf("buddy: order %d: non-empty bit %v, head %#x, count %d", k, h.nonEmpty&(1<<k) != 0, h.head[k], h.count[k])
		}
		var n, prev uint64
		for b := h.head[k]; b != 0; b = *a.m.U64(b) {
			if n++; n > h.count[k] {
				return fmt.Errorf("buddy: order %d: list longer than its count %d", k, h.count[k])
			}
			if b < a.data || b >= a.end || b&(1<<k-1) != 0 || !a.free(k, b) {
				return fmt.Errorf("buddy: order %d: list entry %#x is not a free block of that order", k, b)
			}
			if p := *a.m.U64(b + 8); p != prev {
				return fmt.Errorf("buddy: order %d: block %#x has back link %#x, want %#x", k, b, p, prev)
			}
			prev = b
		}
		if n != h.count[k] {
			return fmt.Errorf("buddy: order %d: list has %d blocks, count %d", k, n, h.count[k])
		}
	}
	if h.nonEmpty>>(a.root+1) != 0 || h.nonEmpty&(1<<MinOrder-1) != 0 {
		return fmt.Errorf("buddy: non-empty mask %#x has impossible orders", h.nonEmpty)
	}
	return a.c.CheckCounters(Name, live, inUse, free, blocks, a.end-a.data-a.c.C.InUse)
}

func errSmall(size uint64) error {
	return fmt.Errorf("buddy: region of %d bytes is below the minimum of %d: %w", size, MinRegion, errs.ErrBadArg)
}

func errLayout(root, data, end uint64) error {
	return fmt.Errorf("buddy: attach: header layout (root order %d, data %#x, end %#x) does not match this region: %w", root, data, end, errs.ErrSegment)
}
