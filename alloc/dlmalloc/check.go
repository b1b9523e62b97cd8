package dlmalloc

import (
	"fmt"
	"math/bits"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/internal/errs"
)

// This file holds the read-only side: Stats, Walk and the checker.

// largest returns the largest request that would succeed now (MinAlign):
// the bigger of the top and the largest binned chunk (the tail of the
// highest non-empty large bin, else the highest small bin), less 8.
func (a *Allocator) largest() uint64 {
	h := a.h
	var best uint64
	if h.top != 0 {
		best = a.size(h.top)
	}
	found := false
	for w := len(h.largeMap) - 1; w >= 0 && !found; w-- {
		if m := h.largeMap[w]; m != 0 {
			i := w*64 + 63 - bits.LeadingZeros64(m)
			best = max(best, a.size(h.largeTail[i]))
			found = true
		}
	}
	if !found && h.smallMap != 0 {
		best = max(best, uint64(63-bits.LeadingZeros64(h.smallMap))<<4)
	}
	if best == 0 {
		return 0
	}
	return best - hdrWord
}

// Stats returns the figures kept in the region header; O(1).
func (a *Allocator) Stats() alloc.Stats {
	return a.c.Stats(a.free(), Overhead(a.c.Size), a.largest())
}

// free derives the free bytes from the counters: every byte between the
// first chunk and the sentinel is a size word, in use, or free.
func (a *Allocator) free() uint64 {
	return a.end - a.first - a.c.C.InUse - hdrWord*a.c.C.Blocks
}

// Walk calls fn for every chunk in offset order; off is the chunk's size
// word (user offset less 8).
func (a *Allocator) Walk(fn func(off alloc.Off, size uint64, used bool) bool) error {
	for u := a.first; u < a.end; {
		w := *a.sw(u)
		s := w &^ fMask
		if s < minChunk || s > a.end-u {
			return fmt.Errorf("dlmalloc: walk: chunk %#x has size %d", u, s)
		}
		if !fn(alloc.Off(u-hdrWord), s, w&cFree == 0) {
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
		return fmt.Errorf("dlmalloc: header layout changed under us")
	}
	binned := map[uint64]bool{} // free chunks other than the top, from the walk
	var live, inUse, free, blocks, last uint64
	lastFree := false
	var u uint64
	for u = a.first; u < a.end; {
		w := *a.sw(u)
		s := w &^ fMask
		isFree := w&cFree != 0
		switch {
		case s < minChunk || s%16 != 0 || s > a.end-u:
			return fmt.Errorf("dlmalloc: chunk %#x: bad size %d", u, s)
		case (w&pFree != 0) != lastFree:
			return fmt.Errorf("dlmalloc: chunk %#x: prev-free flag %v, predecessor free %v", u, w&pFree != 0, lastFree)
		case isFree && lastFree:
			return fmt.Errorf("dlmalloc: chunks %#x and %#x both free (missed coalescing)", last, u)
		case isFree == a.starts.Test(u/bitsGran):
			return fmt.Errorf("dlmalloc: chunk %#x: free %v but start bit %v", u, isFree, !isFree)
		}
		blocks++
		if isFree {
			if tag := *a.m.U64(u + s - 16); tag != s {
				return fmt.Errorf("dlmalloc: free chunk %#x of size %d has boundary tag %d", u, s, tag)
			}
			free += s - hdrWord
			if u+s == a.end {
				if h.top != u {
					return fmt.Errorf("dlmalloc: last chunk %#x is free but the top is %#x", u, h.top)
				}
			} else {
				binned[u] = false
			}
		} else {
			live++
			inUse += s - hdrWord
		}
		last, lastFree = u, isFree
		u += s
	}
	if u != a.end {
		return fmt.Errorf("dlmalloc: chunks end at %#x, sentinel at %#x", u, a.end)
	}
	if w := *a.sw(a.end); w&^fMask != 0 || w&cFree != 0 || (w&pFree != 0) != lastFree {
		return fmt.Errorf("dlmalloc: sentinel word %#x (last chunk free %v)", w, lastFree)
	}
	if h.top != 0 && !(lastFree && last == h.top) {
		return fmt.Errorf("dlmalloc: top %#x is not the free last chunk", h.top)
	}
	// Bins against the walk.
	visit := func(kind string, i int, head, tail uint64, ok func(s uint64) bool, sorted bool) error {
		var prev, prevSize uint64
		for x := head; x != 0; x = *a.fd(x) {
			seen, isFree := binned[x]
			if !isFree {
				return fmt.Errorf("dlmalloc: %s bin %d holds %#x, which is not a free chunk", kind, i, x)
			}
			if seen {
				return fmt.Errorf("dlmalloc: chunk %#x is on a bin twice (or the list loops)", x)
			}
			binned[x] = true
			s := a.size(x)
			if !ok(s) {
				return fmt.Errorf("dlmalloc: chunk %#x of size %d in %s bin %d", x, s, kind, i)
			}
			if *a.bk(x) != prev {
				return fmt.Errorf("dlmalloc: chunk %#x: back link %#x, want %#x", x, *a.bk(x), prev)
			}
			if sorted && prev != 0 && (s < prevSize || s == prevSize && x < prev) {
				return fmt.Errorf("dlmalloc: large bin %d out of order at %#x", i, x)
			}
			prev, prevSize = x, s
		}
		if sorted && prev != tail {
			return fmt.Errorf("dlmalloc: large bin %d: tail %#x, last entry %#x", i, tail, prev)
		}
		return nil
	}
	for i := 0; i < nSmall; i++ {
		if (h.small[i] != 0) != (h.smallMap&(1<<i) != 0) {
			return fmt.Errorf("dlmalloc: small bin %d: head %#x, map bit %v", i, h.small[i], h.smallMap&(1<<i) != 0)
		}
		if err := visit("small", i, h.small[i], 0, func(s uint64) bool { return s == uint64(i)<<4 }, false); err != nil {
			return err
		}
	}
	if h.smallMap>>nSmall != 0 || h.smallMap&3 != 0 {
		return fmt.Errorf("dlmalloc: small map %#x has bits for impossible bins", h.smallMap)
	}
	for i := 0; i < nLarge; i++ {
		if (h.large[i] != 0) != (h.largeMap[i/64]&(1<<(i%64)) != 0) {
			return fmt.Errorf("dlmalloc: large bin %d: head %#x, map bit %v", i, h.large[i], h.largeMap[i/64]&(1<<(i%64)) != 0)
		}
		ok := func(s uint64) bool { return s >= smallLimit && largeIndex(s) == uint(i) }
		if err := visit("large", i, h.large[i], h.largeTail[i], ok, true); err != nil {
			return err
		}
	}
	for x, seen := range binned {
		if !seen {
			return fmt.Errorf("dlmalloc: free chunk %#x is in no bin", x)
		}
	}
	if n := a.starts.Count(a.m.Len() / bitsGran); n != live {
		return fmt.Errorf("dlmalloc: start bitmap has %d bits for %d chunks in use", n, live)
	}
	return a.c.CheckCounters(Name, live, inUse, free, blocks, a.free())
}

func errSmall(size uint64) error {
	return fmt.Errorf("dlmalloc: region of %d bytes is below the minimum of %d: %w", size, MinRegion, errs.ErrBadArg)
}

func errLayout(bitsOff, first, end uint64) error {
	return fmt.Errorf("dlmalloc: attach: header layout (bitmap %#x, first %#x, end %#x) does not match this region: %w", bitsOff, first, end, errs.ErrSegment)
}
