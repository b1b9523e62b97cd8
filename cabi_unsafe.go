package symheap

import (
	"unsafe"

	"github.com/symheap/symheap/internal/cabi"
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
	polls, yields := shmsync.Budgets()
	l := pe.sp.Lay
	return cabi.Layout{
		Base: unsafe.Pointer(unsafe.SliceData(pe.sp.Mem())), WBase: unsafe.Pointer(unsafe.SliceData(pe.sp.WMem())),
		PartOff: l.PartOff, PartStride: l.PartStride, HeapSize: l.HeapSize,
		CBBase: unsafe.Pointer(unsafe.SliceData(pe.sp.Mem()[l.CBOff:])), CBStride: l.CBSize,
		SigWord:     uint64(unsafe.Offsetof(c.sig) + unsafe.Offsetof(c.sig.word)),
		SigSleepers: uint64(unsafe.Offsetof(c.sig) + unsafe.Offsetof(c.sig.sleepers)),
		Sleeping:    uint64(unsafe.Offsetof(c.sleeping)),
		StatPuts:    unsafe.Pointer(&pe.stats.Puts),
		StatGets:    unsafe.Pointer(&pe.stats.Gets),
		StatAt:      unsafe.Pointer(&pe.stats.Atomics),
		Rank:        pe.rank, NPEs: pe.npes,
		MembarrierReady: pe.rma.membarrierReady(),
		SameAddress:     pe.seg.SameAddress(), Protected: pe.seg.Protected(),
		Far:   pe.rma.far,
		Polls: polls, Yields: yields,
		SegPath: pe.seg.Path(),
	}
}
