package rcache

import (
	"fmt"
	"sync"
	"testing"
)

const page = 4096

func rg(s, e uintptr) Range { return Range{Start: s, End: e} }

// fakeReg is a registrar that touches no memory: it hands out numbered
// handles, remembers which are live, and reports double or unknown
// deregistrations.
type fakeReg struct {
	name string

	mu     sync.Mutex
	next   uint64
	live   map[uint64]Range
	regs   uint64
	deregs uint64
	errs   []string
	fail   func(r Range) error // if set and non-nil for r, Register fails
}

type fakeHandle struct {
	id uint64
	r  Range
}

func newFakeReg(name string) *fakeReg {
	return &fakeReg{name: name, live: map[uint64]Range{}}
}

func (f *fakeReg) Name() string { return f.name }

func (f *fakeReg) Register(r Range) (Handle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		if err := f.fail(r); err != nil {
			return nil, err
		}
	}
	f.next++
	f.live[f.next] = r
	f.regs++
	return fakeHandle{f.next, r}, nil
}

func (f *fakeReg) Deregister(r Range, h Handle) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fh, ok := h.(fakeHandle)
	if !ok {
		f.errs = append(f.errs, fmt.Sprintf("deregister of %v with handle %v", r, h))
		return fmt.Errorf("bad handle")
	}
	lr, live := f.live[fh.id]
	if !live || lr != r {
		f.errs = append(f.errs, fmt.Sprintf("deregister of %v handle %d: live %v, registered %v", r, fh.id, live, lr))
		return fmt.Errorf("not live")
	}
	delete(f.live, fh.id)
	f.deregs++
	return nil
}

func (f *fakeReg) nLive() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.live)
}

// done checks that the registrar saw no bad deregistration and that nothing
// is left registered.
func (f *fakeReg) done(t testing.TB) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.errs {
		t.Errorf("%s: %s", f.name, e)
	}
	if len(f.live) != 0 {
		t.Errorf("%s: %d registrations left live after Close", f.name, len(f.live))
	}
}

// newTestCache makes a cache checked when the test ends: invariants hold,
// and after Close every registration has been given back.
func newTestCache(t testing.TB, cfg Config, regs ...*fakeReg) *Cache {
	t.Helper()
	for _, r := range regs {
		cfg.Registrars = append(cfg.Registrars, r)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Check(); err != nil {
			t.Error(err)
		}
		c.Close()
		if err := c.Check(); err != nil {
			t.Error(err)
		}
		if s := c.Stats(); s.Held == 0 {
			for _, r := range regs {
				r.done(t)
			}
			if s.Entries != 0 || s.Bytes != 0 {
				t.Errorf("after Close: %d entries, %d bytes", s.Entries, s.Bytes)
			}
		}
	})
	return c
}

func mustGet(t testing.TB, c *Cache, r Range, ts TransportSet) *Entry {
	t.Helper()
	e, err := c.Get(r, ts)
	if err != nil {
		t.Fatal(err)
	}
	if !e.Range().Contains(r) {
		t.Fatalf("Get(%v) returned %v", r, e.Range())
	}
	for i := 0; i < 64; i++ {
		if ts.Has(i) && e.Handle(i) == nil {
			t.Fatalf("Get(%v) entry lacks transport %d", r, i)
		}
	}
	return e
}

func mustPut(t testing.TB, c *Cache, e *Entry) {
	t.Helper()
	if err := c.Put(e); err != nil {
		t.Fatal(err)
	}
}
