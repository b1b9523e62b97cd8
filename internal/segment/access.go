package segment

import (
	"strconv"

	"github.com/symheap/symheap/internal/unix"
)

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

// protect sets up protected mode: every other PE's symmetric heap becomes
// read-only in the main mapping, so a stray store through a pointer faults
// instead of corrupting a neighbour, and a second, writable mapping of the
// whole segment (the alias, at an address of its own) is what the
// runtime's Put, atomics and collectives write through. Control blocks and
// local shared heaps stay writable: they are shared by design.
func (s *Segment) protect() error {
	for _, pe := range s.local {
		if pe == s.p.Rank || s.lay.HeapSize == 0 {
			continue
		}
		off := s.HeapOff(pe)
		if err := unix.Mprotect(s.m.Mem[off:off+s.lay.HeapSize], unix.ProtRead); err != nil {
			return mapError("protect the heap of PE "+itoa(pe), err)
		}
	}
	a, err := mapAligned(s.fd, len(s.m.Mem), 0)
	if err != nil {
		return err
	}
	s.alias = a
	return nil
}

// Alias returns the writable mapping of the segment: the alias in
// protected mode, else the main mapping itself.
func (s *Segment) Alias() []byte {
	if s.alias.Mem != nil {
		return s.alias.Mem
	}
	return s.m.Mem
}

// Protected reports whether the job runs in protected mode in this PE.
func (s *Segment) Protected() bool { return s.alias.Mem != nil }

func itoa(n int) string { return strconv.Itoa(n) }
