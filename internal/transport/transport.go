// Package transport is the seam between the runtime and the ways a
// one-sided operation reaches its target PE.
//
// Every PE of a node maps the node's segment, so a put to it is a CPU
// copy and an atomic a sync/atomic operation on its word: that path
// (Local) is the runtime's own code, inlined into Put, Get and the
// atomics, and never goes through an interface. A PE on another node is
// reached through a Remote transport (UCX in the ucx build), which the
// runtime resolves once per operation from the target's Path and calls
// through this interface. A job whose PEs are all on one node has no
// Far PE, and its fast paths test one flag to know it.
//
// # What a Remote must do
//
//   - Put copies src into offset off of the target's symmetric heap. It
//     returns when src may be reused (local completion); the data are
//     visible at the target after the next Quiet. nbi: src must stay
//     unchanged until the next Quiet instead.
//   - Get copies from offset off of the source's symmetric heap into dst
//     and returns when dst holds the data.
//   - Atomic performs op on the size-byte (4 or 8) word at offset off of
//     the target's symmetric heap, atomically with respect to every other
//     atomic on that word from any PE, and returns the previous value for
//     the fetching ops. For CompareSwap, v is the new value and cmp the
//     expected one. The non-fetching ops (AMOAdd, AMOAnd, AMOOr, AMOXor)
//     may return before the operation is performed, and 0; it is
//     complete at the target at the next Quiet.
//   - Fence orders this PE's earlier puts and atomics to each target
//     before its later ones to the same target; Quiet completes all of
//     them at their targets.
//   - Progress makes progress on operations that need this PE's help
//     (over a network without remote memory access, a peer's put into
//     this PE completes only while this PE drives progress). Every wait
//     of the runtime calls it while it polls.
//
// Offsets are core.HeapOff: the same offset names the same symmetric
// object in every PE, on every node.
package transport

import "github.com/symheap/symheap/internal/core"

// Path is how this PE reaches another.
type Path uint8

// The paths.
const (
	Local Path = iota // load and store in the node's shared segment
	Far               // through the Remote transport
)

// AMO names an atomic memory operation.
type AMO uint8

// The atomic operations.
const (
	AMOFetch AMO = iota + 1
	AMOSet
	AMOSwap
	AMOCompareSwap
	AMOFetchAdd
	AMOFetchAnd
	AMOFetchOr
	AMOFetchXor
	// The non-fetching forms: no result, complete at the next Quiet.
	AMOAdd
	AMOAnd
	AMOOr
	AMOXor
)

// Remote carries one-sided operations to PEs whose Path is Far.
type Remote interface {
	Put(target int, off core.HeapOff, src []byte, nbi bool) error
	Get(dst []byte, source int, off core.HeapOff) error
	Atomic(op AMO, target int, off core.HeapOff, size int, v, cmp uint64) (uint64, error)
	Fence() error
	Quiet() error
	Progress()
}
