// Package region holds what the allocator components share: the typed view
// of a region (Mem), the common prefix of every region header, the bitmap
// of block starts that makes bad frees detectable exactly, and the error
// constructors.
//
// # Common header (offset 0 of every region)
//
//	off  size  field
//	  0     8  Magic    "symheap" + layout byte; written last by Format
//	  8     4  Comp     component id (CompBuddy, CompDlmalloc, CompTLSF)
//	 12     4  Version  layout version of that component
//	 16     8  Size     region bytes at Format; Attach requires the same
//	 24     8  Meta     bytes of metadata at the start of the region
//	 32    32  Param    component parameters (meaning per component)
//	 64     4  Lock     word of the cross-process alloc.Lock, alone on its
//	                    cache line
//	128    64  Counters statistics kept up to date by every call
//	192        component header follows
//
// Everything but Lock is touched only by the holder of the region's lock
// (or by a single process that serialises its own calls), so plain loads
// and stores suffice; the lock's atomics order them between processes.
// Magic is stored and loaded atomically so that an Attach racing a Format
// sees either no magic or a complete header.
package region

import (
	"bytes"
	"fmt"
	"math/bits"
	"os"
	"sync/atomic"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/internal/config"
	"github.com/symheap/symheap/internal/errs"
)

// Magic identifies a formatted region: "symheap" followed by layout 1.
const Magic uint64 = 0x01_70_61_65_68_6d_79_73 // little-endian "symheap\x01"

// Component ids stored in Header.Comp.
const (
	CompBuddy    uint32 = 1
	CompDlmalloc uint32 = 2
	CompTLSF     uint32 = 3
)

// HeaderSize is the size of the common header; component headers start
// here.
const HeaderSize = 192

// LockOff is the offset of the lock word in every region.
const LockOff = 64

// Header is the common prefix of every region (layout in the package doc).
type Header struct {
	Magic   uint64
	Comp    uint32
	Version uint32
	Size    uint64
	Meta    uint64
	Param   [4]uint64
	Lock    uint32
	_       [15]uint32
	C       Counters
}

// Counters are the statistics kept in the region. Live blocks are Allocs -
// Frees (a Realloc that moved counts as one of each) and free bytes follow
// from InUse and Blocks, so neither is kept: the hot paths update as few
// words as they can.
type Counters struct {
	InUse    uint64 // usable bytes of live blocks
	Allocs   uint64 // successful Alloc, and Realloc that moved
	Frees    uint64 // successful Free, and Realloc that moved
	Reallocs uint64 // successful Realloc
	Failed   uint64 // calls that returned an error
	Blocks   uint64 // blocks of any kind, used and free (component-defined)
	_        [2]uint64
}

// Verify, set from the environment variable SYMHEAP_ALLOC_VERIFY (any
// non-empty value), makes every component run its full Check after each
// call that changes the region and panic on the first violation. It is off
// by default (Check is O(heap)); the conformance suite checks after every
// operation regardless.
var Verify = os.Getenv(config.EnvAllocVerify) != ""

// MustCheck runs check and panics with the violation it reports. Callers
// guard it with Verify.
func MustCheck(name, op string, check func() error) {
	if err := check(); err != nil {
		panic(fmt.Sprintf("%s: heap invariant broken after %s: %v", name, op, err))
	}
}

// Init writes the common header of a region being formatted, all but
// Magic (see Publish), and zeroes the counters.
func Init(m Mem, comp, version uint32, meta uint64) *Header {
	h := Ptr[Header](m, 0)
	atomic.StoreUint64(&h.Magic, 0) // release: a racing Attach sees an unformatted region from now on
	h.Comp = comp
	h.Version = version
	h.Size = m.Len()
	h.Meta = meta
	h.Param = [4]uint64{}
	h.Lock = 0
	h.C = Counters{}
	return h
}

// Publish stores the magic number last, once all metadata is written.
func Publish(h *Header) {
	atomic.StoreUint64(&h.Magic, Magic) // release: pairs with the acquire load in Open (any process)
}

// CheckMem verifies that mem can hold a region: its first byte is aligned
// to alloc.MaxAlign and it has at least min bytes.
func CheckMem(name string, m Mem, min uint64) error {
	if !m.Aligned(alloc.MaxAlign) {
		return fmt.Errorf("%s: region does not start on a %d-byte boundary (the segment layer must align it): %w", name, alloc.MaxAlign, errs.ErrBadArg)
	}
	if m.Len() < min {
		return fmt.Errorf("%s: region of %d bytes is below the minimum of %d: %w", name, m.Len(), min, errs.ErrBadArg)
	}
	return nil
}

// Open validates the common header of a region written by Format.
func Open(name string, m Mem, comp, version uint32, min uint64) (*Header, error) {
	if err := CheckMem(name, m, min); err != nil {
		return nil, err
	}
	h := Ptr[Header](m, 0)
	if mg := atomic.LoadUint64(&h.Magic); mg != Magic { // acquire: pairs with Publish
		return nil, fmt.Errorf("%s: attach: no formatted region here (magic %#x): %w", name, mg, errs.ErrSegment)
	}
	if h.Comp != comp {
		return nil, fmt.Errorf("%s: attach: region was formatted by component id %d, not %d: %w", name, h.Comp, comp, errs.ErrSegment)
	}
	if h.Version != version {
		return nil, fmt.Errorf("%s: attach: region layout version %d, this code reads %d: %w", name, h.Version, version, errs.ErrSegment)
	}
	if h.Size != m.Len() {
		return nil, fmt.Errorf("%s: attach: region was formatted with %d bytes, mapping has %d: %w", name, h.Size, m.Len(), errs.ErrSegment)
	}
	if h.Meta < HeaderSize || h.Meta > h.Size {
		return nil, fmt.Errorf("%s: attach: metadata size %d out of range: %w", name, h.Meta, errs.ErrSegment)
	}
	return h, nil
}

// Stats converts the counters to alloc.Stats, given the figures the
// component derives.
func (h *Header) Stats(free, overhead, largest uint64) alloc.Stats {
	c := &h.C
	return alloc.Stats{
		Size: h.Size, Overhead: overhead, InUse: c.InUse, Free: free,
		LargestFree: largest, Live: c.Allocs - c.Frees, Allocs: c.Allocs, Frees: c.Frees,
		Reallocs: c.Reallocs, Failed: c.Failed,
	}
}

// CheckCounters verifies the counters against the figures a Check walk
// computed: live blocks, their usable bytes, free bytes (against free, the
// component's derivation from the counters) and blocks.
func (h *Header) CheckCounters(name string, live, inUse, walkFree, blocks, free uint64) error {
	c := &h.C
	switch {
	case c.Allocs-c.Frees != live:
		return fmt.Errorf("%s: header says %d allocs - %d frees, walk found %d live blocks", name, c.Allocs, c.Frees, live)
	case c.InUse != inUse:
		return fmt.Errorf("%s: header says %d bytes in use, walk found %d", name, c.InUse, inUse)
	case c.Blocks != blocks:
		return fmt.Errorf("%s: header says %d blocks, walk found %d", name, c.Blocks, blocks)
	case free != walkFree:
		return fmt.Errorf("%s: counters give %d bytes free, walk found %d", name, free, walkFree)
	}
	return nil
}

// Zero clears n bytes at off, writing only to pages that are not already
// zero, so that formatting a large sparse region does not commit memory
// for metadata that is still all zeroes.
func Zero(m Mem, off, n uint64) {
	for n > 0 {
		step := zeroPageSize - off%zeroPageSize
		if step > n {
			step = n
		}
		if b := m.Bytes(off, step); !bytes.Equal(b, zeroPage[:step]) {
			clear(b)
		}
		off += step
		n -= step
	}
}

const zeroPageSize = 4096

var zeroPage [zeroPageSize]byte

// Bitmap is a bitmap stored in the region at Off (8-byte aligned), bit i
// in word i/64 at position i%64.
type Bitmap struct {
	M   Mem
	Off uint64
}

// BitmapBytes is the size of a bitmap of n bits, rounded to whole words.
func BitmapBytes(n uint64) uint64 { return (n + 63) / 64 * 8 }

// Test reports bit i.
func (b Bitmap) Test(i uint64) bool { return *b.M.U64(b.Off + i>>6<<3)&(1<<(i&63)) != 0 }

// Set sets bit i.
func (b Bitmap) Set(i uint64) { *b.M.U64(b.Off + i>>6<<3) |= 1 << (i & 63) }

// Clear clears bit i.
func (b Bitmap) Clear(i uint64) { *b.M.U64(b.Off + i>>6<<3) &^= 1 << (i & 63) }

// Count returns the number of set bits among the first n (the bits past n
// in the last word are counted too: they must be zero).
func (b Bitmap) Count(n uint64) uint64 {
	var c uint64
	for _, w := range b.M.Words(b.Off, (n+63)/64) {
		c += uint64(bits.OnesCount64(w))
	}
	return c
}

// BadFree builds the error for a free (or realloc, or size query) of an
// offset that is not a live block. op names the call.
func BadFree(name, op string, off alloc.Off, why string) error {
	return fmt.Errorf("%s: %s of offset %#x: %s: %w", name, op, uint64(off), why, alloc.ErrBadFree)
}

// OutOfMemory builds the error for a request that cannot be met.
func OutOfMemory(name string, size, align, regionSize, largest uint64) error {
	return fmt.Errorf("%s: alloc of %d bytes aligned to %d: %w (region of %d bytes, largest free request now %d bytes; raise the heap size, e.g. SHMEM_SYMMETRIC_SIZE)",
		name, size, align, alloc.ErrOutOfMemory, regionSize, largest)
}
