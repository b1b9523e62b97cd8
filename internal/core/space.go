package core

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"

	"github.com/symheap/symheap/internal/segment"
)

// Kinds of offset (see the package comment).
type (
	SegOff    uint64
	HeapOff   uint64
	SharedOff uint64
	CBOff     uint64
)

// Space is this PE's view of the job's segment.
type Space struct {
	Seg   *segment.Segment
	Rank  int
	NPEs  int
	Lay   segment.Layout
	base  []byte // the whole segment as mapped here
	wbase []byte // where the runtime writes other PEs' heaps: base, or the alias in protected mode
	near  nearTable
}

// NewSpace returns PE rank's view of seg, which maps a job of npes PEs.
func NewSpace(seg *segment.Segment, rank, npes int) *Space {
	s := &Space{Seg: seg, Rank: rank, NPEs: npes, Lay: seg.Layout(), base: seg.Mem(), wbase: seg.Alias()}
	s.near = s.nearTable()
	return s
}

// Mem returns the whole segment as mapped here.
func (s *Space) Mem() []byte { return s.base }

// Part returns the segment offset of PE pe's partition, which begins with
// its symmetric heap.
func (s *Space) Part(pe int) SegOff { return SegOff(s.Lay.PartOff + uint64(pe)*s.Lay.PartStride) }

// HeapSeg returns the segment offset of offset off of PE pe's symmetric heap.
func (s *Space) HeapSeg(pe int, off HeapOff) SegOff { return s.Part(pe) + SegOff(off) }

// SharedSeg returns the segment offset of offset off of PE pe's shared heap.
func (s *Space) SharedSeg(pe int, off SharedOff) SegOff {
	return s.Part(pe) + SegOff(s.Lay.SharedOff) + SegOff(off)
}

// CBSeg returns the segment offset of byte off of PE pe's control block.
func (s *Space) CBSeg(pe int, off CBOff) SegOff {
	return SegOff(s.Lay.CBOff + uint64(pe)*s.Lay.CBSize + uint64(off))
}

// Heap returns PE pe's symmetric heap as mapped here (the region its
// allocator manages).
func (s *Space) Heap(pe int) []byte {
	o := uint64(s.Part(pe))
	return s.base[o : o+s.Lay.HeapSize : o+s.Lay.HeapSize]
}

// Shared returns PE pe's local shared heap as mapped here.
func (s *Space) Shared(pe int) []byte {
	o := uint64(s.SharedSeg(pe, 0))
	return s.base[o : o+s.Lay.SharedSize : o+s.Lay.SharedSize]
}

// Area is a layer's part of every PE's control block.
type Area struct {
	name string
	size func(npes int) uint64
}

var areas struct {
	sync.Mutex
	list   []*Area
	frozen bool // a layout has been computed: registering now would change it
}

// ControlSize is the bytes at the start of every control block that hold
// the runtime's fixed words; the areas follow.
const ControlSize = 4096

// areaAlign keeps every area on its own pair of cache lines.
const areaAlign = 128

// RegisterArea reserves, in every PE's control block of a job of npes
// PEs, size(npes) bytes for the layer name. Call it from an init
// function; it panics on a duplicate name or once a layout was computed.
func RegisterArea(name string, size func(npes int) uint64) *Area {
	areas.Lock()
	defer areas.Unlock()
	if areas.frozen {
		panic(fmt.Sprintf("core: area %q registered after the layout was fixed", name))
	}
	for _, a := range areas.list {
		if a.name == name {
			panic(fmt.Sprintf("core: area %q registered twice", name))
		}
	}
	a := &Area{name: name, size: size}
	areas.list = append(areas.list, a)
	slices.SortFunc(areas.list, func(x, y *Area) int {
		if x.name < y.name {
			return -1
		}
		return 1
	})
	return a
}

// layout returns the offset of every area, in order, and the block size.
func layout(npes int) (offs []CBOff, total uint64) {
	areas.Lock()
	defer areas.Unlock()
	areas.frozen = true
	total = ControlSize
	for _, a := range areas.list {
		offs = append(offs, CBOff(total))
		total += (a.size(npes) + areaAlign - 1) &^ (areaAlign - 1)
	}
	return offs, total
}

// CBSize returns the size of each PE's control block in a job of npes PEs.
func CBSize(npes int) uint64 {
	_, total := layout(npes)
	return total
}

// CBSum returns a digest of the control blocks' layout in a job of npes
// PEs: the fixed part's size and every area's name, size and offset. PEs
// whose programs were built with different versions of the runtime may
// agree on CBSize and still disagree on where an area lies; the segment
// refuses a PE whose digest differs from the job's.
func CBSum(npes int) uint64 {
	offs, total := layout(npes)
	h := fnv.New64a()
	put := func(v uint64) { h.Write(binary.LittleEndian.AppendUint64(nil, v)) }
	put(ControlSize)
	put(total)
	areas.Lock()
	defer areas.Unlock()
	for i, a := range areas.list {
		h.Write([]byte(a.name))
		put(a.size(npes))
		put(uint64(offs[i]))
	}
	return h.Sum64()
}

// AreaSize is one area's bytes in each control block of a job.
type AreaSize struct {
	Name string
	Size uint64 // as registered; the block holds it rounded up to 128 bytes
}

// Areas returns every registered area and its size in a job of npes PEs,
// in layout order (the fixed ControlSize bytes come first). symheap info
// and the tests that bound the control blocks' growth read it.
func Areas(npes int) []AreaSize {
	layout(npes) // freezes the list, as a layout does
	areas.Lock()
	defer areas.Unlock()
	out := make([]AreaSize, len(areas.list))
	for i, a := range areas.list {
		out[i] = AreaSize{a.name, a.size(npes)}
	}
	return out
}

// Off returns the offset of area a in the control blocks of a job of npes
// PEs.
func (a *Area) Off(npes int) CBOff {
	offs, _ := layout(npes)
	for i, x := range areas.list {
		if x == a {
			return offs[i]
		}
	}
	panic("core: unregistered area")
}

// Size returns the bytes of area a in a job of npes PEs, as registered.
func (a *Area) Size(npes int) uint64 { return a.size(npes) }

// Bytes returns area a of PE pe's control block.
func (s *Space) Bytes(a *Area, pe int) []byte {
	o := uint64(s.CBSeg(pe, a.Off(s.NPEs)))
	n := a.size(s.NPEs)
	return s.base[o : o+n : o+n]
}

// Control returns the fixed part of PE pe's control block.
func (s *Space) Control(pe int) []byte {
	o := uint64(s.CBSeg(pe, 0))
	return s.base[o : o+ControlSize : o+ControlSize]
}

// WMem returns the segment as the runtime writes it: Mem, or in protected
// mode the writable alias, where other PEs' symmetric heaps are writable.
func (s *Space) WMem() []byte { return s.wbase }
