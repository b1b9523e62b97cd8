package tlsf

import (
	"fmt"
	"math/bits"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/internal/errs"
)

// This file holds the read-only side of the allocator: Stats, Walk and the
// invariant checker.

// largest returns the largest request that would succeed now with
// MinAlign: the biggest block of the highest non-empty class, less its
// size word.
func (a *Allocator) largest() uint64 {
	h := a.h
	if h.flMap == 0 {
		return 0
	}
	fl := 63 - bits.LeadingZeros64(h.flMap)
	sl := 31 - bits.LeadingZeros32(h.slMap[fl])
	var best uint64
	for u := h.heads[fl][sl]; u != 0; u = *a.m.U64(u) {
		best = max(best, a.size(u))
	}
	return best - hdrWord
}

// Stats returns the figures kept in the region header. It costs one scan
// of the highest non-empty free list (for LargestFree).
func (a *Allocator) Stats() alloc.Stats {
	return a.c.Stats(a.free(), Overhead(a.c.Size), a.largest())
}

// free derives the free bytes from the counters: every byte between the
// first block and the sentinel is a size word, in use, or free.
func (a *Allocator) free() uint64 {
	return a.end - a.first - a.c.C.InUse - hdrWord*a.c.C.Blocks
}

// Walk calls fn for every block in offset order. off is the block's size
// word (the user offset less 8), size its full span.
func (a *Allocator) Walk(fn func(off alloc.Off, size uint64, used bool) bool) error {
	for u := a.first; u < a.end; {
		w := *a.sw(u)
		s := w &^ fMask
		if s < minBlock || s > a.end-u {
			return fmt.Errorf("tlsf: walk: block at %#x has size %d", u, s)
		}
		if !fn(alloc.Off(u-hdrWord), s, w&fFree == 0) {
			return nil
		}
		u += s
	}
	return nil
}

// Check verifies every invariant listed in the package comment.
func (a *Allocator) Check() error {
	h := a.h
	if h.first != a.first || h.end != a.end || a.c.Size != a.m.Len() {
		return fmt.Errorf("tlsf: header layout changed under us")
	}
	type class struct{ fl, sl uint }
	perClass := map[class]uint64{}
	var live, inUse, free, blocks uint64
	prevFree := false
	var u uint64
	for u = a.first; u < a.end; {
		w := *a.sw(u)
		s := w &^ fMask
		isFree := w&fFree != 0
		switch {
		case s < minBlock || s%alloc.MinAlign != 0 || s > a.end-u:
			return fmt.Errorf("tlsf: block %#x: bad size %d", u, s)
		case (w&fPrev != 0) != prevFree:
			return fmt.Errorf("tlsf: block %#x: prev-free flag %v, predecessor free %v", u, w&fPrev != 0, prevFree)
		case isFree && prevFree:
			return fmt.Errorf("tlsf: blocks before %#x and at %#x both free (missed coalescing)", u, u)
		case isFree == a.starts.Test(u/bitsGran):
			return fmt.Errorf("tlsf: block %#x: free %v but start bit %v", u, isFree, a.starts.Test(u/bitsGran))
		}
		blocks++
		if isFree {
			if own := *a.m.U64(u + s - 16); own != u {
				return fmt.Errorf("tlsf: free block %#x: last word %#x, want its own offset", u, own)
			}
			fl, sl := mapping(s)
			perClass[class{fl, sl}]++
			free += s - hdrWord
		} else {
			live++
			inUse += s - hdrWord
		}
		prevFree = isFree
		u += s
	}
	if u != a.end {
		return fmt.Errorf("tlsf: blocks end at %#x, sentinel at %#x", u, a.end)
	}
	if w := *a.sw(a.end); w&^fMask != 0 || w&fFree != 0 || (w&fPrev != 0) != prevFree {
		return fmt.Errorf("tlsf: end sentinel word %#x (last block free %v)", w, prevFree)
	}
	// Free lists against the walk and the bitmaps.
	for fl := uint(0); fl < flCount; fl++ {
		if (h.flMap&(1<<fl) != 0) != (h.slMap[fl] != 0) {
			return fmt.Errorf("tlsf: first-level bit %d is %v, second-level map %#x", fl, h.flMap&(1<<fl) != 0, h.slMap[fl])
		}
		for sl := uint(0); sl < slCount; sl++ {
			head := h.heads[fl][sl]
			if (head != 0) != (h.slMap[fl]&(1<<sl) != 0) {
				return fmt.Errorf("tlsf: class (%d,%d): head %#x but bitmap bit %v", fl, sl, head, h.slMap[fl]&(1<<sl) != 0)
			}
			want := perClass[class{fl, sl}]
			var n uint64
			prev := uint64(0)
			for x := head; x != 0; x = *a.m.U64(x) {
				if n++; n > want {
					return fmt.Errorf("tlsf: class (%d,%d): list longer than the %d free blocks of that class", fl, sl, want)
				}
				if x < a.first || x >= a.end || x%alloc.MinAlign != 0 {
					return fmt.Errorf("tlsf: class (%d,%d): list entry %#x outside the heap", fl, sl, x)
				}
				w := *a.sw(x)
				if w&fFree == 0 {
					return fmt.Errorf("tlsf: class (%d,%d): used block %#x on a free list", fl, sl, x)
				}
				if f, s := mapping(w &^ fMask); f != fl || s != sl {
					return fmt.Errorf("tlsf: block %#x of size %d in class (%d,%d), belongs in (%d,%d)", x, w&^fMask, fl, sl, f, s)
				}
				if p := *a.m.U64(x + 8); prev != 0 && p != prev {
					return fmt.Errorf("tlsf: block %#x: back link %#x, want %#x", x, p, prev)
				}
				prev = x
			}
			if n != want {
				return fmt.Errorf("tlsf: class (%d,%d): list has %d blocks, heap has %d", fl, sl, n, want)
			}
		}
	}
	if n := a.starts.Count(a.m.Len() / bitsGran); n != live {
		return fmt.Errorf("tlsf: start bitmap has %d bits set for %d used blocks", n, live)
	}
	return a.c.CheckCounters(Name, live, inUse, free, blocks, a.free())
}

func errSmall(size uint64) error {
	return fmt.Errorf("tlsf: region of %d bytes is below the minimum of %d: %w", size, MinRegion, errs.ErrBadArg)
}

func errLayout(bitsOff, first, end uint64) error {
	return fmt.Errorf("tlsf: attach: header layout (bitmap %#x, first %#x, end %#x) does not match this region: %w", bitsOff, first, end, errs.ErrSegment)
}
