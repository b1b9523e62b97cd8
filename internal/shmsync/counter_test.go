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
// that completes a round. A lost wake-up is counted as such ("Lost
// wake-ups, counted"), not guessed from a slow run or from slices that ran
// out: on a loaded machine the rounds are slow anyway, and the last
// arrival of a round may wait a whole slice for a core before it arrives.
func TestCountRounds(t *testing.T) {
	for _, pace := range []struct {
		name string
		p    Pacer
	}{{"polling first", Pacer{polls: 1000, yields: 16}}, {"sleeping at once", Pacer{}}} {
		spin := pace.p
		var c atomic.Uint64
		const n, rounds = 4, 300
		var wg sync.WaitGroup
		errs := make(chan error, n)
		var ranOut atomic.Int64
		check := func() error { ranOut.Add(1); return nil }
		// The arrival that completed round r began its Arrive at
		// begun[r-1] and had returned from it (its wake-up step done)
		// at done[r-1]; both Monotonic.
		var begun, done [rounds]atomic.Int64
		var mu sync.Mutex
		var sleeps []Sleep
		defer TraceSleeps(func(s Sleep) {
			if s.Word == Low32(&c) {
				mu.Lock()
				sleeps = append(sleeps, s)
				mu.Unlock()
			}
		})()
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := uint64(1); r <= rounds; r++ {
					want := r * n
					b := Monotonic()
					v := Arrive(&c, want)
					if v == want {
						begun[r-1].Store(b)
						done[r-1].Store(Monotonic())
					}
					if v > want {
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
			t.Fatalf("%s: %v", pace.name, err)
		}
		if got := c.Load(); got != n*rounds {
			t.Fatalf("%s: counter %#x, want %#x (count and no sleepers)", pace.name, got, n*rounds)
		}
		// A sleep that began before the completing arrival of some round
		// began its Arrive waited for that round: the rounds before it
		// had completed before it (its goroutine left them), and a later
		// round cannot complete before it ends. Charged with that
		// arrival, it lost the wake-up if it timed out although the
		// arrival's wake-up step was done before its deadline.
		lost, slept, timedOut := 0, len(sleeps), 0
		for _, s := range sleeps {
			if s.TimedOut {
				timedOut++
			}
			for r := range rounds {
				if begun[r].Load() > s.Start && s.Missed(done[r].Load()) {
					lost++
					if lost <= 3 {
						t.Logf("%s: a sleep of %v ran out although round %d's last arrival had woken its sleepers %v before its deadline",
							pace.name, s.Slice, r+1, time.Duration(s.Deadline()-done[r].Load()))
					}
					break
				}
			}
		}
		t.Logf("%s: %d sleeps, %d ran their slice out, %d liveness checks, %d lost wake-ups", pace.name, slept, timedOut, ranOut.Load(), lost)
		if lost != 0 {
			t.Errorf("%s: %d of %d sleeps ran their slice of %v out although the arrival that completed their round had woken its sleepers before the slice ended: wake-ups are lost",
				pace.name, lost, slept, SleepSlice)
		}
	}
}

// TestWaitCountCheck: a wait nobody ends returns the liveness check's
// error after a sleep slice, and takes its sleeper unit back.
func TestWaitCountCheck(t *testing.T) {
	var c atomic.Uint64
	gone := errors.New("peer gone")
	var last Sleep // the sleep before the check; only this goroutine sleeps on c
	defer TraceSleeps(func(s Sleep) {
		if s.Word == Low32(&c) {
			last = s
		}
	})()
	checks := 0
	err := WaitCount(&c, 1, Pacer{polls: 10, yields: 2}, func() error {
		checks++
		if !last.TimedOut || !last.Check {
			t.Errorf("liveness check after a sleep that did not run its slice out: %+v", last)
		}
		return gone
	})
	if !errors.Is(err, gone) {
		t.Fatalf("WaitCount: %v, want %v", err, gone)
	}
	if checks != 1 {
		t.Errorf("%d liveness checks, want the one that ended the wait", checks)
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
