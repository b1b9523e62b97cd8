package symheap

import (
	"fmt"
	"strings"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/internal/cabi"
	"github.com/symheap/symheap/internal/calls"
	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/shmsync"
)

// The C library's view of a PE (internal/cabi): filled once at its
// shmem_init, read by its fast paths.
func init() {
	cabi.Describe = func(p any) cabi.Layout { return p.(*PE).describeForC() }
	cabi.CheckPeers = func(p any) error {
		// The C library prints the error as it is: say whose it is.
		err := p.(*PE).collectiveLost()
		if err != nil && !strings.HasPrefix(err.Error(), "symheap:") {
			return fmt.Errorf("symheap: %w", err)
		}
		return err
	}
	cabi.ShareRecords = func(p any, nums *[2]uint64) {
		pe := p.(*PE)
		pe.mu.Lock()
		h := &pe.ext.sym
		*nums = *h.nums
		h.nums = nums
		pe.mu.Unlock()
	}
	cabi.FreeExchanged = func(p any, offs []uint64) error { return p.(*PE).freeExchanged(offs) }
	cabi.Diverged = func(p any, withOut bool) error {
		pe := p.(*PE)
		pe.mu.Lock()
		defer pe.mu.Unlock()
		// The C library's exchange: the phase it published is the last
		// one the numbers they share hold.
		return pe.ext.sym.diverged(pe.ext.sym.nums[numSeq], withOut)
	}
}

// freeExchanged gives blocks back to the symmetric heap's allocator
// without an exchange: the C library made the Free's exchange itself
// (cabi.FreeExchanged). Every PE gives back the same blocks at the same
// point of its calls, so the heaps stay alike.
func (pe *PE) freeExchanged(offs []uint64) error {
	pe.mu.Lock()
	defer pe.mu.Unlock()
	for _, off := range offs {
		if err := pe.ext.sym.heap.Free(alloc.Off(off)); err != nil { // reports the release (alloc.Reporting)
			return fmt.Errorf("symheap: giving back the block at offset %#x, freed earlier: %w", off, err)
		}
	}
	return nil
}

func (pe *PE) describeForC() cabi.Layout {
	var c control
	polls, yields, yieldFor := shmsync.Budgets()
	l := pe.sp.Lay
	base, _ := core.SliceData(pe.sp.Mem())
	wbase, _ := core.SliceData(pe.sp.WMem())
	cb, _ := core.SliceData(pe.sp.Mem()[l.CBOff:])
	return cabi.Layout{
		Base: base, WBase: wbase,
		PartOff: l.PartOff, PartStride: l.PartStride, HeapSize: l.HeapSize,
		CBBase: cb, CBStride: l.CBSize,
		SigWord:     core.OffsetIn(&c, &c.sig.word),
		SigSleepers: core.OffsetIn(&c, &c.sig.sleepers),
		Sleeping:    core.OffsetIn(&c, &c.sleeping),
		StatPuts:    core.AddrOf(&pe.stats.Puts),
		StatGets:    core.AddrOf(&pe.stats.Gets),
		StatAt:      core.AddrOf(&pe.stats.Atomics),
		Rank:        pe.rank, NPEs: pe.npes,
		MembarrierReady: pe.rma.membarrierReady(),
		SameAddress:     pe.seg.SameAddress(), Protected: pe.seg.Protected(),
		Far:   pe.rma.far,
		Polls: polls, Yields: yields, YieldNs: yieldFor.Nanoseconds(), Settle: shmsync.SettlePolls(),
		AllocRec:      core.OffsetIn(&c, &c.allocRec),
		AllocSlot:     core.SizeOf[allocSlot](),
		StatSymAllocs: core.AddrOf(&pe.stats.SymAllocs),
		StatSymFrees:  core.AddrOf(&pe.stats.SymFrees),
		Calls:         uint64(calls.Off(pe.npes)),
		SegPath:       pe.seg.Path(),
	}
}
