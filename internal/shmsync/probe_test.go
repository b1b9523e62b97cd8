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
		var took [2]time.Duration // the leader's probe, the follower's
		for i, lead := range []bool{true, false} {
			go func() {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				start := time.Now()
				d, ok := ProbeLine(&w, lead, 20*time.Millisecond, 2*time.Millisecond)
				took[i] = time.Since(start)
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
		// A transfer is half a round trip of the best block, so the
		// probe's own duration bounds it whatever the load: a figure
		// above that is not a transfer time (a unit or a division lost).
		// A fixed ceiling would fail on a busy machine, where a block
		// that met a preemption can be the best one.
		if a.ok && (a.d <= 0 || a.d > took[0]/(2*probeRounds)) {
			t.Fatalf("transfer time %v from a probe of %v (%d round trips per block)", a.d, took[0], probeRounds)
		}
		t.Logf("transfer time between two threads: %v (measured: %v)", a.d, a.ok)
	})
	t.Run("no-follower", func(t *testing.T) {
		var w atomic.Uint64
		// The probe's limit is an hour: only the arrival bound can end
		// it before go test's timeout does, whatever the load.
		if d, ok := ProbeLine(&w, true, 2*time.Millisecond, time.Hour); ok || d != 0 {
			t.Fatalf("alone: %v %v, want 0 false", d, ok)
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
