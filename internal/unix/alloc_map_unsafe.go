package unix

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// This file holds the mapping helpers that the allocator packages
// (alloc/...) and their tests need: regions whose first byte is aligned to
// a large power of two (alloc.MaxAlign), private or shared, and memfd files
// to map twice.

// MapAnonAligned maps length bytes of private anonymous read-write memory
// whose first byte is aligned to align (a power of two). With noreserve the
// kernel commits no swap or memory for it up front (MAP_NORESERVE): pages
// are materialised when first written, so very large sparse regions are
// cheap. Release it with Unmap.
func MapAnonAligned(length, align uintptr, noreserve bool) (Mapping, error) {
	flags := unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	if noreserve {
		flags |= unix.MAP_NORESERVE
	}
	return mapAligned(-1, length, align, flags, 0)
}

// MapSharedAligned maps the first length bytes of fd read-write and shared,
// at an address aligned to align (a power of two). Mapping the same file
// twice gives two views of the same memory at different addresses.
func MapSharedAligned(fd int, length, align uintptr) (Mapping, error) {
	return mapAligned(fd, length, align, unix.MAP_SHARED, 0)
}

// MapSharedAlignedProt is MapSharedAligned with the protection prot (as
// MapShared's: 0 for read-write). Unlike a reservation released before
// the mapping, it cannot lose the address to another thread's mapping.
func MapSharedAlignedProt(fd int, length, align uintptr, prot int) (Mapping, error) {
	return mapAligned(fd, length, align, unix.MAP_SHARED, prot)
}

// mapAligned reserves length+align bytes of address space, maps the aligned
// part of it with MAP_FIXED (replacing only our own reservation) and
// releases the unused head and tail of the reservation.
func mapAligned(fd int, length, align uintptr, flags, prot int) (Mapping, error) {
	if length == 0 || align == 0 || align&(align-1) != 0 {
		return Mapping{}, EINVAL
	}
	if align < PageSize {
		align = PageSize
	}
	total := length + align
	res, err := unix.MmapPtr(-1, 0, nil, total, unix.PROT_NONE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return Mapping{}, err
	}
	// skip is how far into the reservation the aligned start lies. The
	// aligned start is derived from res with unsafe.Add, never rebuilt
	// from an integer.
	skip := (align - uintptr(res)&(align-1)) & (align - 1)
	start := unsafe.Add(res, skip)
	if prot == 0 {
		prot = unix.PROT_READ | unix.PROT_WRITE
	}
	p, err := unix.MmapPtr(fd, 0, start, length, prot, flags|unix.MAP_FIXED)
	if err != nil {
		unix.MunmapPtr(res, total)
		return Mapping{}, err
	}
	if skip > 0 {
		unix.MunmapPtr(res, skip)
	}
	if tail := total - skip - length; tail > 0 {
		unix.MunmapPtr(unsafe.Add(start, length), tail)
	}
	return Mapping{Mem: unsafe.Slice((*byte)(p), length)}, nil
}

// MemfdCreate creates an anonymous memory file (memfd_create, close-on-exec)
// that can be sized with Ftruncate and mapped several times.
func MemfdCreate(name string) (int, error) {
	return unix.MemfdCreate(name, unix.MFD_CLOEXEC)
}
