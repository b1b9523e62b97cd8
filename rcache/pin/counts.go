package pin

// counts records, for every page, how many live registrations cover it, as
// a sorted list of disjoint segments [start, end) with a count ≥ 1; a page
// in no segment has count 0.
//
// Invariants (checked by check):
//  1. Segments are non-empty, sorted and disjoint.
//  2. Every count is ≥ 1.
//  3. Two segments that touch have different counts (they are joined
//     otherwise), so the list is as short as the counts allow.
//
// add(r, +1) raises every page of r; add(r, -1) lowers them and reports the
// maximal runs that reached 0. Both cost O(log n + k) to find the k segments
// involved plus the splice, O(n) at worst.

import (
	"fmt"
	"sort"

	"github.com/symheap/symheap/memhook"
)

type seg struct {
	start, end uintptr
	n          int32
}

type counts struct {
	segs []seg
	mid  []seg // scratch for add
}

// add adds delta (+1 or -1) to the count of every byte of r. For delta -1,
// zero is called with each maximal run of r whose count reached 0; runs of r
// whose count was already 0 are left as they are (and reported through
// underflow).
func (c *counts) add(r memhook.Range, delta int32, zero func(memhook.Range)) (underflow bool) {
	if r.End <= r.Start {
		return false
	}
	i := sort.Search(len(c.segs), func(k int) bool { return c.segs[k].end > r.Start })
	j := i
	for j < len(c.segs) && c.segs[j].start < r.End {
		j++
	}
	mid := c.mid[:0]
	var zr memhook.Range // the zero run being gathered
	flush := func() {
		if zr.End > zr.Start && zero != nil {
			zero(zr)
		}
		zr = memhook.Range{}
	}
	gone := func(lo, hi uintptr) {
		if zr.End == lo && zr.End > zr.Start {
			zr.End = hi
			return
		}
		flush()
		zr = memhook.Range{Start: lo, End: hi}
	}
	at := r.Start
	for _, s := range c.segs[i:j] {
		if s.start < r.Start {
			mid = append(mid, seg{s.start, r.Start, s.n})
		}
		lo, hi := max(s.start, r.Start), min(s.end, r.End)
		if lo > at {
			if delta > 0 {
				mid = append(mid, seg{at, lo, delta})
			} else {
				underflow = true
			}
		}
		if n := s.n + delta; n > 0 {
			mid = append(mid, seg{lo, hi, n})
		} else {
			gone(lo, hi)
		}
		if s.end > r.End {
			mid = append(mid, seg{r.End, s.end, s.n})
		}
		at = hi
	}
	if at < r.End {
		if delta > 0 {
			mid = append(mid, seg{at, r.End, delta})
		} else {
			underflow = true
		}
	}
	flush()
	// Splice mid in place of segs[i:j], then join equal neighbours around it.
	tail := len(c.segs) - j
	need := i + len(mid) + tail
	if need > cap(c.segs) {
		ns := make([]seg, need, need+need/2)
		copy(ns, c.segs[:i])
		copy(ns[i+len(mid):], c.segs[j:])
		c.segs = ns
	} else {
		old := c.segs
		c.segs = c.segs[:need]
		copy(c.segs[i+len(mid):], old[j:j+tail])
	}
	copy(c.segs[i:], mid)
	c.mid = mid[:0]
	c.join(max(i-1, 0), min(i+len(mid)+1, len(c.segs)))
	return underflow
}

// join merges touching segments with equal counts within segs[lo:hi].
func (c *counts) join(lo, hi int) {
	if hi-lo < 2 {
		return
	}
	out := lo
	for k := lo + 1; k < hi; k++ {
		if c.segs[out].end == c.segs[k].start && c.segs[out].n == c.segs[k].n {
			c.segs[out].end = c.segs[k].end
			continue
		}
		out++
		c.segs[out] = c.segs[k]
	}
	out++
	if out < hi {
		n := copy(c.segs[out:], c.segs[hi:])
		c.segs = c.segs[:out+n]
	}
}

// uncounted calls fn with each maximal run of r whose count is 0.
func (c *counts) uncounted(r memhook.Range, fn func(memhook.Range)) {
	at := r.Start
	i := sort.Search(len(c.segs), func(k int) bool { return c.segs[k].end > r.Start })
	for ; i < len(c.segs) && c.segs[i].start < r.End; i++ {
		if c.segs[i].start > at {
			fn(memhook.Range{Start: at, End: c.segs[i].start})
		}
		at = c.segs[i].end
	}
	if at < r.End {
		fn(memhook.Range{Start: at, End: r.End})
	}
}

// bytes returns the bytes with a count ≥ 1.
func (c *counts) bytes() uint64 {
	var n uint64
	for _, s := range c.segs {
		n += uint64(s.end - s.start)
	}
	return n
}

func (c *counts) check() error {
	for k, s := range c.segs {
		if s.end <= s.start || s.n < 1 {
			return fmt.Errorf("pin: segment %d [%#x, %#x) count %d", k, s.start, s.end, s.n)
		}
		if k > 0 {
			p := c.segs[k-1]
			if p.end > s.start {
				return fmt.Errorf("pin: segments %d and %d overlap", k-1, k)
			}
			if p.end == s.start && p.n == s.n {
				return fmt.Errorf("pin: segments %d and %d touch with count %d", k-1, k, s.n)
			}
		}
	}
	return nil
}
