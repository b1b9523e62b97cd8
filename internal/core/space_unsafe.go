package core

import "unsafe"

// Ptr is an address in this process. Layers pass it around and compare
// it; only this package does arithmetic on it or turns it into a typed
// pointer.
type Ptr = unsafe.Pointer

func (s *Space) at(b []byte, off uint64) Ptr {
	return unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), off)
}

// Addr returns the address of segment offset off in this PE.
func (s *Space) Addr(off SegOff) Ptr { return s.at(s.base, uint64(off)) }

// Base returns the address of the segment in this PE, as an integer.
func (s *Space) Base() uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(s.base))) }

// SegOffset returns the segment offset of p, and whether p lies in the
// segment at all. It compares addresses as integers and never turns one
// back into a pointer.
func (s *Space) SegOffset(p Ptr) (SegOff, bool) {
	b := s.Base()
	a := uintptr(p)
	if a < b || a >= b+uintptr(len(s.base)) {
		return 0, false
	}
	return SegOff(a - b), true
}

// part splits a segment offset into a partition and an offset in it.
func (s *Space) part(so SegOff) (owner int, off uint64, ok bool) {
	if uint64(so) < s.Lay.PartOff {
		return 0, 0, false
	}
	rel := uint64(so) - s.Lay.PartOff
	owner = int(rel / s.Lay.PartStride)
	return owner, rel % s.Lay.PartStride, owner < s.NPEs
}

// HeapOffset locates n bytes at p in the symmetric heap of some partition:
// it returns the offset within that heap and the partition's PE.
func (s *Space) HeapOffset(p Ptr, n uint64) (off HeapOff, owner int, ok bool) {
	so, in := s.SegOffset(p)
	if !in {
		return 0, 0, false
	}
	owner, o, ok := s.part(so)
	if !ok || o >= s.Lay.HeapSize || n > s.Lay.HeapSize-o {
		return 0, 0, false
	}
	return HeapOff(o), owner, true
}

// SharedOffset locates n bytes at p in some PE's local shared heap.
func (s *Space) SharedOffset(p Ptr, n uint64) (off SharedOff, owner int, ok bool) {
	// This PE's own heap first: subtractions, no division.
	if o := uint64(uintptr(p)-uintptr(unsafe.Pointer(unsafe.SliceData(s.base)))) - s.Lay.PartOff - uint64(s.Rank)*s.Lay.PartStride - s.Lay.SharedOff; o < s.Lay.SharedSize && n <= s.Lay.SharedSize-o { // wraps when below
		return SharedOff(o), s.Rank, true
	}
	so, in := s.SegOffset(p)
	if !in {
		return 0, 0, false
	}
	owner, o, ok := s.part(so)
	if !ok || o < s.Lay.SharedOff {
		return 0, 0, false
	}
	o -= s.Lay.SharedOff
	if o >= s.Lay.SharedSize || n > s.Lay.SharedSize-o {
		return 0, 0, false
	}
	return SharedOff(o), owner, true
}

// The fast paths of the API (Put, Get, the atomics, the waits) are
// generic functions, compiled in the user's package. There the compiler
// inlines the generic functions of any package but the plain ones only of
// packages the user's package imports itself, which this internal package
// never is: a Put of 8 bytes through a call to a plain OwnOff took
// longer (measured: docs/bench/design-measurements.md, «internal/core,
// the fast paths' primitives»). So the primitives of those paths are
// generic (in the element type they serve, which they do not otherwise
// use), and the methods of the same names are them for everybody else.

// OwnOff returns the offset of the n bytes at p in this PE's own
// symmetric heap, and whether they lie wholly in it: the test of the fast
// paths of Put and Get.
func OwnOff[T any](s *Space, p Ptr, n uint64) (HeapOff, bool) {
	off := uint64(uintptr(p)-uintptr(unsafe.Pointer(unsafe.SliceData(s.base)))) - s.Lay.PartOff - uint64(s.Rank)*s.Lay.PartStride // wraps when below
	return HeapOff(off), off < s.Lay.HeapSize && n <= s.Lay.HeapSize-off
}

// PeerAddr returns the address of offset off of PE target's heap, as
// HeapAddr: in the writable alias for other PEs in protected mode, in the
// main mapping for this PE itself (where the caller's slices are, so that
// memmove sees an overlap between them as one).
func PeerAddr[T any](s *Space, target int, off HeapOff) Ptr {
	b := s.wbase
	if target == s.Rank {
		b = s.base
	}
	return unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), s.Lay.PartOff+uint64(target)*s.Lay.PartStride+uint64(off))
}

// nearTable is Near's view of the heaps, computed once: the address of
// every PE's heap as PeerAddr gives it, and this PE's own (heaps[Rank],
// kept apart so that Near's first test needs no index).
type nearTable struct {
	own   uintptr
	heaps []Ptr
}

func (s *Space) nearTable() nearTable {
	heaps := make([]Ptr, s.NPEs)
	for pe := range heaps {
		heaps[pe] = PeerAddr[byte](s, pe, 0)
	}
	return nearTable{own: uintptr(heaps[s.Rank]), heaps: heaps}
}

// NoNear empties Near's table, so that Near takes nothing: for a job
// with PEs on other nodes, whose atomics go through the transport.
func (s *Space) NoNear() { s.near = nearTable{} }

// Near is OwnOff and PeerAddr in one, for the atomics' fast path: the
// address at which this PE reaches PE target's copy of the n bytes at p,
// if they start in this PE's own heap, aligned to n, and target is a PE of
// the job. n is a power of two up to a page: the heap's size is a whole
// number of pages, so an aligned word that starts in it ends in it too.
// Small enough (cost 52, from the table) for the compiler to inline it
// into the atomics' fast path, and that into each atomic.
func Near[T any](s *Space, p Ptr, n uint64, target int) (Ptr, bool) {
	off := uint64(uintptr(p) - s.near.own) // wraps when below
	if off >= s.Lay.HeapSize || off&(n-1) != 0 || uint(target) >= uint(len(s.near.heaps)) {
		return nil, false
	}
	return unsafe.Add(s.near.heaps[target], off), true
}

// Target locates the n bytes at p in the symmetric heap of some partition
// and returns the address at which this PE reaches PE target's copy of
// them (as HeapAddr). ok is false if target does not exist or the bytes
// are not wholly in a symmetric heap. The common case, p in this PE's own
// heap (a slice as Malloc returned it), is a few compares; a slice onto
// another PE's copy takes targetSlow.
func Target[T any](s *Space, p Ptr, n uint64, target int) (Ptr, bool) {
	l := &s.Lay
	off := uint64(uintptr(p)-uintptr(unsafe.Pointer(unsafe.SliceData(s.base)))) - l.PartOff - uint64(s.Rank)*l.PartStride // wraps when below
	if off >= l.HeapSize || n > l.HeapSize-off || uint(target) >= uint(s.NPEs) {
		return s.targetSlow(p, n, target)
	}
	if target == s.Rank {
		return p, true
	}
	return unsafe.Add(unsafe.Pointer(unsafe.SliceData(s.wbase)), l.PartOff+uint64(target)*l.PartStride+off), true
}

// OwnOff is OwnOff[byte].
func (s *Space) OwnOff(p Ptr, n uint64) (HeapOff, bool) { return OwnOff[byte](s, p, n) }

// PeerAddr is PeerAddr[byte].
func (s *Space) PeerAddr(target int, off HeapOff) Ptr { return PeerAddr[byte](s, target, off) }

// Target is Target[byte].
func (s *Space) Target(p Ptr, n uint64, target int) (Ptr, bool) { return Target[byte](s, p, n, target) }

func (s *Space) targetSlow(p Ptr, n uint64, target int) (Ptr, bool) {
	off, _, ok := s.HeapOffset(p, n)
	if !ok || uint(target) >= uint(s.NPEs) {
		return nil, false
	}
	return s.HeapAddr(target, off), true
}

// HeapAddr returns the address at which the runtime reads and writes
// offset off of PE target's symmetric heap: the writable alias for other
// PEs in protected mode.
func (s *Space) HeapAddr(target int, off HeapOff) Ptr {
	if target != s.Rank {
		return s.at(s.wbase, uint64(s.HeapSeg(target, off)))
	}
	return s.Addr(s.HeapSeg(target, off))
}

// ViewAddr returns the address of offset off of PE target's symmetric
// heap in the main mapping: what users see (Ptr), read-only for other PEs
// in protected mode.
func (s *Space) ViewAddr(target int, off HeapOff) Ptr { return s.Addr(s.HeapSeg(target, off)) }

// SharedAddr returns the address of offset off in PE owner's shared heap.
func (s *Space) SharedAddr(owner int, off SharedOff) Ptr { return s.Addr(s.SharedSeg(owner, off)) }

// CBAddr returns the address of byte off of PE p's control block.
func (s *Space) CBAddr(p int, off CBOff) Ptr { return s.Addr(s.CBSeg(p, off)) }
