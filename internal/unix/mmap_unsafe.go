package unix

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Mapping is one mmap'd range. Mem is the whole range as a byte slice; it is
// kept for unmapping. Base is its first byte.
type Mapping struct {
	Mem []byte
}

// Base returns the address of the first byte of the mapping.
func (m Mapping) Base() unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(m.Mem)) }

// Addr returns the address of the first byte as an integer, for reporting
// and for comparing placements between processes. It is never converted back
// to a pointer.
func (m Mapping) Addr() uintptr { return uintptr(m.Base()) }

// MapShared maps length bytes of fd from offset 0 read-write and shared.
// With hint != 0 the mapping is placed exactly at hint with
// MAP_FIXED_NOREPLACE; EEXIST means the range is not free, and a kernel that
// ignores the flag (older than 4.17) is detected by the returned address and
// reported as ErrNotSupported.
func MapShared(fd int, length int, hint uintptr, prot int) (Mapping, error) {
	flags := unix.MAP_SHARED
	if hint != 0 {
		flags |= unix.MAP_FIXED_NOREPLACE
	}
	if prot == 0 {
		prot = unix.PROT_READ | unix.PROT_WRITE
	}
	// hint is an address proposed by some PE, not a Go object: it is formed
	// as an offset from nil so that it never passes for a Go pointer.
	p, err := unix.MmapPtr(fd, 0, unsafe.Add(nil, hint), uintptr(length), prot, flags)
	if err != nil {
		return Mapping{}, err
	}
	m := Mapping{Mem: unsafe.Slice((*byte)(p), length)}
	if hint != 0 && m.Addr() != hint {
		unix.MunmapPtr(p, uintptr(length))
		return Mapping{}, fmt.Errorf("mmap at %#x landed at %#x: MAP_FIXED_NOREPLACE %w", hint, m.Addr(), ErrNotSupported)
	}
	return m, nil
}

// ReserveAligned finds length bytes of free address space whose start is
// aligned to align (a power of two) and returns its address. The range is
// unmapped again before return: it is a proposal, free in this process at
// the time of the call.
func ReserveAligned(length, align uintptr) (uintptr, error) {
	p, err := unix.MmapPtr(-1, 0, nil, length+align, unix.PROT_NONE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return 0, err
	}
	a := (uintptr(p) + align - 1) &^ (align - 1)
	unix.MunmapPtr(p, length+align)
	return a, nil
}

// Unmap releases a mapping made by MapShared.
func Unmap(m Mapping) error {
	if m.Mem == nil {
		return nil
	}
	return unix.MunmapPtr(m.Base(), uintptr(len(m.Mem)))
}

// MapAnon maps length bytes of private anonymous memory.
func MapAnon(length int) (Mapping, error) {
	b, err := unix.Mmap(-1, 0, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return Mapping{}, err
	}
	return Mapping{Mem: b}, nil
}

// MapRange is one line of /proc/self/maps.
type MapRange struct {
	Start, End uintptr
	Path       string
}

// SelfMaps parses /proc/self/maps.
func SelfMaps() ([]MapRange, error) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []MapRange
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) < 1 {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			return nil, fmt.Errorf("unix: malformed maps line %q", line)
		}
		s, err1 := strconv.ParseUint(lo, 16, 64)
		e, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("unix: malformed maps line %q", line)
		}
		r := MapRange{Start: uintptr(s), End: uintptr(e)}
		if len(fields) >= 6 {
			r.Path = fields[5]
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

// Mprotect changes the protection of part of a mapping.
func Mprotect(b []byte, prot int) error { return unix.Mprotect(b, prot) }
