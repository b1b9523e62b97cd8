package shmsync

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCountRounds runs rounds of a counting barrier on Arrive and
// WaitCount, with and without polling first: every round must be complete
// when a waiter leaves it, and the sleepers must be woken by the arrival
// that completes a round alone. A lost wake-up shows as a sleep slice that
// runs out (the liveness check is called), not as a slow run: on a loaded
// machine the rounds are slow anyway, since every wake-up waits for a core.
func TestCountRounds(t *testing.T) {
	for _, spin := range []Pacer{{polls: 1000, yields: 16}, {}} {
		var c atomic.Uint64
		const n, rounds = 4, 300
		var wg sync.WaitGroup
		errs := make(chan error, n)
		var ranOut atomic.Int64
		check := func() error { ranOut.Add(1); return nil }
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := uint64(1); r <= rounds; r++ {
					want := r * n
					if v := Arrive(&c, want); v > want {
						errs <- errors.New("arrived past the round's end")
						return
					}
					if err := WaitCount(&c, want, spin, check); err != nil {
						errs <- err
						return
					}
					if v := c.Load() & CountMask; v < want {
						errs <- errors.New("left a round before its end")
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("spin %+v: %v", spin, err)
		}
		if got := c.Load(); got != n*rounds {
			t.Fatalf("spin %+v: counter %#x, want %#x (count and no sleepers)", spin, got, n*rounds)
		}
		// Woken, a sleeper's slice runs out only when the last arrival of
		// its round waited for a core for a whole slice (SleepSlice): on a
		// crowded machine a few times. Not woken, in most rounds.
		if k := ranOut.Load(); k > rounds/20 {
			t.Errorf("spin %+v: %d sleep slices of %v ran out in %d rounds: sleepers were not woken", spin, k, SleepSlice, rounds)
		}
	}
}

// TestWaitCountCheck: a wait nobody ends returns the liveness check's
// error after a sleep slice, and takes its sleeper unit back.
func TestWaitCountCheck(t *testing.T) {
	var c atomic.Uint64
	gone := errors.New("peer gone")
	start := time.Now()
	err := WaitCount(&c, 1, Pacer{polls: 10, yields: 2}, func() error { return gone })
	if !errors.Is(err, gone) {
		t.Fatalf("WaitCount: %v, want %v", err, gone)
	}
	if d := time.Since(start); d < SleepSlice/2 {
		t.Errorf("returned after %v, before a sleep slice ran out", d)
	}
	if v := c.Load(); v != 0 {
		t.Fatalf("counter %#x after the wait, want 0", v)
	}
}

// TestReachedWraps: counts compare across the wrap of CountBits.
func TestReachedWraps(t *testing.T) {
	for _, tc := range []struct {
		v, want uint64
		ok      bool
	}{
		{5, 5, true}, {6, 5, true}, {4, 5, false},
		{1, CountMask, true}, {CountMask, 1, false},
		{sleeperUnit | 5, 5, true}, {3*sleeperUnit | 4, 5, false},
	} {
		if got := Reached(tc.v, tc.want); got != tc.ok {
			t.Errorf("Reached(%#x, %#x) = %v, want %v", tc.v, tc.want, got, tc.ok)
		}
	}
}

// TestLow32 checks that the futex word is the half that every arrival
// moves and no sleeper unit does.
func TestLow32(t *testing.T) {
	var w atomic.Uint64
	w.Store(1)
	w.Add(sleeperUnit)
	if got := Low32(&w).Load(); got != 1 {
		t.Fatalf("Low32 of %#x = %#x, want 1", w.Load(), got)
	}
	w.Add(1)
	if got := Low32(&w).Load(); got != 2 {
		t.Fatalf("after an arrival, Low32 = %#x, want 2", got)
	}
}
