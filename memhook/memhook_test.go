package memhook

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/unix"
)

// recorder collects events for a test.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) record(k Kind, rg Range) {
	r.mu.Lock()
	r.events = append(r.events, Event{k, rg})
	r.mu.Unlock()
}

func (r *recorder) saw(k Kind, rg Range) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e.Kind == k && e.Range.Overlaps(rg) {
			return true
		}
	}
	return false
}

func (r *recorder) all() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// newMonitor returns a monitor closed at the end of the test, and checks
// that its reader goroutine is gone by then.
func newMonitor(t testing.TB) *Monitor {
	m := New()
	t.Cleanup(func() {
		m.uf.mu.Lock()
		b := m.uf.b
		m.uf.mu.Unlock()
		if err := m.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if b != nil {
			select {
			case <-b.done:
			default:
				t.Errorf("the userfaultfd reader is still running after Close")
			}
		}
	})
	return m
}

// needUserfault skips the test when the kernel refuses userfaultfd, saying
// why.
func needUserfault(t *testing.T, m *Monitor) {
	t.Helper()
	if err := m.Userfault(); err != nil {
		if errors.Is(err, errs.ErrNotSupported) {
			t.Skipf("userfaultfd backend unavailable: %v", err)
		}
		t.Fatal(err)
	}
}

func TestPublishCostsNothingWithoutSubscribers(t *testing.T) {
	m := newMonitor(t)
	r := Range{0x1000, 0x2000}
	if n := testing.AllocsPerRun(1000, func() { m.Publish(Free, r) }); n != 0 {
		t.Errorf("Publish without subscribers allocates %v times", n)
	}
	if c := m.Counts(); c != (Counts{}) {
		t.Errorf("events counted without subscribers: %+v", c)
	}
	cancel := m.Subscribe(func(Kind, Range) {})
	defer cancel()
	if n := testing.AllocsPerRun(1000, func() { m.PublishFree(0x1000, 0x1000) }); n != 0 {
		t.Errorf("Publish to a subscriber allocates %v times", n)
	}
}

func TestSubscribeAndCancel(t *testing.T) {
	m := newMonitor(t)
	var a, b recorder
	ca := m.Subscribe(a.record)
	cb := m.Subscribe(b.record)
	m.Publish(Free, Range{10, 20})
	m.Publish(Chunk, Range{30, 30}) // empty: ignored
	ca()
	ca() // idempotent
	m.Publish(Remove, Range{40, 50})
	cb()
	m.Publish(Unmap, Range{60, 70})
	if got := a.all(); len(got) != 1 || got[0] != (Event{Free, Range{10, 20}}) {
		t.Errorf("first subscriber got %v", got)
	}
	if got := b.all(); len(got) != 2 || got[1] != (Event{Remove, Range{40, 50}}) {
		t.Errorf("second subscriber got %v", got)
	}
	if c := m.Counts(); c.Free != 1 || c.Remove != 1 || c.Unmap != 0 {
		t.Errorf("counts %+v", c)
	}
}

func TestReallocReleased(t *testing.T) {
	for _, c := range []struct {
		oa, os, na, ns uintptr
		want           Range
		ok             bool
	}{
		{0x1000, 0x100, 0x2000, 0x200, Range{0x1000, 0x1100}, true}, // moved: all of the old block
		{0x1000, 0x100, 0x1000, 0x40, Range{0x1040, 0x1100}, true},  // shrunk: the tail
		{0x1000, 0x100, 0x1000, 0x200, Range{}, false},              // grown in place
		{0x1000, 0x100, 0x1000, 0x100, Range{}, false},              // unchanged
	} {
		got, ok := ReallocReleased(c.oa, c.os, c.na, c.ns)
		if got != c.want || ok != c.ok {
			t.Errorf("ReallocReleased(%#x,%#x,%#x,%#x) = %v,%v, want %v,%v", c.oa, c.os, c.na, c.ns, got, ok, c.want, c.ok)
		}
	}
}

func TestPrivateHeapPublishes(t *testing.T) {
	m := newMonitor(t)
	h, err := NewPrivateHeap(m, 1<<20, "tlsf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	var rec recorder
	defer m.Subscribe(rec.record)()

	a, err := h.Alloc(1000)
	if err != nil {
		t.Fatal(err)
	}
	if a%16 != 0 || !h.Range().Contains(Range{a, a + 1000}) {
		t.Fatalf("block %#x outside heap %v", a, h.Range())
	}
	n, _ := h.UsableSize(a)
	if err := h.Free(a); err != nil {
		t.Fatal(err)
	}
	if got := rec.all(); len(got) != 1 || got[0] != (Event{Free, Range{a, a + uintptr(n)}}) {
		t.Fatalf("after free: %v", got)
	}
	if err := h.Free(a); !errors.Is(err, errs.ErrBadFree) {
		t.Errorf("double free: %v", err)
	}

	// Shrink in place: the tail is released.
	a, _ = h.Alloc(4096)
	b, err := h.Realloc(a, 1024)
	if err != nil || b != a {
		t.Fatalf("shrink: %#x, %v", b, err)
	}
	if !rec.saw(Chunk, Range{a + 1024, a + 4096}) {
		t.Errorf("no Chunk for the released tail: %v", rec.all())
	}
	// Grow past a neighbour: the block moves and all of it is released.
	fence, _ := h.Alloc(64)
	c, err := h.Realloc(b, 8192)
	if err != nil || c == b {
		t.Fatalf("grow: %#x, %v", c, err)
	}
	if !rec.saw(Chunk, Range{b, b + 1024}) {
		t.Errorf("no Chunk for the moved block: %v", rec.all())
	}
	h.Free(c)
	h.Free(fence)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if !rec.saw(Unmap, h.Range()) {
		t.Errorf("no Unmap at Close")
	}
	if _, err := h.Alloc(1); !errors.Is(err, errs.ErrClosed) {
		t.Errorf("Alloc after Close: %v", err)
	}
}

func TestWatchUnmapRemoveRemap(t *testing.T) {
	m := newMonitor(t)
	needUserfault(t, m)
	var rec recorder
	defer m.Subscribe(rec.record)()
	page := os.Getpagesize()

	mp, err := unix.MapAnon(16 * page)
	if err != nil {
		t.Fatal(err)
	}
	r := RangeOf(mp.Mem)
	if err := m.Watch(r); err != nil {
		t.Fatal(err)
	}
	// Faults in a watched range are not intercepted: first touches from
	// user mode, and from the kernel (read(2) into an untouched page).
	mp.Mem[0] = 1
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	pw.Write([]byte("hello"))
	if n, err := pr.Read(mp.Mem[5*page : 6*page]); err != nil || n != 5 {
		t.Fatalf("read(2) into a watched page: %d, %v", n, err)
	}
	pr.Close()
	pw.Close()

	// REMOVE: pages dropped, mapping kept.
	drop := mp.Mem[4*page : 8*page]
	if err := unix.Madvise(drop, unix.MadvDontneed); err != nil {
		t.Fatal(err)
	}
	m.Sync()
	if !rec.saw(Remove, RangeOf(drop)) {
		t.Errorf("no Remove event for %v: %v", RangeOf(drop), rec.all())
	}
	if mp.Mem[5*page] != 0 {
		t.Errorf("dropped page kept its contents")
	}

	// REMAP: mremap moves the pages; the old addresses are reported.
	moved, err := unix.MremapMove(mp.Mem, 64*page)
	if err != nil {
		t.Fatal(err)
	}
	m.Sync()
	if nr := RangeOf(moved); nr.Start != r.Start {
		if !rec.saw(Unmap, r) {
			t.Errorf("no Unmap event for the range mremap moved away %v: %v", r, rec.all())
		}
	} else {
		t.Logf("mremap grew the mapping in place; no move to report")
	}

	// UNMAP.
	nr := RangeOf(moved)
	if err := unix.Unmap(unix.Mapping{Mem: moved}); err != nil {
		t.Fatal(err)
	}
	m.Sync()
	if !rec.saw(Unmap, nr) {
		t.Errorf("no Unmap event for %v: %v", nr, rec.all())
	}
	for _, e := range rec.all() {
		if e.Range.Empty() {
			t.Errorf("empty range delivered: %v", e)
		}
	}
}

func TestWatchRefusals(t *testing.T) {
	m := newMonitor(t)
	needUserfault(t, m)
	page := os.Getpagesize()

	t.Run("file-backed", func(t *testing.T) {
		f, err := os.Create(t.TempDir() + "/mapped")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(int64(4 * page)); err != nil {
			t.Fatal(err)
		}
		mp, err := unix.MapShared(int(f.Fd()), 4*page, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		r := RangeOf(mp.Mem)
		// The reason given when the kernel says EINVAL for it.
		rerr := registerError(r, unix.EINVAL)
		if !errors.Is(rerr, errs.ErrNotSupported) || !strings.Contains(rerr.Error(), "file-backed mapping of "+f.Name()) {
			t.Errorf("EINVAL on a file mapping explained as: %v", rerr)
		}
		var rec recorder
		defer m.Subscribe(rec.record)()
		err = m.Watch(r)
		switch {
		case err == nil:
			// Kernels with UFFD_FEATURE_WP_ASYNC accept any memory in
			// write-protect mode: then the unmap must be reported.
			unix.Unmap(mp)
			m.Sync()
			if !rec.saw(Unmap, r) {
				t.Errorf("watched file mapping unmapped without an event")
			}
			t.Logf("this kernel watches file-backed mappings (%s)", m.UserfaultInfo())
		case errors.Is(err, errs.ErrNotSupported) && strings.Contains(err.Error(), "file-backed"):
			unix.Unmap(mp)
			t.Log(err)
		default:
			unix.Unmap(mp)
			t.Errorf("Watch of a file mapping: %v", err)
		}
	})
	t.Run("busy", func(t *testing.T) {
		mp, err := unix.MapAnon(4 * page)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Unmap(mp)
		if err := m.Watch(RangeOf(mp.Mem)); err != nil {
			t.Fatal(err)
		}
		other := newMonitor(t)
		err = other.Watch(RangeOf(mp.Mem))
		if !errors.Is(err, errs.ErrNotSupported) || !strings.Contains(err.Error(), "EBUSY") {
			t.Errorf("Watch of a range another userfaultfd owns: %v", err)
		}
		t.Log(err)
		if err := m.Unwatch(RangeOf(mp.Mem)); err != nil {
			t.Fatal(err)
		}
		if err := other.Watch(RangeOf(mp.Mem)); err != nil {
			t.Errorf("Watch after the owner let go: %v", err)
		}
	})
	t.Run("unmapped", func(t *testing.T) {
		a, err := unix.ReserveAligned(uintptr(16*page), uintptr(page))
		if err != nil {
			t.Fatal(err)
		}
		err = m.Watch(Range{a, a + uintptr(4*page)})
		if !errors.Is(err, errs.ErrBadArg) {
			t.Errorf("Watch of an unmapped range: %v", err)
		}
	})
	t.Run("empty", func(t *testing.T) {
		if err := m.Watch(Range{0x1000, 0x1000}); !errors.Is(err, errs.ErrBadArg) {
			t.Errorf("Watch of an empty range: %v", err)
		}
	})
}

func TestRegisterErrorMessages(t *testing.T) {
	r := Range{0x1000, 0x2000}
	if err := registerError(r, unix.EBUSY); !errors.Is(err, errs.ErrNotSupported) || !strings.Contains(err.Error(), "another") {
		t.Errorf("EBUSY: %v", err)
	}
	if err := registerError(r, unix.ENOMEM); !errors.Is(err, errs.ErrBadArg) {
		t.Errorf("ENOMEM: %v", err)
	}
	if err := openError(unix.EPERM); !errors.Is(err, errs.ErrNotSupported) || !strings.Contains(err.Error(), "EPERM") {
		t.Errorf("EPERM: %v", err)
	}
	if err := openError(unix.ENOSYS); !errors.Is(err, errs.ErrNotSupported) || !strings.Contains(err.Error(), "CONFIG_USERFAULTFD") {
		t.Errorf("ENOSYS: %v", err)
	}
}

// Many threads unmapping watched memory at once: each must find its own
// event delivered once its munmap has returned and it has called Sync.
func TestConcurrentUnmapSync(t *testing.T) {
	m := newMonitor(t)
	needUserfault(t, m)
	var rec recorder
	defer m.Subscribe(rec.record)()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				mp, err := unix.MapAnon(2 * os.Getpagesize())
				if err != nil {
					t.Error(err)
					return
				}
				r := RangeOf(mp.Mem)
				if err := m.Watch(r); err != nil {
					t.Error(err)
					return
				}
				mp.Mem[0] = 1
				unix.Unmap(mp)
				m.Sync()
				if !rec.saw(Unmap, r) {
					t.Errorf("Unmap of %v not delivered by the time Sync returned", r)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestClosedMonitor(t *testing.T) {
	m := New()
	needUserfault(t, m)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Watch(Range{0x1000, 0x2000}); !errors.Is(err, errs.ErrClosed) {
		t.Errorf("Watch after Close: %v", err)
	}
	// Heap events still flow.
	var rec recorder
	defer m.Subscribe(rec.record)()
	m.PublishFree(0x1000, 16)
	if len(rec.all()) != 1 {
		t.Errorf("heap event after Close not delivered")
	}
}

// The self-test on this machine: FREE and CHUNK through a symheap heap,
// MUNMAP and REMOVE through userfaultfd, or the precise reason why not.
func TestSelfTest(t *testing.T) {
	m := newMonitor(t)
	res := m.SelfTest(nil)
	t.Logf("\n%s", res)
	for _, f := range []Flags{FlagFree, FlagChunk} {
		if res.Flags&f == 0 {
			t.Errorf("%s not proven: %s", f, res.Why[f])
		}
	}
	if err := m.Userfault(); err != nil {
		if res.Flags&FlagMunmap != 0 || res.Why[FlagMunmap] == "" {
			t.Errorf("userfaultfd unavailable (%v) but MUNMAP = %v, why %q", err, res.Flags&FlagMunmap != 0, res.Why[FlagMunmap])
		}
	} else {
		for _, f := range []Flags{FlagMunmap, FlagRemove} {
			if res.Flags&f == 0 {
				t.Errorf("%s not proven although userfaultfd runs: %s", f, res.Why[f])
			}
		}
	}
	if m.Support() != res.Flags {
		t.Errorf("Support() = %v, SelfTest found %v", m.Support(), res.Flags)
	}
}

// A heap that publishes nothing must leave FREE and CHUNK unset, saying why.
type silentHeap struct{ h *PrivateHeap }

func (s silentHeap) Alloc(n uint64) (uintptr, error) { return s.h.Alloc(n) }
func (s silentHeap) Free(a uintptr) error {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	off, _ := s.h.offset(a)
	return s.h.a.Free(off)
}
func (s silentHeap) Realloc(a uintptr, n uint64) (uintptr, error) {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	off, _ := s.h.offset(a)
	o, err := s.h.a.Realloc(off, n)
	return s.h.base + uintptr(o), err
}

func TestSelfTestSilentHeap(t *testing.T) {
	m := newMonitor(t)
	h, err := NewPrivateHeap(New(), 16<<20, "tlsf")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	res := m.SelfTest(silentHeap{h})
	if res.Flags&(FlagFree|FlagChunk) != 0 {
		t.Errorf("flags %v from a heap that publishes nothing", res.Flags)
	}
	if !strings.Contains(res.Why[FlagFree], "does not publish") || !strings.Contains(res.Why[FlagChunk], "does not publish") {
		t.Errorf("reasons: %q, %q", res.Why[FlagFree], res.Why[FlagChunk])
	}
}

// Without WP_ASYNC (kernels before 6.7) faults in a watched range must still
// go through untouched, and events still arrive.
func TestWatchWithoutWPAsync(t *testing.T) {
	testNoWPAsync = true
	m := newMonitor(t)
	err := m.Userfault()
	testNoWPAsync = false
	if err != nil {
		t.Skipf("userfaultfd backend unavailable: %v", err)
	}
	if strings.Contains(m.UserfaultInfo(), "WP_ASYNC") {
		t.Fatalf("WP_ASYNC negotiated: %s", m.UserfaultInfo())
	}
	var rec recorder
	defer m.Subscribe(rec.record)()
	page := os.Getpagesize()
	mp, err := unix.MapAnon(8 * page)
	if err != nil {
		t.Fatal(err)
	}
	r := RangeOf(mp.Mem)
	if err := m.Watch(r); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(mp.Mem); i += page {
		mp.Mem[i] = byte(i)
	}
	if err := unix.Madvise(mp.Mem, unix.MadvDontneed); err != nil {
		t.Fatal(err)
	}
	mp.Mem[page] = 7 // a fresh page after the drop
	unix.Unmap(mp)
	m.Sync()
	if !rec.saw(Remove, r) || !rec.saw(Unmap, r) {
		t.Errorf("events: %v", rec.all())
	}
}

// With one P, a goroutine unmapping watched memory must not wait for ever
// for the reader (it leaves its P while in the munmap system call).
func TestUnmapWithOneP(t *testing.T) {
	m := newMonitor(t)
	needUserfault(t, m)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var rec recorder
	defer m.Subscribe(rec.record)()
	for i := 0; i < 20; i++ {
		mp, err := unix.MapAnon(os.Getpagesize())
		if err != nil {
			t.Fatal(err)
		}
		r := RangeOf(mp.Mem)
		if err := m.Watch(r); err != nil {
			t.Fatal(err)
		}
		unix.Unmap(mp)
		m.Sync()
		if !rec.saw(Unmap, r) {
			t.Fatalf("no Unmap for %v", r)
		}
	}
}
