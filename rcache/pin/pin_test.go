package pin_test

import (
	"bufio"
	"errors"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/unix"
	"github.com/symheap/symheap/memhook"
	"github.com/symheap/symheap/rcache"
	"github.com/symheap/symheap/rcache/pin"
)

var _ rcache.Registrar = (*pin.Registrar)(nil)

const page = 4096

// lockedKB sums the Locked: lines of /proc/self/smaps over the mappings
// overlapping r, and reports whether every one has VmFlags "dc"
// (MADV_DONTFORK).
func lockedKB(t *testing.T, r memhook.Range) (kb int, dontfork bool) {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in, seen := false, false
	dontfork = true
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(fields[0], "-"); ok {
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

func mapPages(t *testing.T, n int) memhook.Range {
	t.Helper()
	m, err := unix.MapAnon(n * page)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmap(m) })
	return memhook.RangeOf(m.Mem)
}

func sub(r memhook.Range, from, to int) memhook.Range {
	return memhook.Range{Start: r.Start + uintptr(from*page), End: r.Start + uintptr(to*page)}
}

func TestOverlappingPins(t *testing.T) {
	p := pin.New()
	m := mapPages(t, 16)
	a, b := sub(m, 0, 8), sub(m, 4, 12)
	if _, err := p.Register(a); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Register(b); err != nil {
		t.Fatal(err)
	}
	if kb, df := lockedKB(t, sub(m, 0, 12)); kb != 12*page/1024 || !df {
		t.Errorf("two pins: %d kB locked, dontfork %v", kb, df)
	}
	if err := p.Deregister(a, nil); err != nil {
		t.Fatal(err)
	}
	// Pages 4 to 8 are still covered by b: they stay locked.
	if kb, _ := lockedKB(t, m); kb != 8*page/1024 {
		t.Errorf("after dropping the first: %d kB locked, want %d", kb, 8*page/1024)
	}
	if kb, df := lockedKB(t, sub(m, 0, 4)); kb != 0 || df {
		t.Errorf("pages only the first covered: %d kB locked, dontfork %v", kb, df)
	}
	if err := p.Deregister(b, nil); err != nil {
		t.Fatal(err)
	}
	if kb, _ := lockedKB(t, m); kb != 0 || p.Pinned() != 0 {
		t.Errorf("after dropping both: %d kB locked, %d pinned", kb, p.Pinned())
	}
	if err := p.Deregister(b, nil); !errors.Is(err, errs.ErrBadArg) {
		t.Errorf("deregistering twice: %v", err)
	}
	if err := p.Check(); err != nil {
		t.Error(err)
	}
}

func TestUnmappedAfterRegistration(t *testing.T) {
	p := pin.New()
	mp, err := unix.MapAnon(4 * page)
	if err != nil {
		t.Fatal(err)
	}
	r := memhook.RangeOf(mp.Mem)
	if _, err := p.Register(r); err != nil {
		t.Fatal(err)
	}
	unix.Unmap(mp)
	if err := p.Deregister(r, nil); err != nil {
		t.Errorf("deregistering unmapped memory: %v", err)
	}
}

func TestNotMapped(t *testing.T) {
	a, err := unix.ReserveAligned(64*page, page)
	if err != nil {
		t.Fatal(err)
	}
	_, err = pin.New().Register(memhook.Range{Start: a, End: a + 8*page})
	if !errors.Is(err, errs.ErrBadArg) || !strings.Contains(err.Error(), "not mapped") {
		t.Errorf("Register of unmapped memory: %v", err)
	}
}

// With CAP_IPC_LOCK dropped on one thread and a small RLIMIT_MEMLOCK, the
// error must name the limit and say what to raise.
func TestMemlockLimit(t *testing.T) {
	m := mapPages(t, 256) // 1 MiB
	cur, max, err := unix.Rlimit(unix.RlimitMemlock)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 64 << 10
	if err := unix.SetRlimit(unix.RlimitMemlock, limit, max); err != nil {
		t.Skipf("cannot lower RLIMIT_MEMLOCK: %v", err)
	}
	defer unix.SetRlimit(unix.RlimitMemlock, cur, max)
	done := make(chan error, 1)
	go func() {
		// The capability is dropped on this thread only, and the thread
		// dies with the goroutine (no UnlockOSThread).
		runtime.LockOSThread()
		if unix.Getuid() == 0 || unix.MemlockDiagnosis().CapIPCLock {
			if err := unix.DropIPCLockCapability(); err != nil {
				done <- err
				return
			}
		}
		_, err := pin.New().Register(m)
		done <- err
	}()
	err = <-done
	if err == nil {
		t.Fatal("1 MiB pinned under a 64 KiB RLIMIT_MEMLOCK")
	}
	if !errors.Is(err, errs.ErrOutOfMemory) || !strings.Contains(err.Error(), "RLIMIT_MEMLOCK") ||
		!strings.Contains(err.Error(), "64 KiB") || !strings.Contains(err.Error(), "ulimit -l") {
		t.Errorf("error: %v", err)
	}
	t.Log(err)
	if kb, _ := lockedKB(t, m); kb != 0 {
		t.Errorf("a refused registration left %d kB locked", kb)
	}
}

// The page counts against a per-page model.
func TestCountsModel(t *testing.T) {
	p := pin.New()
	m := mapPages(t, 32)
	counts := make([]int, 32)
	type reg struct{ from, to int }
	var live []reg
	rnd := rand.New(rand.NewPCG(3, 4))
	for step := 0; step < 400; step++ {
		if len(live) == 0 || rnd.IntN(2) == 0 {
			from := rnd.IntN(32)
			to := from + 1 + rnd.IntN(32-from)
			if _, err := p.Register(sub(m, from, to)); err != nil {
				t.Fatal(err)
			}
			for i := from; i < to; i++ {
				counts[i]++
			}
			live = append(live, reg{from, to})
		} else {
			k := rnd.IntN(len(live))
			g := live[k]
			live = append(live[:k], live[k+1:]...)
			if err := p.Deregister(sub(m, g.from, g.to), nil); err != nil {
				t.Fatal(err)
			}
			for i := g.from; i < g.to; i++ {
				counts[i]--
			}
		}
		if err := p.Check(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		want := 0
		for _, n := range counts {
			if n > 0 {
				want++
			}
		}
		if got := p.Pinned(); got != uint64(want*page) {
			t.Fatalf("step %d: %d bytes pinned, the model says %d", step, got, want*page)
		}
		if step%50 == 0 {
			if kb, _ := lockedKB(t, m); kb != want*page/1024 {
				t.Fatalf("step %d: the kernel says %d kB locked, the model %d", step, kb, want*page/1024)
			}
		}
	}
}
