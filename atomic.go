package symheap

import (
	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/transport"
)

// Atomic memory operations (AMOs) on symmetric integers.
//
// An AMO on PE target is one sync/atomic operation on target's copy of the
// variable, made by the calling PE's CPU: the memory is coherent across
// processes, so there is no need for the target's participation, and an
// AMO on the calling PE itself is the same operation on its own copy.
// Every AMO is sequentially consistent with every other AMO, wherever it
// runs. Every AMO that modifies the variable then takes the wake-up step
// of a put (rma.go): a PE asleep in WaitUntil on the variable learns of
// the change at once.
//
// The variable must be a symmetric int32, int64, uint32 or uint64 (or a
// type defined on one) aligned to its size: ErrNotSymmetric, ErrBadAlign
// and ErrBadPE otherwise. The checks and the operation allocate nothing.

// Integer is the set of types the atomics, WaitUntil and Test work on.
type Integer interface {
	~int32 | ~int64 | ~uint32 | ~uint64
}

// Operation names, for errors.
const (
	opFetch    = "AtomicFetch"
	opSet      = "AtomicSet"
	opSwap     = "AtomicSwap"
	opCSwap    = "AtomicCompareSwap"
	opFetchAdd = "AtomicFetchAdd"
	opAdd      = "AtomicAdd"
	opFetchAnd = "AtomicFetchAnd"
	opFetchOr  = "AtomicFetchOr"
	opFetchXor = "AtomicFetchXor"
	opAnd      = "AtomicAnd"
	opOr       = "AtomicOr"
	opXor      = "AtomicXor"
)

// nearAMO is the atomics' fast path, Put's (core.Near): the size bytes at
// p in this PE's own heap, target a PE of a job on one node (useRemote
// turns it off in a job on several). The caller checks that the PE is
// open. It makes no call, so the compiler inlines it into each atomic,
// which calls amo only when it fails: a call to core.Target, and later
// to amo, with their spills, were a large share of a fetch-add. A plain
// function: a generic one costs the inliner more than its budget
// (measured: docs/bench/design-measurements.md, «atomic.go, fast path»).
func (pe *PE) nearAMO(p core.Ptr, size uint64, target int) (core.Ptr, bool) {
	if pe == nil {
		return nil, false
	}
	return core.Near[byte](&pe.sp, p, size, target) // none when some PE is far (useRemote)
}

// amo is an atomic's way to its word when nearAMO has failed: it returns
// the error, errFar for a PE on another node, or the word (in another
// PE's partition, say).
func amo[T Integer](pe *PE, p *T, target int, op string) (*T, error) {
	if pe == nil || pe.closed.Load() {
		return nil, pe.check()
	}
	if pe.rma.far && uint(target) < uint(pe.npes) && pe.rma.paths[target] == transport.Far {
		return nil, errFar
	}
	return remoteWord(pe, p, target, op)
}

// amoSlow is an atomic's way when nearAMO has failed: the word to finish
// the atomic on (w not nil), or, with w nil, the atomic done on a PE of
// another node (its result in res) or refused (err). op names the atomic
// in errors, kind is its operation across nodes, with v and cmp.
func amoSlow[T Integer](pe *PE, p *T, target int, op string, kind transport.AMO, v, cmp T) (w *T, res T, err error) {
	if w, err = amo(pe, p, target, op); err == errFar {
		res, err = farAMO(pe, kind, p, v, cmp, target)
	}
	return w, res, err
}

// amoStart counts a modifying AMO on target and returns target's signal,
// whose wakeStep the AMO calls after it: the AMO itself is the full
// fence the wake-up protocol needs. The count's store and the loads of the signal's address come
// before the AMO: a locked instruction holds up the loads after it until
// it completes, so whatever follows it, the next AMO waits for too
// (measured: docs/bench/design-measurements.md, «atomic.go, fast path»).
func (r *rmaLayer) amoStart(target int) *signal {
	core.Bump(&r.stats.Atomics)
	return &r.ctl[target].sig
}

// amoDone finishes a modifying AMO on target: it counts it and wakes
// target's sleepers. The AMO itself was the full fence the wake-up
// protocol needs.
func (r *rmaLayer) amoDone(target int) {
	core.Bump(&r.stats.Atomics)
	r.wake(target)
}
