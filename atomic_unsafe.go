package symheap

import (
	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/transport"
)

// The atomics' API. Each fast path turns the symmetric address p into PE
// target's word in one step the compiler inlines (nearAMO, core.At), so
// the casts live here, with the calls they serve: a generic helper that
// did it for them would not be inlined (its cost is 113 of the
// inliner's budget of 80), and every atomic would pay a call.

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
