package symheap

import (
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/alloc/small"
	"github.com/symheap/symheap/internal/config"
	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/inspect"
	"github.com/symheap/symheap/internal/petest"
)

// Tests of the local shared heap's small-block front end (alloc/small)
// as the runtime uses it: the checker and symheap stat see the small
// blocks, and the owner takes back what other PEs freed. Remote frees
// under contention run in TestSharedRemoteFree (sizes up to 2000 bytes:
// small blocks) and, across processes without the runtime, in
// alloc/small; the release events in TestRCachePEReleaseReachesEveryPE.

// sharedOffOf returns the offset of s in this PE's shared heap.
func sharedOffOf[T any](t *testing.T, pe *PE, s []T) alloc.Off {
	t.Helper()
	p, _ := core.SliceData(s)
	off, owner, ok := pe.sp.SharedOffset(p, 0)
	if !ok || owner != pe.rank {
		t.Fatalf("block %p is not in PE %d's shared heap", p, pe.rank)
	}
	return alloc.Off(off)
}

// TestSharedSmallSeen: small blocks are counted by Stats, mapped by
// symheap stat (inspect), and checked by CheckHeaps, which finds a
// damaged span.
func TestSharedSmallSeen(t *testing.T) {
	petest.Run(t, 1, func(t *testing.T) {
		pe := startPE(t)
		front := pe.ext.shared.front
		if front == nil {
			t.Fatal("no small-block front end over the shared heap")
		}
		before := front.Stats()
		var blocks [][]byte
		var inUse uint64
		for i := range 200 {
			n := 1 + i*19%small.MaxSmall
			blocks = append(blocks, need(SharedAlloc[byte](pe, n)))
			us, _ := small.ClassSize(uint64(n))
			inUse += us
		}
		big := need(SharedAlloc[byte](pe, 100<<10))
		st := front.Stats()
		if st.Live != before.Live+201 || st.InUse < before.InUse+inUse+100<<10 {
			t.Errorf("200 small blocks (%d bytes) and one of 100 KiB: Stats went from %+v to %+v", inUse, before, st)
		}
		// symheap stat's view: the same figures, and a map with every block.
		v, err := inspect.Open(os.Getenv(config.EnvJob))
		if err != nil {
			t.Fatalf("inspect.Open: %v", err)
		}
		defer v.Close()
		if got := v.Info().PEs[0].Shared; got != st {
			t.Errorf("symheap stat reads the shared heap as %+v, the PE as %+v", got, st)
		}
		m, _, err := v.HeapMap(0, true)
		if err != nil {
			t.Fatal(err)
		}
		var nUsed int
		for _, b := range m {
			if b.Used {
				nUsed++
			}
		}
		if nUsed != int(st.Live) {
			t.Errorf("symheap stat's map shows %d used blocks, Stats %d live", nUsed, st.Live)
		}
		for _, b := range append(blocks, big) {
			off := uint64(sharedOffOf(t, pe, b))
			i, _ := slices.BinarySearchFunc(m, off, func(x inspect.Block, o uint64) int {
				switch {
				case x.Off > o:
					return 1
				case x.Off+x.Size <= o:
					return -1
				}
				return 0
			})
			if i == len(m) || !m[i].Used || m[i].Off+m[i].Size < off+uint64(len(b)) {
				t.Fatalf("symheap stat's map has no used block holding the block at %#x", off)
			}
		}
		// Damage one span's count of allocated slots: CheckHeaps says so.
		span, ok := front.SpanOf(sharedOffOf(t, pe, blocks[7]))
		if !ok {
			t.Fatal("a small block outside every span")
		}
		used64 := (*uint64)(unsafe.Pointer(&pe.sp.Shared(0)[span+32])) // spanHdr.used
		*used64 += 3
		err = pe.CheckHeaps()
		*used64 -= 3
		if err == nil || !strings.Contains(err.Error(), "small: span") {
			t.Fatalf("CheckHeaps with a damaged span: %v, want the span named", err)
		}
		noErr(t, pe.CheckHeaps())
		for _, b := range blocks {
			noErr(t, SharedFree(pe, b))
		}
		noErr(t, SharedFree(pe, big))
		// (Spans may remain: a free made on another P than the
		// allocation goes through the span's remote-free stack, and the
		// owner collects when it next needs the span.)
		if st := front.Stats(); st.Live != before.Live {
			t.Errorf("after freeing everything: %d live blocks, was %d", st.Live, before.Live)
		}
	}, sharedOpts()...)
}

// TestSharedSmallOwnerCollects: PE 1 frees PE 0's small blocks; PE 0's
// next allocations of the size take them back (collected from its spans'
// remote-free stacks) instead of new spans. The PEs run on one P: spans
// belong to the P that took them, and a goroutine that moved to another P
// would start spans of its own there. With SYMHEAP_SHARED_SMALL=0 there
// is no front end.
func TestSharedSmallOwnerCollects(t *testing.T) {
	petest.Run(t, 2, func(t *testing.T) {
		runtime.GOMAXPROCS(1)
		pe := startPE(t)
		const n = 300
		box := need(Calloc[uint64](pe, n))
		var spans uint64
		if pe.Rank() == 0 {
			for i := range n {
				b := need(SharedAlloc[byte](pe, 200))
				box[i] = uint64(need(SharedPtrOf(pe, b)))
			}
			spans = pe.ext.shared.front.Spans()
			noErr(t, Put(pe, box, box, 1))
		}
		sync2(t, pe)
		if pe.Rank() == 1 {
			for i := range n {
				noErr(t, SharedFree(pe, need(SharedAt[byte](pe, SharedPtr(box[i]), 200))))
			}
			if got := pe.stats.RemoteFrees.Load(); got != n {
				t.Errorf("PE 1 counted %d remote frees, want %d", got, n)
			}
		}
		sync2(t, pe)
		if pe.Rank() == 0 {
			freed := map[uint64]bool{}
			for i := range n {
				freed[box[i]] = true
			}
			// The spans have room for n more only if PE 1's frees are
			// collected: the last span's untouched slots are fewer.
			reused := 0
			for range n {
				b := need(SharedAlloc[byte](pe, 200))
				if p := uint64(need(SharedPtrOf(pe, b))); freed[p] {
					reused++
					delete(freed, p)
				}
				defer func() { noErr(t, SharedFree(pe, b)) }()
			}
			if s := pe.ext.shared.front.Spans(); s != spans || reused < n/2 {
				t.Errorf("PE 0 holds %d spans (had %d) and took back %d of the %d blocks PE 1 freed", s, spans, reused, n)
			}
		}
		sync2(t, pe)
	}, sharedOpts()...)

	t.Run("off", func(t *testing.T) {
		petest.Run(t, 1, func(t *testing.T) {
			pe := startPE(t)
			if pe.ext.shared.front != nil || pe.stats.SharedFront.Load() != 0 {
				t.Fatal("SYMHEAP_SHARED_SMALL=0, but the shared heap has the front end")
			}
			if _, ok := pe.ext.shared.own.(*alloc.Locked); !ok {
				t.Fatalf("the shared heap is %T, want the locked component", pe.ext.shared.own)
			}
			b := need(SharedAlloc[byte](pe, 100))
			noErr(t, SharedFree(pe, b))
		}, sharedOpts(petest.Env(config.EnvSharedSmall+"=0"))...)
	})
}
