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
// open. It makes no
// call, so the compiler inlines it into each atomic, which calls amo only
// when it fails: a call to core.Target, and later to amo, with their
// spills, were a fifth of a fetch-add. A plain function: a generic one
// costs the inliner more (116 against 74 of its budget of 80).
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
// (BenchmarkLocalPath/AtomicFetchAdd: 8.5 ns with them after, 8.0 before).
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

// AtomicFetch returns PE target's value of the symmetric variable *p.
func AtomicFetch[T Integer](pe *PE, p *T, target int) (T, error) {
	r, ok := pe.nearAMO(core.AddrOf(p), core.SizeOf[T](), target)
	w := core.At[T](r)
	if !ok || pe.closed.Load() {
		var res T
		var err error
		if w, res, err = amoSlow(pe, p, target, opFetch, transport.AMOFetch, 0, 0); w == nil {
			return res, err
		}
	}
	pe.rma.payFence()
	v := core.Load(w)
	core.Bump(&pe.stats.Atomics)
	return v, nil
}

// AtomicSet stores v into PE target's copy of *p.
func AtomicSet[T Integer](pe *PE, p *T, v T, target int) error {
	r, ok := pe.nearAMO(core.AddrOf(p), core.SizeOf[T](), target)
	w := core.At[T](r)
	if !ok || pe.closed.Load() {
		var err error
		if w, _, err = amoSlow(pe, p, target, opSet, transport.AMOSet, v, 0); w == nil {
			return err
		}
	}
	s := pe.rma.amoStart(target)
	core.Store(w, v)
	s.wakeStep()
	return nil
}

// AtomicSwap stores v into PE target's copy of *p and returns the value it
// replaced.
func AtomicSwap[T Integer](pe *PE, p *T, v T, target int) (T, error) {
	r, ok := pe.nearAMO(core.AddrOf(p), core.SizeOf[T](), target)
	w := core.At[T](r)
	if !ok || pe.closed.Load() {
		var res T
		var err error
		if w, res, err = amoSlow(pe, p, target, opSwap, transport.AMOSwap, v, 0); w == nil {
			return res, err
		}
	}
	s := pe.rma.amoStart(target)
	old := core.Swap(w, v)
	s.wakeStep()
	return old, nil
}

// AtomicCompareSwap stores new into PE target's copy of *p if it holds old,
// and returns the value it held (equal to old when the swap happened).
func AtomicCompareSwap[T Integer](pe *PE, p *T, old, new T, target int) (T, error) {
	r, ok := pe.nearAMO(core.AddrOf(p), core.SizeOf[T](), target)
	w := core.At[T](r)
	if !ok || pe.closed.Load() {
		var res T
		var err error
		if w, res, err = amoSlow(pe, p, target, opCSwap, transport.AMOCompareSwap, new, old); w == nil {
			return res, err
		}
	}
	prev := core.CAS(w, old, new)
	if prev == old {
		pe.rma.amoDone(target)
	}
	return prev, nil
}

// AtomicFetchAdd adds v to PE target's copy of *p and returns the previous
// value. Addition wraps, as Go's does.
func AtomicFetchAdd[T Integer](pe *PE, p *T, v T, target int) (T, error) {
	r, ok := pe.nearAMO(core.AddrOf(p), core.SizeOf[T](), target)
	w := core.At[T](r)
	if !ok || pe.closed.Load() {
		var res T
		var err error
		if w, res, err = amoSlow(pe, p, target, opFetchAdd, transport.AMOFetchAdd, v, 0); w == nil {
			return res, err
		}
	}
	s := pe.rma.amoStart(target)
	old := core.FetchAdd(w, v)
	s.wakeStep()
	return old, nil
}

// AtomicAdd adds v to PE target's copy of *p.
func AtomicAdd[T Integer](pe *PE, p *T, v T, target int) error {
	r, ok := pe.nearAMO(core.AddrOf(p), core.SizeOf[T](), target)
	w := core.At[T](r)
	if !ok || pe.closed.Load() {
		var err error
		if w, _, err = amoSlow(pe, p, target, opAdd, transport.AMOAdd, v, 0); w == nil {
			return err
		}
	}
	s := pe.rma.amoStart(target)
	core.FetchAdd(w, v)
	s.wakeStep()
	return nil
}

// AtomicInc adds 1 to PE target's copy of *p.
func AtomicInc[T Integer](pe *PE, p *T, target int) error {
	return AtomicAdd(pe, p, 1, target)
}

// AtomicFetchInc adds 1 to PE target's copy of *p and returns the
// previous value.
func AtomicFetchInc[T Integer](pe *PE, p *T, target int) (T, error) {
	return AtomicFetchAdd(pe, p, 1, target)
}

// AtomicFetchAnd stores the bitwise AND of PE target's copy of *p and v,
// and returns the previous value.
func AtomicFetchAnd[T Integer](pe *PE, p *T, v T, target int) (T, error) {
	r, ok := pe.nearAMO(core.AddrOf(p), core.SizeOf[T](), target)
	w := core.At[T](r)
	if !ok || pe.closed.Load() {
		var res T
		var err error
		if w, res, err = amoSlow(pe, p, target, opFetchAnd, transport.AMOFetchAnd, v, 0); w == nil {
			return res, err
		}
	}
	s := pe.rma.amoStart(target)
	old := core.FetchAnd(w, v)
	s.wakeStep()
	return old, nil
}

// AtomicFetchOr stores the bitwise OR of PE target's copy of *p and v, and
// returns the previous value.
func AtomicFetchOr[T Integer](pe *PE, p *T, v T, target int) (T, error) {
	r, ok := pe.nearAMO(core.AddrOf(p), core.SizeOf[T](), target)
	w := core.At[T](r)
	if !ok || pe.closed.Load() {
		var res T
		var err error
		if w, res, err = amoSlow(pe, p, target, opFetchOr, transport.AMOFetchOr, v, 0); w == nil {
			return res, err
		}
	}
	s := pe.rma.amoStart(target)
	old := core.FetchOr(w, v)
	s.wakeStep()
	return old, nil
}

// AtomicFetchXor stores the bitwise XOR of PE target's copy of *p and v,
// and returns the previous value.
func AtomicFetchXor[T Integer](pe *PE, p *T, v T, target int) (T, error) {
	r, ok := pe.nearAMO(core.AddrOf(p), core.SizeOf[T](), target)
	w := core.At[T](r)
	if !ok || pe.closed.Load() {
		var res T
		var err error
		if w, res, err = amoSlow(pe, p, target, opFetchXor, transport.AMOFetchXor, v, 0); w == nil {
			return res, err
		}
	}
	s := pe.rma.amoStart(target)
	old := core.FetchXor(w, v)
	s.wakeStep()
	return old, nil
}

// AtomicAnd is AtomicFetchAnd without the result.
func AtomicAnd[T Integer](pe *PE, p *T, v T, target int) error {
	r, ok := pe.nearAMO(core.AddrOf(p), core.SizeOf[T](), target)
	w := core.At[T](r)
	if !ok || pe.closed.Load() {
		var err error
		if w, _, err = amoSlow(pe, p, target, opAnd, transport.AMOAnd, v, 0); w == nil {
			return err
		}
	}
	s := pe.rma.amoStart(target)
	core.FetchAnd(w, v)
	s.wakeStep()
	return nil
}

// AtomicOr is AtomicFetchOr without the result.
func AtomicOr[T Integer](pe *PE, p *T, v T, target int) error {
	r, ok := pe.nearAMO(core.AddrOf(p), core.SizeOf[T](), target)
	w := core.At[T](r)
	if !ok || pe.closed.Load() {
		var err error
		if w, _, err = amoSlow(pe, p, target, opOr, transport.AMOOr, v, 0); w == nil {
			return err
		}
	}
	s := pe.rma.amoStart(target)
	core.FetchOr(w, v)
	s.wakeStep()
	return nil
}

// AtomicXor is AtomicFetchXor without the result.
func AtomicXor[T Integer](pe *PE, p *T, v T, target int) error {
	r, ok := pe.nearAMO(core.AddrOf(p), core.SizeOf[T](), target)
	w := core.At[T](r)
	if !ok || pe.closed.Load() {
		var err error
		if w, _, err = amoSlow(pe, p, target, opXor, transport.AMOXor, v, 0); w == nil {
			return err
		}
	}
	s := pe.rma.amoStart(target)
	core.FetchXor(w, v)
	s.wakeStep()
	return nil
}
