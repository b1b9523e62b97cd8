package small_test

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/alloc/alloctest"
	"github.com/symheap/symheap/alloc/internal/region"
	"github.com/symheap/symheap/alloc/small"
	"github.com/symheap/symheap/alloc/tlsf"
)

// Tests with several handles on one region, as the owner PE and other PEs
// have: the region is mapped twice (two addresses), the owner formats it
// through one mapping and another handle attaches through the other. The
// tests across processes are in remote_test.go.

// sinkLog records the releases it hears of.
type sinkLog struct {
	mu   sync.Mutex
	got  map[alloc.Off]int
	size map[alloc.Off]uint64
}

func newSinkLog() *sinkLog {
	return &sinkLog{got: map[alloc.Off]int{}, size: map[alloc.Off]uint64{}}
}

func (s *sinkLog) Listening() bool { return true }

func (s *sinkLog) Released(k alloc.Release, off alloc.Off, n uint64) {
	s.mu.Lock()
	s.got[off]++
	s.size[off] = n
	s.mu.Unlock()
}

func (s *sinkLog) count(off alloc.Off) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got[off]
}

type pair struct {
	owner, other *small.Heap
	mem          []byte
	sOwner       *sinkLog
	sOther       *sinkLog
}

func newPair(t *testing.T, size uint64) pair {
	ma, mb := alloctest.NewSharedRegion(t, size)
	// Each handle's inner allocator under the region's lock, as the
	// runtime has it (goroutines and handles call inner concurrently).
	locked := func(a *tlsf.Allocator, err error, id uint32) alloc.Allocator {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		l, err := alloc.NewLocked(a, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a, err := tlsf.Format(ma)
	ia := locked(a, err, 0)
	p := pair{mem: ma, sOwner: newSinkLog(), sOther: newSinkLog()}
	if p.owner, err = small.Format(ia, ma, p.sOwner); err != nil {
		t.Fatal(err)
	}
	b, err := tlsf.Attach(mb)
	ib := locked(b, err, 1)
	if p.other, err = small.Attach(ib, mb, p.owner.Header(), p.sOther); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.owner.Check(); err != nil {
			t.Errorf("Check at cleanup: %v", err)
		}
	})
	return p
}

// TestOwnerCollectsRemoteFrees: blocks freed through another handle go on
// their spans' remote-free stacks; the owner's next allocations of the
// class take them back (the same offsets, no new span), and until then a
// free of one of them by anybody is ErrBadFree.
func TestOwnerCollectsRemoteFrees(t *testing.T) {
	onOneP(t)
	p := newPair(t, 4<<20)
	const n = 100
	var offs []alloc.Off
	for range n {
		off, err := p.owner.Alloc(100, 0)
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, off)
	}
	spans := p.owner.Spans()
	live := p.owner.Stats().Live
	freed := map[alloc.Off]bool{}
	for i, off := range offs {
		if i%2 == 0 {
			if err := p.other.Free(off); err != nil {
				t.Fatalf("remote free of %#x: %v", off, err)
			}
			freed[off] = true
		}
	}
	if got := p.owner.Stats().Live; got != live-n/2 {
		t.Fatalf("after %d remote frees Live is %d, was %d", n/2, got, live)
	}
	// Pending: every further free of them is refused, by either handle.
	for off := range freed {
		for who, h := range map[string]*small.Heap{"owner": p.owner, "other": p.other} {
			if err := h.Free(off); !errors.Is(err, alloc.ErrBadFree) {
				t.Fatalf("second free of %#x by the %s while pending: %v, want ErrBadFree", off, who, err)
			}
		}
		break
	}
	if err := p.owner.Check(); err != nil {
		t.Fatal(err)
	}
	// Fill the span the blocks came from: the owner must reuse every
	// remotely freed slot before it takes a new span.
	reused := 0
	for range n / 2 {
		off, err := p.owner.Alloc(100, 0)
		if err != nil {
			t.Fatal(err)
		}
		if freed[off] {
			reused++
			delete(freed, off)
		}
		offs = append(offs, off)
	}
	if reused != n/2 || p.owner.Spans() != spans {
		t.Fatalf("the owner reused %d of %d remotely freed blocks and holds %d spans (had %d)", reused, n/2, p.owner.Spans(), spans)
	}
	// Each remote free produced one release event, at the freeing handle.
	for i, off := range offs[:n] {
		want := 0
		if i%2 == 0 {
			want = 1
		}
		if got := p.sOther.count(off); got != want || p.sOwner.count(off) != 0 {
			t.Fatalf("block %#x: %d events at the freeing handle, %d at the owner; want %d, 0", off, got, p.sOwner.count(off), want)
		}
	}
}

// TestSpanGivenBackAfterRemoteFrees: a span emptied by remote frees goes
// back to the region when the owner next runs short, so large blocks can
// use its memory again.
func TestSpanGivenBackAfterRemoteFrees(t *testing.T) {
	onOneP(t)
	p := newPair(t, 1<<20)
	var offs []alloc.Off
	for {
		off, err := p.owner.Alloc(2000, 0)
		if err != nil {
			if !errors.Is(err, alloc.ErrOutOfMemory) {
				t.Fatal(err)
			}
			break
		}
		offs = append(offs, off)
	}
	for _, off := range offs {
		if err := p.other.Free(off); err != nil {
			t.Fatal(err)
		}
	}
	// Every span is empty but pending; a large allocation finds the
	// region full, collects, gives the spans back and succeeds.
	big, err := p.owner.Alloc(512<<10, 0)
	if err != nil {
		t.Fatalf("large alloc after every small block was freed remotely: %v", err)
	}
	if s := p.owner.Spans(); s != 0 {
		t.Errorf("%d spans left after collecting", s)
	}
	if err := p.owner.Free(big); err != nil {
		t.Fatal(err)
	}
}

// TestBadFrees: frees the front end must refuse, changing nothing.
func TestBadFrees(t *testing.T) {
	onOneP(t)
	p := newPair(t, 2<<20)
	a, _ := p.owner.Alloc(64, 0)
	b, _ := p.owner.Alloc(64, 0)
	c, _ := p.owner.Alloc(64, 0)
	if err := p.owner.Free(b); err != nil {
		t.Fatal(err)
	}
	if err := p.other.Free(c); err != nil {
		t.Fatal(err)
	}
	span, _ := p.owner.SpanOf(a)
	never := c + 64*10 // a slot never handed out
	before := p.owner.Stats()
	for _, tc := range []struct {
		what string
		h    *small.Heap
		off  alloc.Off
	}{
		{"owner double free", p.owner, b},
		{"remote double free of an owner-freed block", p.other, b},
		{"owner free of a block freed remotely", p.owner, c},
		{"remote double free", p.other, c},
		{"never allocated, by the owner", p.owner, never},
		{"never allocated, remotely", p.other, never},
		{"interior", p.owner, a + 16},
		{"interior, remotely", p.other, a + 8},
		{"span header", p.owner, span},
		{"span bitmap", p.other, span + 128},
		{"front-end header", p.owner, p.owner.Header()},
		{"front-end header, remotely", p.other, p.owner.Header()},
	} {
		err := tc.h.Free(tc.off)
		if !errors.Is(err, alloc.ErrBadFree) {
			t.Errorf("%s (%#x): %v, want ErrBadFree", tc.what, tc.off, err)
		}
		if _, err := tc.h.UsableSize(tc.off); !errors.Is(err, alloc.ErrBadFree) {
			t.Errorf("UsableSize, %s (%#x): %v, want ErrBadFree", tc.what, tc.off, err)
		}
	}
	after := p.owner.Stats()
	before.Failed, after.Failed = 0, 0
	if before != after {
		t.Fatalf("bad frees changed the heap:\nbefore %+v\nafter  %+v", before, after)
	}
	if err := p.owner.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestGoroutines: goroutines of the owner's process allocate and free
// concurrently, each freeing blocks another allocated (so frees cross Ps),
// while another handle frees some too. Run with -race as well (pinning is
// then a mutex).
func TestGoroutines(t *testing.T) {
	prev := runtime.GOMAXPROCS(max(4, runtime.GOMAXPROCS(0)))
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	p := newPair(t, 16<<20)
	const workers, rounds = 4, 3000
	chans := make([]chan alloc.Off, workers)
	for i := range chans {
		chans[i] = make(chan alloc.Off, 64)
	}
	var wg sync.WaitGroup
	errc := make(chan error, 2*workers)
	for w := range workers {
		wg.Add(2)
		go func() { // allocates, hands every block to the next worker
			defer wg.Done()
			defer close(chans[(w+1)%workers])
			for i := range rounds {
				off, err := p.owner.Alloc(uint64(16+(i*37+w*101)%3000), 0)
				if err != nil {
					errc <- err
					return
				}
				p.mem[off] = byte(w)
				chans[(w+1)%workers] <- off
			}
		}()
		go func() { // frees what the previous worker allocated
			defer wg.Done()
			i := 0
			for off := range chans[w] {
				h := p.owner
				if i%5 == 0 {
					h = p.other
				}
				if err := h.Free(off); err != nil {
					errc <- err
					return
				}
				i++
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if err := p.owner.Check(); err != nil {
		t.Fatal(err)
	}
	if st := p.owner.Stats(); st.Live != 0 {
		t.Fatalf("%d blocks live after every one was freed: %+v", st.Live, st)
	}
}

// TestWriteAfterFree: a program that writes into a block after freeing
// it overwrites the free list's link there; the front end must not then
// hand out a live block twice.
func TestWriteAfterFree(t *testing.T) {
	if region.Verify {
		t.Skip("the test damages a span on purpose, which SYMHEAP_ALLOC_VERIFY turns into a panic")
	}
	onOneP(t)
	p := newPair(t, 2<<20)
	live, _ := p.owner.Alloc(48, 0)
	a, _ := p.owner.Alloc(48, 0)
	b, _ := p.owner.Alloc(48, 0)
	for _, off := range []alloc.Off{b, a} {
		if err := p.owner.Free(off); err != nil {
			t.Fatal(err)
		}
	}
	// The span was fresh: live, a and b are its slots 0, 1 and 2. a's
	// link (its first word, slot + 1) names b; make it name live.
	if a != live+48 || b != a+48 {
		t.Fatalf("blocks %#x %#x %#x are not a fresh span's first slots", live, a, b)
	}
	*(*uint64)(unsafe.Pointer(&p.mem[a])) = 1
	got := map[alloc.Off]bool{live: true}
	for range 3 {
		off, err := p.owner.Alloc(48, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got[off] {
			t.Fatalf("Alloc returned %#x, which is live", off)
		}
		got[off] = true
	}
	// The slot the damaged link hid is lost, and the checker says so;
	// freeing every block gives the span back, and the loss with it.
	if err := p.owner.Check(); err == nil || !strings.Contains(err.Error(), "handed out once") {
		t.Errorf("Check after a write after free: %v, want the lost slot reported", err)
	}
	for off := range got {
		if err := p.owner.Free(off); err != nil {
			t.Fatal(err)
		}
	}
	if p.owner.Spans() != 0 {
		t.Errorf("%d spans left after freeing every block", p.owner.Spans())
	}
}

// TestSmallRegion: a heap too small for a span of every class still
// serves a block of every class (the classes without a span get theirs
// from inner, as large blocks are) until it is full.
func TestSmallRegion(t *testing.T) {
	onOneP(t)
	p := newPair(t, 256<<10)
	var offs []alloc.Off
	for size := uint64(16); size <= small.MaxSmall; size += size / 4 {
		off, err := p.owner.Alloc(size, 0)
		if err != nil {
			t.Fatalf("Alloc(%d) with %d blocks live in a %d-byte heap: %v", size, len(offs), len(p.mem), err)
		}
		offs = append(offs, off)
	}
	if _, in := p.owner.SpanOf(offs[len(offs)-1]); in {
		t.Fatalf("the last class got a span in a heap that has no room for one per class (%d spans)", p.owner.Spans())
	}
	for i, off := range offs {
		h := p.owner
		if i%2 == 1 {
			h = p.other
		}
		if err := h.Free(off); err != nil {
			t.Fatal(err)
		}
	}
}
