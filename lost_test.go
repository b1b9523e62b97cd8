package symheap_test

import (
	"sync/atomic"
	"testing"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/internal/shmsync"
)

// lossWatch counts the futex sleeps of this process's waits
// (shmsync.TraceSleeps) while a test waits on a PE that is dying: every
// sleep, and the liveness checks made when that PE's liveness token was
// already gone. The tracer runs between a sleep and its liveness check,
// and a token once gone stays gone, so a wait that turns the loss into
// ErrPeerLost at its first chance makes at most one check after the
// token went, however slowly a loaded machine runs it. The clock could
// not tell that first check, late, from a later one.
//
// Only the test's own wait sleeps on a futex word with a liveness check
// in these jobs; a sleep of another goroutine would be counted too.
type lossWatch struct {
	pe                        *symheap.PE
	lost                      int
	sleeps, checks, afterLoss atomic.Int32
}

// watchLoss starts counting for PE lost until the end of the test.
func watchLoss(t *testing.T, pe *symheap.PE, lost int) *lossWatch {
	w := &lossWatch{pe: pe, lost: lost}
	t.Cleanup(shmsync.TraceSleeps(func(s shmsync.Sleep) {
		w.sleeps.Add(1)
		if s.Check {
			w.checks.Add(1)
			if !w.pe.Accessible(w.lost) {
				w.afterLoss.Add(1)
			}
		}
	}))
	return w
}

// take returns the counts since the last take and zeroes them.
func (w *lossWatch) take() (sleeps, checks, afterLoss int32) {
	return w.sleeps.Swap(0), w.checks.Swap(0), w.afterLoss.Swap(0)
}

// firstCheck fails the test unless the wait that just ended made at most
// one liveness check after PE lost's token was gone, and returns the
// counts for a log line.
func (w *lossWatch) firstCheck(t *testing.T, what string) (sleeps, checks, afterLoss int32) {
	t.Helper()
	sleeps, checks, afterLoss = w.take()
	if afterLoss > 1 {
		t.Errorf("%s: the wait ran %d liveness checks after PE %d's token was gone; the first must end it", what, afterLoss, w.lost)
	}
	return sleeps, checks, afterLoss
}

// noSleep fails the test if the wait that just ended slept at all: a
// broken barrier or team returns its error at once, not after a sleep
// slice.
func (w *lossWatch) noSleep(t *testing.T, what string) {
	t.Helper()
	if sleeps, _, _ := w.take(); sleeps != 0 {
		t.Errorf("%s: %d futex sleeps; a broken barrier must return the first error at once", what, sleeps)
	}
}
