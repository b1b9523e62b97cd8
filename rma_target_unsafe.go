package symheap

import (
	"fmt"

	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/segment"
	"github.com/symheap/symheap/internal/transport"
)

// Locating the targets of one-sided access, and explaining refusals. The
// address arithmetic is core's (Space.Target, OwnOff, HeapOffset).

// symOff locates n bytes at p in the symmetric heap of some partition and
// returns their offset within that heap.
func (pe *PE) symOff(p core.Ptr, n uint64) (uint64, bool) {
	off, _, ok := pe.sp.HeapOffset(p, n)
	return uint64(off), ok
}

// localOff is symOff for memory that must lie in this PE's own heap
// (WaitUntil's variable). owner is the partition p lies in, -1 if none.
func (pe *PE) localOff(p core.Ptr, n uint64) (off uint64, owner int, ok bool) {
	o, owner, ok := pe.sp.HeapOffset(p, n)
	if !ok {
		return 0, -1, false
	}
	return uint64(o), owner, owner == pe.rank
}

// remoteWord translates the address of a T in the symmetric heap into the
// address of PE target's copy of it. op names the caller for errors.
func remoteWord[T Integer](pe *PE, p *T, target int, op string) (*T, error) {
	size := core.SizeOf[T]()
	r, ok := core.Target[T](&pe.sp, core.AddrOf(p), size, target)
	if !ok || uintptr(r)&uintptr(size-1) != 0 {
		return nil, pe.atomicError(op, core.AddrOf(p), size, target)
	}
	return core.At[T](r), nil
}

// localWord checks that p is a T in this PE's own symmetric heap, aligned.
func localWord[T Integer](pe *PE, p *T, op string) (*T, error) {
	size := core.SizeOf[T]()
	if off, ok := core.OwnOff[T](&pe.sp, core.AddrOf(p), size); ok && uint64(off)&(size-1) == 0 {
		return p, nil
	}
	off, owner, _ := pe.localOff(core.AddrOf(p), size)
	return nil, pe.localError(op, core.AddrOf(p), size, owner, off)
}

// whereIs describes where p lies, for errors about memory that
// is not a symmetric object.
func (pe *PE) whereIs(p core.Ptr) string {
	if p == nil {
		return "nil"
	}
	if _, owner, ok := pe.sp.HeapOffset(p, 1); ok {
		return fmt.Sprintf("running past the end of PE %d's symmetric heap (%s per PE)", owner, segment.FormatSize(pe.sp.Lay.HeapSize))
	}
	if _, owner, ok := pe.sp.SharedOffset(p, 1); ok {
		return fmt.Sprintf("in PE %d's local shared heap, which is not symmetric", owner)
	}
	if _, ok := pe.sp.SegOffset(p); ok {
		return "in symheap's control area"
	}
	return "outside the symmetric heap (Go memory or another mapping)"
}

// notSymmetric explains why n bytes at p are not a symmetric object.
func (pe *PE) notSymmetric(op, what string, p core.Ptr, n uint64) error {
	return fmt.Errorf("symheap: %s: %s (%d bytes at %p) is %s: %w (use memory from Malloc, Calloc, Align or Realloc)",
		op, what, n, p, pe.whereIs(p), ErrNotSymmetric)
}

// atomicError explains why an atomic on the size-byte word at p on target
// was refused: bad PE, not symmetric, or misaligned, checked in that order.
func (pe *PE) atomicError(op string, p core.Ptr, size uint64, target int) error {
	if err := pe.checkPE(target); err != nil {
		return fmt.Errorf("symheap: %s: %w", op, err)
	}
	if off, ok := pe.symOff(p, size); !ok {
		return pe.notSymmetric(op, "the variable", p, size)
	} else if off&(size-1) != 0 {
		return fmt.Errorf("symheap: %s on %p: %w (a %d-byte atomic needs a %d-byte aligned address; offset %#x in the heap)", op, p, ErrBadAlign, size, size, off)
	}
	return fmt.Errorf("symheap: %s on %p: %w", op, p, ErrBadArg)
}

// localError explains why the variable at p cannot be waited on.
func (pe *PE) localError(op string, p core.Ptr, size uint64, owner int, off uint64) error {
	switch {
	case owner < 0:
		return pe.notSymmetric(op, "the variable", p, size)
	case owner != pe.rank:
		return fmt.Errorf("symheap: %s on %p: %w (it is PE %d's copy; PE %d can wait only on its own copy of a symmetric variable, which other PEs update with Put or atomics)", op, p, ErrNotSymmetric, owner, pe.rank)
	}
	return fmt.Errorf("symheap: %s on %p: %w (a %d-byte variable needs a %d-byte aligned address; offset %#x in the heap)", op, p, ErrBadAlign, size, size, off)
}

// Reinterpret views the bytes of b as a slice of T (len(b)/sizeof(T)
// elements), without copying. It is for plain-data types in symmetric or
// shared memory, such as a byte buffer holding float64s; it does not check
// alignment (the atomics and Put do). A T that holds Go pointers is
// refused with ErrPointerType, as Malloc refuses it: shared memory holds
// no Go pointers.
func Reinterpret[T any](b []byte) ([]T, error) {
	if err := plainData[T](); err != nil {
		return nil, err
	}
	if core.SizeOf[T]() == 0 {
		return nil, nil
	}
	return core.Reinterpret[T](b), nil
}

// farAMO performs op on PE target's copy of *p through the Remote.
func farAMO[T Integer](pe *PE, op transport.AMO, p *T, v, cmp T, target int) (T, error) {
	size := core.SizeOf[T]()
	off, owner, ok := pe.sp.HeapOffset(core.AddrOf(p), size)
	if !ok || owner != pe.rank || uint64(off)&(size-1) != 0 {
		return 0, pe.atomicError(amoNames[op], core.AddrOf(p), size, target)
	}
	old, err := pe.rma.remote.Atomic(op, target, off, int(size), uint64(v), uint64(cmp))
	if err != nil {
		return 0, fmt.Errorf("symheap: %s on PE %d: %w", amoNames[op], target, err)
	}
	core.Bump(&pe.stats.Atomics)
	return T(old), nil
}
