package small

import (
	"sync/atomic"
	"unsafe"
)

// The front end's pointer arithmetic, all of it: typed views of words of
// the region at offsets. The region is shared memory, so these pointers
// point outside the Go heap and are never stored in it.

// view is the address of a region's first byte.
type view struct{ base unsafe.Pointer }

func viewOf(mem []byte) view { return view{unsafe.Pointer(unsafe.SliceData(mem))} }

// aligned reports whether mem's first byte is aligned to n.
func aligned(mem []byte, n uintptr) bool {
	return len(mem) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%n == 0
}

func (v view) word(off uint64) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Add(v.base, off)) }
func (v view) plain(off uint64) *uint64       { return (*uint64)(unsafe.Add(v.base, off)) }
func (v view) span(off uint64) *spanHdr       { return (*spanHdr)(unsafe.Add(v.base, off)) }
func (v view) header(off uint64) *header      { return (*header)(unsafe.Add(v.base, off)) }
func (v view) arena(off uint64) *arenaHdr     { return (*arenaHdr)(unsafe.Add(v.base, off)) }

// words is the n words from off.
func (v view) words(off, n uint64) []atomic.Uint64 {
	return unsafe.Slice((*atomic.Uint64)(unsafe.Add(v.base, off)), n)
}

// The headers' sizes are part of the layout.
var (
	_ [hdrFixed - unsafe.Sizeof(header{})]byte
	_ [unsafe.Sizeof(header{}) - hdrFixed]byte
	_ [spanFixed - unsafe.Sizeof(spanHdr{})]byte
	_ [unsafe.Sizeof(spanHdr{}) - spanFixed]byte
	_ [arenaFixed - unsafe.Sizeof(arenaHdr{})]byte
	_ [unsafe.Sizeof(arenaHdr{}) - arenaFixed]byte
)
