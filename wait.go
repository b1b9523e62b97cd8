package symheap

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/symheap/symheap/internal/core"

	"github.com/symheap/symheap/internal/shmsync"
	"github.com/symheap/symheap/internal/unix"
)

// Point-to-point synchronisation: WaitUntil and Test.
//
// A PE waits for another PE's Put or atomic to change one of its own
// symmetric variables. Waiting PEs must not steal the cores of the PEs they
// wait for (a job may run 8 PEs on 2 cores), so a waiter spins only
// briefly, and only while the machine has a core per PE, yields a few
// times, then sleeps on a futex that the writer wakes.
//
// # The signal word
//
// Each PE's control block holds a signal: a futex word and a sleepers
// count (control.sig). A PE's waiters, whatever variable they wait on,
// sleep on its word; every Put, IPut and modifying atomic aimed at the PE
// wakes it when its sleepers count is non-zero, as does every Quiet (for
// NBI puts and stores through Ptr) and ClearLock (on PE 0, for SetLock).
//
//	waiter (on PE t)                      writer (any PE)
//	W1 sleepers.Add(1)                    P1 store the data (a put: plain stores)
//	W2 membarrier(GLOBAL_EXPEDITED)       P2 full fence, unless registered (see below)
//	loop:                                 P3 if sleepers.Load() != 0 {
//	  W3 v := word.Load()                 P4     word.Add(1)
//	  W4 if cond(): leave                 P5     FutexWake(word, all)
//	  W5 FutexWait(word, v, 50ms)            }
//	  W6 on timeout: check liveness
//	W7 sleepers.Add(-1)
//
// A put does not fence (P2) when its process has registered for global
// expedited membarrier (rma.go, membarrierReady): the waiter's W2 makes
// every CPU that runs a thread of a registered process execute a full
// barrier, which splits each such writer's program at some point Q. An
// atomic writer needs neither: its read-modify-write is a full fence.
//
// # Proof that no wake-up is lost
//
// W1, W3, P4 and the sleepers load P3 are sequentially consistent
// atomics; the data load in W4 is an atomic load after W3. Suppose the
// writer's change makes cond() true, and look at the writer's P3.
//
//   - P3 reads zero. Then P3 precedes W1 in the order of sleepers'
//     modifications. With a fence P2, P1 < P2 < P3 < W1 < W4, so W4 sees
//     the data. Without one (registered writer), P3 cannot come after the
//     writer's barrier point Q, because everything the waiter did before
//     W2 (W1 included) is visible after Q; so P3, and P1 before it in
//     program order, come before Q, and everything before Q is visible to
//     the waiter once W2 returns: W4 sees the data.
//   - P3 reads non-zero, so the writer runs P4 and P5, and P1 precedes P4
//     (P4 is a locked instruction). If W3 reads the word after P4, W4
//     (after W3) sees P1: the waiter leaves. If W3 reads it before P4, the
//     word has changed since v was read: FutexWait either sees word != v
//     and returns at once (the kernel compares and enqueues atomically) or
//     was enqueued before P4 and P5 wakes it. Either way the loop runs
//     again and W4 sees the data.
//
// A wake-up may also be spurious (another variable changed, another
// writer, a signal): the loop re-checks cond() every time. Even a store
// that takes no wake-up step (an NBI put never quieted, a store through
// Ptr) is seen within one sleep slice. If membarrier fails in the waiter
// (it cannot, where writers registered: the same kernel), the waiter
// sleeps in 1 ms slices instead, so a fence-free put is seen within 1 ms.
//
// Quiet takes the wake-up step for every PE at once; it first loads a
// job-wide count of sleepers (control.sleeping, in PE 0's block), which
// every waiter increments at W1 before its own PE's count, and looks at
// the PEs' counts only if it is non-zero. The proof above holds with the
// job's count in place of the PE's: a waiter that incremented it is seen
// by a load after the barrier point, and a load before the point comes
// after stores that W2 made visible.
//
// The writer's uncontended path is P1 and P3: no syscall, no locked
// instruction, and the only shared line it reads besides the data is the
// target's sleepers line, which stays in every cache in the shared state
// while nobody sleeps.
//
// # Liveness
//
// Every time a sleep slice runs out the waiter runs its liveness check
// (every PE of the job still holds its liveness token, for SetLock the
// holder first), so a waiter whose writer died gets ErrPeerLost within a
// slice instead of hanging.

// Cmp is a comparison for WaitUntil and Test.
type Cmp int

// The comparisons of OpenSHMEM's SHMEM_CMP_*: the waited-for condition is
// "*p cmp v".
const (
	CmpEQ Cmp = iota
	CmpNE
	CmpGT
	CmpGE
	CmpLT
	CmpLE
)

var cmpNames = [...]string{CmpEQ: "==", CmpNE: "!=", CmpGT: ">", CmpGE: ">=", CmpLT: "<", CmpLE: "<="}

// String returns the comparison as a Go operator.
func (c Cmp) String() string {
	if c < 0 || int(c) >= len(cmpNames) {
		return fmt.Sprintf("Cmp(%d)", int(c))
	}
	return cmpNames[c]
}

// holds reports whether x cmp v.
func holds[T Integer](x T, cmp Cmp, v T) bool {
	switch cmp {
	case CmpEQ:
		return x == v
	case CmpNE:
		return x != v
	case CmpGT:
		return x > v
	case CmpGE:
		return x >= v
	case CmpLT:
		return x < v
	case CmpLE:
		return x <= v
	}
	return false
}

// waitVar validates the variable of WaitUntil and Test: in this PE's own
// symmetric heap, aligned, with a known comparison.
func waitVar[T Integer](pe *PE, p *T, cmp Cmp, op string) (*T, error) {
	if err := pe.check(); err != nil {
		return nil, err
	}
	if cmp < CmpEQ || cmp > CmpLE {
		return nil, fmt.Errorf("symheap: %s with comparison %v: %w (use CmpEQ, CmpNE, CmpGT, CmpGE, CmpLT or CmpLE)", op, cmp, ErrBadArg)
	}
	return localWord(pe, p, op)
}

// WaitUntil blocks until this PE's symmetric variable *p satisfies
// "*p cmp v", as other PEs (or this one) change it with Put or the
// atomics. If a PE of the job dies meanwhile it returns ErrPeerLost.
func WaitUntil[T Integer](pe *PE, p *T, cmp Cmp, v T) error {
	return waitUntil(pe, p, cmp, v, nil)
}

// waitUntil is WaitUntil; stop, if not nil, can end the wait
// (WaitUntilCtx): its error is asked first in the liveness check.
func waitUntil[T Integer](pe *PE, p *T, cmp Cmp, v T, stop func() error) error {
	w, err := waitVar(pe, p, cmp, "WaitUntil")
	if err != nil {
		return err
	}
	pe.rma.payFence()
	if holds(core.Load(w), cmp, v) { // seq-cst load; pairs with the writer's store
		return nil
	}
	cond := func() bool { return holds(core.Load(w), cmp, v) } // seq-cst load, after W1 and W2
	if pe.rma.far {
		// Writers on other nodes reach w only while this PE drives the
		// Remote (transport.go).
		local := cond
		cond = func() bool { pe.rma.farProgress(); return local() }
	}
	check := pe.peerLost
	if stop != nil {
		if err := stop(); err != nil {
			return fmt.Errorf("symheap: PE %d waiting until its variable at %p %v %v: %w", pe.rank, p, cmp, v, err)
		}
		check = func() error {
			if err := stop(); err != nil {
				return err
			}
			return pe.peerLost()
		}
	}
	err = pe.rma.waitSignal(pe.rank, cond, check)
	if err != nil {
		return fmt.Errorf("symheap: PE %d waiting until its variable at %p %v %v: %w", pe.rank, p, cmp, v, err)
	}
	return nil
}

// Test reports whether this PE's symmetric variable *p satisfies
// "*p cmp v" now.
func Test[T Integer](pe *PE, p *T, cmp Cmp, v T) (bool, error) {
	w, err := waitVar(pe, p, cmp, "Test")
	if err != nil {
		return false, err
	}
	pe.rma.payFence()
	pe.rma.farProgress()
	return holds(core.Load(w), cmp, v), nil // seq-cst load; pairs with the writer's store
}

// waitSignal waits until cond() holds, sleeping on PE owner's signal (the
// waiter's side of the protocol above). check runs whenever a sleep slice
// runs out; its error ends the wait.
func (r *rmaLayer) waitSignal(owner int, cond func() bool, check func() error) error {
	if cond() {
		return nil
	}
	// Poll, then yield, under the runtime's one pacing (shmsync
	// "Pacing"), which polls only while every PE has a core.
	if p := shmsync.Pace(); p.Until(cond) {
		return nil
	}
	s := &r.ctl[owner].sig
	all := &r.ctl[0].sleeping
	// W1: seq-cst RMWs; pair with the writers' sleepers loads (P3), and
	// Quiet's load of the job's count before it.
	all.Add(1)
	s.sleepers.Add(1)
	defer func() { // W7
		s.sleepers.Add(^uint32(0))
		all.Add(^uint32(0))
	}()
	return r.sleepFenced(&s.word, cond, check) // W2..W6
}

// sleepFenced is the sleeping half of a waiter whose writers may publish
// with plain or release stores and no fence (wait.go W2..W6, msg_queue.go
// "Waking" S2..S6). The caller has announced itself in the sleepers
// counts those writers load. It executes the asymmetric fence that stands
// in for the writers' own, then sleeps on word until cond() holds; where
// the fence is not to be had it sleeps in 1 ms slices, so a store that
// takes no wake-up step is seen within one. check runs whenever a full
// SleepSlice has run out; its error ends the wait.
func (r *rmaLayer) sleepFenced(word *atomic.Uint32, cond func() bool, check func() error) error {
	slice := shmsync.SleepSlice
	if !r.membarrierReady() || unix.MembarrierGlobal() != nil {
		slice = time.Millisecond
	}
	return shmsync.SleepFenced(word, slice, cond, check)
}
