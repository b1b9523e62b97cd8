package symheap

import (
	"fmt"
	"time"
)

// Locks when the lock's state, on PE 0, lies on another node: the same
// ticket lock as lock.go, its word reached with the transport's atomics
// (AtomicFetchAdd and friends route to it). Atomics on the word from PE
// 0's node (CPU atomics) and from other nodes (the transport's) mix
// correctly: over TCP, UCX performs them at PE 0 with the same locked
// instructions (internal/far, "Atomics"). A far waiter cannot sleep on PE
// 0's futex, so it polls the word, backing off from 20 µs to 1 ms, and
// checks every PE's liveness every SleepSlice.

func farSetLock(pe *PE, l *int64) error {
	cur, err := AtomicFetch(pe, l, 0)
	if err != nil {
		return err
	}
	if lockHolder(uint64(cur)) == pe.rank {
		return fmt.Errorf("symheap: SetLock at %p: PE %d already holds the lock: %w (call ClearLock first)", l, pe.rank, ErrBadArg)
	}
	old, err := AtomicFetchAdd(pe, l, int64(1)<<lockNextShift, 0)
	if err != nil {
		return err
	}
	ticket := lockNext(uint64(old))
	pause, checked := 20*time.Microsecond, time.Now()
	for lockServing(uint64(old)) != ticket {
		time.Sleep(pause)
		pause = min(2*pause, time.Millisecond)
		if time.Since(checked) > 50*time.Millisecond {
			checked = time.Now()
			if err := pe.peerLost(); err != nil {
				return fmt.Errorf("symheap: SetLock at %p on PE %d (ticket %d): %w", l, pe.rank, ticket, err)
			}
		}
		if old, err = AtomicFetch(pe, l, 0); err != nil {
			return err
		}
	}
	_, err = AtomicFetchAdd(pe, l, int64(uint64(pe.rank+1)<<lockHolderShift), 0)
	return err
}

func farTestLock(pe *PE, l *int64) (bool, error) {
	tag := uint64(pe.rank + 1)
	for {
		old, err := AtomicFetch(pe, l, 0)
		if err != nil {
			return false, err
		}
		if lockNext(uint64(old)) != lockServing(uint64(old)) {
			return false, nil
		}
		nw := uint64(old) + 1<<lockNextShift | tag<<lockHolderShift
		if v, err := AtomicCompareSwap(pe, l, old, int64(nw), 0); err != nil || v == old {
			return err == nil, err
		}
	}
}

func farClearLock(pe *PE, l *int64) error {
	pe.rma.quietAll()
	for {
		o, err := AtomicFetch(pe, l, 0)
		if err != nil {
			return err
		}
		old := uint64(o)
		nw, err := pe.released(l, old)
		if err != nil {
			return err
		}
		if v, err := AtomicCompareSwap(pe, l, int64(old), int64(nw), 0); err != nil || uint64(v) == old {
			return err
		}
	}
}
