// Package buddy is a binary buddy allocator (the scheme of Open MPI's memheap
// "buddy" component) over a region of shared memory, with 64-bit offsets
// and all metadata inside the region. It registers itself as the "buddy"
// component.
//
// # The tree
//
// The region's offsets [0, 2^R) form a complete binary tree of blocks: a
// node of order k covers [i*2^k, (i+1)*2^k), its children are the two
// halves, its buddy the other half of its parent. Orders run from MinOrder
// (16 bytes) to R, the smallest power of two covering the region. Because
// a block of order k starts at a multiple of 2^k from the region's first
// byte, and that byte is aligned to alloc.MaxAlign, every block is aligned
// to its size (up to MaxAlign) in every process.
//
// The real region [0, end) (end: the size rounded down to 16) need not be
// a power of two. Its metadata occupies [0, data). Format decomposes
// [data, end) greedily into the largest aligned blocks that fit, so no
// block ever reaches past end or into the metadata; the tree nodes that
// cover metadata or lie past the end are never free, so nothing merges
// with them.
//
// # Metadata, per order k
//
//   - free bitmap: bit i set when node (k, i) is a free block;
//   - split bitmap (k > MinOrder): bit i set when node (k, i) is divided
//     into its children. The order of an allocated block at offset b is
//     therefore kept in the region: the block is the leaf holding b, the
//     first node on the way up from MinOrder whose parent is split (nothing
//     inside a leaf is split). Free needs only the offset, and an offset
//     that is not that leaf's start (interior offset) or whose leaf is free
//     (double free) is refused exactly;
//   - a doubly linked free list through the free blocks themselves (next at
//     the block's offset, previous at +8), a free count, and a bit in
//     nonEmpty, so that allocation finds the smallest order with a free
//     block in O(1).
//
// # Alloc (size, align)
//
//  1. Order k: the smallest power of two >= size (at least MinOrder); the
//     search starts at max(k, log2(align)): a block of that order or above
//     is aligned enough.
//  2. Take the head of the lowest non-empty list at or above it.
//  3. Split it down to order k, keeping the lower half each time (so the
//     alignment is kept), setting split bits and listing the upper halves.
//
// # Free (offset)
//
//  1. Find the block's order by the walk up the split bits; refuse bad
//     offsets without writing anything.
//  2. While the buddy is a free block of the same order: unlist it, clear
//     the parent's split bit, and go up to the parent.
//  3. Mark the result free and list it.
//
// # Invariants (verified by Check)
//
// No two buddies are both free; a node is at most one of free and split;
// the free and split bitmaps have bits exactly on the free leaves and the
// split nodes reachable from the root; the lists hold exactly the free
// blocks of their order; counters match the tree.
//
// Overhead: the metadata (about size/43: 1/64 for the free bitmaps and
// 1/128 for the split bitmaps, plus a 2.3 KiB header) and the few bytes
// past the last multiple of 16. A single allocation on an empty heap is at
// most the largest free block, a power of two (a quarter to a half of the
// region), not the region less the metadata: Stats.LargestFree says which.
//
// The allocator is not safe for concurrent use; see alloc.Locked.
package buddy

import (
	"math/bits"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/alloc/internal/region"
)

// Name is the registered component name.
const Name = "buddy"

// Priority is the component's selection priority, the lowest of the three.
// In alloc/bench_test.go buddy is faster than dlmalloc (slower than tlsf
// on small blocks, level with it on large ones) but wastes memory: power-of-two rounding leaves about a fifth of
// the bytes it hands out unused (util 0.80 against 0.998 in
// BenchmarkFragmentation), which a fixed-size symmetric heap cannot afford
// by default.
const Priority = 10

// MinOrder is the order of the smallest block (16 bytes).
const MinOrder = 4

// MinRegion is the smallest region the component accepts.
const MinRegion = 64 << 10

const (
	version  = 1
	hdrOff   = region.HeaderSize
	maxOrder = 63
)

type hdr struct {
	root      uint64     // R: order of the root node
	data      uint64     // first offset of the heap; metadata below
	end       uint64     // region size rounded down to 16
	nonEmpty  uint64     // bit k: free list k is non-empty
	freeBits  [64]uint64 // offset of the free bitmap of order k
	splitBits [64]uint64 // offset of the split bitmap of order k (k > MinOrder)
	count     [64]uint64 // free blocks of order k
	head      [64]uint64 // free list heads; 0 = empty
}

// layout returns the root order, the metadata end and the usable end of a
// region of size bytes, and fills in the bitmap offsets of h if not nil.
func layout(size uint64, h *hdr) (root, data, end uint64) {
	end = size &^ 15
	root = uint64(bits.Len64(end - 1))
	off := (hdrOff + region.Sizeof[hdr]() + 63) &^ 63
	for k := uint64(MinOrder); k <= root; k++ {
		if h != nil {
			h.freeBits[k] = off
		}
		off += region.BitmapBytes(nodes(end, k))
	}
	for k := uint64(MinOrder + 1); k <= root; k++ {
		if h != nil {
			h.splitBits[k] = off
		}
		off += region.BitmapBytes(nodes(end, k))
	}
	return root, (off + 15) &^ 15, end
}

// nodes is the number of order-k nodes that start below end.
func nodes(end, k uint64) uint64 { return (end-1)>>k + 1 }

// Overhead returns the bytes of a region of size bytes that are not
// blocks: the metadata and the tail past the last multiple of 16. On an
// empty heap Free is size - Overhead(size), spread over a few blocks.
func Overhead(size uint64) uint64 {
	_, data, end := layout(size, nil)
	if data >= end {
		return size
	}
	return data + size - end
}

// Allocator is a buddy heap over one region.
type Allocator struct {
	m    region.Mem
	c    *region.Header
	h    *hdr
	root uint64
	data uint64
	end  uint64
}

var _ alloc.Allocator = (*Allocator)(nil)

func init() {
	alloc.Register(alloc.Component{
		Name:     Name,
		Priority: Priority,
		Probe:    probe,
		Format:   func(mem []byte) (alloc.Allocator, error) { return Format(mem) },
		Attach:   func(mem []byte) (alloc.Allocator, error) { return Attach(mem) },
	})
}

func probe(size uint64) error {
	if size < MinRegion {
		return errSmall(size)
	}
	return nil
}

// Format writes an empty heap into mem.
func Format(mem []byte) (*Allocator, error) {
	m := region.NewMem(mem)
	if err := region.CheckMem(Name, m, MinRegion); err != nil {
		return nil, err
	}
	root, data, end := layout(m.Len(), nil)
	c := region.Init(m, region.CompBuddy, version, data)
	region.Zero(m, hdrOff, data-hdrOff)
	h := region.Ptr[hdr](m, hdrOff)
	layout(m.Len(), h)
	h.root, h.data, h.end = root, data, end
	c.Param = [4]uint64{MinOrder, root, data, end}
	a := newAllocator(m, c, h)
	// Greedy decomposition of [data, end) into maximal aligned blocks.
	for b := data; b < end; {
		k := uint64(bits.TrailingZeros64(b))
		for b+1<<k > end {
			k--
		}
		a.setFree(k, b)
		a.push(k, b)
		for j := k + 1; j <= root && !a.split(j, b); j++ {
			a.setSplit(j, b)
		}
		c.C.Blocks++
		b += 1 << k
	}
	region.Publish(c)
	return a, nil
}

// Attach opens a region formatted by Format, in any process.
func Attach(mem []byte) (*Allocator, error) {
	m := region.NewMem(mem)
	c, err := region.Open(Name, m, region.CompBuddy, version, MinRegion)
	if err != nil {
		return nil, err
	}
	h := region.Ptr[hdr](m, hdrOff)
	var want hdr
	root, data, end := layout(m.Len(), &want)
	if h.root != root || h.data != data || h.end != end || h.freeBits != want.freeBits || h.splitBits != want.splitBits {
		return nil, errLayout(h.root, h.data, h.end)
	}
	return newAllocator(m, c, h), nil
}

func newAllocator(m region.Mem, c *region.Header, h *hdr) *Allocator {
	return &Allocator{m: m, c: c, h: h, root: h.root, data: h.data, end: h.end}
}

// Name returns "buddy".
func (a *Allocator) Name() string { return Name }

// LockWord returns the region's word for the cross-process alloc.Lock.
func (a *Allocator) LockWord() *uint32 { return &a.c.Lock }

// ---- bitmaps: node (k, b) is the order-k node that starts at offset b ----

func (a *Allocator) freeMap(k uint64) region.Bitmap {
	return region.Bitmap{M: a.m, Off: a.h.freeBits[k&maxOrder]}
}

func (a *Allocator) splitMap(k uint64) region.Bitmap {
	return region.Bitmap{M: a.m, Off: a.h.splitBits[k&maxOrder]}
}

func (a *Allocator) free(k, b uint64) bool   { return a.freeMap(k).Test(b >> k) }
func (a *Allocator) setFree(k, b uint64)     { a.freeMap(k).Set(b >> k) }
func (a *Allocator) clearFree(k, b uint64)   { a.freeMap(k).Clear(b >> k) }
func (a *Allocator) split(k, b uint64) bool  { return k > MinOrder && a.splitMap(k).Test(b>>k) }
func (a *Allocator) setSplit(k, b uint64)    { a.splitMap(k).Set(b >> k) }
func (a *Allocator) clearSplit(k, b uint64)  { a.splitMap(k).Clear(b >> k) }
func (a *Allocator) exists(k, b uint64) bool { return b < a.end && b>>k < nodes(a.end, k) }

// ---- free lists ----

func (a *Allocator) push(k, b uint64) {
	h := a.h
	k &= maxOrder
	head := h.head[k]
	*a.m.U64(b), *a.m.U64(b + 8) = head, 0
	if head != 0 {
		*a.m.U64(head + 8) = b
	}
	h.head[k] = b
	h.count[k]++
	h.nonEmpty |= 1 << k
}

func (a *Allocator) unlist(k, b uint64) {
	h := a.h
	k &= maxOrder
	next, prev := *a.m.U64(b), *a.m.U64(b + 8)
	if next != 0 {
		*a.m.U64(next + 8) = prev
	}
	if prev != 0 {
		*a.m.U64(prev) = next
	} else {
		h.head[k] = next
	}
	if h.count[k]--; h.count[k] == 0 {
		h.nonEmpty &^= 1 << k
	}
}

// orderFor is the order of the block serving a request of n bytes
// (n <= end, so no overflow).
func orderFor(n uint64) uint64 {
	if n <= 1<<MinOrder {
		return MinOrder
	}
	return uint64(bits.Len64(n - 1))
}

// Alloc returns a block of at least size bytes aligned to align.
func (a *Allocator) Alloc(size, align uint64) (alloc.Off, error) {
	al := uint64(alloc.MinAlign)
	if align > alloc.MinAlign || align&(align-1) != 0 {
		var err error
		if al, err = alloc.CheckAlign(align); err != nil {
			a.c.C.Failed++
			return 0, err
		}
	}
	b, ok := a.take(size, al)
	if !ok {
		return 0, a.oom(size, al)
	}
	a.c.C.Allocs++
	if region.Verify {
		region.MustCheck(Name, "Alloc", a.Check)
	}
	return alloc.Off(b), nil
}

// take carves a block for size bytes aligned to al; false if none.
func (a *Allocator) take(size, al uint64) (uint64, bool) {
	if size > a.end {
		return 0, false
	}
	k := orderFor(size)
	need := max(k, uint64(bits.TrailingZeros64(al)))
	avail := a.h.nonEmpty >> need << need
	if avail == 0 {
		return 0, false
	}
	j := uint64(bits.TrailingZeros64(avail))
	b := a.h.head[j]
	a.unlist(j, b)
	a.clearFree(j, b)
	for ; j > k; j-- {
		a.setSplit(j, b)
		up := b + 1<<(j-1)
		a.setFree(j-1, up)
		a.push(j-1, up)
		a.c.C.Blocks++
	}
	a.c.C.InUse += 1 << k
	return b, true
}

// orderOf validates offset off without writing and returns the order of
// the allocated block there.
func (a *Allocator) orderOf(op string, off alloc.Off) (uint64, error) {
	b := uint64(off)
	switch {
	case b < a.data || b >= a.end:
		return 0, region.BadFree(Name, op, off, "outside the heap")
	case b%(1<<MinOrder) != 0:
		return 0, region.BadFree(Name, op, off, "misaligned, not a block start")
	}
	// The leaf holding b is the first node on the way up from MinOrder
	// whose parent is split: every node below a leaf is unsplit.
	k := uint64(MinOrder)
	for k < a.root && !a.split(k+1, b) {
		k++
	}
	switch {
	case b&(1<<k-1) != 0:
		return 0, region.BadFree(Name, op, off, "inside a block, not at its start")
	case a.free(k, b):
		return 0, region.BadFree(Name, op, off, "not an allocated block (double free?)")
	}
	return k, nil
}

// Free releases the block at off.
func (a *Allocator) Free(off alloc.Off) error {
	k, err := a.orderOf("free", off)
	if err != nil {
		a.c.C.Failed++
		return err
	}
	a.release(k, uint64(off))
	a.c.C.Frees++
	if region.Verify {
		region.MustCheck(Name, "Free", a.Check)
	}
	return nil
}

// release frees allocated block (k, b), merging it with free buddies.
func (a *Allocator) release(k, b uint64) {
	a.c.C.InUse -= 1 << k
	for k < a.root {
		bud := b ^ 1<<k
		if !a.exists(k, bud) || !a.free(k, bud) {
			break
		}
		a.unlist(k, bud)
		a.clearFree(k, bud)
		b &^= 1 << k
		k++
		a.clearSplit(k, b)
		a.c.C.Blocks--
	}
	a.setFree(k, b)
	a.push(k, b)
}

// Realloc resizes the block at off: in place when shrinking, or when
// growing and the buddies up to the new order are free; else it moves.
func (a *Allocator) Realloc(off alloc.Off, size uint64) (alloc.Off, error) {
	k, err := a.orderOf("realloc", off)
	if err != nil {
		a.c.C.Failed++
		return 0, err
	}
	if size > a.end {
		return 0, a.oom(size, alloc.MinAlign)
	}
	b := uint64(off)
	nk := orderFor(size)
	switch {
	case nk == k:
	case nk < k:
		for j := k; j > nk; j-- {
			a.setSplit(j, b)
			up := b + 1<<(j-1)
			a.setFree(j-1, up)
			a.push(j-1, up)
			a.c.C.Blocks++
		}
		a.c.C.InUse -= 1<<k - 1<<nk
	case a.growInPlace(b, k, nk):
	default:
		nb, ok := a.take(size, alloc.MinAlign)
		if !ok {
			return 0, a.oom(size, alloc.MinAlign)
		}
		a.m.Move(nb, b, 1<<k)
		a.release(k, b)
		a.c.C.Allocs++
		a.c.C.Frees++
		b = nb
	}
	a.c.C.Reallocs++
	if region.Verify {
		region.MustCheck(Name, "Realloc", a.Check)
	}
	return alloc.Off(b), nil
}

// growInPlace turns block (k, b) into (nk, b) if b is aligned to 2^nk and
// every buddy on the way up is a free block.
func (a *Allocator) growInPlace(b, k, nk uint64) bool {
	if nk > a.root || b&(1<<nk-1) != 0 {
		return false
	}
	for j := k; j < nk; j++ {
		if bud := b + 1<<j; !a.exists(j, bud) || !a.free(j, bud) {
			return false
		}
	}
	for j := k; j < nk; j++ {
		bud := b + 1<<j
		a.unlist(j, bud)
		a.clearFree(j, bud)
		a.clearSplit(j+1, b)
		a.c.C.Blocks--
	}
	a.c.C.InUse += 1<<nk - 1<<k
	return true
}

// UsableSize returns the size of the block at off.
func (a *Allocator) UsableSize(off alloc.Off) (uint64, error) {
	k, err := a.orderOf("usable size", off)
	if err != nil {
		a.c.C.Failed++
		return 0, err
	}
	return 1 << k, nil
}

// largest is the largest free block (any request up to it succeeds).
func (a *Allocator) largest() uint64 {
	if a.h.nonEmpty == 0 {
		return 0
	}
	return 1 << (63 - bits.LeadingZeros64(a.h.nonEmpty))
}

func (a *Allocator) oom(size, align uint64) error {
	a.c.C.Failed++
	return region.OutOfMemory(Name, size, align, a.c.Size, a.largest())
}
