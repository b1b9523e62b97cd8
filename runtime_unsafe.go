package symheap

import (
	"sync/atomic"
	"unsafe"
)

// This file holds the runtime's pointer arithmetic: views of control
// blocks, and the translation between slices and (partition, offset).

// The fixed control part must fit its reservation.
var _ [controlSize - unsafe.Sizeof(control{})]byte

// controlOf views the start of a control block.
func controlOf(cb []byte) *control { return (*control)(unsafe.Pointer(unsafe.SliceData(cb))) }

// wordAddr returns the address of an atomic word for the futex syscall.
func wordAddr(w *atomic.Uint32) unsafe.Pointer { return unsafe.Pointer(w) }

// segAddr returns the address of byte off of the segment in this PE.
func (pe *PE) segAddr(off uint64) unsafe.Pointer {
	return unsafe.Add(unsafe.Pointer(unsafe.SliceData(pe.base)), off)
}

// segOffset returns the segment offset of p, and whether p lies in the
// segment at all. It compares addresses as integers and never turns one
// back into a pointer.
func (pe *PE) segOffset(p unsafe.Pointer) (uint64, bool) {
	b := uintptr(unsafe.Pointer(unsafe.SliceData(pe.base)))
	a := uintptr(p)
	if a < b || a >= b+uintptr(len(pe.base)) {
		return 0, false
	}
	return uint64(a - b), true
}

// heapOffset locates n bytes at p in the symmetric heap of some partition:
// it returns the offset within that heap and the partition's PE.
func (pe *PE) heapOffset(p unsafe.Pointer, n uint64) (off uint64, owner int, ok bool) {
	so, in := pe.segOffset(p)
	if !in || so < pe.lay.PartOff {
		return 0, 0, false
	}
	rel := so - pe.lay.PartOff
	owner = int(rel / pe.lay.PartStride)
	off = rel % pe.lay.PartStride
	if owner >= pe.npes || off >= pe.lay.HeapSize || n > pe.lay.HeapSize-off {
		return 0, 0, false
	}
	return off, owner, true
}

// sharedOffset locates n bytes at p in some PE's local shared heap.
func (pe *PE) sharedOffset(p unsafe.Pointer, n uint64) (off uint64, owner int, ok bool) {
	so, in := pe.segOffset(p)
	if !in || so < pe.lay.PartOff {
		return 0, 0, false
	}
	rel := so - pe.lay.PartOff
	owner = int(rel / pe.lay.PartStride)
	off = rel % pe.lay.PartStride
	if owner >= pe.npes || off < pe.lay.SharedOff {
		return 0, 0, false
	}
	off -= pe.lay.SharedOff
	if off >= pe.lay.SharedSize || n > pe.lay.SharedSize-off {
		return 0, 0, false
	}
	return off, owner, true
}

// heapAddr returns the address at which the runtime reads and writes
// offset off of PE target's symmetric heap. In protected mode other PEs'
// heaps are read-only in the main mapping, and the runtime goes through
// the writable alias instead.
func (pe *PE) heapAddr(target int, off uint64) unsafe.Pointer {
	if target != pe.rank {
		return unsafe.Add(unsafe.Pointer(unsafe.SliceData(pe.wbase)), pe.seg.HeapOff(target)+off)
	}
	return pe.segAddr(pe.seg.HeapOff(target) + off)
}

// viewAddr returns the address of offset off of PE target's symmetric heap
// in the main mapping: what users see (Ptr), read-only for other PEs in
// protected mode.
func (pe *PE) viewAddr(target int, off uint64) unsafe.Pointer {
	return pe.segAddr(pe.seg.HeapOff(target) + off)
}

// sharedAddr returns the address of offset off in PE owner's shared heap.
func (pe *PE) sharedAddr(owner int, off uint64) unsafe.Pointer {
	return pe.segAddr(pe.seg.SharedOffOf(owner) + off)
}

// cbAddr returns the address of byte off of PE p's control block.
func (pe *PE) cbAddr(p int, off uint64) unsafe.Pointer {
	return pe.segAddr(pe.lay.CBOff + uint64(p)*pe.lay.CBSize + off)
}

// sliceData returns the address of s's first element and its size in bytes.
func sliceData[T any](s []T) (unsafe.Pointer, uint64) {
	var z T
	return unsafe.Pointer(unsafe.SliceData(s)), uint64(len(s)) * uint64(unsafe.Sizeof(z))
}

// sliceAt makes a []T of n elements at p (shared memory).
func sliceAt[T any](p unsafe.Pointer, n int) []T { return unsafe.Slice((*T)(p), n) }

// sizeOf is unsafe.Sizeof for a type parameter.
func sizeOf[T any]() uint64 {
	var z T
	return uint64(unsafe.Sizeof(z))
}

// alignOf is unsafe.Alignof for a type parameter.
func alignOf[T any]() uint64 {
	var z T
	return uint64(unsafe.Alignof(z))
}

// Reinterpret views the bytes of b as a slice of T (len(b)/sizeof(T)
// elements), without copying. It is for plain-data types in symmetric or
// shared memory, such as a byte buffer holding float64s; it does not check
// alignment (the atomics and Put do).
func Reinterpret[T any](b []byte) []T {
	sz := sizeOf[T]()
	if len(b) == 0 || sz == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), uint64(len(b))/sz)
}
