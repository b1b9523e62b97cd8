package small

import (
	"fmt"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/alloc/internal/region"
)

// spans calls fn for every span in the span table, in offset order.
func (h *Heap) spans(fn func(s uint64, sp *spanHdr, c int, ci *classInfo) error) error {
	for i := range h.table {
		e := h.table[i].Load() // acquire: pairs with the publishing Store
		if e == 0 || e>>8>>PageShift != uint64(i) {
			continue // not a span, or not its first page
		}
		c := e&0xff - 1
		if c >= uint64(nClasses) || uint64(i)+spanPages > uint64(len(h.table)) {
			return fmt.Errorf("small: span table entry %d holds %#x, not a class", i, e)
		}
		for p := i + 1; p < i+spanPages; p++ {
			if h.table[p].Load() != e {
				return fmt.Errorf("small: span table entry %d holds %#x, its span's first page %#x", p, h.table[p].Load(), e)
			}
		}
		s := e >> 8
		if s-uint64(i)<<PageShift >= classes[c].colours*colourStep {
			return fmt.Errorf("small: span table entry %d holds %#x, a span header beyond its first page's colours", i, e)
		}
		if err := fn(s, h.span(s), int(c), &classes[c]); err != nil {
			return err
		}
	}
	return nil
}

// liveIn counts span s's live slots (A=1, R=0).
func (h *Heap) liveIn(s uint64, ci *classInfo) uint64 {
	var n uint64
	for w := uint64(0); w < ci.nwords; w++ {
		n += ones(h.aWord(s, w).Load() &^ h.rWord(s, ci, w).Load())
	}
	return n
}

// Stats returns the region's figures: inner's, with the header and the
// spans taken out and the small blocks put in. A slot freed remotely and
// not yet collected counts as free. It writes nothing and asks inner only
// for its Stats, so that an inspector can call it on a read-only mapping
// while the owner works (inner's UsableSize of a span given back in the
// meantime would count a failure, a write).
func (h *Heap) Stats() alloc.Stats {
	h.quiet()
	defer h.unquiet()
	ist := h.inner.Stats()
	hdrUse := h.hdr.hdrUse.Load()
	var spanUse, inUse, free, live, allocs, frees, largest uint64
	h.spans(func(s uint64, sp *spanHdr, _ int, ci *classInfo) error {
		spanUse += sp.use.Load()
		n := h.liveIn(s, ci)
		live += n
		inUse += n * ci.size
		free += (ci.nslots - n) * ci.size
		if n < ci.nslots {
			largest = max(largest, ci.size)
		}
		allocs += sp.allocs
		frees += sp.allocs - n
		return nil
	})
	// The C front end's spans are pages of one block of inner, its
	// arena (foreign.go), not blocks of their own.
	var cspans, cback uint64
	if _, a, ok := h.inForeign(alloc.Off(h.hdr.foreign.Load() - 1)); ok {
		cspans, cback = a.spans.Load(), a.spansBack.Load()
	}
	st := ist
	st.InUse = ist.InUse - hdrUse - spanUse + inUse
	st.Free = ist.Free + free
	st.Overhead = st.Size - st.InUse - st.Free
	st.LargestFree = max(ist.LargestFree, largest)
	hd := h.hdr
	st.Live = ist.Live - 1 - (hd.spansTaken.Load() - hd.spansGiven.Load()) + (cspans - cback) + live
	st.Allocs = ist.Allocs - 1 - hd.spansTaken.Load() + cspans + hd.retAllocs.Load() + allocs
	st.Frees = ist.Frees - hd.spansGiven.Load() + cback + hd.retFrees.Load() + frees
	st.Reallocs = ist.Reallocs + hd.reallocs.Load()
	st.Failed = ist.Failed + hd.failed.Load() - hd.retried.Load()
	return st
}

// Check verifies inner, the header, the span table and every span: its
// header, bitmaps, free list and remote-free stack, and the counters.
func (h *Heap) Check() error {
	h.quiet()
	defer h.unquiet()
	if err := h.inner.Check(); err != nil {
		return err
	}
	hd := h.hdr
	if hd.magic.Load() != magic || hd.size.Load() != uint64(len(h.mem)) || hd.chunks.Load() != uint64(len(h.table)) {
		return fmt.Errorf("small: header at %#x overwritten (magic %#x, size %d, chunks %d)", uint64(h.hoff), hd.magic.Load(), hd.size.Load(), hd.chunks.Load())
	}
	if us, err := h.inner.UsableSize(h.hoff); err != nil || us < hdrFixed+8*uint64(len(h.table)) || us != hd.hdrUse.Load() {
		return fmt.Errorf("small: the header block %#x is not a live block of %d bytes: %v", uint64(h.hoff), hdrFixed+8*len(h.table), err)
	}
	var n uint64
	err := h.spans(func(s uint64, sp *spanHdr, c int, ci *classInfo) error {
		n++
		if _, _, ok := h.inForeign(alloc.Off(s)); ok {
			// A span of the C front end's arena (foreign.go): its block
			// is the arena's, not inner's.
		} else if us, err := h.inner.UsableSize(alloc.Off(blockOf(s))); err != nil || us < SpanSize || us != sp.use.Load() {
			return fmt.Errorf("small: span %#x is not a live %d-byte block of the region (usable %d, recorded %d): %v", s, SpanSize, us, sp.use.Load(), err)
		}
		if cw := sp.class.Load(); cw != spanMagic|uint64(c) {
			return fmt.Errorf("small: span %#x: header says %#x, the span table class %d", s, cw, c)
		}
		if sp.owner.Load()>>32 == 0 || sp.owner.Load()&(1<<32-1) == 0 {
			return fmt.Errorf("small: span %#x has no owner (%#x)", s, sp.owner.Load())
		}
		if sp.bump > ci.nslots {
			return fmt.Errorf("small: span %#x: bump %d above its %d slots", s, sp.bump, ci.nslots)
		}
		var setA, setR uint64
		for w := uint64(0); w < ci.nwords; w++ {
			a, r := h.aWord(s, w).Load(), h.rWord(s, ci, w).Load()
			if r&^a != 0 {
				return fmt.Errorf("small: span %#x: slots freed remotely but not allocated (bitmap word %d: A %#x R %#x)", s, w, a, r)
			}
			for b := uint64(0); b < 64; b++ {
				if a&(1<<b) != 0 && w*64+b >= sp.bump {
					return fmt.Errorf("small: span %#x: slot %d allocated above bump %d", s, w*64+b, sp.bump)
				}
			}
			setA += ones(a)
			setR += ones(r)
		}
		if setA != sp.used {
			return fmt.Errorf("small: span %#x: %d slots allocated, used says %d", s, setA, sp.used)
		}
		if sp.allocs < sp.used || sp.rfrees.Load() < setR {
			return fmt.Errorf("small: span %#x: %d slots handed out, %d used; %d remote frees, %d pending", s, sp.allocs, sp.used, sp.rfrees.Load(), setR)
		}
		seen := make([]bool, ci.nslots)
		var onList uint64
		for f := sp.free; f != 0; f = *h.link(s, ci, f-1) {
			slot := f - 1
			if slot >= sp.bump || seen[slot] {
				return fmt.Errorf("small: span %#x: free list reaches slot %d (bump %d) twice or out of range", s, slot, sp.bump)
			}
			if h.aWord(s, slot/64).Load()&(1<<(slot%64)) != 0 {
				return fmt.Errorf("small: span %#x: slot %d is on the free list but allocated", s, slot)
			}
			seen[slot] = true
			onList++
		}
		if onList+setA != sp.bump {
			return fmt.Errorf("small: span %#x: %d slots free on the list + %d allocated != %d handed out once", s, onList, setA, sp.bump)
		}
		var stacked uint64
		for f := sp.stack.Load(); f != 0; f = *h.link(s, ci, f-1) {
			slot := f - 1
			if slot >= sp.bump || seen[slot] || stacked >= setR {
				return fmt.Errorf("small: span %#x: remote-free stack reaches slot %d twice or out of range", s, slot)
			}
			if !(h.aWord(s, slot/64).Load()&(1<<(slot%64)) != 0 && h.rWord(s, ci, slot/64).Load()&(1<<(slot%64)) != 0) {
				return fmt.Errorf("small: span %#x: slot %d is on the remote-free stack but not marked freed", s, slot)
			}
			seen[slot] = true
			stacked++
		}
		if stacked != setR {
			return fmt.Errorf("small: span %#x: %d slots on the remote-free stack, %d marked freed remotely", s, stacked, setR)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if live := hd.spansTaken.Load() - hd.spansGiven.Load(); live != n {
		return fmt.Errorf("small: %d spans in the table, the counters say %d", n, live)
	}
	return nil
}

// checkSpan verifies what the pinned owner of span s may rely on at any
// moment, whatever remote frees do meanwhile: bump in range, used equal
// to the A bits set, the free list inside bump, unallocated, without a
// loop, and holding every slot handed out once that is not allocated.
// SYMHEAP_ALLOC_VERIFY runs it after each of the owner's changes.
func (h *Heap) checkSpan(s uint64, ci *classInfo) error {
	sp := h.span(s)
	if sp.bump > ci.nslots {
		return fmt.Errorf("small: span %#x: bump %d above its %d slots", s, sp.bump, ci.nslots)
	}
	var setA uint64
	for w := uint64(0); w < ci.nwords; w++ {
		setA += ones(h.aWord(s, w).Load())
	}
	if setA != sp.used {
		return fmt.Errorf("small: span %#x: %d slots allocated, used says %d", s, setA, sp.used)
	}
	seen := make([]bool, ci.nslots)
	var onList uint64
	for f := sp.free; f != 0; f = *h.link(s, ci, f-1) {
		slot := f - 1
		if slot >= sp.bump || seen[slot] || h.aWord(s, slot/64).Load()&(1<<(slot%64)) != 0 {
			return fmt.Errorf("small: span %#x: free list reaches slot %d (bump %d): twice, out of range or allocated", s, slot, sp.bump)
		}
		seen[slot] = true
		onList++
	}
	if onList+setA != sp.bump {
		return fmt.Errorf("small: span %#x: %d slots on the free list + %d allocated != %d handed out once", s, onList, setA, sp.bump)
	}
	return nil
}

func (h *Heap) verify(op string, s uint64, ci *classInfo) {
	region.MustCheck("small", op, func() error { return h.checkSpan(s, ci) })
}

// Walk reports inner's blocks in offset order, with each span replaced by
// its slots (live ones used; runs of free ones merged) and the header left
// out.
func (h *Heap) Walk(fn func(off alloc.Off, size uint64, used bool) bool) error {
	h.quiet()
	defer h.unquiet()
	stop := false
	err := h.inner.Walk(func(off alloc.Off, size uint64, used bool) bool {
		if !used {
			return fn(off, size, false)
		}
		end := uint64(off) + size
		if uint64(h.hoff) >= uint64(off) && uint64(h.hoff) < end {
			return true
		}
		s := (uint64(off) + 1<<PageShift - 1) &^ (1<<PageShift - 1)
		var e uint64
		if s+SpanSize <= end && s>>PageShift < uint64(len(h.table)) {
			e = h.table[s>>PageShift].Load()
		}
		if e == 0 || e>>8>>PageShift != s>>PageShift {
			return fn(off, size, true)
		}
		s = e >> 8
		ci := &classes[e&0xff-1]
		var runOff, runLen uint64
		for slot := uint64(0); slot < ci.nslots; slot++ {
			so := s + ci.slots + slot*ci.size
			if !h.live(s, ci, slot) {
				if runLen == 0 {
					runOff = so
				}
				runLen += ci.size
				continue
			}
			if runLen != 0 && !fn(alloc.Off(runOff), runLen, false) {
				stop = true
				return false
			}
			runLen = 0
			if !fn(alloc.Off(so), ci.size, true) {
				stop = true
				return false
			}
		}
		if runLen != 0 && !fn(alloc.Off(runOff), runLen, false) {
			stop = true
			return false
		}
		return true
	})
	_ = stop
	return err
}
