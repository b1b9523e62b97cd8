package symheap

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/internal/cabi"
	"github.com/symheap/symheap/internal/calls"
	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/shmsync"
	"github.com/symheap/symheap/internal/team"
)

// The formats the C library shares with the runtime (internal/cabi): the
// fixed part of the control block, whose signal words, job sleepers count
// and allocation records it reads and writes, and the constants of the
// allocation records. capi/gen lays them out in capi/shmemi_formats.h.
func init() {
	cabi.RegisterStruct(cabi.Struct{Type: reflect.TypeFor[control](),
		Doc: "the fixed part of a PE's control block (control.go): the wake-up words (wait.go) and the allocation records (symalloc.go)"})
	cabi.RegisterConst("CONTROL_SIZE", core.ControlSize, "bytes of the fixed part of a control block (core.ControlSize)")
	for _, k := range []struct {
		name string
		v    uint64
	}{{"MALLOC", callMalloc}, {"CALLOC", callCalloc}, {"ALIGN", callAlign}, {"HINTS", callHints}, {"REALLOC", callRealloc}, {"FREE", callFree}} {
		cabi.RegisterConst("ALLOC_CALL_"+k.name, k.v, "an allocation record's kind (symalloc.go)")
	}
	cabi.RegisterConst("ALLOC_NO_OFF", noOff, "an allocation record's in or out when there is no offset (symalloc.go)")
}

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
	cabi.MonitorTested = func(p any, flags uint32) {
		p.(*PE).stats.MonFlags.Store(uint64(flags) | core.MonTested | core.MonCHooks)
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
	polls, yields, yieldFor := shmsync.Budgets()
	l := pe.sp.Lay
	base, _ := core.SliceData(pe.sp.Mem())
	wbase, _ := core.SliceData(pe.sp.WMem())
	cb, _ := core.SliceData(pe.sp.Mem()[l.CBOff:])
	return cabi.Layout{
		Base: base, WBase: wbase,
		PartOff: l.PartOff, PartStride: l.PartStride, HeapSize: l.HeapSize,
		CBBase: cb, CBStride: l.CBSize,
		StatPuts: core.AddrOf(&pe.stats.Puts),
		StatGets: core.AddrOf(&pe.stats.Gets),
		StatAt:   core.AddrOf(&pe.stats.Atomics),
		Rank:     pe.rank, NPEs: pe.npes,
		MembarrierReady: pe.rma.membarrierReady(),
		SameAddress:     pe.seg.SameAddress(), Protected: pe.seg.Protected(),
		Far:   pe.rma.far,
		Polls: polls, Yields: yields, YieldNs: yieldFor.Nanoseconds(), Settle: shmsync.SettlePolls(),
		StatSymAllocs: core.AddrOf(&pe.stats.SymAllocs),
		StatSymFrees:  core.AddrOf(&pe.stats.SymFrees),
		Calls:         uint64(calls.Off(pe.npes)),
		Barrier:       team.BarrierOff(pe.npes),
		BarrierRounds: team.BarrierRounds(pe.npes),
		SegPath:       pe.seg.Path(),
	}
}
