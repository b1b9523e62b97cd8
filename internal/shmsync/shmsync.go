// Package shmsync holds the synchronisation objects that live in shared
// memory and are used by several processes at once: a futex-backed wait with
// liveness checks, and a counting barrier.
//
// Every object here is plain data (no Go pointers) laid out in the shared
// segment; every access to its words goes through sync/atomic, whose
// operations are sequentially consistent, and each access says which other
// process it pairs with.
//
// Waiting follows one pattern everywhere: poll briefly while the machine has
// a core for every PE, then yield, under one policy ("Pacing", pace.go),
// then sleep on a non-private futex with a short timeout, and on every
// timeout ask the caller's liveness check whether the process we wait for
// is still there. A dead peer therefore turns into an error within one
// timeout instead of a hang.
package shmsync

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/symheap/symheap/internal/unix"
)

// SleepSlice is how long a waiter sleeps on a futex before it re-checks the
// liveness of the peers it waits for.
const SleepSlice = 50 * time.Millisecond

// # Liveness
//
// A waiter checks its peers' liveness only after it found its condition
// false, and the two are not one atomic step: between them the last peer
// may make the condition true and then leave (complete a barrier, then
// Close). The check then finds a peer gone that owes the waiter nothing.
// So every wait re-tests its condition after a failed check and reports
// the loss only if the condition still does not hold; a peer that made it
// true before leaving was seen to do so, since the check's loads come
// after the peer's leaving, which comes after its arrival. Whatever a
// failed check decides for other waiters (breaking a barrier) comes after
// that re-test too.

// CheckDelay is slept between a timed-out wait's test of its condition
// and its liveness check. It is zero but in tests, which set it before
// their waits start, to widen the window of "Liveness" so that a PE
// arriving one sleep slice late falls into it every time.
var CheckDelay time.Duration

// Lost is a wait's liveness check after a sleep slice ran out with cond
// false: check's error, unless cond holds after it ("Liveness"). Every
// wait with a liveness check takes it, after the pause of CheckDelay.
func Lost(cond func() bool, check func() error) error {
	if CheckDelay > 0 {
		time.Sleep(CheckDelay)
	}
	if err := check(); err != nil && !cond() {
		return err
	}
	return nil
}

// WaitWord waits until cond(atomic load of *word) is true. word is the futex
// word that whoever changes the condition increments and wakes; sleepers is
// a counter that lets wakers skip the wake-up syscall when nobody sleeps.
// check is called on every sleep timeout; its error ends the wait unless
// the condition holds after it (Liveness). It polls first, paced by Pace.
func WaitWord(word *atomic.Uint32, sleepers *atomic.Uint32, cond func() bool, check func() error) error {
	if p := Pace(); p.Until(cond) {
		return nil
	}
	// Announce the sleep before re-reading the condition; pairs with the
	// waker's increment of word followed by its load of sleepers (Wake).
	sleepers.Add(1)
	defer sleepers.Add(^uint32(0))
	checked := time.Now() // the last liveness check (the wait's start)
	for {
		v := word.Load()
		if cond() {
			return nil
		}
		tr, start := traceStart()
		err := unix.FutexWait((*uint32)(addrOf(word)), v, SleepSlice)
		met := cond()
		checkNow := !met && check != nil && (err == unix.ETIMEDOUT || checkDue(checked))
		if tr != nil {
			(*tr)(Sleep{word, start, SleepSlice, err == unix.ETIMEDOUT, met, checkNow})
		}
		if met {
			return nil
		}
		if checkNow {
			checked = time.Now()
			if err := Lost(cond, check); err != nil {
				return err
			}
		}
	}
}

// SleepFenced is the sleeping half of a waiter whose writers publish
// with plain or release stores and no fence, and take the wake-up step
// (Wake) only when they see a sleeper: the caller has announced itself in
// the sleepers count those writers load, and executed the asymmetric
// fence (membarrier) that stands in for theirs. It sleeps on word in
// slices of slice until cond() holds: SleepSlice normally, shorter where
// the fence could not be had, so that a store that took no wake-up step
// is seen within one. check runs whenever a full SleepSlice has run out;
// its error ends the wait unless cond holds after it (Lost).
func SleepFenced(word *atomic.Uint32, slice time.Duration, cond func() bool, check func() error) error {
	slept := time.Duration(0) // in slices run out since the last liveness check
	checked := time.Now()     // the last liveness check (the wait's start)
	for {
		v := word.Load() // seq-cst; pairs with the writer's word.Add after its store
		if cond() {
			return nil
		}
		tr, start := traceStart()
		err := unix.FutexWait((*uint32)(addrOf(word)), v, slice)
		met := cond()
		checkNow := false // a full SleepSlice has run out since the last check
		if !met && check != nil {
			if err == unix.ETIMEDOUT {
				slept += slice
			}
			if slept >= SleepSlice || err != unix.ETIMEDOUT && checkDue(checked) {
				slept, checkNow = 0, true
			}
		}
		if tr != nil {
			(*tr)(Sleep{word, start, slice, err == unix.ETIMEDOUT, met, checkNow})
		}
		if met {
			if err == unix.ETIMEDOUT {
				timedOutEnds.Add(1)
			}
			return nil
		}
		if checkNow {
			checked = time.Now()
			if err := Lost(cond, check); err != nil {
				return err
			}
		}
	}
}

// checkDue reports whether a sleeper that was woken, and found its
// condition false, should make its liveness check now: a SleepSlice has
// passed since the last one. A waiter that something wakes more often
// than a slice (a progress thread's wake-ups, a busy neighbour on the
// same word) would otherwise never check, and never end if a PE it
// waits for is gone.
func checkDue(checked time.Time) bool { return time.Since(checked) >= SleepSlice }

// timedOutEnds counts the sleeps of SleepFenced that found their
// condition true when a slice ran out rather than when a writer woke them.
var timedOutEnds atomic.Uint64

// TimedOutEnds is the number of waits in this process that SleepFenced
// ended when a slice ran out and found the condition true: the writer's
// store came without a wake-up, or its wake-up came a slice late. Tests
// of the wake-up path count them; time would mislead on a loaded machine,
// where a woken sleeper waits for a core.
func TimedOutEnds() uint64 { return timedOutEnds.Load() }

// A counter is a 64-bit word in shared memory that counts arrivals in its
// low CountBits bits, wrapping, and the processes asleep on it in the bits
// above. Arrivals add 1 (Arrive); a waiter that goes to sleep adds a
// sleeper unit and takes it back when it wakes (WaitCount). The low half
// of the word is the futex word, which every arrival moves and no sleeper
// unit does. Keeping the sleepers in the word itself spares the arrival
// that a waiter waits for a second access to shared memory: its add
// returns whether anyone sleeps.
//
// A count wraps after 2^CountBits arrivals (4.5e15: years of barriers),
// and compares correctly across the wrap (Reached).
const (
	CountBits   = 52
	CountMask   = 1<<CountBits - 1
	sleeperUnit = 1 << CountBits
)

// Arrive adds one arrival to counter c and returns the count it reached.
// If that count is done, it wakes the sleepers, if any. The add is
// sequentially consistent: every earlier store of the caller is visible
// to a waiter that sees the count.
func Arrive(c *atomic.Uint64, done uint64) uint64 {
	v := c.Add(1)
	if v&CountMask == done&CountMask && v>>CountBits != 0 {
		WakeAll(Low32(c))
	}
	return v & CountMask
}

// Reached reports whether count v has reached want, across the wrap.
func Reached(v, want uint64) bool { return int64((v-want)<<(64-CountBits)) >= 0 }

// WaitCount waits until the count of counter c reaches want: polls and
// yields paced by p (Pace), then sleeps on the counter's futex word, until
// the arrival that reaches want wakes it (Arrive). check is called on
// every sleep timeout; its error ends the wait. The loads are
// sequentially consistent and pair with the arrivals' adds.
func WaitCount(c *atomic.Uint64, want uint64, p Pacer, check func() error) error {
	for {
		if Reached(c.Load(), want) {
			p.learn(true)
			return nil
		}
		if !p.Next() {
			p.learn(false)
			return sleepOnCount(c, want, check)
		}
	}
}

// sleepOnCount is WaitCount's last stage.
func sleepOnCount(c *atomic.Uint64, want uint64, check func() error) error {
	// Seq-cst add of a sleeper unit: either the arrival that reaches want
	// comes after it, sees the unit in its own add's result and wakes us,
	// or it came before, and v shows the count reached.
	v := c.Add(sleeperUnit)
	defer c.Add(^uint64(sleeperUnit - 1))
	checked := time.Now() // the last liveness check (the sleep's start)
	for !Reached(v, want) {
		// The futex word is the count's low half: any arrival since v
		// makes FutexWait return at once.
		tr, start := traceStart()
		err := unix.FutexWait((*uint32)(addrOf(Low32(c))), uint32(v), SleepSlice)
		checkNow := check != nil && (err == unix.ETIMEDOUT || checkDue(checked))
		if tr != nil {
			(*tr)(Sleep{Low32(c), start, SleepSlice, err == unix.ETIMEDOUT, Reached(c.Load(), want), checkNow})
		}
		if checkNow {
			checked = time.Now()
			if err := Lost(func() bool { return Reached(c.Load(), want) }, check); err != nil {
				return err
			}
		}
		v = c.Load()
	}
	return nil
}

// Wake publishes a change of condition: it increments word and wakes every
// sleeper, making the syscall only when some process announced a sleep.
func Wake(word *atomic.Uint32, sleepers *atomic.Uint32) {
	// Seq-cst increment then load: a waiter that incremented sleepers
	// before our load is woken; one that did so after sees the new word
	// value in its FutexWait and does not sleep.
	word.Add(1)
	if sleepers.Load() != 0 {
		WakeAll(word)
	}
}

// WakeAll wakes every process asleep on word (in WaitWord). The caller
// has published its change and seen a non-zero sleepers count after it.
func WakeAll(word *atomic.Uint32) {
	unix.FutexWake((*uint32)(addrOf(word)), 1<<30)
}

// Barrier is a counting barrier in shared memory for a fixed group of n
// processes. Its zero value is ready to use.
//
// A barrier whose member died can never complete an episode correctly
// again (the dead member's arrival may or may not have been counted), so
// the first process that finds a member gone breaks it: from then on
// every Wait, in every process, returns the breaker's error at once.
type Barrier struct {
	count    atomic.Uint32 // arrivals in the current episode
	gen      atomic.Uint32 // episode number; the futex word
	sleepers atomic.Uint32 // processes asleep on gen
	broken   atomic.Uint32 // 1 + the member found gone, once broken
	_        [48]byte      // own cache line
}

// ErrBroken is wrapped by Wait on a broken barrier.
var ErrBroken = errors.New("barrier broken: a member is gone")

// Break marks the barrier broken by the loss of member and wakes every
// waiter.
func (b *Barrier) Break(member int) {
	// Pairs with the waiters' load of broken in their condition.
	b.broken.CompareAndSwap(0, uint32(member)+1)
	unix.FutexWake((*uint32)(addrOf(&b.gen)), 1<<30)
}

// Broken returns the member whose loss broke the barrier, if it is broken.
func (b *Barrier) Broken() (member int, broken bool) {
	v := b.broken.Load()
	return int(v) - 1, v != 0
}

// Wait blocks until n processes have called Wait in this episode. check is
// called while asleep (see WaitWord).
//
// check returns the member found gone (or -1) with its error; Wait then
// breaks the barrier.
func (b *Barrier) Wait(n int, check func() (int, error)) error {
	if n <= 1 {
		return nil
	}
	if m, ok := b.Broken(); ok {
		return fmt.Errorf("member %d: %w", m, ErrBroken)
	}
	// Read the episode before arriving: the last arrival increments gen
	// only after every count.Add of this episode.
	g := b.gen.Load()
	if b.count.Add(1) == uint32(n) {
		// Last arrival: reset for the next episode, then release.
		// Nobody can arrive for the next episode before gen moves.
		b.count.Store(0)
		Wake(&b.gen, &b.sleepers)
		return nil
	}
	lost := -1
	err := WaitWord(&b.gen, &b.sleepers, func() bool { return b.gen.Load() != g || b.broken.Load() != 0 }, func() error {
		m, err := check()
		lost = m
		return err
	})
	if err != nil {
		// Break only now: WaitWord re-tested the episode after the failed
		// check (Liveness), so the episode did not complete.
		b.Break(max(lost, 0))
		return err
	}
	if b.gen.Load() == g {
		m, _ := b.Broken()
		return fmt.Errorf("member %d: %w", m, ErrBroken)
	}
	return nil
}
