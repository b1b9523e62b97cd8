package tcp

import (
	"fmt"

	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/transport"
)

// fetching reports whether op waits for its reply (and returns the
// previous value): every op but the four non-fetching forms. AMOSet is
// a swap whose previous value is returned too.
func fetching(op transport.AMO) bool {
	switch op {
	case transport.AMOAdd, transport.AMOAnd, transport.AMOOr, transport.AMOXor:
		return false
	}
	return true
}

// validAMO reports whether op is an atomic operation.
func validAMO(op transport.AMO) bool {
	return op >= transport.AMOFetch && op <= transport.AMOXor
}

// checkRange checks an access of n bytes at off of region r, whose
// regions have the given sizes, and returns an error wrapping
// errs.ErrBadArg that says what is wrong. It is the check of both ends:
// the origin's against the published sizes, the target's against its
// memory.
func checkRange(sizes []uint64, r transport.Region, off, n uint64) error {
	if r < 0 || int(r) >= len(sizes) {
		return fmt.Errorf("region %d: %w (the target registered %d)", r, errs.ErrBadArg, len(sizes))
	}
	size := sizes[r]
	if size == 0 {
		return fmt.Errorf("region %d is empty: %w", r, errs.ErrBadArg)
	}
	if off > size || n > size-off {
		return fmt.Errorf("%d bytes at offset %d of region %d: %w (the region has %d bytes)", n, off, r, errs.ErrBadArg, size)
	}
	return nil
}

// checkAMO checks an atomic's op, size and offset alignment, then its
// range.
func checkAMO(sizes []uint64, op transport.AMO, r transport.Region, off uint64, size int) error {
	if !validAMO(op) {
		return fmt.Errorf("atomic operation %d: %w", op, errs.ErrBadArg)
	}
	if size != 4 && size != 8 {
		return fmt.Errorf("atomic on %d bytes: %w (4 or 8)", size, errs.ErrBadArg)
	}
	if off%uint64(size) != 0 {
		return fmt.Errorf("atomic on %d bytes at offset %d: %w (not aligned)", size, off, errs.ErrBadArg)
	}
	return checkRange(sizes, r, off, uint64(size))
}

// performAMO performs op on the size-byte word at b[off] (checked by
// checkAMO against b) and returns the previous value. Every op is one
// sync/atomic operation (xor a compare-and-swap loop), so it is atomic
// with the CPU atomics of every process that maps the memory.
func performAMO(b []byte, op transport.AMO, off uint64, size int, v, cmp uint64) (uint64, error) {
	if !aligned(b, off, size) {
		return 0, fmt.Errorf("atomic on %d bytes at offset %d: %w (the word's address is not aligned)", size, off, errs.ErrBadArg)
	}
	if size == 4 {
		return uint64(perform(word32(b, off), op, uint32(v), uint32(cmp))), nil
	}
	return perform(word64(b, off), op, v, cmp), nil
}

// word is sync/atomic's Uint32 or Uint64.
type word[T uint32 | uint64] interface {
	Load() T
	Swap(T) T
	CompareAndSwap(old, new T) bool
	Add(T) T
	And(T) T
	Or(T) T
}

// perform performs op on w and returns the previous value.
func perform[T uint32 | uint64, W word[T]](w W, op transport.AMO, v, cmp T) T {
	var old T
	switch op {
	case transport.AMOFetch:
		old = w.Load()
	case transport.AMOSet, transport.AMOSwap:
		old = w.Swap(v)
	case transport.AMOCompareSwap:
		for {
			old = w.Load()
			if old != cmp || w.CompareAndSwap(cmp, v) {
				break
			}
		}
	case transport.AMOFetchAdd, transport.AMOAdd:
		old = w.Add(v) - v
	case transport.AMOFetchAnd, transport.AMOAnd:
		old = w.And(v)
	case transport.AMOFetchOr, transport.AMOOr:
		old = w.Or(v)
	case transport.AMOFetchXor, transport.AMOXor:
		for {
			old = w.Load()
			if w.CompareAndSwap(old, old^v) {
				break
			}
		}
	}
	return old
}
