package rcache

import (
	"bufio"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/unix"
	"github.com/symheap/symheap/memhook"
	"github.com/symheap/symheap/rcache/pin"
)

// smapsLocked returns the kB locked in the mappings overlapping r, and
// whether all of them are marked MADV_DONTFORK ("dc" in VmFlags).
func smapsLocked(t testing.TB, r Range) (kb int, dontfork bool) {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in := false
	dontfork = true
	seen := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(fields[0], "-"); ok && !strings.HasSuffix(fields[0], ":") {
			s, err1 := strconv.ParseUint(lo, 16, 64)
			e, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				in = uintptr(s) < r.End && r.Start < uintptr(e)
				continue
			}
		}
		if !in {
			continue
		}
		switch fields[0] {
		case "Locked:":
			n, _ := strconv.Atoi(fields[1])
			kb += n
		case "VmFlags:":
			seen = true
			if !strings.Contains(line, " dc") {
				dontfork = false
			}
		}
	}
	return kb, dontfork && seen
}

// The stale-registration bug: a block is registered, freed, and a new block
// is allocated at the same address. Get must not hand back the registration
// of the old block.
func TestNoStaleRegistrationAfterFreeAndRealloc(t *testing.T) {
	const n = 256 << 10
	for _, withMonitor := range []bool{true, false} {
		mon := memhook.New()
		heap, err := memhook.NewPrivateHeap(mon, 16<<20, "")
		if err != nil {
			t.Fatal(err)
		}
		nic := newFakeReg("nic")
		cfg := Config{Registrars: []Registrar{nic}}
		if withMonitor {
			cfg.Monitor = mon
		}
		c, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		a, err := heap.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		e := mustGet(t, c, rg(a, a+n), 1)
		old := e.Handle(0)
		mustPut(t, c, e)
		if err := heap.Free(a); err != nil {
			t.Fatal(err)
		}
		b, err := heap.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		if b != a {
			t.Fatalf("the allocator (%s) did not reuse the address: %#x then %#x", heap.Component(), a, b)
		}
		e2 := mustGet(t, c, rg(b, b+n), 1)
		stale := e2 == e || e2.Handle(0) == old
		if withMonitor {
			if stale || e.Valid() {
				t.Errorf("Get after free and reallocation at %#x returned the old registration", a)
			}
			if s := c.Stats(); s.Invalidations != 1 || s.Deregistrations != 1 || nic.nLive() != 1 {
				t.Errorf("stats %+v, %d live", s, nic.nLive())
			}
		} else if !stale {
			// Without release events the cache cannot know: this is the
			// bug the monitor exists to prevent.
			t.Errorf("control without a monitor: expected the stale entry back")
		}
		mustPut(t, c, e2)
		c.Close()
		nic.done(t)
		heap.Close()
		mon.Close()
	}
}

// The same through munmap: memory the runtime does not own, watched with
// userfaultfd, unmapped and mapped again at the same address. The entry is
// pinned with the real pin registrar; afterwards the new pages must be the
// ones locked.
func TestNoStaleRegistrationAfterUnmapAndRemap(t *testing.T) {
	const n = 256 << 10
	mon := memhook.New()
	defer mon.Close()
	if err := mon.Userfault(); err != nil {
		t.Skipf("userfaultfd backend unavailable: %v", err)
	}
	// Far from where the kernel places mappings by itself (top down from
	// 0x7f...), so that nothing else lands in the hole between the unmap
	// and the new mapping.
	mp, err := mapAnonFar(n)
	if err != nil {
		t.Fatal(err)
	}
	r := memhook.RangeOf(mp.Mem)
	if err := mon.Watch(r); err != nil {
		t.Fatal(err)
	}
	nic := newFakeReg("nic")
	pins := pin.New()
	c, err := New(Config{Registrars: []Registrar{nic, pins}, Monitor: mon})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	e := mustGet(t, c, r, Transports(0, 1))
	old := e.Handle(0)
	mustPut(t, c, e)
	if kb, df := smapsLocked(t, r); kb != n>>10 || !df {
		t.Fatalf("after registration: %d kB locked, dontfork %v", kb, df)
	}

	if err := unix.Unmap(mp); err != nil {
		t.Fatal(err)
	}
	mp2, err := unix.MapAnonAt(r.Start, n)
	if err != nil {
		t.Fatalf("mapping again at %#x: %v", r.Start, err)
	}
	defer unix.Unmap(mp2)
	if kb, _ := smapsLocked(t, r); kb != 0 {
		t.Fatalf("new mapping born locked: %d kB", kb)
	}
	if err := mon.Watch(r); err != nil {
		t.Fatal(err)
	}
	e2 := mustGet(t, c, r, Transports(0, 1))
	if e2 == e || e2.Handle(0) == old || e.Valid() {
		t.Fatalf("Get after munmap and mmap at %#x returned the old registration", r.Start)
	}
	if kb, df := smapsLocked(t, r); kb != n>>10 || !df {
		t.Errorf("the new pages are not pinned: %d kB locked, dontfork %v", kb, df)
	}
	mustPut(t, c, e2)
	c.Close()
	if kb, _ := smapsLocked(t, r); kb != 0 || pins.Pinned() != 0 {
		t.Errorf("after Close: %d kB locked, registrar holds %d bytes", kb, pins.Pinned())
	}
	nic.done(t)
	if s := c.Stats(); s.Invalidations != 1 {
		t.Errorf("stats %+v", s)
	}
}

// A registration that the kernel refuses (memory not mapped) surfaces as an
// error, and leaves nothing behind.
func TestPinRefusalSurfaces(t *testing.T) {
	a, err := unix.ReserveAligned(1<<20, page)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{Registrars: []Registrar{pin.New()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Get(rg(a, a+64<<10), 1)
	if !errors.Is(err, errs.ErrBadArg) || !strings.Contains(err.Error(), "not mapped") || !strings.Contains(err.Error(), "pin") {
		t.Errorf("Get of unmapped memory: %v", err)
	}
	if s := c.Stats(); s.Entries != 0 || s.RegisterErrors != 1 {
		t.Errorf("stats %+v", s)
	}
}

// mapAnonFar maps n bytes at an address picked in [0x2000_0000_0000,
// 0x5000_0000_0000), above the Go heap's hints and below the kernel's own
// placements.
func mapAnonFar(n int) (unix.Mapping, error) {
	var err error
	for i := 0; i < 16; i++ {
		a := uintptr(0x2000_0000_0000 + rand.Uint64N(0x3000_0000_0000)&^(1<<21-1))
		var m unix.Mapping
		if m, err = unix.MapAnonAt(a, n); err == nil {
			return m, nil
		}
	}
	return unix.Mapping{}, err
}
