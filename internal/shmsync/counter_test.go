package shmsync

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// counterCell is a counter and its sleepers on a line of their own, as
// they sit in shared memory.
type counterCell struct {
	count    atomic.Uint64
	sleepers atomic.Uint32
	_        [52]byte
}

// TestWaitCounterRounds runs rounds of a counting barrier on WaitCounter,
// with and without polling first: every waiter must return a value that
// ends its round, and the sleepers must be woken by the last add alone.
func TestWaitCounterRounds(t *testing.T) {
	for _, spin := range []Spin{{Polls: 1000, Yields: 16}, {}} {
		var c counterCell
		const n, rounds = 4, 300
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := uint64(1); r <= rounds; r++ {
					want := r * n
					if c.count.Add(1) == want && c.sleepers.Load() != 0 {
						WakeAll(Low32(&c.count))
					}
					v, err := WaitCounter(&c.count, &c.sleepers, spin, func(v uint64) bool { return v >= want }, nil)
					if err != nil || v < want {
						errs <- errors.Join(err, errors.New("round ended early"))
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
		if got := c.count.Load(); got != n*rounds {
			t.Fatalf("spin %+v: count %d, want %d", spin, got, n*rounds)
		}
		if s := c.sleepers.Load(); s != 0 {
			t.Fatalf("spin %+v: %d sleepers left", spin, s)
		}
	}
}

// TestWaitCounterCheck: a wait nobody ends returns the liveness check's
// error after a sleep slice, and leaves no sleeper behind.
func TestWaitCounterCheck(t *testing.T) {
	var c counterCell
	gone := errors.New("peer gone")
	start := time.Now()
	_, err := WaitCounter(&c.count, &c.sleepers, Spin{Polls: 10, Yields: 2}, func(v uint64) bool { return v > 0 }, func() error { return gone })
	if !errors.Is(err, gone) {
		t.Fatalf("WaitCounter: %v, want %v", err, gone)
	}
	if d := time.Since(start); d < SleepSlice/2 {
		t.Errorf("returned after %v, before a sleep slice ran out", d)
	}
	if s := c.sleepers.Load(); s != 0 {
		t.Fatalf("%d sleepers left", s)
	}
}

// TestLow32 checks that the futex word is the half that every add moves.
func TestLow32(t *testing.T) {
	var w atomic.Uint64
	w.Store(0xdead_beef_0000_0001)
	if got := Low32(&w).Load(); got != 1 {
		t.Fatalf("Low32 of %#x = %#x, want 1", w.Load(), got)
	}
	w.Add(1)
	if got := Low32(&w).Load(); got != 2 {
		t.Fatalf("after an add, Low32 = %#x, want 2", got)
	}
}
