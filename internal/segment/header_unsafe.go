package segment

import (
	"fmt"
	"unsafe"

	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/unix"
)

// The header must fit in its reserved space.
var _ [HeaderSize - unsafe.Sizeof(header{})]byte

// headerOf views the first bytes of b (at least HeaderSize, 8-byte aligned,
// in a mapping) as the header.
func headerOf(b []byte) *header { return (*header)(unsafe.Pointer(unsafe.SliceData(b))) }

// mapHeader maps the header alone, anywhere, so that the placement rounds
// can run before the segment itself is mapped.
func (s *Segment) mapHeader() error {
	if s.h != nil {
		return nil
	}
	prot := unix.ProtRead | unix.ProtWrite
	if s.p.ReadOnly {
		prot = unix.ProtRead
	}
	m, err := unix.MapShared(s.fd, HeaderSize, 0, prot)
	if err != nil {
		return fmt.Errorf("segment: map header of %s: %v: %w", s.path, err, errs.ErrSegment)
	}
	s.hdrMap = m
	s.h = headerOf(m.Mem)
	return nil
}

func (s *Segment) unmapAll() {
	unix.Unmap(s.m)
	s.m = unix.Mapping{}
	unix.Unmap(s.hdrMap)
	s.hdrMap = unix.Mapping{}
	s.h = nil
}
