package alloc

// Lock: a robust, owner-tagged mutual exclusion lock over one 32-bit word of
// shared memory, for processes that share a heap region.
//
// # The word
//
//	bit 31      waiters: some process may be sleeping in FutexWait on the
//	            word (set by a waiter before it sleeps, cleared only by the
//	            unlock that wakes)
//	bits 0..30  holder: 0 when free, else the holder's id + 1
//
// # Lock (id)
//
//  1. CAS 0 -> id+1. Uncontended, that is all: no syscall.
//  2. Otherwise spin a little (re-reading the word, yielding the processor
//     after a few rounds) and retry the CAS whenever the word reads 0.
//  3. Then sleep: make sure the waiters bit is set in the value v we saw
//     (CAS v -> v|bit), FutexWait(word, v|bit, 50ms). On wake-up or timeout
//     loop to the top; a free word is now taken as id+1|bit, since other
//     sleepers may remain and this holder must wake one when it leaves.
//  4. After a timeout, ask alive(holder); a dead holder ends the wait with
//     ErrPeerLost.
//
// # Unlock (id)
//
//  1. Check the holder is id (else ErrBadArg: an unlock by a non-holder is a
//     programming error and must not free someone else's critical section).
//  2. Swap the word to 0. If the old value had the waiters bit, FutexWake
//     one sleeper. The uncontended unlock makes no syscall.
//
// No wake-up is lost: a waiter sets the bit with a CAS on the same word the
// unlock swaps, so either the unlock sees the bit (and wakes), or the
// waiter's CAS fails on the changed word (and it re-reads without
// sleeping), or FutexWait finds the word changed and returns at once.

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/shmsync"
	"github.com/symheap/symheap/internal/unix"
)

const (
	lockWaiters = 1 << 31
	lockHolder  = lockWaiters - 1

	// MaxLockID is the largest holder id a Lock accepts.
	MaxLockID = lockHolder - 1

	lockSleep = 50 * time.Millisecond // one FutexWait; then re-check liveness
)

// Lock is a cross-process lock over a 32-bit word in shared memory. The
// zero word is an unlocked lock. Holders identify themselves with a small
// id (a PE number, say): the word records who holds the lock, so that a
// waiter can tell when the holder has died.
//
// If a holder dies inside its critical section, waiters get ErrPeerLost.
// Whatever the holder was changing (a heap's free lists, say) may then be
// half-updated: the lock is not taken over and the data is not repaired.
// That is deliberate: in symheap a lost PE ends the job, and the error
// only has to arrive promptly instead of a hang.
type Lock struct {
	w *uint32
}

// NewLock returns a Lock over word, which must lie in memory shared by every
// process that uses the lock (a non-private futex is used) and be 4-byte
// aligned.
func NewLock(word *uint32) *Lock { return &Lock{w: word} }

// Lock acquires the lock for holder id (at most MaxLockID). alive, if not
// nil, is asked about the current holder (by id) whenever a wait times out;
// when it returns false, Lock gives up with ErrPeerLost.
func (l *Lock) Lock(id uint32, alive func(holder uint32) bool) error {
	if id > MaxLockID {
		return fmt.Errorf("alloc: lock holder id %d above %d: %w", id, MaxLockID, errs.ErrBadArg)
	}
	// Acquire: the CAS orders this holder's critical section after the
	// previous holder's Swap in Unlock (any process).
	if atomic.CompareAndSwapUint32(l.w, 0, id+1) {
		return nil
	}
	return l.lockSlow(id+1, alive)
}

// TryLock acquires the lock if it is free, without waiting.
func (l *Lock) TryLock(id uint32) bool {
	return id <= MaxLockID && atomic.CompareAndSwapUint32(l.w, 0, id+1) // acquire, as in Lock
}

func (l *Lock) lockSlow(me uint32, alive func(uint32) bool) error {
	// Poll, then yield, under the runtime's one pacing (shmsync
	// "Pacing"), then sleep on the word.
	for p := shmsync.Pace(); ; {
		// Relaxed read is enough to decide whether to try; the CAS
		// acquires.
		if atomic.LoadUint32(l.w) == 0 && atomic.CompareAndSwapUint32(l.w, 0, me) {
			return nil
		}
		if !p.Next() {
			break
		}
	}
	for {
		v := atomic.LoadUint32(l.w)
		if v == 0 {
			// Acquire with the waiters bit: others may still sleep.
			if atomic.CompareAndSwapUint32(l.w, 0, me|lockWaiters) {
				return nil
			}
			continue
		}
		if v&lockWaiters == 0 {
			// Tell the holder to wake us; pairs with the Swap in Unlock.
			if !atomic.CompareAndSwapUint32(l.w, v, v|lockWaiters) {
				continue
			}
			v |= lockWaiters
		}
		tr, start := shmsync.Traced() // nil but in tests
		err := unix.FutexWait(l.w, v, lockSleep)
		if tr != nil {
			// Met: the word is free, the next round's CAS may take it.
			tr(shmsync.Sleep{Word: l.word(), Start: start, Slice: lockSleep, TimedOut: err == unix.ETIMEDOUT,
				Met: atomic.LoadUint32(l.w) == 0, Check: err == unix.ETIMEDOUT && alive != nil})
		}
		switch err {
		case nil, unix.EAGAIN:
			continue // woken, or the word changed: look again
		case unix.ETIMEDOUT:
		default:
			return fmt.Errorf("alloc: lock wait: %w", err)
		}
		if alive == nil {
			continue
		}
		// Re-read: the holder we slept on may have gone in the meantime.
		cur := atomic.LoadUint32(l.w)
		if h := cur & lockHolder; h != 0 && !alive(h-1) {
			return fmt.Errorf("alloc: heap lock holder %d is gone (the heap may be inconsistent: it died mid-operation): %w", h-1, errs.ErrPeerLost)
		}
	}
}

// Unlock releases the lock held by id.
func (l *Lock) Unlock(id uint32) error {
	v := atomic.LoadUint32(l.w)
	if v&lockHolder != id+1 {
		return fmt.Errorf("alloc: unlock by %d of a lock held by %s: %w", id, holderString(v), errs.ErrBadArg)
	}
	// Release: publishes the critical section to the next acquirer (CAS in
	// Lock, any process); reading the old value tells whether anyone
	// announced a sleep on the word.
	if atomic.SwapUint32(l.w, 0)&lockWaiters != 0 {
		if _, err := unix.FutexWake(l.w, 1); err != nil {
			return fmt.Errorf("alloc: lock wake: %w", err)
		}
	}
	return nil
}

// Holder returns the id of the current holder, if any. The answer may be
// stale as soon as it is returned; it is for diagnostics.
func (l *Lock) Holder() (id uint32, held bool) {
	v := atomic.LoadUint32(l.w) & lockHolder // relaxed: a snapshot for reporting
	if v == 0 {
		return 0, false
	}
	return v - 1, true
}

func holderString(v uint32) string {
	if v&lockHolder == 0 {
		return "nobody"
	}
	return fmt.Sprint(v&lockHolder - 1)
}
