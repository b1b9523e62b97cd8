package symheap

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/symheap/symheap/internal/segment"
)

// This file holds the pointer arithmetic of one-sided access: turning a
// user's slice or pointer into an offset in the symmetric heap, that
// offset into the address of another PE's copy, and the typed atomic
// primitives on such an address. Every other file of RMA, atomics, waits
// and locks works on the results without importing unsafe.

// rmaTarget locates the n bytes at p in the symmetric heap of some
// partition and returns the address at which this PE reaches PE target's
// copy of them (as heapAddr: the writable alias for other PEs in
// protected mode). ok is false if target does not exist or the bytes are
// not wholly in a symmetric heap. The common case, p in this PE's own heap
// (a slice as Malloc returned it), is a few compares and small enough to
// inline; a slice onto another PE's copy (from Ptr) takes rmaTargetSlow.
// Addresses are compared as integers and never turned back into pointers.
func (pe *PE) rmaTarget(p unsafe.Pointer, n uint64, target int) (unsafe.Pointer, bool) {
	l := &pe.lay
	off := uint64(uintptr(p)-uintptr(unsafe.Pointer(unsafe.SliceData(pe.base)))) - l.PartOff - uint64(pe.rank)*l.PartStride // wraps when below
	if off >= l.HeapSize || n > l.HeapSize-off || uint(target) >= uint(pe.npes) {
		return pe.rmaTargetSlow(p, n, target)
	}
	if target == pe.rank {
		return p, true
	}
	return unsafe.Add(unsafe.Pointer(unsafe.SliceData(pe.wbase)), l.PartOff+uint64(target)*l.PartStride+off), true
}

// ownOff returns the offset of the n bytes at p in this PE's own
// symmetric heap, and whether they lie wholly in it: the test of the fast
// paths of Put and Get, small enough to inline.
func (pe *PE) ownOff(p unsafe.Pointer, n uint64) (uint64, bool) {
	off := uint64(uintptr(p)-uintptr(unsafe.Pointer(unsafe.SliceData(pe.base)))) - pe.lay.PartOff - uint64(pe.rank)*pe.lay.PartStride // wraps when below
	return off, off < pe.lay.HeapSize && n <= pe.lay.HeapSize-off
}

// peerAddr returns the address of offset off of PE target's heap, as
// heapAddr: in the writable alias for other PEs in protected mode, in the
// main mapping for this PE itself (where the caller's slices are, so that
// memmove sees an overlap between them as one). Inlined by the fast paths.
func (pe *PE) peerAddr(target int, off uint64) unsafe.Pointer {
	b := pe.wbase
	if target == pe.rank {
		b = pe.base
	}
	return unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), pe.lay.PartOff+uint64(target)*pe.lay.PartStride+off)
}

// rmaTargetSlow is rmaTarget for everything but this PE's own heap.
func (pe *PE) rmaTargetSlow(p unsafe.Pointer, n uint64, target int) (unsafe.Pointer, bool) {
	off, _, ok := pe.heapOffset(p, n)
	if !ok || uint(target) >= uint(pe.npes) {
		return nil, false
	}
	return pe.heapAddr(target, off), true
}

// symOff locates n bytes at p in the symmetric heap of some partition and
// returns their offset within that heap.
func (pe *PE) symOff(p unsafe.Pointer, n uint64) (uint64, bool) {
	off, _, ok := pe.heapOffset(p, n)
	return off, ok
}

// copyBytes copies n bytes from src to dst, as copy does (overlap
// included): two word loads then two word stores for 8 to 16 bytes (a
// transfer of a word or two is the latency that matters most, and the
// call to memmove was a fifth of it), the runtime's memmove otherwise.
func copyBytes(dst, src unsafe.Pointer, n uint64) {
	if n-8 <= 8 { // 8 <= n <= 16
		a := *(*uint64)(src)
		b := *(*uint64)(unsafe.Add(src, n-8))
		*(*uint64)(dst) = a
		*(*uint64)(unsafe.Add(dst, n-8)) = b
		return
	}
	copy(unsafe.Slice((*byte)(dst), n), unsafe.Slice((*byte)(src), n))
}

// bump adds one to a statistics counter of this PE in its control block.
// Only this PE writes its counters, so the increment is a plain load and
// store: an atomic one (any sync/atomic write is a locked instruction on
// amd64) would cost the hot paths 9 ns each. Readers (symheap stat) load
// the word atomically, and an aligned 8-byte store is never torn on the
// 64-bit targets symheap runs on. Two goroutines of one PE may lose an
// increment between them, which a statistic can afford.
func bump(c *atomic.Uint64) {
	p := (*uint64)(unsafe.Pointer(c))
	*p++
}

// localOff is symOff for memory that must lie in this PE's own heap
// (WaitUntil's variable). owner is the partition p lies in, -1 if none.
func (pe *PE) localOff(p unsafe.Pointer, n uint64) (off uint64, owner int, ok bool) {
	off, owner, ok = pe.heapOffset(p, n)
	if !ok {
		return 0, -1, false
	}
	return off, owner, owner == pe.rank
}

// remoteWord translates the address of a T in the symmetric heap into the
// address of PE target's copy of it. op names the caller for errors.
func remoteWord[T Integer](pe *PE, p *T, target int, op string) (*T, error) {
	size := uint64(unsafe.Sizeof(*p))
	r, ok := pe.rmaTarget(unsafe.Pointer(p), size, target)
	if !ok || uintptr(r)&uintptr(size-1) != 0 {
		return nil, pe.atomicError(op, unsafe.Pointer(p), size, target)
	}
	return (*T)(r), nil
}

// localWord checks that p is a T in this PE's own symmetric heap, aligned.
func localWord[T Integer](pe *PE, p *T, op string) (*T, error) {
	size := uint64(unsafe.Sizeof(*p))
	if off, ok := pe.ownOff(unsafe.Pointer(p), size); ok && off&(size-1) == 0 {
		return p, nil
	}
	off, owner, _ := pe.localOff(unsafe.Pointer(p), size)
	return nil, pe.localError(op, unsafe.Pointer(p), size, owner, off)
}

// setPlain stores v into a word of a record that a later sequentially
// consistent store publishes (symalloc.go, exchange): an ordinary store,
// ordered before the publishing one by x86-64 TSO and by the release
// semantics of arm64's STLR, so that a record costs one locked
// instruction instead of eight.
func setPlain(w *atomic.Uint64, v uint64) {
	*(*uint64)(unsafe.Pointer(w)) = v
}

// The typed atomic primitives. Each is one sync/atomic operation on a word
// in shared memory, sequentially consistent, and therefore a full fence
// on amd64 (LOCK-prefixed or XCHG) and arm64 (acquire-release forms). The
// size switch is resolved at compile time for each instantiation.

func atomicLoad[T Integer](p *T) T {
	if unsafe.Sizeof(*p) == 4 {
		return T(atomic.LoadUint32((*uint32)(unsafe.Pointer(p))))
	}
	return T(atomic.LoadUint64((*uint64)(unsafe.Pointer(p))))
}

func atomicStore[T Integer](p *T, v T) {
	if unsafe.Sizeof(*p) == 4 {
		atomic.StoreUint32((*uint32)(unsafe.Pointer(p)), uint32(v))
		return
	}
	atomic.StoreUint64((*uint64)(unsafe.Pointer(p)), uint64(v))
}

func atomicSwap[T Integer](p *T, v T) T {
	if unsafe.Sizeof(*p) == 4 {
		return T(atomic.SwapUint32((*uint32)(unsafe.Pointer(p)), uint32(v)))
	}
	return T(atomic.SwapUint64((*uint64)(unsafe.Pointer(p)), uint64(v)))
}

// atomicCAS stores new if *p == old and returns the value it found.
func atomicCAS[T Integer](p *T, old, new T) T {
	for {
		if unsafe.Sizeof(*p) == 4 {
			if atomic.CompareAndSwapUint32((*uint32)(unsafe.Pointer(p)), uint32(old), uint32(new)) {
				return old
			}
		} else if atomic.CompareAndSwapUint64((*uint64)(unsafe.Pointer(p)), uint64(old), uint64(new)) {
			return old
		}
		// Failed: report what is there now, unless it changed back to
		// old in between (then try again: the answer must be a value
		// the word held while the swap was refused).
		if cur := atomicLoad(p); cur != old {
			return cur
		}
	}
}

// atomicFetchAdd adds v and returns the previous value.
func atomicFetchAdd[T Integer](p *T, v T) T {
	if unsafe.Sizeof(*p) == 4 {
		return T(atomic.AddUint32((*uint32)(unsafe.Pointer(p)), uint32(v)) - uint32(v))
	}
	return T(atomic.AddUint64((*uint64)(unsafe.Pointer(p)), uint64(v)) - uint64(v))
}

func atomicFetchAnd[T Integer](p *T, v T) T {
	if unsafe.Sizeof(*p) == 4 {
		return T(atomic.AndUint32((*uint32)(unsafe.Pointer(p)), uint32(v)))
	}
	return T(atomic.AndUint64((*uint64)(unsafe.Pointer(p)), uint64(v)))
}

func atomicFetchOr[T Integer](p *T, v T) T {
	if unsafe.Sizeof(*p) == 4 {
		return T(atomic.OrUint32((*uint32)(unsafe.Pointer(p)), uint32(v)))
	}
	return T(atomic.OrUint64((*uint64)(unsafe.Pointer(p)), uint64(v)))
}

// atomicFetchXor has no single instruction that returns the old value:
// a compare-and-swap loop.
func atomicFetchXor[T Integer](p *T, v T) T {
	for {
		old := atomicLoad(p)
		if unsafe.Sizeof(*p) == 4 {
			if atomic.CompareAndSwapUint32((*uint32)(unsafe.Pointer(p)), uint32(old), uint32(old^v)) {
				return old
			}
		} else if atomic.CompareAndSwapUint64((*uint64)(unsafe.Pointer(p)), uint64(old), uint64(old^v)) {
			return old
		}
	}
}

// fullFence orders every load and store before it against every one
// after it: an atomic read-modify-write of a private word (LOCK XADD on
// amd64; LDADDAL on arm64).
func fullFence() {
	var w atomic.Uint32
	w.Add(1)
}

// whereIs describes where p lies, for errors about memory that
// is not a symmetric object.
func (pe *PE) whereIs(p unsafe.Pointer) string {
	if p == nil {
		return "nil"
	}
	if _, owner, ok := pe.heapOffset(p, 1); ok {
		return fmt.Sprintf("running past the end of PE %d's symmetric heap (%s per PE)", owner, segment.FormatSize(pe.lay.HeapSize))
	}
	if _, owner, ok := pe.sharedOffset(p, 1); ok {
		return fmt.Sprintf("in PE %d's local shared heap, which is not symmetric", owner)
	}
	if _, ok := pe.segOffset(p); ok {
		return "in symheap's control area"
	}
	return "outside the symmetric heap (Go memory or another mapping)"
}

// notSymmetric explains why n bytes at p are not a symmetric object.
func (pe *PE) notSymmetric(op, what string, p unsafe.Pointer, n uint64) error {
	return fmt.Errorf("symheap: %s: %s (%d bytes at %p) is %s: %w (use memory from Malloc, Calloc, Align or Realloc)",
		op, what, n, p, pe.whereIs(p), ErrNotSymmetric)
}

// atomicError explains why an atomic on the size-byte word at p on target
// was refused: bad PE, not symmetric, or misaligned, checked in that order.
func (pe *PE) atomicError(op string, p unsafe.Pointer, size uint64, target int) error {
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
func (pe *PE) localError(op string, p unsafe.Pointer, size uint64, owner int, off uint64) error {
	switch {
	case owner < 0:
		return pe.notSymmetric(op, "the variable", p, size)
	case owner != pe.rank:
		return fmt.Errorf("symheap: %s on %p: %w (it is PE %d's copy; PE %d can wait only on its own copy of a symmetric variable, which other PEs update with Put or atomics)", op, p, ErrNotSymmetric, owner, pe.rank)
	}
	return fmt.Errorf("symheap: %s on %p: %w (a %d-byte variable needs a %d-byte aligned address; offset %#x in the heap)", op, p, ErrBadAlign, size, size, off)
}
