package symheap

import (
	"fmt"

	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/transport"
)

// Reach is Ptr with the reason when there is no slice: ErrBadPE for a
// target that does not exist, ErrNotSymmetric for s outside the
// symmetric heap (a slice of ordinary Go memory, or one that runs past
// the heap's end), ErrNotSupported for a target on another node (Put and
// Get reach it), or this PE's error after Close. A nil result of Ptr,
// indexed, is "index out of range [0] with length 0"; Reach says why.
func Reach[T any](pe *PE, s []T, target int) ([]T, error) {
	if err := pe.check(); err != nil {
		return nil, err
	}
	if target < 0 || target >= pe.npes {
		return nil, fmt.Errorf("symheap: Reach: PE %d does not exist (the job has PEs 0 to %d): %w", target, pe.npes-1, ErrBadPE)
	}
	if pe.rma.route(target) == transport.Far {
		return nil, fmt.Errorf("symheap: Reach: PE %d is on node %d, this PE on node %d: a slice reaches only this node's PEs (use Put and Get): %w",
			target, pe.Node(target), pe.Node(pe.rank), ErrNotSupported)
	}
	if s == nil {
		return nil, fmt.Errorf("symheap: Reach: a nil slice: %w (pass a slice from Malloc, Calloc or Realloc)", ErrNotSymmetric)
	}
	p, n := core.SliceData(s)
	if _, _, ok := pe.sp.HeapOffset(p, n); !ok {
		return nil, fmt.Errorf("symheap: Reach: the %d bytes at %#x are not in the symmetric heap: %w (pass a slice from Malloc, Calloc or Realloc)", n, uintptr(p), ErrNotSymmetric)
	}
	return Ptr(pe, s, target), nil
}
