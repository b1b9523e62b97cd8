package shmsync

import (
	"errors"
	"sync/atomic"
	"testing"
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
