package symheap

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/transport"
)

// Distributed locks: SetLock, ClearLock and TestLock on a symmetric int64.
//
// As in OpenSHMEM implementations, a lock's state lives on one PE: PE 0's
// copy of the symmetric int64 (the other copies are never touched). It is
// a ticket lock, so PEs acquire it in the order they asked for it and
// none starves however contended it is. The 64-bit word packs:
//
//	bits 48-63  next     the next ticket to hand out (mod 2^16)
//	bits 32-47  holder   1 + the rank of the PE holding the lock; 0: none
//	bits 16-31  zero
//	bits  0-15  serving  the ticket whose owner may hold the lock
//
// The zero word is the unlocked lock with no history, as OpenSHMEM
// requires, and a lock that nobody holds or waits for always returns to
// zero. 16 bits suffice for tickets: at most one per PE is outstanding, and
// a job has far fewer than 2^16 PEs (segment.MaxPEs).
//
//   - SetLock takes a ticket with one fetch-add of 1<<48 (a carry out of
//     bit 63 is discarded: next wraps by itself), waits until serving
//     equals it, then records itself as holder with an add of its tag into
//     the holder field, which is zero then.
//   - TestLock takes the lock only if it is free (next == serving): one
//     compare-and-swap that takes a ticket and records the holder at once.
//   - ClearLock completes this PE's puts (Quiet), then with a
//     compare-and-swap clears the holder and advances serving; when no
//     ticket is outstanding any more it stores zero instead. Then it wakes
//     PE 0's sleepers.
//
// Waiting PEs sleep on PE 0's signal word (wait.go), which every ClearLock
// wakes. On every sleep slice a waiter checks that the holder, and every
// other PE, is alive: a PE that dies holding the lock, or dies with a
// ticket before its turn, turns every waiter's SetLock into ErrPeerLost
// instead of a hang.
//
// SetLock by the PE that already holds the lock, and ClearLock by one that
// does not, return ErrBadArg (OpenSHMEM leaves both undefined; here the
// first would deadlock). A lock belongs to a PE, not to a goroutine.

const (
	lockNextShift   = 48
	lockHolderShift = 32
	lockField       = 0xffff
)

// released returns the word of lock l (now old) once this PE, its
// holder, releases it: the next ticket served, or the zero lock when no
// ticket is outstanding. A PE that does not hold it gets ErrBadArg.
func (pe *PE) released(l *int64, old uint64) (uint64, error) {
	if h := lockHolder(old); h != pe.rank {
		who := "no PE holds it"
		if h >= 0 {
			who = fmt.Sprintf("PE %d holds it", h)
		}
		return 0, fmt.Errorf("symheap: ClearLock at %p by PE %d: %s: %w (only the holder may clear a lock)", l, pe.rank, who, ErrBadArg)
	}
	serving := (lockServing(old) + 1) & lockField
	if serving == lockNext(old) {
		return 0, nil
	}
	return lockNext(old)<<lockNextShift | serving, nil
}

func lockNext(w uint64) uint64    { return w >> lockNextShift }
func lockHolder(w uint64) int     { return int(w>>lockHolderShift&lockField) - 1 }
func lockServing(w uint64) uint64 { return w & lockField }

// farLock reports whether the lock's state, on PE 0, is reached through a
// multi-node transport (lock_far.go). A Remote that is not one (the
// loopback of the seam's test) keeps lockWord's refusal.
func farLock(pe *PE) bool {
	return pe != nil && pe.far != nil && !pe.closed.Load() && pe.rma.route(0) == transport.Far
}

// lockWord validates l and returns PE 0's copy of it, where the state lives.
func (pe *PE) lockWord(l *int64, op string) (*int64, error) {
	if err := pe.check(); err != nil {
		return nil, err
	}
	if pe.rma.route(0) == transport.Far {
		return nil, fmt.Errorf("symheap: %s: the lock's state lives on PE 0, on another node: %w (locks across nodes need the multi-node transport's atomics)", op, errs.ErrNotSupported)
	}
	return remoteWord(pe, l, 0, op)
}

// SetLock acquires the distributed lock l (a symmetric int64, zero when
// first used), waiting for the PEs that asked for it earlier.
func (pe *PE) SetLock(l *int64) error {
	if farLock(pe) {
		return farSetLock(pe, l)
	}
	return setLock(pe, l, nil)
}

// setLock is SetLock on this node's PE 0. stop, if not nil, can end the
// wait for the lock (SetLockCtx): the ticket taken is then abandoned to
// a goroutine that passes it on when its turn comes (abandonTicket), and
// setLock returns stop's error, the lock not held.
func setLock(pe *PE, l *int64, stop func() error) error {
	w, err := pe.lockWord(l, "SetLock")
	if err != nil {
		return err
	}
	tag := uint64(pe.rank + 1)
	// Seq-cst load; only this PE writes its own tag into holder.
	if cur := uint64(core.Load(w)); lockHolder(cur) == pe.rank {
		return fmt.Errorf("symheap: SetLock at %p: PE %d already holds the lock: %w (call ClearLock first)", l, pe.rank, ErrBadArg)
	}
	if stop != nil {
		if err := stop(); err != nil {
			return fmt.Errorf("symheap: SetLock at %p on PE %d: %w (not begun: the lock is as it was)", l, pe.rank, err)
		}
	}
	// Take a ticket. Seq-cst RMW on PE 0's word; pairs with other
	// SetLocks, TestLocks and ClearLocks on the same word.
	old := uint64(core.FetchAdd(w, int64(1)<<lockNextShift))
	ticket := lockNext(old)
	if lockServing(old) != ticket {
		// Seq-cst load; pairs with the ClearLock that serves us.
		served := func() bool { return lockServing(uint64(core.Load(w))) == ticket }
		live := func() error { return pe.lockLiveness(w) }
		if stop == nil {
			if err := pe.rma.waitSignal(0, served, live); err != nil {
				return fmt.Errorf("symheap: SetLock at %p on PE %d (ticket %d): %w", l, pe.rank, ticket, err)
			}
		} else if err, cause := waitStop(&pe.rma, served, live, stop); cause != nil {
			pe.ext.tickets.abandon(&pe.rma, w, ticket, live)
			return fmt.Errorf("symheap: SetLock at %p on PE %d (ticket %d): %w (not acquired; the lock stays usable by the other PEs)", l, pe.rank, ticket, cause)
		} else if err != nil {
			return fmt.Errorf("symheap: SetLock at %p on PE %d (ticket %d): %w", l, pe.rank, ticket, err)
		}
	}
	// Our turn: holder is zero (ClearLock cleared it); only we write it
	// now. Seq-cst RMW; pairs with waiters' liveness checks.
	core.FetchAdd(w, int64(tag<<lockHolderShift))
	return nil
}

// Abandoned tickets. A ticket lock cannot take a ticket back: the PEs
// that took later ones wait for it to be served, and serving only moves
// on when its holder clears the lock. So a SetLockCtx whose context ends
// first hands its ticket to a goroutine, which waits for the ticket's
// turn as SetLock would and then passes the lock on at once, without
// recording itself as holder (passOn): to the other PEs the lock was held
// for an instant; to this PE it never was (a later SetLock takes a new
// ticket behind it, ClearLock refuses). Close stops these goroutines
// after its barrier, when no PE waits for a lock any more (tickets).

// tickets is a PE's abandoned tickets: the goroutines that pass them on.
type tickets struct {
	mu      sync.Mutex // guards ended and wg's Add against end's Wait
	ended   bool       // end has run: no goroutine starts any more
	wg      sync.WaitGroup
	stopped atomic.Bool // set by end: the goroutines leave
}

// abandon starts the goroutine that passes ticket of lock word w on when
// its turn comes (Abandoned tickets); live is SetLock's liveness check.
func (tk *tickets) abandon(r *rmaLayer, w *int64, ticket uint64, live func() error) {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	if tk.ended {
		return // a SetLockCtx racing with Close: the job is closing, nobody waits
	}
	tk.wg.Add(1)
	go func() {
		defer tk.wg.Done()
		// Seq-cst loads; the ticket's pair with the ClearLock that serves
		// it, stop with Close's store.
		served := func() bool { return lockServing(uint64(core.Load(w))) == ticket }
		err := r.waitSignal(0, func() bool { return tk.stopped.Load() || served() }, live)
		if err != nil || !served() {
			return // a PE is gone (its waiters see it too), or the job is closing
		}
		passOn(r, w)
	}()
}

// passOn serves the next ticket of lock word w, whose turn is an
// abandoned ticket of this PE: ClearLock's step, with no holder to clear.
func passOn(r *rmaLayer, w *int64) {
	for {
		old := uint64(core.Load(w)) // seq-cst load
		serving := (lockServing(old) + 1) & lockField
		nw := uint64(0)
		if serving != lockNext(old) {
			nw = lockNext(old)<<lockNextShift | serving
		}
		// Seq-cst CAS; a failure means a SetLock took a ticket meanwhile.
		if uint64(core.CAS(w, int64(old), int64(nw))) == old {
			break
		}
	}
	core.Bump(&r.stats.Atomics)
	r.wake(0) // the next ticket's owner sleeps on PE 0's signal
}

// end stops the goroutines of abandoned tickets and waits for them
// (Close, once no PE waits for a lock).
func (tk *tickets) end(r *rmaLayer) {
	tk.mu.Lock()
	tk.ended = true
	tk.mu.Unlock()
	tk.stopped.Store(true) // seq-cst; pairs with the goroutines' loads in their condition
	r.ctl[0].sig.wake()
	tk.wg.Wait()
}

// lockLiveness is SetLock's check between sleep slices. The holder is
// named whenever it is the PE found gone, also when it dies between the
// two checks.
func (pe *PE) lockLiveness(w *int64) error {
	// Seq-cst load; pairs with the holder's tag add.
	h := lockHolder(uint64(core.Load(w)))
	holder := h >= 0 && h < pe.npes
	if holder && !pe.seg.Alive(h) {
		return pe.holderLost(h)
	}
	lost, err := pe.seg.LostPeer(nil)
	if err != nil && holder && lost == h && !pe.seg.Alive(h) { // not merely stalled
		return pe.holderLost(h)
	}
	return err
}

func (pe *PE) holderLost(h int) error {
	return fmt.Errorf("the lock's holder, PE %d (pid %d), is gone: %w", h, pe.seg.Pid(h), ErrPeerLost)
}

// TestLock acquires the lock l if no PE holds it or waits for it, and
// reports whether it did; it never waits.
func (pe *PE) TestLock(l *int64) (acquired bool, err error) {
	if farLock(pe) {
		return farTestLock(pe, l)
	}
	w, err := pe.lockWord(l, "TestLock")
	if err != nil {
		return false, err
	}
	tag := uint64(pe.rank + 1)
	for {
		old := uint64(core.Load(w)) // seq-cst load
		if lockNext(old) != lockServing(old) {
			return false, nil // held, or tickets outstanding
		}
		// Free: take ticket next (== serving) and record us as holder.
		// Seq-cst CAS; pairs with SetLock's fetch-add and ClearLock.
		nw := old + 1<<lockNextShift | tag<<lockHolderShift
		if uint64(core.CAS(w, int64(old), int64(nw))) == old {
			return true, nil
		}
	}
}

// ClearLock releases the lock l, which this PE holds. It first completes
// this PE's puts, so the next holder sees every store made under the lock.
func (pe *PE) ClearLock(l *int64) error {
	if farLock(pe) {
		return farClearLock(pe, l)
	}
	w, err := pe.lockWord(l, "ClearLock")
	if err != nil {
		return err
	}
	pe.rma.quietAll()
	for {
		old := uint64(core.Load(w)) // seq-cst load
		nw, err := pe.released(l, old)
		if err != nil {
			return err
		}
		// Seq-cst CAS; a failure means a SetLock took a ticket meanwhile.
		if uint64(core.CAS(w, int64(old), int64(nw))) == old {
			break
		}
	}
	pe.rma.amoDone(0)
	return nil
}
