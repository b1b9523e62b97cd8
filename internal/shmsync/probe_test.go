package shmsync

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestProbeLine: two goroutines on threads of their own agree on one
// transfer time, which a third reads with ProbeResult; a leader whose
// follower never comes gives up after its arrival bound and says so in
// the word, and a follower whose leader never comes gives up too.
func TestProbeLine(t *testing.T) {
	t.Run("pair", func(t *testing.T) {
		if runtime.NumCPU() < 2 || runtime.GOMAXPROCS(0) < 2 {
			t.Skip("needs two CPUs")
		}
		var w atomic.Uint64
		type res struct {
			d  time.Duration
			ok bool
		}
		got := make(chan res, 2)
		for _, lead := range []bool{true, false} {
			go func() {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				d, ok := ProbeLine(&w, lead, 20*time.Millisecond, 2*time.Millisecond)
				got <- res{d, ok}
			}()
		}
		a, b := <-got, <-got
		if a != b {
			t.Fatalf("leader and follower disagree: %v and %v", a, b)
		}
		r, ok := ProbeResult(&w, time.Millisecond)
		if r != a.d || ok != a.ok {
			t.Fatalf("ProbeResult %v %v, the pair found %v", r, ok, a)
		}
		if a.ok && (a.d <= 0 || a.d > 100*time.Microsecond) {
			t.Fatalf("transfer time %v", a.d)
		}
		t.Logf("transfer time between two threads: %v (measured: %v)", a.d, a.ok)
	})
	t.Run("no-follower", func(t *testing.T) {
		var w atomic.Uint64
		start := time.Now()
		if d, ok := ProbeLine(&w, true, 2*time.Millisecond, time.Millisecond); ok || d != 0 {
			t.Fatalf("alone: %v %v, want 0 false", d, ok)
		}
		if el := time.Since(start); el > time.Second {
			t.Fatalf("alone: gave up after %v", el)
		}
		if v := w.Load(); v != probeDone {
			t.Fatalf("word %#x, want the verdict %#x", v, uint64(probeDone))
		}
		if d, ok := ProbeLine(&w, false, time.Millisecond, time.Millisecond); ok || d != 0 {
			t.Fatalf("late follower: %v %v, want 0 false", d, ok)
		}
	})
	t.Run("no-leader", func(t *testing.T) {
		var w atomic.Uint64
		if d, ok := ProbeLine(&w, false, time.Millisecond, time.Millisecond); ok || d != 0 {
			t.Fatalf("alone: %v %v, want 0 false", d, ok)
		}
		if _, ok := ProbeResult(&w, time.Millisecond); ok {
			t.Fatal("ProbeResult found a result nobody measured")
		}
	})
}
