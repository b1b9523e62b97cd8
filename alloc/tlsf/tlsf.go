// Package tlsf is a two-level segregated fit allocator (after Masmano et al.,
// "TLSF: a new dynamic memory allocator for real-time systems", 2004) over
// a region of shared memory: O(1) Alloc and Free, immediate coalescing,
// good-fit placement with bounded fragmentation, and all metadata inside
// the region so that any process mapping it, at any address, can Attach
// and free into it. It registers itself as the "tlsf" component.
//
// # Region layout
//
//	0                 common header (region.Header: magic, component id,
//	                  size, lock word, counters)
//	192               TLSF header (hdr): first-level bitmap, 64 second-level
//	                  bitmaps, 64x32 free-list heads, layout offsets
//	bitsOff           start bitmap: one bit per 16-byte granule, set at the
//	                  user offset of every live block
//	first-8 ... end   the blocks, then the end sentinel
//
// # Blocks
//
// A block is named by its user offset u (16-aligned). Its size word sits at
// u-8: the block size (distance to the next block's u, a multiple of 16, at
// least minBlock) with two flag bits, fFree (this block is free) and
// fPrev (the physically previous block is free). A free block also
// holds, at u and u+8, the offsets of the next and previous blocks in its
// free list (next 0 = none; the previous link of a list's head is stale and
// never used: the head is recognised by the list-head array, so popping it
// writes nothing into its successor), and stores its own offset in the
// last word of its span, u+size-16, which the next block reads as its
// "previous physical block" when it needs to coalesce backwards. A used
// block of size s gives the caller s-8 bytes: its payload runs up to the
// next block's size word.
// The end sentinel is a used block of size 0 at end, so the last real block
// always has a used successor.
//
// # Free lists
//
// Free blocks are segregated by size into classes (fl, sl): fl is the
// power of two of the size (fl 0 holds everything below 512 bytes), sl one
// of 32 equal steps inside it. flMap has bit fl set when some class of fl is
// non-empty, slMap[fl] bit sl when class (fl, sl) is. Lists are LIFO.
//
// # Alloc (size, align <= MinAlign)
//
//  1. Reject sizes that exceed the largest block the region could ever
//     hold (before any arithmetic can overflow).
//  2. Round size+8 up to 16 and to minBlock: nb.
//  3. Round nb up to the next class boundary and take the head of the
//     first non-empty class at or above it, found with two bit scans. Every
//     block there is >= nb. If there is none, scan the one class that nb
//     itself falls in for a block >= nb (the rare path that makes
//     LargestFree exact; never more than one list).
//  4. Unlink the block. If it is at least nb+minBlock, split off the tail
//     as a new free block and insert it. Mark the block used, set its start
//     bit.
//
// Larger alignments search for nb+align+minBlock, cut a leading free block
// off so that u lands on the alignment, then continue at step 4.
//
// # Free (u)
//
//  1. Validate without writing: u inside the block area, 16-aligned, its
//     start bit set (this rejects double frees and interior offsets
//     exactly, whatever the caller wrote into its blocks), size word sane.
//  2. Clear the start bit. If the previous block is free, unlink it and
//     merge; if the next is free, unlink it and merge.
//  3. Insert the result, store its offset in its last word and set the
//     fPrev flag of its successor.
//
// # Invariants (verified by Check)
//
//   - Blocks tile [first-8, end-8) exactly; no two free blocks are adjacent.
//   - fPrev of every block equals fFree of its predecessor; a free
//     block's last word holds its own offset.
//   - Every free block is in exactly the list of its class, and the bitmaps
//     mark exactly the non-empty lists.
//   - The start bitmap has exactly the user offsets of the used blocks.
//   - Counters: InUse = sum over used blocks of (size-8), Blocks counts
//     the real blocks, Allocs-Frees the used ones; free bytes follow as
//     (end-first) - InUse - 8*Blocks and equal the sum over free blocks of
//     (size-8).
//
// # Cost
//
// The paths above are the whole work: no loop but the one-list scan of the
// rare path, no allocation, no syscall. Measured with BenchmarkPeerMalloc
// (alloc/bench_test.go) and cachegrind, two things mattered:
//
//   - Branches that depend on the block at hand (its size class, whether
//     a list is empty, whether the block heads its list) mispredict about
//     half the time. mapping, searchClass, backLink, the list-emptiness
//     bitmap updates and remove are written without them (masks instead of
//     ifs; a "sink" word in the header absorbs the back link of a missing
//     list entry). That took most of the mispredictions of an alloc+free
//     pair away, and brought the pair from behind glibc malloc to par.
//   - Alloc's common path and Free are written out in full (release and
//     insert inlined by hand in Free): fewer instructions.
//
// (Measured: docs/bench/design-measurements.md, «alloc/tlsf/tlsf.go,
// branch-free paths».)
//
// The allocator is not safe for concurrent use; see alloc.Locked.
package tlsf

import (
	"math/bits"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/alloc/internal/region"
)

// Name is the registered component name.
const Name = "tlsf"

// Priority is the component's selection priority, the highest: in
// alloc/bench_test.go TLSF is the fastest of the three on small blocks (on
// par with glibc malloc), level with buddy on large ones, and as frugal
// with memory as dlmalloc, so it is the default.
const Priority = 30

const (
	version = 1

	alignLog2 = 4 // MinAlign
	slLog2    = 5 // 32 second-level classes per power of two
	slCount   = 1 << slLog2
	flShift   = slLog2 + alignLog2
	smallSize = 1 << flShift // below this, classes are 16 bytes apart
	flCount   = 64

	hdrWord  = 8  // size word of a block
	minBlock = 32 // links (16) + size word (8) + own-offset word (8)
	fFree    = 1  // this block is free
	fPrev    = 2  // the previous physical block is free
	fMask    = 15 // flag bits of a size word
	hdrOff   = region.HeaderSize
	bitsGran = alloc.MinAlign // one start bit per 16 bytes
)

// MinRegion is the smallest region the component accepts.
const MinRegion = 64 << 10

// hdr is the TLSF header, stored at offset hdrOff.
type hdr struct {
	flMap   uint64                   // bit fl: some slMap[fl] bit is set
	bitsOff uint64                   // offset of the start bitmap
	first   uint64                   // user offset of the first block
	end     uint64                   // user offset of the end sentinel
	slMap   [flCount]uint32          // bit sl: heads[fl][sl] != 0
	heads   [flCount][slCount]uint64 // free-list heads (user offsets; 0 = empty)
	sink    uint64                   // written instead of a missing list head's back link; never read
}

// layout computes where everything goes in a region of size bytes.
func layout(size uint64) (bitsOff, first, end uint64) {
	bitsOff = (hdrOff + region.Sizeof[hdr]() + 63) &^ 63
	bitsEnd := bitsOff + region.BitmapBytes(size/bitsGran)
	first = (bitsEnd + 16 + 15) &^ 15
	end = size &^ 15
	return
}

// Overhead returns the bytes of a region of size bytes that can never be
// handed out: the headers, the start bitmap (size/128 bytes), the size word
// of the single block of an empty heap, and the end sentinel. On an empty
// heap the largest possible allocation is exactly size - Overhead(size).
func Overhead(size uint64) uint64 {
	_, first, end := layout(size)
	if end < first+minBlock {
		return size
	}
	return size - (end - first - hdrWord)
}

// Allocator is a TLSF heap over one region.
type Allocator struct {
	m        region.Mem
	c        *region.Header
	h        *hdr
	starts   region.Bitmap
	first    uint64 // copies of h.first / h.end: immutable after Format
	end      uint64
	span     uint64 // end - first
	maxReq   uint64 // end - first - 8: no larger request can ever succeed
	sink     uint64 // offset of h.sink
	headsOff uint64 // offset of h.heads[0][0]
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

// Format writes an empty heap into mem, which must be aligned to
// alloc.MaxAlign and at least MinRegion bytes long.
func Format(mem []byte) (*Allocator, error) {
	m := region.NewMem(mem)
	if err := region.CheckMem(Name, m, MinRegion); err != nil {
		return nil, err
	}
	bitsOff, first, end := layout(m.Len())
	c := region.Init(m, region.CompTLSF, version, first-16)
	region.Zero(m, hdrOff, bitsOff+region.BitmapBytes(m.Len()/bitsGran)-hdrOff)
	h := region.Ptr[hdr](m, hdrOff)
	h.bitsOff, h.first, h.end = bitsOff, first, end
	c.Param = [4]uint64{bitsOff, first, end, 0}
	a := newAllocator(m, c, h)
	// One free block spanning everything, then the sentinel: used, size
	// 0, its predecessor free.
	*a.sw(end) = fPrev
	a.setFree(first, end-first)
	a.insert(first, end-first)
	c.C.Blocks = 1
	region.Publish(c)
	return a, nil
}

// Attach opens a region formatted by Format, possibly in another process
// and at another address.
func Attach(mem []byte) (*Allocator, error) {
	m := region.NewMem(mem)
	c, err := region.Open(Name, m, region.CompTLSF, version, MinRegion)
	if err != nil {
		return nil, err
	}
	h := region.Ptr[hdr](m, hdrOff)
	bitsOff, first, end := layout(m.Len())
	if h.bitsOff != bitsOff || h.first != first || h.end != end {
		return nil, errLayout(h.bitsOff, h.first, h.end)
	}
	return newAllocator(m, c, h), nil
}

func newAllocator(m region.Mem, c *region.Header, h *hdr) *Allocator {
	return &Allocator{
		m: m, c: c, h: h,
		starts: region.Bitmap{M: m, Off: h.bitsOff},
		first:  h.first, end: h.end, span: h.end - h.first,
		maxReq: h.end - h.first - hdrWord,
		sink:   m.OffsetOf(&h.sink), headsOff: m.OffsetOf(&h.heads[0][0]),
	}
}

// Name returns "tlsf".
func (a *Allocator) Name() string { return Name }

// LockWord returns the region's word for the cross-process alloc.Lock.
func (a *Allocator) LockWord() *uint32 { return &a.c.Lock }

// ---- block words ----

// sw is the size word of block u.
func (a *Allocator) sw(u uint64) *uint64 { return a.m.U64(u - hdrWord) }

// size is the size of block u.
func (a *Allocator) size(u uint64) uint64 { return *a.m.U64(u - hdrWord) &^ fMask }

// setFree marks u free with size s (its predecessor is used, as for every
// free block) and stores u in its last word for its successor.
func (a *Allocator) setFree(u, s uint64) {
	*a.m.U64(u - hdrWord) = s | fFree
	*a.m.U64(u + s - 16) = u
}

// ---- size classes ----

// mapping returns the class of a block of size s (a multiple of 16).
//
// It has no branch: the size class of a block is as unpredictable as the
// block, and a mispredicted branch here cost more than the arithmetic.
// Sizes below smallSize are or'ed up to a leading bit of 256 (f = 8, fl =
// 0) and shifted one place further, giving the 32 linear 16-byte classes;
// larger sizes lose their leading bit to the mask.
func mapping(s uint64) (fl, sl uint) {
	f := uint(bits.Len64(s|smallSize>>1)) - 1 // >= flShift-1
	fl = f - (flShift - 1)
	sh := f - slLog2 + uint((uint64(fl)-1)>>63) // one more when fl == 0
	return fl, uint(s>>sh) & (slCount - 1)
}

// searchClass returns the first class all of whose blocks are >= s (a
// multiple of 16): s rounded up to the next class boundary. Below
// smallSize the added 7 changes no class (they are 16 bytes apart), so
// there is no branch here either.
func searchClass(s uint64) (fl, sl uint) {
	return mapping(s + 1<<(uint(bits.Len64(s|smallSize>>1))-1-slLog2) - 1)
}

// ---- free lists ----

func (a *Allocator) insert(u, s uint64) {
	fl, sl := mapping(s)
	fl &= flCount - 1
	sl &= slCount - 1
	h := a.h
	head := h.heads[fl][sl]
	*a.m.U64(u) = head // u's back link is left as is: u is the head
	*a.m.U64(a.backLink(head)) = u
	h.heads[fl][sl] = u
	h.slMap[fl] |= 1 << sl
	h.flMap |= 1 << fl
}

func (a *Allocator) remove(u, s uint64) {
	fl, sl := mapping(s)
	fl &= flCount - 1
	sl &= slCount - 1
	h := a.h
	next, prev := *a.m.U64(u), *a.m.U64(u + 8)
	// Without branches (whether u heads its list is unpredictable): the
	// word that points to u is the list head when u is the head, else
	// prev's next link. A head's prev is stale, and so becomes next's
	// back link then, which is right: next is the new head.
	head := -((h.heads[fl][sl] ^ u - 1) >> 63) // all ones when u is the head
	*a.m.U64(prev&^head | (a.headsOff+uint64(fl*slCount+sl)*8)&head) = next
	*a.m.U64(a.backLink(next)) = prev
	m := h.slMap[fl] &^ (uint32(head&((next-1)>>63)) << sl) // the list is now empty
	h.slMap[fl] = m
	h.flMap &^= ((uint64(m) - 1) >> 63) << fl
}

// backLink is where to store the back link of list entry x: x+8, or the
// sink word when x is 0 (no entry). Computed with a mask, not a branch: an
// empty list is as unpredictable as the sizes (the compiler kept the
// branch for the if-form).
func (a *Allocator) backLink(x uint64) uint64 {
	mask := -((x - 1) >> 63) // all ones when x == 0
	return (x+8)&^mask | a.sink&mask
}

// find returns a free block of at least nb bytes, or 0.
func (a *Allocator) find(nb uint64) uint64 {
	fl, sl := searchClass(nb)
	h := a.h
	if fl < flCount {
		slm := h.slMap[fl] & (^uint32(0) << sl)
		if slm == 0 {
			flm := h.flMap & (^uint64(0) << (fl + 1))
			if flm != 0 {
				fl = uint(bits.TrailingZeros64(flm))
				slm = h.slMap[fl&(flCount-1)]
			}
		}
		if slm != 0 {
			return h.heads[fl&(flCount-1)][bits.TrailingZeros32(slm)&(slCount-1)]
		}
	}
	// Rare path: the class nb falls in may hold a block big enough.
	fl, sl = mapping(nb)
	for u := h.heads[fl&(flCount-1)][sl&(slCount-1)]; u != 0; u = *a.m.U64(u) {
		if a.size(u) >= nb {
			return u
		}
	}
	return 0
}

// use turns free block u (already unlinked) into a used block of nb bytes,
// splitting off and inserting the tail when it can stand alone.
func (a *Allocator) use(u, nb uint64) {
	w := *a.sw(u)
	s := w &^ fMask
	if s-nb >= minBlock {
		r := u + nb
		a.setFree(r, s-nb) // r's successor keeps fPrev set
		a.insert(r, s-nb)
		*a.sw(u) = nb | w&fPrev
		a.c.C.Blocks++
		s = nb
	} else {
		*a.sw(u) = s | w&fPrev
		*a.sw(u + s) &^= fPrev
	}
	a.starts.Set(u / bitsGran)
	a.c.C.InUse += s - hdrWord
}

// blockSize is the block size for a request of n bytes (n <= maxReq).
func blockSize(n uint64) uint64 {
	nb := (n + hdrWord + 15) &^ 15
	if nb < minBlock {
		nb = minBlock
	}
	return nb
}

// Alloc returns a block of at least size bytes aligned to align.
//
// The common path (MinAlign, a class at or above nb has a block) is written
// out in full here: steps 3 and 4 of the package comment, with the list
// head popped directly. It makes no call but insert (for a split-off tail)
// and allocates nothing.
func (a *Allocator) Alloc(size, align uint64) (alloc.Off, error) {
	if align > alloc.MinAlign || align&(align-1) != 0 {
		return a.allocAligned(size, align)
	}
	if size > a.maxReq {
		return 0, a.oom(size, alloc.MinAlign)
	}
	nb := blockSize(size)
	h := a.h
	fl, sl := searchClass(nb)
	fl &= flCount - 1
	slm := h.slMap[fl] & (^uint32(0) << sl)
	if slm == 0 {
		flm := h.flMap & (^uint64(0) << (fl + 1))
		if flm == 0 {
			return a.allocRare(size, nb)
		}
		fl = uint(bits.TrailingZeros64(flm)) & (flCount - 1)
		slm = h.slMap[fl]
	}
	sl = uint(bits.TrailingZeros32(slm)) & (slCount - 1)
	u := h.heads[fl][sl]
	next := *a.m.U64(u)
	h.heads[fl][sl] = next
	// Clear the bitmap bits of a list that is now empty, without a branch:
	// (x-1)>>63 is 1 exactly when x is 0.
	m := h.slMap[fl] &^ (uint32((next-1)>>63) << sl)
	h.slMap[fl] = m
	h.flMap &^= ((uint64(m) - 1) >> 63) << fl
	w := *a.m.U64(u - hdrWord)
	s := w &^ fMask
	c := &a.c.C
	if s-nb >= minBlock {
		r := u + nb
		a.setFree(r, s-nb) // r's successor keeps fPrev set
		a.insert(r, s-nb)
		*a.m.U64(u - hdrWord) = nb | w&fPrev
		c.Blocks++
		s = nb
	} else {
		*a.m.U64(u - hdrWord) = s | w&fPrev
		*a.m.U64(u + s - hdrWord) &^= fPrev
	}
	a.starts.Set(u / bitsGran)
	c.InUse += s - hdrWord
	c.Allocs++
	if region.Verify {
		region.MustCheck(Name, "Alloc", a.Check)
	}
	return alloc.Off(u), nil
}

// allocRare is Alloc when no class above nb's has a block: the one class
// nb falls in may still hold one big enough.
func (a *Allocator) allocRare(size, nb uint64) (alloc.Off, error) {
	u := a.find(nb)
	if u == 0 {
		return 0, a.oom(size, alloc.MinAlign)
	}
	a.remove(u, a.size(u))
	a.use(u, nb)
	a.c.C.Allocs++
	if region.Verify {
		region.MustCheck(Name, "Alloc", a.Check)
	}
	return alloc.Off(u), nil
}

func (a *Allocator) allocAligned(size, align uint64) (alloc.Off, error) {
	al, err := alloc.CheckAlign(align)
	if err != nil {
		a.c.C.Failed++
		return 0, err
	}
	if al == alloc.MinAlign {
		return a.Alloc(size, 0)
	}
	if size > a.maxReq {
		return 0, a.oom(size, al)
	}
	nb := blockSize(size)
	u := a.find(nb + al + minBlock)
	if u == 0 {
		// A block that happens to sit at the right place may still do.
		u = a.findAligned(nb, al)
		if u == 0 {
			return 0, a.oom(size, al)
		}
	}
	s := a.size(u)
	a.remove(u, s)
	if ua := (u + al - 1) &^ (al - 1); ua != u {
		if ua-u < minBlock {
			ua += al
		}
		// Cut [u, ua) off as a free block of its own; its predecessor is
		// used (u was free), and ua's predecessor is now free.
		g := ua - u
		a.setFree(u, g)
		a.insert(u, g)
		*a.sw(ua) = (s - g) | fFree | fPrev
		a.c.C.Blocks++
		u = ua
	}
	a.use(u, nb)
	a.c.C.Allocs++
	if region.Verify {
		region.MustCheck(Name, "Alloc", a.Check)
	}
	return alloc.Off(u), nil
}

// findAligned scans every free list, in class order, for a block that can
// hold nb bytes at an offset aligned to al without slack: the slow path
// used only when the O(1) search for nb+al+minBlock failed.
func (a *Allocator) findAligned(nb, al uint64) uint64 {
	h := a.h
	for flm := h.flMap; flm != 0; flm &= flm - 1 {
		fl := uint(bits.TrailingZeros64(flm))
		for slm := h.slMap[fl&(flCount-1)]; slm != 0; slm &= slm - 1 {
			sl := uint(bits.TrailingZeros32(slm))
			for u := h.heads[fl&(flCount-1)][sl&(slCount-1)]; u != 0; u = *a.m.U64(u) {
				s := a.size(u)
				ua := (u + al - 1) &^ (al - 1)
				if ua != u && ua-u < minBlock {
					ua += al
				}
				if ua-u <= s && s-(ua-u) >= nb {
					return u
				}
			}
		}
	}
	return 0
}

// lookup validates a user offset without writing anything and returns its
// size word.
func (a *Allocator) lookup(op string, off alloc.Off) (uint64, error) {
	u := uint64(off)
	switch {
	case u < a.first || u >= a.end:
		return 0, region.BadFree(Name, op, off, "outside the heap")
	case u%alloc.MinAlign != 0:
		return 0, region.BadFree(Name, op, off, "misaligned, not a block start")
	case !a.starts.Test(u / bitsGran):
		return 0, region.BadFree(Name, op, off, "not a live block (double free, or inside a block)")
	}
	w := *a.sw(u)
	if s := w &^ fMask; w&fFree != 0 || s < minBlock || s > a.end-u {
		return 0, region.BadFree(Name, op, off, "heap metadata corrupted (block size word overwritten?)")
	}
	return w, nil
}

// Free releases the block at off.
func (a *Allocator) Free(off alloc.Off) error {
	// Step 1 inline; lookup repeats it to say what is wrong.
	u := uint64(off)
	if u-a.first >= a.span || u%alloc.MinAlign != 0 || !a.starts.Test(u/bitsGran) {
		return a.badFree("free", off)
	}
	w := *a.m.U64(u - hdrWord)
	if s := w &^ fMask; w&fFree != 0 || s < minBlock || s > a.end-u {
		return a.badFree("free", off)
	}
	a.starts.Clear(u / bitsGran)
	c := &a.c.C
	s := w &^ fMask
	c.InUse -= s - hdrWord
	c.Frees++
	// Steps 2 and 3: release(u, w), written out.
	if w&fPrev != 0 {
		p := *a.m.U64(u - 16)
		ps := a.size(p)
		a.remove(p, ps)
		u, s = p, s+ps
		c.Blocks--
	}
	n := u + s
	nw := *a.m.U64(n - hdrWord)
	if nw&fFree != 0 {
		ns := nw &^ fMask
		a.remove(n, ns)
		s += ns
		c.Blocks--
		n = u + s
		nw = *a.m.U64(n - hdrWord)
	}
	*a.m.U64(u - hdrWord) = s | fFree
	*a.m.U64(n - 16) = u
	*a.m.U64(n - hdrWord) = nw | fPrev
	// insert(u, s), written out.
	fl, sl := mapping(s)
	fl &= flCount - 1
	sl &= slCount - 1
	h := a.h
	head := h.heads[fl][sl]
	*a.m.U64(u) = head
	*a.m.U64(a.backLink(head)) = u
	h.heads[fl][sl] = u
	h.slMap[fl] |= 1 << sl
	h.flMap |= 1 << fl
	if region.Verify {
		region.MustCheck(Name, "Free", a.Check)
	}
	return nil
}

// badFree returns lookup's verdict on an offset Free refused.
func (a *Allocator) badFree(op string, off alloc.Off) error {
	_, err := a.lookup(op, off)
	a.c.C.Failed++
	return err
}

// release turns used block u (size word w, start bit already cleared) into
// free space, coalescing with free neighbours.
func (a *Allocator) release(u, w uint64) {
	s := w &^ fMask
	if w&fPrev != 0 {
		p := *a.m.U64(u - 16)
		ps := a.size(p)
		a.remove(p, ps)
		u, s = p, s+ps
		a.c.C.Blocks--
	}
	n := u + s
	nw := *a.sw(n)
	if nw&fFree != 0 {
		ns := nw &^ fMask
		a.remove(n, ns)
		s += ns
		a.c.C.Blocks--
		n = u + s
		nw = *a.sw(n)
	}
	a.setFree(u, s)
	*a.sw(n) = nw | fPrev
	a.insert(u, s)
}

// Realloc resizes the block at off, in place when it can: shrinking splits
// the tail off, growing takes the free block that follows if it is big
// enough. Otherwise it allocates a new block (aligned to MinAlign only),
// copies and frees the old one; on failure the old block is untouched.
func (a *Allocator) Realloc(off alloc.Off, size uint64) (alloc.Off, error) {
	w, err := a.lookup("realloc", off)
	if err != nil {
		a.c.C.Failed++
		return 0, err
	}
	if size > a.maxReq {
		return 0, a.oom(size, alloc.MinAlign)
	}
	u := uint64(off)
	s := w &^ fMask
	nb := blockSize(size)
	switch {
	case nb <= s:
		// Shrink (or keep) in place.
		if s-nb >= minBlock {
			*a.sw(u) = nb | w&fPrev
			a.c.C.InUse -= s - nb
			a.c.C.Blocks++
			a.release(u+nb, s-nb) // predecessor (u) is used
		}
	case a.growInPlace(u, w, nb):
	default:
		nu, err := a.Alloc(size, 0)
		if err != nil {
			return 0, err // Alloc counted the failure
		}
		a.m.Move(uint64(nu), u, s-hdrWord)
		a.starts.Clear(u / bitsGran)
		a.c.C.InUse -= s - hdrWord
		a.c.C.Frees++
		a.release(u, *a.sw(u))
		u = uint64(nu)
	}
	a.c.C.Reallocs++
	if region.Verify {
		region.MustCheck(Name, "Realloc", a.Check)
	}
	return alloc.Off(u), nil
}

// growInPlace extends used block u (size word w) to nb bytes by taking the
// free block after it, if that is enough.
func (a *Allocator) growInPlace(u, w, nb uint64) bool {
	s := w &^ fMask
	n := u + s
	nw := *a.sw(n)
	if nw&fFree == 0 || s+nw&^fMask < nb {
		return false
	}
	ns := nw &^ fMask
	a.remove(n, ns)
	a.c.C.Blocks--
	t := s + ns
	if t-nb >= minBlock {
		r := u + nb
		a.setFree(r, t-nb)
		a.insert(r, t-nb)
		a.c.C.Blocks++
		t = nb
	} else {
		*a.sw(u + t) &^= fPrev
	}
	*a.sw(u) = t | w&fPrev
	a.c.C.InUse += t - s
	return true
}

// UsableSize returns the bytes the caller may use at off.
func (a *Allocator) UsableSize(off alloc.Off) (uint64, error) {
	w, err := a.lookup("usable size", off)
	if err != nil {
		a.c.C.Failed++
		return 0, err
	}
	return w&^fMask - hdrWord, nil
}

func (a *Allocator) oom(size, align uint64) error {
	a.c.C.Failed++
	return region.OutOfMemory(Name, size, align, a.c.Size, a.largest())
}
