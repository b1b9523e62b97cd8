package msg

import (
	"sync/atomic"

	"github.com/symheap/symheap/internal/shmsync"
	"github.com/symheap/symheap/internal/unix"
)

// msgLock is Layer's lock: a lock among the goroutines of one PE that
// takes no locked instruction while one P (the Go scheduler's processor)
// does all the messaging.
//
// Why not sync.Mutex. A locked instruction (CAS, atomic add) between the
// arrival of a message and the publishing of the reply adds a large share
// to a small Send/Recv half round trip (docs/bench/design-measurements.md);
// sync.Mutex takes two per critical section.
//
// # Parking
//
// The lock is taken with a CAS when free and released with a plain store,
// but once released by a goroutine with nobody waiting it is parked on
// that goroutine's P instead: from then on a goroutine running on that P
// enters with plain stores (claim) and leaves with one (Unlock), and the
// lock stays parked. A goroutine on any other P steals it, with a CAS and
// an asymmetric fence (membarrier), and the lock then goes back to
// CAS-and-store for a while (noPark), so that goroutines that take turns
// on different Ps do not pay a system call per critical section.
//
// # States of v (low 2 bits; the rest counts parkings)
//
//	lockFree     0  nobody holds it
//	lockHeld     1  held by a goroutine that took it with a CAS (or stole it)
//	lockParked   2  parked on P parkedP-1; held iff claimed == 1
//	lockStealing 3  a goroutine is taking a parked lock (it waits for claimed == 0)
//
// The count makes every parking a new value of v, so that a claimer that
// read v before a steal and a new parking cannot mistake the new parking
// for the one it checked (C2 compares the whole word).
//
// # Claim and steal (an asymmetric Dekker)
//
//	claimer (pinned to P parkedP-1)      stealer (any goroutine)
//	C0 v0 := v (parked); if claimed      S1 CAS v: v0 (parked) → lockStealing
//	   != 0: fail                        S2 membarrier(GLOBAL_EXPEDITED)
//	C1 claimed = 1 (plain store)         S3 wait until claimed == 0
//	C2 if v.Load() != v0:                S4 v = lockHeld: it owns the lock
//	     claimed = 0; fail
//	   ... critical section ...
//	C3 Unlock: claimed = 0
//
// A claimer is pinned to its P (runtime.procPin: not preempted) from C0
// to C2, and only goroutines on that P claim, so C0..C1 is atomic among
// claimers: at most one holds the lock by claim. A stealer's S1 succeeds
// only while v is lockParked; S2 makes the claimer's CPU execute a full
// barrier at some point Q. If the claimer's C1 precedes Q, S3 sees
// claimed == 1 until the claimer leaves (C3) or fails (C2), and the
// stealer waits; if C1 follows Q, C2 (after it) sees lockStealing and the
// claimer fails. Either way one of them holds the lock. A claimer that
// fails, or finds claimed set (a claimer preempted inside its critical
// section), takes the slow path like any other goroutine.
//
// Holders never sleep or block. A goroutine that finds the lock held
// announces itself in wanting, spins briefly, then yields, then naps; a
// holder that polls lets go whenever wanting is non-zero.
type msgLock struct {
	v       atomic.Uint32 // lockFree, lockHeld, lockParked, lockStealing
	claimed atomic.Uint32 // a claimer holds the parked lock (C1..C3)
	parkedP atomic.Uint32 // 1 + the P the lock is parked on
	wanting atomic.Int32  // goroutines in lockSlow
	canPark bool          // membarrier is available and no race detector; set at init
	noPark  int           // lock releases to go without parking (after a steal); guarded by the lock
	steals  uint64        // steals made (tests read it); guarded by the lock
}

const (
	lockFree     = 0
	lockHeld     = 1
	lockParked   = 2
	lockStealing = 3
	lockState    = 3 // the state bits of v
	lockGen      = 4 // one parking
)

// noParkAfterSteal is how many releases follow a steal without parking.
const noParkAfterSteal = 1 << 12

// Lock acquires the lock.
func (l *msgLock) Lock() {
	switch v := l.v.Load(); v & lockState { // in-process: a hint; claim and the CAS check it
	case lockParked:
		if l.claim(v) {
			return
		}
	case lockFree:
		if l.v.CompareAndSwap(v, v|lockHeld) { // in-process, acquire: pairs with Unlock's store
			return
		}
	}
	l.lockSlow()
}

// claim enters the lock parked as v0 with plain stores if this goroutine
// runs on the P it is parked on (C0..C2 above).
func (l *msgLock) claim(v0 uint32) bool {
	p := procPin()
	ok := uint32(p)+1 == l.parkedP.Load() && l.claimed.Load() == 0 // C0; in-process: parkedP is stored before v; claimed is set by claimers of this P only
	if ok {
		shmsync.StoreRelease32(&l.claimed, 1) // C1; in-process: ordered before C2, for the stealer, by its membarrier
		if l.v.Load() != v0 {                 // C2; in-process: pairs with the stealer's CAS (S1)
			shmsync.StoreRelease32(&l.claimed, 0)
			ok = false
		}
	}
	procUnpin()
	return ok
}

func (l *msgLock) lockSlow() {
	l.wanting.Add(1) // in-process: read by contended and Unlock
	defer l.wanting.Add(-1)
	for p := shmsync.PaceLocal(); ; p.Step() {
		switch v := l.v.Load(); v & lockState { // in-process
		case lockFree:
			if l.v.CompareAndSwap(v, v|lockHeld) { // in-process, acquire: pairs with Unlock's store
				return
			}
		case lockParked:
			if l.claim(v) || l.steal(v) {
				return
			}
		}
	}
}

// steal takes the lock parked as v0 (S1..S4 above) and reports whether
// this goroutine now holds it.
func (l *msgLock) steal(v0 uint32) bool {
	v := v0&^lockState | lockStealing
	if !l.v.CompareAndSwap(v0, v) { // S1; in-process: pairs with the claimer's C2
		return false
	}
	if unix.MembarrierGlobal() != nil { // S2
		panic("symheap: membarrier failed after it was registered") // canPark requires it
	}
	for p := shmsync.PaceLocal(); l.claimed.Load() != 0; { // S3; in-process: the claimer's C3, or its C2 failing
		p.Step()
	}
	shmsync.StoreRelease32(&l.v, v&^lockState|lockHeld) // S4; in-process: only this goroutine writes v now
	l.noPark = noParkAfterSteal
	l.steals++
	return true
}

// Unlock releases the lock: a claimer's hold ends, and a CAS holder's
// release parks the lock on this P when parking is allowed and nobody
// waits.
func (l *msgLock) Unlock() {
	v := l.v.Load()              // in-process: we hold the lock; only a stealer may change v meanwhile
	if v&lockState != lockHeld { // lockParked or lockStealing: we hold it by claim
		shmsync.StoreRelease32(&l.claimed, 0) // C3; in-process, release: pairs with C0 and the stealer's S3
		return
	}
	free := v &^ lockState
	if raceEnabled {
		l.v.Store(free) // the race detector sees no release in StoreRelease32
		return
	}
	if !l.canPark || l.wanting.Load() != 0 || l.noPark > 0 { // in-process
		if l.noPark > 0 {
			l.noPark--
		}
		shmsync.StoreRelease32(&l.v, free) // in-process, release: pairs with Lock's CAS
		return
	}
	p := procPin()
	procUnpin()
	shmsync.StoreRelease32(&l.parkedP, uint32(p)+1)       // in-process: read by claim after its load of v
	shmsync.StoreRelease32(&l.v, free+lockGen|lockParked) // in-process, release: pairs with claim's and steal's loads
}

// contended reports whether another goroutine waits for the lock.
func (l *msgLock) contended() bool { return l.wanting.Load() != 0 } // in-process: lockSlow's announcement
