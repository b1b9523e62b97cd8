package symheap

import (
	"github.com/symheap/symheap/internal/cabi"
	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/shmsync"
)

// The C library's view of a PE (internal/cabi): filled once at its
// shmem_init, read by its fast paths.
func init() {
	cabi.Describe = func(p any) cabi.Layout { return p.(*PE).describeForC() }
	cabi.CheckPeers = func(p any) error { return p.(*PE).peerLost() }
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
		SegPath: pe.seg.Path(),
	}
}
