// Package dlmalloc is a dlmalloc-style allocator (after Doug Lea's malloc,
// the ancestor of glibc's ptmalloc and of Open MPI's memheap "ptmalloc"
// component) over a region of shared memory: boundary-tagged chunks,
// exact-size small bins, size-sorted large bins, immediate coalescing and a
// top chunk, with all metadata inside the region. The region is its only
// memory source: there is no sbrk or mmap fallback. It registers itself as
// the "dlmalloc" component.
//
// # Region layout
//
//	0          common header (region.Header)
//	192        dlmalloc header (hdr): bin maps, the top chunk, 32 small-bin
//	           heads, 256 large-bin heads and tails
//	bitsOff    start bitmap: one bit per 16 bytes, set at the user offset
//	           of every chunk in use (exact detection of bad frees)
//	first-8    the chunks, then a used sentinel of size 0 at end
//
// # Chunks
//
// A chunk is named by its user offset u (16-aligned). The word at u-8 holds
// its size (a multiple of 16, at least 32) and two flags: cInuse clear
// marks a free chunk, pFree that the previous chunk is free. A free chunk
// keeps its forward and back bin links at u and u+8 and its size again in
// its last word (the boundary tag, u+size-16), where its successor finds it
// to coalesce backwards. A used chunk gives the caller size-8 bytes.
//
// # Bins and top
//
//   - Small bins hold free chunks of one exact size each, 32 to 496 bytes
//     (bin size/16). smallMap marks the non-empty ones.
//   - Large bins hold chunks of 512 bytes and up, four bins per power of
//     two; each list is sorted by size, then offset, so the head is the best
//     fit of its bin. largeMap marks the non-empty ones.
//   - The top chunk is the free chunk that ends at the sentinel, if any.
//     It is in no bin; it is carved only when no bin can serve a request.
//
// # Alloc
//
//  1. Reject impossible sizes first; nb = size+8 rounded up to 16, >= 32.
//  2. Small request: the exact bin, else the next non-empty small bin (a
//     bitmap scan).
//  3. Else the best fit of the large bins: scan nb's own bin (sorted) for
//     the first chunk >= nb, else the head of the next non-empty bin.
//  4. Else carve the top chunk. Else ErrOutOfMemory.
//  5. Unlink the chunk; split off the remainder if it is at least 32 bytes
//     (it goes back to a bin, or becomes the top if it touches the end).
//
// # Free
//
//  1. Validate without writing (region, alignment, start bit, size word).
//  2. Coalesce with a free predecessor (found through the boundary tag)
//     and a free successor (which may be the top).
//  3. The result becomes the top if it touches the end, else goes to its
//     bin.
//
// # Invariants (verified by Check)
//
// Chunks tile the heap; no two free chunks are adjacent; flags and boundary
// tags agree; every free chunk but the top is in exactly its bin, in order,
// and the maps mark exactly the non-empty bins; the top, when present, is
// the last chunk; the start bitmap marks exactly the used chunks; the
// counters match the chunks.
//
// The allocator is not safe for concurrent use; see alloc.Locked.
package dlmalloc

import (
	"math/bits"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/alloc/internal/region"
)

// Name is the registered component name.
const Name = "dlmalloc"

// Priority is the component's selection priority: second to tlsf, which
// is faster on every workload of alloc/bench_test.go with the same memory
// use; ahead of buddy, which is faster than dlmalloc but wastes about a
// fifth of what it hands out.
const Priority = 20

// MinRegion is the smallest region the component accepts.
const MinRegion = 64 << 10

const (
	version = 1

	hdrWord     = 8
	minChunk    = 32
	cFree       = 1 // this chunk is free ("not in use")
	pFree       = 2 // the previous chunk is free
	fMask       = 15
	smallLimit  = 512 // chunks below this size live in small bins
	nSmall      = smallLimit / 16
	nLarge      = 256
	largePerPow = 4
	hdrOff      = region.HeaderSize
	bitsGran    = alloc.MinAlign
)

type hdr struct {
	smallMap  uint64              // bit i: small[i] non-empty
	largeMap  [nLarge / 64]uint64 // bit i: large[i] non-empty
	top       uint64              // user offset of the top chunk; 0: none
	bitsOff   uint64
	first     uint64 // user offset of the first chunk
	end       uint64 // user offset of the sentinel
	small     [nSmall]uint64
	large     [nLarge]uint64
	largeTail [nLarge]uint64
}

func layout(size uint64) (bitsOff, first, end uint64) {
	bitsOff = (hdrOff + region.Sizeof[hdr]() + 63) &^ 63
	first = (bitsOff + region.BitmapBytes(size/bitsGran) + 16 + 15) &^ 15
	end = size &^ 15
	return
}

// Overhead returns the bytes of a region of size bytes that can never be
// handed out: headers (about 6.7 KiB), the start bitmap (size/128), the
// size word of the empty heap's single chunk and the sentinel. On an empty
// heap the largest allocation is exactly size - Overhead(size).
func Overhead(size uint64) uint64 {
	_, first, end := layout(size)
	if end < first+minChunk {
		return size
	}
	return size - (end - first - hdrWord)
}

// Allocator is a dlmalloc-style heap over one region.
type Allocator struct {
	m      region.Mem
	c      *region.Header
	h      *hdr
	starts region.Bitmap
	first  uint64
	end    uint64
	maxReq uint64
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

// Format writes an empty heap (one top chunk) into mem.
func Format(mem []byte) (*Allocator, error) {
	m := region.NewMem(mem)
	if err := region.CheckMem(Name, m, MinRegion); err != nil {
		return nil, err
	}
	bitsOff, first, end := layout(m.Len())
	c := region.Init(m, region.CompDlmalloc, version, first-16)
	region.Zero(m, hdrOff, bitsOff+region.BitmapBytes(m.Len()/bitsGran)-hdrOff)
	h := region.Ptr[hdr](m, hdrOff)
	h.bitsOff, h.first, h.end = bitsOff, first, end
	c.Param = [4]uint64{bitsOff, first, end, 0}
	a := newAllocator(m, c, h)
	*a.sw(end) = pFree
	a.setFree(first, end-first, 0)
	a.link(first, end-first)
	c.C.Blocks = 1
	region.Publish(c)
	return a, nil
}

// Attach opens a region formatted by Format, in any process.
func Attach(mem []byte) (*Allocator, error) {
	m := region.NewMem(mem)
	c, err := region.Open(Name, m, region.CompDlmalloc, version, MinRegion)
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
		first:  h.first, end: h.end,
		maxReq: h.end - h.first - hdrWord,
	}
}

// Name returns "dlmalloc".
func (a *Allocator) Name() string { return Name }

// LockWord returns the region's word for the cross-process alloc.Lock.
func (a *Allocator) LockWord() *uint32 { return &a.c.Lock }

// ---- chunk words ----

func (a *Allocator) sw(u uint64) *uint64  { return a.m.U64(u - hdrWord) }
func (a *Allocator) size(u uint64) uint64 { return *a.m.U64(u - hdrWord) &^ fMask }
func (a *Allocator) fd(u uint64) *uint64  { return a.m.U64(u) }
func (a *Allocator) bk(u uint64) *uint64  { return a.m.U64(u + 8) }

// setFree writes the size word (with the given pFree flag) and the
// boundary tag of free chunk u of size s.
func (a *Allocator) setFree(u, s, prevFlag uint64) {
	*a.sw(u) = s | cFree | prevFlag
	*a.m.U64(u + s - 16) = s
}

// ---- bins ----

// largeIndex is the large bin of a chunk of size s >= smallLimit.
func largeIndex(s uint64) uint {
	f := uint(bits.Len64(s)) - 1
	return (f-9)*largePerPow + uint(s>>(f-2))&(largePerPow-1)
}

// link files free chunk u of size s (header and tag written): it becomes
// the top if it ends at the sentinel, else goes to its bin.
func (a *Allocator) link(u, s uint64) {
	h := a.h
	if u+s == a.end {
		h.top = u
		return
	}
	if s < smallLimit {
		i := s >> 4 & (nSmall - 1)
		head := h.small[i]
		*a.fd(u), *a.bk(u) = head, 0
		if head != 0 {
			*a.bk(head) = u
		}
		h.small[i] = u
		h.smallMap |= 1 << i
		return
	}
	i := largeIndex(s) & (nLarge - 1)
	// Sorted by (size, offset): find the first chunk that sorts after u.
	next := h.large[i]
	for next != 0 {
		if ns := a.size(next); ns > s || ns == s && next > u {
			break
		}
		next = *a.fd(next)
	}
	var prev uint64
	if next != 0 {
		prev = *a.bk(next)
		*a.bk(next) = u
	} else {
		prev = h.largeTail[i]
		h.largeTail[i] = u
	}
	if prev != 0 {
		*a.fd(prev) = u
	} else {
		h.large[i] = u
	}
	*a.fd(u), *a.bk(u) = next, prev
	h.largeMap[i/64] |= 1 << (i % 64)
}

// unlink takes free chunk u of size s out of its bin (or the top).
func (a *Allocator) unlink(u, s uint64) {
	h := a.h
	if u == h.top {
		h.top = 0
		return
	}
	next, prev := *a.fd(u), *a.bk(u)
	if s < smallLimit {
		i := s >> 4 & (nSmall - 1)
		if next != 0 {
			*a.bk(next) = prev
		}
		if prev != 0 {
			*a.fd(prev) = next
		} else if h.small[i] = next; next == 0 {
			h.smallMap &^= 1 << i
		}
		return
	}
	i := largeIndex(s) & (nLarge - 1)
	if next != 0 {
		*a.bk(next) = prev
	} else {
		h.largeTail[i] = prev
	}
	if prev != 0 {
		*a.fd(prev) = next
	} else if h.large[i] = next; next == 0 {
		h.largeMap[i/64] &^= 1 << (i % 64)
	}
}

// nextLarge returns the first non-empty large bin at or above i, or nLarge.
func (a *Allocator) nextLarge(i uint) uint {
	for w := i / 64; w < nLarge/64; w++ {
		m := a.h.largeMap[w]
		if w == i/64 {
			m &= ^uint64(0) << (i % 64)
		}
		if m != 0 {
			return w*64 + uint(bits.TrailingZeros64(m))
		}
	}
	return nLarge
}

// find returns a free chunk of at least nb bytes (binned or the top), or
// 0: small bins, then best fit in the large bins, then the top.
func (a *Allocator) find(nb uint64) uint64 {
	h := a.h
	var li uint
	if nb < smallLimit {
		if m := h.smallMap >> (nb >> 4) << (nb >> 4); m != 0 {
			return h.small[bits.TrailingZeros64(m)&(nSmall-1)]
		}
	} else {
		li = largeIndex(nb)
		for u := h.large[li&(nLarge-1)]; u != 0; u = *a.fd(u) {
			if a.size(u) >= nb {
				return u
			}
		}
		li++
	}
	if li = a.nextLarge(li); li < nLarge {
		return h.large[li]
	}
	if t := h.top; t != 0 && a.size(t) >= nb {
		return t
	}
	return 0
}

// use turns free chunk u (unlinked) into a used chunk of nb bytes, filing
// the remainder when it can stand alone.
func (a *Allocator) use(u, nb uint64) {
	w := *a.sw(u)
	s := w &^ fMask
	if s-nb >= minChunk {
		r := u + nb
		a.setFree(r, s-nb, 0)
		a.link(r, s-nb)
		a.c.C.Blocks++
		s = nb
	} else {
		*a.sw(u + s) &^= pFree
	}
	*a.sw(u) = s | w&pFree
	a.starts.Set(u / bitsGran)
	a.c.C.InUse += s - hdrWord
}

func chunkSize(n uint64) uint64 {
	nb := (n + hdrWord + 15) &^ 15
	if nb < minChunk {
		nb = minChunk
	}
	return nb
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
	if size > a.maxReq {
		return 0, a.oom(size, al)
	}
	nb := chunkSize(size)
	var u uint64
	if al == alloc.MinAlign {
		if u = a.find(nb); u == 0 {
			return 0, a.oom(size, al)
		}
		a.unlink(u, a.size(u))
	} else if u = a.carveAligned(nb, al); u == 0 {
		return 0, a.oom(size, al)
	}
	a.use(u, nb)
	a.c.C.Allocs++
	if region.Verify {
		region.MustCheck(Name, "Alloc", a.Check)
	}
	return alloc.Off(u), nil
}

// carveAligned finds a free chunk that can hold nb bytes at an offset
// aligned to al, unlinks it, cuts off (and files) the free chunk before the
// aligned offset, and returns the aligned chunk, still marked free.
func (a *Allocator) carveAligned(nb, al uint64) uint64 {
	u := a.find(nb + al + minChunk)
	if u == 0 {
		return 0
	}
	s := a.size(u)
	a.unlink(u, s)
	ua := (u + al - 1) &^ (al - 1)
	if ua == u {
		return u
	}
	if ua-u < minChunk {
		ua += al
	}
	g := ua - u
	a.setFree(u, g, 0)
	a.link(u, g)
	*a.sw(ua) = (s - g) | cFree | pFree
	a.c.C.Blocks++
	return ua
}

// lookup validates a user offset without writing and returns its size
// word.
func (a *Allocator) lookup(op string, off alloc.Off) (uint64, error) {
	u := uint64(off)
	switch {
	case u < a.first || u >= a.end:
		return 0, region.BadFree(Name, op, off, "outside the heap")
	case u%alloc.MinAlign != 0:
		return 0, region.BadFree(Name, op, off, "misaligned, not a chunk start")
	case !a.starts.Test(u / bitsGran):
		return 0, region.BadFree(Name, op, off, "not a chunk in use (double free, or inside a chunk)")
	}
	w := *a.sw(u)
	if s := w &^ fMask; w&cFree != 0 || s < minChunk || s > a.end-u {
		return 0, region.BadFree(Name, op, off, "heap metadata corrupted (chunk size word overwritten?)")
	}
	return w, nil
}

// Free releases the block at off.
func (a *Allocator) Free(off alloc.Off) error {
	// Step 1 inline; lookup repeats it to say what is wrong.
	u := uint64(off)
	if u-a.first >= a.end-a.first || u%alloc.MinAlign != 0 || !a.starts.Test(u/bitsGran) {
		return a.badFree(off)
	}
	w := *a.sw(u)
	if s := w &^ fMask; w&cFree != 0 || s < minChunk || s > a.end-u {
		return a.badFree(off)
	}
	a.starts.Clear(u / bitsGran)
	a.c.C.InUse -= w&^fMask - hdrWord
	a.c.C.Frees++
	a.release(u, w)
	if region.Verify {
		region.MustCheck(Name, "Free", a.Check)
	}
	return nil
}

// badFree returns lookup's verdict on an offset Free refused.
func (a *Allocator) badFree(off alloc.Off) error {
	_, err := a.lookup("free", off)
	a.c.C.Failed++
	return err
}

// release makes used chunk u (size word w, start bit cleared) free,
// coalescing with its neighbours, and files the result.
func (a *Allocator) release(u, w uint64) {
	s := w &^ fMask
	if w&pFree != 0 {
		ps := *a.m.U64(u - 16)
		u -= ps
		a.unlink(u, ps)
		s += ps
		a.c.C.Blocks--
	}
	n := u + s
	if nw := *a.sw(n); nw&cFree != 0 {
		ns := nw &^ fMask
		a.unlink(n, ns)
		s += ns
		a.c.C.Blocks--
		n = u + s
	}
	a.setFree(u, s, 0)
	*a.sw(n) |= pFree
	a.link(u, s)
}

// Realloc resizes the block at off, in place when it can: shrinking splits
// the tail off, growing takes the free chunk (or top) that follows if it is
// big enough. Otherwise it allocates a new chunk (aligned to MinAlign only),
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
	nb := chunkSize(size)
	switch {
	case nb <= s:
		if s-nb >= minChunk {
			*a.sw(u) = nb | w&pFree
			a.c.C.InUse -= s - nb
			a.c.C.Blocks++
			a.release(u+nb, s-nb)
		}
	case a.grow(u, w, nb):
	default:
		nu, err := a.Alloc(size, 0)
		if err != nil {
			return 0, err
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

// grow extends used chunk u into the free chunk after it (binned or top).
func (a *Allocator) grow(u, w, nb uint64) bool {
	s := w &^ fMask
	n := u + s
	nw := *a.sw(n)
	if nw&cFree == 0 || s+nw&^fMask < nb {
		return false
	}
	ns := nw &^ fMask
	a.unlink(n, ns)
	a.c.C.Blocks--
	t := s + ns
	if t-nb >= minChunk {
		a.setFree(u+nb, t-nb, 0)
		a.link(u+nb, t-nb)
		a.c.C.Blocks++
		t = nb
	} else {
		*a.sw(u + t) &^= pFree
	}
	*a.sw(u) = t | w&pFree
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
