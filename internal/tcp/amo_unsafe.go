package tcp

import (
	"sync/atomic"
	"unsafe"
)

// The one place that turns region bytes into words. A region is memory
// the PE registered (its symmetric heap or the node's control blocks, a
// shared mapping outside the Go heap, or a []byte in tests); the caller
// has checked that off+size lies inside b.

// aligned reports whether the size-byte word at b[off] is aligned in
// memory (not only in offset: a region's base need not be).
func aligned(b []byte, off uint64, size int) bool {
	return uintptr(unsafe.Pointer(&b[off]))%uintptr(size) == 0
}

// word32 and word64 return the word at b[off], for sync/atomic.
func word32(b []byte, off uint64) *atomic.Uint32 { return (*atomic.Uint32)(unsafe.Pointer(&b[off])) }
func word64(b []byte, off uint64) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&b[off])) }
