package alloctest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/symheap/symheap/alloc"
)

// heap is an allocator under test together with a model of what it should
// hold: the live blocks, their usable sizes and the pattern written into
// each. Every operation goes through it, and it verifies the allocator
// against the model after each one.
type heap struct {
	t    testing.TB
	c    alloc.Component
	mem  []byte
	a    alloc.Allocator
	live map[alloc.Off]*block
	seed byte
	ops  int
	// fullEvery: verify every byte of every block each so many operations
	// (head and tail are verified after every one).
	fullEvery int
}

type block struct {
	size   uint64 // requested
	usable uint64
	align  uint64
	seed   byte
}

// newHeap formats a fresh region of size bytes.
func newHeap(t testing.TB, c alloc.Component, size uint64) *heap {
	t.Helper()
	return formatHeap(t, c, NewRegion(t, size))
}

func formatHeap(t testing.TB, c alloc.Component, mem []byte) *heap {
	t.Helper()
	a, err := c.Format(mem)
	if err != nil {
		t.Fatalf("%s: Format(%d bytes): %v", c.Name, len(mem), err)
	}
	h := &heap{t: t, c: c, mem: mem, a: a, live: map[alloc.Off]*block{}, fullEvery: 64}
	h.check("Format")
	// The last word: the checker once more, before the region goes (the
	// region's unmapping was registered first, so it runs after this).
	t.Cleanup(func() {
		if err := a.Check(); err != nil {
			t.Errorf("%s: Check at cleanup: %v", c.Name, err)
		}
	})
	return h
}

// alloc allocates and verifies; failure is fatal.
func (h *heap) alloc(size, align uint64) alloc.Off {
	h.t.Helper()
	off, err := h.tryAlloc(size, align)
	if err != nil {
		h.t.Fatalf("%s: Alloc(%d, %d) with %d live blocks: %v", h.c.Name, size, align, len(h.live), err)
	}
	return off
}

// tryAlloc allocates; an error is returned after verifying that the call
// changed nothing.
func (h *heap) tryAlloc(size, align uint64) (alloc.Off, error) {
	h.t.Helper()
	before := h.snapshot()
	off, err := h.a.Alloc(size, align)
	if err != nil {
		h.unchanged(before, fmt.Sprintf("failed Alloc(%d, %d)", size, align))
		return 0, err
	}
	h.adopt(off, size, align, fmt.Sprintf("Alloc(%d, %d)", size, align))
	h.check(fmt.Sprintf("Alloc(%d, %d) = %#x", size, align, off))
	return off, nil
}

// adopt records a block the allocator returned, after checking its
// placement, and fills it with a fresh pattern.
func (h *heap) adopt(off alloc.Off, size, align uint64, what string) {
	h.t.Helper()
	if _, dup := h.live[off]; dup {
		h.t.Fatalf("%s: %s returned %#x, which is already live", h.c.Name, what, off)
	}
	want := max(align, alloc.MinAlign)
	if align == 0 {
		want = alloc.MinAlign
	}
	if uint64(off)%want != 0 {
		h.t.Fatalf("%s: %s returned %#x, not aligned to %d", h.c.Name, what, off, want)
	}
	us, err := h.a.UsableSize(off)
	if err != nil {
		h.t.Fatalf("%s: UsableSize(%#x) after %s: %v", h.c.Name, off, what, err)
	}
	if us < size {
		h.t.Fatalf("%s: %s: usable size %d below the %d asked", h.c.Name, what, us, size)
	}
	if uint64(off) > uint64(len(h.mem)) || us > uint64(len(h.mem))-uint64(off) {
		h.t.Fatalf("%s: %s: block [%#x, +%d) runs past the region end %#x", h.c.Name, what, off, us, len(h.mem))
	}
	h.seed++
	b := &block{size: size, usable: us, align: align, seed: h.seed}
	h.live[off] = b
	fill(h.mem[off:uint64(off)+us], b.seed)
}

// free frees a live block; failure is fatal.
func (h *heap) free(off alloc.Off) {
	h.t.Helper()
	if _, ok := h.live[off]; !ok {
		h.t.Fatalf("alloctest: free of %#x, which the model does not hold", off)
	}
	h.verifyBlock(off, h.live[off], true)
	if err := h.a.Free(off); err != nil {
		h.t.Fatalf("%s: Free(%#x): %v", h.c.Name, off, err)
	}
	delete(h.live, off)
	h.check(fmt.Sprintf("Free(%#x)", off))
}

// realloc resizes a live block and verifies its contents moved with it.
func (h *heap) realloc(off alloc.Off, size uint64) (alloc.Off, error) {
	h.t.Helper()
	b, ok := h.live[off]
	if !ok {
		h.t.Fatalf("alloctest: realloc of %#x, which the model does not hold", off)
	}
	before := h.snapshot()
	n, err := h.a.Realloc(off, size)
	if err != nil {
		h.unchanged(before, fmt.Sprintf("failed Realloc(%#x, %d)", off, size))
		h.verifyBlock(off, b, true)
		return 0, err
	}
	us, err := h.a.UsableSize(n)
	if err != nil {
		h.t.Fatalf("%s: UsableSize(%#x) after Realloc: %v", h.c.Name, n, err)
	}
	if us < size {
		h.t.Fatalf("%s: Realloc(%#x, %d) = %#x with usable size %d", h.c.Name, off, size, n, us)
	}
	if uint64(n)%alloc.MinAlign != 0 || uint64(n)+us > uint64(len(h.mem)) {
		h.t.Fatalf("%s: Realloc(%#x, %d) = %#x (+%d): misplaced", h.c.Name, off, size, n, us)
	}
	// The old contents, up to the smaller size, must be at n now.
	keep := min(b.usable, size)
	if !patternOK(h.mem[n:uint64(n)+keep], b.seed, 0) {
		h.t.Fatalf("%s: Realloc(%#x, %d) = %#x lost the block's contents", h.c.Name, off, size, n)
	}
	delete(h.live, off)
	h.seed++
	nb := &block{size: size, usable: us, seed: h.seed}
	h.live[n] = nb
	fill(h.mem[n:uint64(n)+us], nb.seed)
	h.check(fmt.Sprintf("Realloc(%#x, %d) = %#x", off, size, n))
	return n, nil
}

// check runs the allocator's checker and compares it with the model.
func (h *heap) check(what string) {
	h.t.Helper()
	h.ops++
	if err := h.a.Check(); err != nil {
		h.t.Fatalf("%s: Check after %s: %v", h.c.Name, what, err)
	}
	st := h.a.Stats()
	var inUse uint64
	for _, b := range h.live {
		inUse += b.usable
	}
	switch {
	case st.Size != uint64(len(h.mem)):
		h.t.Fatalf("%s: after %s: Stats.Size %d, region %d", h.c.Name, what, st.Size, len(h.mem))
	case st.Live != uint64(len(h.live)):
		h.t.Fatalf("%s: after %s: Stats.Live %d, model %d", h.c.Name, what, st.Live, len(h.live))
	case st.InUse != inUse:
		h.t.Fatalf("%s: after %s: Stats.InUse %d, model %d", h.c.Name, what, st.InUse, inUse)
	case st.Allocs-st.Frees != st.Live:
		h.t.Fatalf("%s: after %s: %d allocs - %d frees != %d live", h.c.Name, what, st.Allocs, st.Frees, st.Live)
	case st.LargestFree > st.Free:
		h.t.Fatalf("%s: after %s: LargestFree %d > Free %d", h.c.Name, what, st.LargestFree, st.Free)
	case st.Overhead+st.InUse+st.Free > st.Size:
		h.t.Fatalf("%s: after %s: overhead %d + in use %d + free %d > size %d", h.c.Name, what, st.Overhead, st.InUse, st.Free, st.Size)
	}
	h.checkWalk(what)
	h.verifyAll(h.ops%h.fullEvery == 0)
}

// checkWalk verifies that Walk tiles part of the region in order, and that
// each live block lies inside exactly one used block of the walk.
func (h *heap) checkWalk(what string) {
	h.t.Helper()
	w := h.walk()
	var end uint64
	used := 0
	for i, b := range w {
		if i > 0 && b.off < end {
			h.t.Fatalf("%s: after %s: walk block %d at %#x overlaps the previous one (ends %#x)", h.c.Name, what, i, b.off, end)
		}
		if b.size == 0 || b.off+b.size > uint64(len(h.mem)) {
			h.t.Fatalf("%s: after %s: walk block %#x+%d outside the region", h.c.Name, what, b.off, b.size)
		}
		end = b.off + b.size
		if b.used {
			used++
		}
	}
	if used != len(h.live) {
		h.t.Fatalf("%s: after %s: walk shows %d used blocks, model has %d", h.c.Name, what, used, len(h.live))
	}
	for off, b := range h.live {
		i, _ := slices.BinarySearchFunc(w, uint64(off), func(x walkBlock, o uint64) int {
			if x.off > o {
				return 1
			}
			if x.off+x.size <= o {
				return -1
			}
			return 0
		})
		if i >= len(w) || !w[i].used || w[i].off > uint64(off) || w[i].off+w[i].size < uint64(off)+b.usable {
			h.t.Fatalf("%s: after %s: live block %#x+%d is not inside a used block of the walk", h.c.Name, what, off, b.usable)
		}
	}
}

// verifyAll checks that no two live blocks overlap and that their
// patterns survive: the whole of every block when full, else its first and
// last 64 bytes.
func (h *heap) verifyAll(full bool) {
	h.t.Helper()
	offs := make([]alloc.Off, 0, len(h.live))
	for off := range h.live {
		offs = append(offs, off)
	}
	slices.Sort(offs)
	for i, off := range offs {
		b := h.live[off]
		if i+1 < len(offs) && uint64(off)+b.usable > uint64(offs[i+1]) {
			h.t.Fatalf("%s: live blocks %#x+%d and %#x overlap", h.c.Name, off, b.usable, offs[i+1])
		}
		h.verifyBlock(off, b, full)
	}
}

func (h *heap) verifyBlock(off alloc.Off, b *block, full bool) {
	h.t.Helper()
	mem := h.mem[off : uint64(off)+b.usable]
	ok := true
	if full || b.usable <= 128 {
		ok = patternOK(mem, b.seed, 0)
	} else {
		tail := b.usable - 64
		ok = patternOK(mem[:64], b.seed, 0) && patternOK(mem[tail:], b.seed, tail)
	}
	if !ok {
		h.t.Fatalf("%s: contents of live block %#x+%d were overwritten", h.c.Name, off, b.usable)
	}
}

// freeAll frees every live block in a random order.
func (h *heap) freeAll(r interface{ Perm(int) []int }) {
	h.t.Helper()
	offs := h.liveOffs()
	for _, i := range r.Perm(len(offs)) {
		h.free(offs[i])
	}
}

// liveOffs lists the live blocks in offset order (deterministic).
func (h *heap) liveOffs() []alloc.Off {
	offs := make([]alloc.Off, 0, len(h.live))
	for off := range h.live {
		offs = append(offs, off)
	}
	slices.Sort(offs)
	return offs
}

// ---- snapshots: "the call changed nothing" ----

type walkBlock struct {
	off, size uint64
	used      bool
}

type snapshot struct {
	st   alloc.Stats
	walk []walkBlock
}

func (h *heap) walk() []walkBlock {
	h.t.Helper()
	var w []walkBlock
	err := h.a.Walk(func(off alloc.Off, size uint64, used bool) bool {
		w = append(w, walkBlock{uint64(off), size, used})
		return true
	})
	if err != nil {
		h.t.Fatalf("%s: Walk: %v", h.c.Name, err)
	}
	return w
}

func (h *heap) snapshot() snapshot { return snapshot{h.a.Stats(), h.walk()} }

// unchanged verifies that a failed call left the heap as it was (Stats
// other than Failed, which must have grown by one, and Walk), and that the
// live blocks still hold their patterns.
func (h *heap) unchanged(before snapshot, what string) {
	h.t.Helper()
	after := h.snapshot()
	if after.st.Failed != before.st.Failed+1 {
		h.t.Errorf("%s: %s: Stats.Failed went from %d to %d, want +1", h.c.Name, what, before.st.Failed, after.st.Failed)
	}
	b, a := before.st, after.st
	b.Failed, a.Failed = 0, 0
	if a != b {
		h.t.Fatalf("%s: %s changed the heap's figures:\nbefore %+v\nafter  %+v", h.c.Name, what, b, a)
	}
	if !slices.Equal(before.walk, after.walk) {
		h.t.Fatalf("%s: %s changed the heap's blocks", h.c.Name, what)
	}
	if err := h.a.Check(); err != nil {
		h.t.Fatalf("%s: Check after %s: %v", h.c.Name, what, err)
	}
	h.verifyAll(false)
}

// expectErr runs a call that must fail with target and change nothing.
func (h *heap) expectErr(target error, what string, call func() error) {
	h.t.Helper()
	before := h.snapshot()
	err := call()
	if !errors.Is(err, target) {
		h.t.Fatalf("%s: %s: got %v, want %v", h.c.Name, what, err, target)
	}
	if err.Error() == target.Error() {
		h.t.Errorf("%s: %s: error %q carries no detail", h.c.Name, what, err)
	}
	h.unchanged(before, what)
}

// ---- patterns ----

// A block's pattern repeats a 4 KiB template derived from the block's
// seed, so that filling and checking are copies and comparisons.
var templates = func() (ts [256][]byte) {
	for s := range ts {
		t := make([]byte, 4096)
		for i := range t {
			t[i] = byte(s)*29 + byte(i) + byte(i>>8)*7 + 1
		}
		ts[s] = t
	}
	return ts
}()

func template(seed byte) []byte { return templates[seed] }

func fill(b []byte, seed byte) {
	t := template(seed)
	for i := 0; i < len(b); i += len(t) {
		copy(b[i:], t)
	}
}

// patternOK reports whether b holds the pattern of seed, b starting at
// byte pos of the block.
func patternOK(b []byte, seed byte, pos uint64) bool {
	t := template(seed)
	for len(b) > 0 {
		p := pos % uint64(len(t))
		n := min(uint64(len(b)), uint64(len(t))-p)
		if !bytes.Equal(b[:n], t[p:p+n]) {
			return false
		}
		b = b[n:]
		pos += n
	}
	return true
}
