package symheap

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unsafe"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/alloc/small"
	"github.com/symheap/symheap/internal/cabi"
	"github.com/symheap/symheap/internal/calls"
	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/far"
	"github.com/symheap/symheap/internal/shmsync"
	"github.com/symheap/symheap/internal/team"
	"github.com/symheap/symheap/internal/transport"
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
	cabi.RegisterConst("ALLOC_MIN_ALIGN", alloc.MinAlign, "the least alignment an allocation record holds: every block's (alloc.MinAlign, symalloc.go)")
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
	cabi.SharedMalloc = func(p any, size uint64) (cabi.SharedMallocArena, error) {
		pe := p.(*PE)
		if size == 0 { // three quarters: SharedAlloc keeps the rest
			size = pe.sp.Lay.SharedSize / 4 * 3
		}
		off, got, err := pe.ext.shared.cArena(size)
		if err != nil {
			return cabi.SharedMallocArena{}, err
		}
		front, _ := core.Within(pe.sp.Mem()[uint64(pe.sp.CBSeg(pe.rank, 0)):], core.AddrOf(&pe.stats.SharedFront))
		return cabi.SharedMallocArena{
			SharedOff: pe.sp.Lay.SharedOff, SharedSize: pe.sp.Lay.SharedSize,
			FrontWord: front,
			Arena:     off, ArenaSize: got,
			Fallbacks: core.AddrOf(&pe.stats.CMallocFallbacks),
			Classes:   small.ClassTable(),
		}, nil
	}
	cabi.FreeExchanged = func(p any, offs []uint64) error { return p.(*PE).freeExchanged(offs) }
	cabi.ReduceFold = func(t any, dst, src unsafe.Pointer, n int, esz uint64, fold func(acc, x unsafe.Pointer, n int)) error {
		if pe := farTeam(t.(*Team)); pe != nil {
			// A job on several nodes: the multi-node layer's reduction,
			// on bytes, folding with the C library's fold.
			nb := uint64(n) * esz
			d, s := core.Bytes(core.Ptr(dst), nb), core.Bytes(core.Ptr(src), nb)
			return farCollective(pe, func() error {
				return far.ReduceWith(pe.far, (*team.Team)(t.(*Team)), d, s, func(acc, x []byte) {
					a, _ := core.SliceData(acc)
					b, _ := core.SliceData(x)
					fold(unsafe.Pointer(a), unsafe.Pointer(b), len(acc)/int(esz))
				})
			})
		}
		return (*team.Team)(t.(*Team)).ReduceFold(dst, src, n, esz, func(acc, x core.Ptr, n int) { fold(acc, x, n) })
	}
	cabi.SyncInCall = func(t any) error {
		tt := t.(*Team)
		if farTeam(tt) != nil {
			return tt.Sync() // the multi-node layer's, which checks calls by kind and number
		}
		return (*team.Team)(tt).SyncInCall()
	}
	cabi.Far = func(p any) cabi.Remote {
		if pe := p.(*PE); pe.far != nil {
			return farForC{pe.far}
		}
		return nil
	}
	cabi.Differs = func(p any, mine, theirs uint64, q int) error {
		return p.(*PE).calls.Differs(mine, theirs, q)
	}
	cabi.Diverged = func(p any, withOut bool) error {
		pe := p.(*PE)
		pe.mu.Lock()
		defer pe.mu.Unlock()
		// The C library's exchange: the phase it published is the last
		// one the numbers they share hold.
		return pe.ext.sym.diverged(pe.ext.sym.nums[numSeq], withOut)
	}
}

// farForC is the multi-node layer as the C library calls it
// (cabi.Remote): the same transport, regions and error reports as the
// runtime's own operations to PEs on other nodes.
type farForC struct{ l *far.Layer }

func (f farForC) PutAt(r, target int, off uint64, src []byte, nbi bool) error {
	return f.l.PutAt(transport.Region(r), target, off, src, nbi)
}

func (f farForC) GetAt(r int, dst []byte, source int, off uint64) error {
	return f.l.GetAt(transport.Region(r), dst, source, off)
}

func (f farForC) AtomicAt(r int, op uint8, target int, off uint64, size int, v, cmp uint64) (uint64, error) {
	return f.l.AtomicAt(transport.Region(r), transport.AMO(op), target, off, size, v, cmp)
}

func (f farForC) Fence() error { return f.l.Fence() }
func (f farForC) Quiet() error { return f.l.Quiet() }

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
	b := shmsync.Budgets()
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
		PostRelaxed:     pe.ext.teams.Relaxed(),
		SameAddress:     pe.seg.SameAddress(), Protected: pe.seg.Protected(),
		Far:    pe.rma.far,
		NodeOf: append([]int(nil), pe.topo.nodeOf...),
		FarPEs: func() []int {
			if pe.far == nil {
				return nil
			}
			return pe.far.Far()
		}(),
		Polls: b.Polls, Yields: b.Yields, YieldNs: b.YieldFor.Nanoseconds(), LongYieldNs: b.LongYield.Nanoseconds(),
		HandOverNs:    b.HandOver.Nanoseconds(),
		Settle:        shmsync.SettlePolls(),
		StatSymAllocs: core.AddrOf(&pe.stats.SymAllocs),
		StatSymFrees:  core.AddrOf(&pe.stats.SymFrees),
		Calls:         uint64(calls.Off(pe.npes)),
		Barrier:       team.BarrierOff(pe.npes),
		BarrierRounds: team.BarrierRounds(pe.npes),
		SegPath:       pe.seg.Path(),
		CBlock:        pe.cBlock,
		GoPEs:         pe.goPEs,
	}
}

// Go and C PEs in one job.
//
// A job may run a Go program on some PEs and a C program (libsymheap,
// which hosts this runtime) on others: one segment, one layout, one
// allocator, and the same formats, which the segment's header checks
// (segment.Params.FormatsSum: every PE's cabi.Sum). What differs is what
// the C library keeps beside the runtime's state, and the steps of its
// own collectives. So:
//
//  1. Before Init's barrier every PE stores in its control block what it
//     runs (lang: LangGo, or LangC where cabi.Hosted), and a C PE the
//     window of its static data (cabi.Static), which the other C PEs map
//     after the barrier without another collective step.
//  2. After the barrier every PE loads the others' lang. If any PE of the
//     job is a C PE, every PE, Go or C, makes one collective allocation
//     of cabi.CBlockSize bytes: the C library's world post lines and
//     scratch words (capi/coll.c), at the same offset on every PE, so
//     that the program's own allocations keep the same offsets on Go and
//     C PEs alike. A Go-only job makes none.
//  3. The C library learns the number of Go PEs (Layout.GoPEs); where it
//     is not 0 it runs the team collectives through this runtime's team
//     layer (the same steps on every PE), refuses those the runtime has
//     not got on a group with a Go PE, and does not cache freed blocks.
//
// A job across nodes (pe.far) makes no exchange of languages beyond its
// node: each node's PEs must run one language, which step 2 checks on the
// node, and the C library routes its collectives and its operations on
// PEs of other nodes through this runtime (Layout.Far); its static data
// are the transport's third region (transport.RegionStatic, startFar).

// formatsSum is the digest of the formats Go and C share (cabi.Sum),
// which every PE of a job must have alike: the segment's header compares
// it (a C PE whose libsymheap was built from another version of symheap
// than a Go PE's program is refused at Init, naming both digests). Sum
// walks the registered types once; they do not change after init.
var formatsSum = sync.OnceValue(func() uint64 {
	s, err := cabi.Sum()
	if err != nil {
		panic(err) // a registered format that cannot live in shared memory: a bug of this module, caught by its tests
	}
	return s
})

// publishLang is step 1.
func (pe *PE) publishLang() {
	c := pe.ctl[pe.rank]
	if cabi.Hosted {
		// Stored before the barrier's release, loaded after it.
		c.staticPid.Store(cabi.Static.PID)
		c.staticFd.Store(cabi.Static.FD)
		c.staticSize.Store(cabi.Static.Size)
		c.lang.Store(cabi.LangC)
		return
	}
	c.lang.Store(cabi.LangGo)
}

// initLangs is step 2: it counts the job's Go and C PEs and allocates
// the C library's block where there is a C PE.
func (pe *PE) initLangs() error {
	if pe.far != nil {
		mine := pe.ctl[pe.rank].lang.Load()
		for _, p := range pe.topo.local {
			if l := pe.ctl[p].lang.Load(); l != mine { // after Init's barrier: stored before it
				return fmt.Errorf("symheap: Init: PE %d runs a %s program and PE %d a %s one: %w (a job on several nodes runs one program language: Go and C PEs share a job on one node only)",
					pe.rank, langName(mine), p, langName(l), ErrBadConfig)
			}
		}
		return nil
	}
	for p, c := range pe.ctl {
		switch l := c.lang.Load(); l { // after Init's barrier: stored before it
		case cabi.LangGo:
			pe.goPEs++
		case cabi.LangC:
			pe.cPEs++
		default:
			return fmt.Errorf("symheap: Init: PE %d published no language (%d) before the barrier: %w (every PE must run this version of symheap)", p, l, ErrBadConfig)
		}
	}
	if pe.cPEs == 0 {
		return nil
	}
	b, err := Align[byte](pe, 64, cabi.CBlockSize)
	if err != nil {
		return fmt.Errorf("symheap: Init: the C library's block (%d bytes) on every PE of a job with C PEs: %w", cabi.CBlockSize, err)
	}
	pe.cBlock, _ = core.SliceData(b)
	return nil
}

func langName(l uint32) string {
	switch l {
	case cabi.LangGo:
		return "Go"
	case cabi.LangC:
		return "C"
	}
	return fmt.Sprintf("language-%d", l)
}
