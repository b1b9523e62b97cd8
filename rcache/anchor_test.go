package rcache

import (
	"runtime"
	"testing"

	"github.com/symheap/symheap/internal/unix"
	"github.com/symheap/symheap/memhook"
)

var anchorGlobal [64]byte

func TestAnchorOf(t *testing.T) {
	if _, ok := AnchorOf(make([]byte, 100)); !ok {
		t.Error("AnchorOf(a heap slice): false")
	}
	if _, ok := AnchorOf(anchorGlobal[:]); !ok {
		t.Error("AnchorOf(a global): false")
	}
	if _, ok := AnchorOf(nil); ok {
		t.Error("AnchorOf(nil): true")
	}
	mp, err := unix.MapAnon(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Unmap(mp)
	if _, ok := AnchorOf(mp.Mem); ok {
		t.Error("AnchorOf(a mapping of this process): true")
	}
}

// collectAndReuse drops the 1 MiB object at addr (the caller holds no
// reference to it any more) and allocates objects of its size until one
// lands at the same address; it returns that one, or nil after many tries.
func collectAndReuse(addr uintptr, n int) []byte {
	for i := 0; i < 200; i++ {
		runtime.GC()
		for j := 0; j < 4; j++ {
			b := make([]byte, n)
			if unix.AddrOf(b) == addr {
				return b
			}
		}
	}
	return nil
}

// The collector frees a buffer whose registration is cached and hands its
// address to a new object: the cache never returns the old registration
// for the new object, though it covers exactly its range.
func TestAnchorStaleNeverUsed(t *testing.T) {
	reg := newFakeReg("net")
	c := newTestCache(t, Config{}, reg)
	const n = 1 << 20
	get := func(b []byte) *Entry {
		t.Helper()
		a, ok := AnchorOf(b)
		if !ok {
			t.Fatal("AnchorOf(a heap slice): false")
		}
		e, err := c.GetAnchored(memhook.RangeOf(b), Transports(0), a)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	buf := make([]byte, n)
	addr := unix.AddrOf(buf)
	e := get(buf)
	first := e.Handle(0).(fakeHandle).id
	mustPut(t, c, e)
	e = get(buf[4096:8192]) // another range of the same live object: a hit
	if id := e.Handle(0).(fakeHandle).id; id != first {
		t.Fatalf("a lookup inside the live object registered again (handle %d, first %d)", id, first)
	}
	mustPut(t, c, e)
	runtime.KeepAlive(buf)
	buf = nil
	nb := collectAndReuse(addr, n)
	if nb == nil {
		t.Skip("the collector did not hand the freed 1 MiB address out again in 200 cycles: nothing to test")
	}
	e = get(nb)
	if id := e.Handle(0).(fakeHandle).id; id == first {
		t.Fatalf("the registration of the collected object was returned for the new object at %#x", addr)
	}
	mustPut(t, c, e)
	// A lookup without an anchor meets the new, live entry.
	e = mustGet(t, c, memhook.RangeOf(nb), Transports(0))
	mustPut(t, c, e)
	s := c.Stats()
	if s.Stale != 1 || s.Misses != 2 || s.Hits != 2 {
		t.Errorf("stale %d, misses %d, hits %d; want 1, 2, 2", s.Stale, s.Misses, s.Hits)
	}
	if reg.deregs != 1 {
		t.Errorf("%d deregistrations; want the stale entry's", reg.deregs)
	}
	runtime.KeepAlive(nb)
}
