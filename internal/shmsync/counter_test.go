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
// that completes a round alone.
func TestCountRounds(t *testing.T) {
	for _, spin := range []Pacer{{polls: 1000, yields: 16}, {}} {
		var c atomic.Uint64
		const n, rounds = 4, 300
		var wg sync.WaitGroup
		errs := make(chan error, n)
		start := time.Now()
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
					if err := WaitCount(&c, want, spin, nil); err != nil {
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
		// A lost wake-up costs a whole sleep slice: 300 rounds would take
		// 15 s. Woken, they take milliseconds.
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("spin %+v: %d rounds took %v: sleepers were not woken", spin, rounds, d)
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
