package shmsync

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// The liveness tests reproduce the race of "Liveness" deterministically:
// the last peer makes the waiter's condition true and leaves while the
// waiter is between its timed-out test of the condition and its check, so
// the check (standing in for the peer) does both and then reports the
// peer gone. The wait must end without error, and a barrier must not be
// broken.

var errGone = errors.New("peer closed: a PE of the job is gone")

func TestWaitWordRetestsAfterCheck(t *testing.T) {
	var word, sleepers atomic.Uint32
	var done atomic.Bool
	checks := 0
	err := WaitWord(&word, &sleepers, done.Load, func() error {
		checks++
		done.Store(true) // the peer arrives, then leaves
		return errGone
	})
	if err != nil || checks != 1 {
		t.Fatalf("WaitWord: %v after %d checks; want nil after 1 (the condition held after the failed check)", err, checks)
	}
	// A check that fails with the condition still false ends the wait.
	done.Store(false)
	if err := WaitWord(&word, &sleepers, done.Load, func() error { return errGone }); !errors.Is(err, errGone) {
		t.Fatalf("WaitWord with a lost peer: %v, want %v", err, errGone)
	}
}

func TestWaitCountRetestsAfterCheck(t *testing.T) {
	var c atomic.Uint64
	err := WaitCount(&c, 1, Pacer{}, func() error {
		Arrive(&c, 1) // the last arrival, then the peer leaves
		return errGone
	})
	if err != nil {
		t.Fatalf("WaitCount: %v; want nil (the count was reached before the check failed)", err)
	}
	if err := WaitCount(&c, 2, Pacer{}, func() error { return errGone }); !errors.Is(err, errGone) {
		t.Fatalf("WaitCount with a lost peer: %v, want %v", err, errGone)
	}
}

func TestBarrierNotBrokenByLeavingLastArrival(t *testing.T) {
	var b Barrier
	const n = 2
	err := b.Wait(n, func() (int, error) {
		// The other member's Wait, as its last arrival runs it.
		if b.count.Add(1) == n {
			b.count.Store(0)
			Wake(&b.gen, &b.sleepers)
		}
		return 1, errGone
	})
	if err != nil {
		t.Fatalf("Wait: %v; want nil (the episode completed before the check failed)", err)
	}
	if m, broken := b.Broken(); broken {
		t.Fatalf("barrier broken by member %d after a completed episode", m)
	}
	// A member that is really gone breaks it, for every later Wait too.
	if err := b.Wait(n, func() (int, error) { return 1, errGone }); !errors.Is(err, errGone) {
		t.Fatalf("Wait with a lost member: %v, want %v", err, errGone)
	}
	if err := b.Wait(n, func() (int, error) { return -1, nil }); !errors.Is(err, ErrBroken) {
		t.Fatalf("Wait on a broken barrier: %v, want %v", err, ErrBroken)
	}
}

// TestWokenWaitChecks: a sleeper that something wakes much more often
// than a slice, without its condition changing (a progress thread's
// wake-ups did so in a job across nodes), still makes its liveness check
// once a SleepSlice has passed, and so ends when the peer is gone. The
// waker keeps waking until the wait has returned; a wait that never
// checks would keep it waking until the test's deadline.
func TestWokenWaitChecks(t *testing.T) {
	waits := map[string]func(word, sleepers *atomic.Uint32, check func() error) error{
		"WaitWord": func(word, sleepers *atomic.Uint32, check func() error) error {
			return WaitWord(word, sleepers, func() bool { return false }, check)
		},
		"SleepFenced": func(word, sleepers *atomic.Uint32, check func() error) error {
			sleepers.Add(1)
			defer sleepers.Add(^uint32(0))
			return SleepFenced(word, SleepSlice, func() bool { return false }, check)
		},
	}
	for name, wait := range waits {
		t.Run(name, func(t *testing.T) {
			var word, sleepers atomic.Uint32
			var returned atomic.Bool
			done := make(chan error, 1)
			go func() {
				done <- wait(&word, &sleepers, func() error { return errGone })
				returned.Store(true)
			}()
			wakes := 0
			for !returned.Load() {
				Wake(&word, &sleepers)
				wakes++
				time.Sleep(SleepSlice / 50)
				if wakes > 20000 { // 20 s at least: 400 slices
					t.Fatalf("the wait was woken %d times and never made its check", wakes)
				}
			}
			if err := <-done; !errors.Is(err, errGone) {
				t.Fatalf("%v, want %v", err, errGone)
			}
		})
	}
}
