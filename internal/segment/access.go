package segment

import "github.com/symheap/symheap/internal/unix"

// Mem returns the whole segment as mapped in this PE.
func (s *Segment) Mem() []byte { return s.m.Mem }

// Base returns the address of the segment in this PE, for reporting.
func (s *Segment) Base() uintptr { return s.m.Addr() }

// AgreedBase returns the address every PE agreed on, or 0 in offset mode.
func (s *Segment) AgreedBase() uint64 { return s.h.base.Load() }

// CB returns PE pe's control block.
func (s *Segment) CB(pe int) []byte {
	off := s.lay.CBOff + uint64(pe)*s.lay.CBSize
	return s.m.Mem[off : off+s.lay.CBSize : off+s.lay.CBSize]
}

// HeapOff returns the segment offset of PE pe's symmetric heap.
func (s *Segment) HeapOff(pe int) uint64 { return s.lay.PartOff + uint64(pe)*s.lay.PartStride }

// SharedOffOf returns the segment offset of PE pe's local shared heap.
func (s *Segment) SharedOffOf(pe int) uint64 { return s.HeapOff(pe) + s.lay.SharedOff }

// Heap returns PE pe's symmetric heap.
func (s *Segment) Heap(pe int) []byte {
	off := s.HeapOff(pe)
	return s.m.Mem[off : off+s.lay.HeapSize : off+s.lay.HeapSize]
}

// Shared returns PE pe's local shared heap.
func (s *Segment) Shared(pe int) []byte {
	off := s.SharedOffOf(pe)
	return s.m.Mem[off : off+s.lay.SharedSize : off+s.lay.SharedSize]
}

// Fd returns the segment's file descriptor (for liveness queries).
func (s *Segment) Fd() int { return s.fd }

// Protect maps PE pe's partition with the given protection (read-only for
// protected mode).
func (s *Segment) Protect(pe int, writable bool) error {
	prot := unix.ProtRead
	if writable {
		prot |= unix.ProtWrite
	}
	off := s.HeapOff(pe)
	return unix.Mprotect(s.m.Mem[off:off+s.lay.PartStride], prot)
}
