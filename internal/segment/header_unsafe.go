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
		return mapError("map header of "+s.path, err)
	}
	s.hdrMap = m
	s.h = headerOf(m.Mem)
	return nil
}

func (s *Segment) unmapAll() {
	unix.Unmap(s.alias)
	s.alias = unix.Mapping{}
	unix.Unmap(s.m)
	s.m = unix.Mapping{}
	unix.Unmap(s.hdrMap)
	s.hdrMap = unix.Mapping{}
	s.h = nil
}

// mapError explains a failed mmap: ENOMEM usually means the process has
// reached the map-count limit, which the message then names.
func mapError(what string, err error) error {
	if err == unix.ENOMEM {
		if n, limit := unix.MapCount(); limit > 0 && n >= limit-64 {
			return fmt.Errorf("segment: %s: the process has %d mappings, at the limit vm.max_map_count=%d: %w (raise it with sysctl vm.max_map_count, or map less)",
				what, n, limit, errs.ErrOutOfMemory)
		}
		if cur, _, e := unix.Rlimit(unix.RlimitAS); e == nil && cur != unix.RlimInfinity {
			return fmt.Errorf("segment: %s: out of address space: the address-space limit (ulimit -v, RLIMIT_AS) is %s: %w (raise it, or lower SHMEM_SYMMETRIC_SIZE)",
				what, FormatSize(cur), errs.ErrOutOfMemory)
		}
		return fmt.Errorf("segment: %s: out of address space or memory: %w", what, errs.ErrOutOfMemory)
	}
	return fmt.Errorf("segment: %s: %v: %w", what, err, errs.ErrSegment)
}
