package region

import "unsafe"

// Mem is a region of shared memory seen through this process's mapping. It
// is the only way the allocator components touch the region: every access
// is an offset from the region's first byte, turned into a typed pointer
// with unsafe.Add. No uintptr is ever stored and turned back into a pointer.
//
// Mem does no bounds checking on the hot accessors (U64, U32): callers have
// validated their offsets against the region's metadata first. Bytes and
// Ptr are used off the hot path and check.
type Mem struct {
	p unsafe.Pointer // first byte of the region in this process
	n uint64         // region bytes
}

// NewMem wraps a mapping.
func NewMem(b []byte) Mem {
	return Mem{p: unsafe.Pointer(unsafe.SliceData(b)), n: uint64(len(b))}
}

// Len is the region size in bytes.
func (m Mem) Len() uint64 { return m.n }

// Aligned reports whether the region's first byte is aligned to a (a power
// of two) in this process.
func (m Mem) Aligned(a uint64) bool { return uint64(uintptr(m.p))&(a-1) == 0 }

// U64 returns the 8-byte word at off (which must be 8-byte aligned and
// inside the region).
func (m Mem) U64(off uint64) *uint64 { return (*uint64)(unsafe.Add(m.p, off)) }

// U32 returns the 4-byte word at off.
func (m Mem) U32(off uint64) *uint32 { return (*uint32)(unsafe.Add(m.p, off)) }

// Bytes returns the n bytes at off as a slice, or nil if they are not all
// inside the region.
func (m Mem) Bytes(off, n uint64) []byte {
	if off > m.n || n > m.n-off {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Add(m.p, off)), n)
}

// Words returns the n 8-byte words at off as a slice (off 8-byte aligned),
// or nil if they are not all inside the region.
func (m Mem) Words(off, n uint64) []uint64 {
	if off > m.n || n > (m.n-off)/8 {
		return nil
	}
	return unsafe.Slice((*uint64)(unsafe.Add(m.p, off)), n)
}

// Move copies n bytes from src to dst inside the region; the ranges may
// overlap.
func (m Mem) Move(dst, src, n uint64) {
	copy(m.Bytes(dst, n), m.Bytes(src, n))
}

// Ptr returns the T at off. The caller guarantees T holds no Go pointers
// and fits in the region at off with T's alignment.
func Ptr[T any](m Mem, off uint64) *T {
	var z T
	if off > m.n || uint64(unsafe.Sizeof(z)) > m.n-off {
		panic("region: Ptr outside the region")
	}
	return (*T)(unsafe.Add(m.p, off))
}

// Sizeof returns the size of T in bytes, for laying out headers.
func Sizeof[T any]() uint64 {
	var z T
	return uint64(unsafe.Sizeof(z))
}

// OffsetOf returns the offset in the region of the word p points to, which
// must lie in the region (a field of a header obtained with Ptr, say).
func (m Mem) OffsetOf(p *uint64) uint64 {
	off := uint64(uintptr(unsafe.Pointer(p)) - uintptr(m.p))
	if off >= m.n {
		panic("region: OffsetOf a word outside the region")
	}
	return off
}
