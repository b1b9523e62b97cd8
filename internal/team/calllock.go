package team

import (
	"sync"
	"sync/atomic"

	"github.com/symheap/symheap/internal/shmsync"
)

// CallLock is the mutex of the calls that synchronise with other PEs (a
// team's collectives here; the root package's PE uses one for its
// collective allocations). Its uncontended path is one compare-and-swap
// to lock and a release store to unlock, where sync.Mutex unlocks with a
// second atomic read-modify-write: right before or after a
// synchronisation between cores, every atomic read-modify-write besides
// the synchronisation's own costs a sizeable share of the call
// (docs/bench/design-measurements.md). A goroutine that finds the lock
// held queues on a sync.Mutex for its turn to poll it, so that at most
// one polls; the holder may be waiting for other PEs for long, so the
// poller backs off to short sleeps.
type CallLock struct {
	held atomic.Uint32 // 1 while locked
	turn sync.Mutex    // orders the goroutines that found it locked
}

// Lock locks l.
func (l *CallLock) Lock() {
	// Seq-cst CAS; pairs with Unlock's release store.
	if l.held.CompareAndSwap(0, 1) {
		return
	}
	l.turn.Lock()
	defer l.turn.Unlock()
	p := shmsync.PaceLocal()
	for !l.held.CompareAndSwap(0, 1) {
		p.Step()
	}
}

// Unlock unlocks l.
func (l *CallLock) Unlock() {
	// Release: the holder's changes are visible to the next goroutine
	// whose CAS in Lock sees 0 (an atomic store under the race detector,
	// which then sees the order).
	shmsync.StoreRelease32(&l.held, 0)
}
