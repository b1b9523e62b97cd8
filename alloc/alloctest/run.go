// Package alloctest is the conformance suite for allocator components, in
// the manner of testing/fstest: Run checks that a component keeps every
// promise of the alloc package's contract, with the component's own
// checker and a model of the live blocks verified after every operation.
// Fuzz drives random operation sequences against the same model.
package alloctest

import (
	"errors"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/symheap/symheap/alloc"
)

// Run runs the conformance suite against c. Each check is a subtest.
//
// Overheads: the suite requires that on an empty heap Stats.Free +
// Stats.Overhead == Stats.Size, that a request of Stats.LargestFree bytes
// succeeds and one byte more fails, and that Overhead is small (at most
// 1/16 of the region plus 64 KiB). When a fresh region is one free block
// (a coalescing allocator), LargestFree must be exactly Size - Overhead;
// otherwise (buddy) it must be the largest free block of the walk.
func Run(t *testing.T, c alloc.Component) {
	if c.Format == nil || c.Attach == nil {
		t.Fatalf("alloctest: component %q lacks Format or Attach", c.Name)
	}
	tests := []struct {
		name string
		fn   func(*testing.T, alloc.Component)
	}{
		{"Basic", testBasic},
		{"Align", testAlign},
		{"Realloc", testRealloc},
		{"Coalesce", testCoalesce},
		{"Largest", testLargest},
		{"Fill80", testFill80},
		{"Random", testRandom},
		{"Determinism", testDeterminism},
		{"BadFree", testBadFree},
		{"Huge", testHuge},
		{"OddSize", testOddSize},
		{"Attach", testAttach},
		{"Large", testLarge},
		{"Probe", testProbe},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, c) })
	}
}

// SizeClassed is implemented by allocators that serve small requests from
// size classes (alloc/small): such a block is resized in place only
// within its class, so Realloc does not expect a fresh heap to grow one
// into the free space after it.
type SizeClassed interface {
	ClassSize(size uint64) (usable uint64, ok bool)
}

// randSize returns a size spread log-uniformly over [lo, hi): a power of
// two drawn uniformly, plus up to as much again.
func randSize(r *rand.Rand, lo, hi uint64) uint64 {
	k := bits.Len64(hi/lo) - 1
	n := lo << r.IntN(k+1)
	return min(n+r.Uint64N(n), hi-1)
}

func testBasic(t *testing.T, c alloc.Component) {
	h := newHeap(t, c, 1<<20)
	if h.a.Name() != c.Name {
		t.Errorf("Name() = %q, component is %q", h.a.Name(), c.Name)
	}
	var offs []alloc.Off
	for _, n := range []uint64{0, 1, 7, 8, 15, 16, 17, 24, 31, 32, 33, 100, 1000, 4095, 4096, 4097, 65536} {
		offs = append(offs, h.alloc(n, 0))
	}
	for i, off := range offs {
		if i%2 == 0 {
			h.free(off)
		}
	}
	for i, off := range offs {
		if i%2 == 1 {
			h.free(off)
		}
	}
	h.verifyAll(true)
}

func testAlign(t *testing.T, c alloc.Component) {
	h := newHeap(t, c, 64<<20)
	fresh := h.snapshot()
	for k := uint(0); k <= 23; k++ {
		h.alloc(uint64(1+k*13), 1<<k)
		h.alloc(uint64(100+k), 0)
	}
	off := h.alloc(5000, alloc.MaxAlign)
	if off%alloc.MaxAlign != 0 {
		t.Fatalf("Alloc(5000, MaxAlign) = %#x", off)
	}
	for _, al := range []uint64{3, 5, 6, 12, 24, 48, 100, 1<<20 + 1, alloc.MaxAlign + 1, alloc.MaxAlign * 2, 1 << 30, 1 << 63, 1<<63 + 1, ^uint64(0)} {
		h.expectErr(alloc.ErrBadAlign, "Alloc with alignment", func() error {
			_, err := h.a.Alloc(64, al)
			return err
		})
	}
	h.freeAll(rand.New(rand.NewPCG(1, 2)))
	if w := h.walk(); !slices.Equal(w, fresh.walk) {
		t.Fatalf("after freeing everything the heap is not back to its fresh state:\nfresh %v\nnow   %v", fresh.walk, w)
	}
}

func testRealloc(t *testing.T, c alloc.Component) {
	h := newHeap(t, c, 8<<20)
	oneBlock := len(h.walk()) == 1
	// Shrinking stays in place, and growing back into the space just
	// given up does too.
	a := h.alloc(1000, 0)
	for _, n := range []uint64{100, 40, 1000, 16, 1000} {
		if got, err := h.realloc(a, n); err != nil || got != a {
			t.Fatalf("Realloc(%#x, %d) = %#x, %v: want in place", a, n, got, err)
		}
	}
	if _, classed := h.a.(SizeClassed); oneBlock && !classed {
		// On a fresh coalescing heap the block is followed by free
		// space: growing takes it. (A block of a size class never
		// grows past its class.)
		if got, err := h.realloc(a, 5000); err != nil || got != a {
			t.Fatalf("Realloc(%#x, 5000) on a fresh heap = %#x, %v: want in place", a, got, err)
		}
	}
	// Twenty rounds of growing and shrinking among other blocks.
	r := rand.New(rand.NewPCG(3, 4))
	off := h.alloc(64, 0)
	for round := 0; round < 20; round++ {
		var size uint64
		if round%2 == 0 {
			size = h.live[off].usable*2 + r.Uint64N(4096)
		} else {
			size = h.live[off].usable / (2 + r.Uint64N(3))
		}
		if r.IntN(2) == 0 {
			h.alloc(randSize(r, 16, 2048), 0) // a neighbour that may block in-place growth
		}
		n, err := h.realloc(off, size)
		if err != nil {
			t.Fatalf("round %d: Realloc(%#x, %d): %v", round, off, size, err)
		}
		off = n
	}
	// A failed Realloc leaves the block where and as it was.
	if _, err := h.realloc(off, 8e12); !errors.Is(err, alloc.ErrOutOfMemory) {
		t.Fatalf("Realloc(%#x, 8e12) = %v, want ErrOutOfMemory", off, err)
	}
	// Fill the heap, then ask for a growth that cannot be met.
	for {
		if _, err := h.tryAlloc(64<<10, 0); err != nil {
			break
		}
	}
	if _, err := h.realloc(off, 4<<20); !errors.Is(err, alloc.ErrOutOfMemory) {
		t.Fatalf("Realloc(%#x, 4 MiB) in a full heap = %v, want ErrOutOfMemory", off, err)
	}
	h.freeAll(r)
}

func testCoalesce(t *testing.T, c alloc.Component) {
	h := newHeap(t, c, 4<<20)
	fresh := h.snapshot()
	r := rand.New(rand.NewPCG(5, 6))
	for round := 0; round < 3; round++ {
		for i := 0; i < 150; i++ {
			al := uint64(0)
			if r.IntN(8) == 0 {
				al = 1 << r.UintN(13)
			}
			if _, err := h.tryAlloc(randSize(r, 16, 32<<10), al); err != nil {
				break
			}
			if i%5 == 4 {
				offs := h.liveOffs()
				h.realloc(offs[r.IntN(len(offs))], randSize(r, 16, 8<<10))
			}
		}
		h.freeAll(r)
		now := h.snapshot()
		if !slices.Equal(now.walk, fresh.walk) {
			t.Fatalf("round %d: after freeing everything the heap is not one free region again:\nfresh %v\nnow   %v", round, fresh.walk, now.walk)
		}
		if now.st.LargestFree != fresh.st.LargestFree || now.st.Free != fresh.st.Free {
			t.Fatalf("round %d: LargestFree %d Free %d, fresh heap had %d, %d", round, now.st.LargestFree, now.st.Free, fresh.st.LargestFree, fresh.st.Free)
		}
	}
}

func testLargest(t *testing.T, c alloc.Component) {
	for _, size := range []uint64{1 << 20, 4<<20 + 8192, 16 << 20} {
		h := newHeap(t, c, size)
		st := h.a.Stats()
		if st.Free+st.Overhead != st.Size {
			t.Fatalf("%d-byte region: empty heap has Free %d + Overhead %d != Size %d", size, st.Free, st.Overhead, st.Size)
		}
		if st.Overhead > size/16+64<<10 {
			t.Errorf("%d-byte region: overhead %d is not small", size, st.Overhead)
		}
		w := h.walk()
		if len(w) == 1 {
			if st.LargestFree != size-st.Overhead {
				t.Fatalf("%d-byte region is one free block, but LargestFree %d != Size - Overhead %d", size, st.LargestFree, size-st.Overhead)
			}
		} else {
			var big uint64
			for _, b := range w {
				if !b.used {
					big = max(big, b.size)
				}
			}
			if st.LargestFree != big {
				t.Fatalf("%d-byte region: LargestFree %d, largest free block of the walk %d", size, st.LargestFree, big)
			}
		}
		h.expectErr(alloc.ErrOutOfMemory, "Alloc(LargestFree+1)", func() error {
			_, err := h.a.Alloc(st.LargestFree+1, 0)
			return err
		})
		off, err := h.a.Alloc(st.LargestFree, 0)
		if err != nil {
			t.Fatalf("%d-byte region: Alloc(LargestFree = %d): %v", size, st.LargestFree, err)
		}
		// Do not fill it (adopt would): only check and free it.
		if us, err := h.a.UsableSize(off); err != nil || us < st.LargestFree || uint64(off)+us > size {
			t.Fatalf("%d-byte region: block %#x usable %d, %v", size, off, us, err)
		}
		if err := h.a.Check(); err != nil {
			t.Fatal(err)
		}
		if err := h.a.Free(off); err != nil {
			t.Fatal(err)
		}
		if got := h.a.Stats().LargestFree; got != st.LargestFree {
			t.Fatalf("LargestFree %d after alloc+free, was %d", got, st.LargestFree)
		}
	}
}

func testFill80(t *testing.T, c alloc.Component) {
	h := newHeap(t, c, 8<<20)
	h.fullEvery = 1 << 30
	st := h.a.Stats()
	target := (st.Size - st.Overhead) * 8 / 10
	r := rand.New(rand.NewPCG(7, 8))
	var inUse uint64
	for inUse < target {
		if len(h.live) > 0 && r.IntN(4) == 0 {
			offs := h.liveOffs()
			h.free(offs[r.IntN(len(offs))])
		} else {
			size := randSize(r, 16, 64<<10)
			if _, err := h.tryAlloc(size, 0); err != nil {
				t.Fatalf("Alloc(%d) failed with the heap %.1f%% full (target 80%%): %v", size, 100*float64(inUse)/float64(st.Size-st.Overhead), err)
			}
		}
		inUse = h.a.Stats().InUse
	}
	h.verifyAll(true)
	h.freeAll(r)
}

// randomOps runs n random operations on h, drawn from r.
func randomOps(h *heap, r *rand.Rand, n int, maxSize uint64) []alloc.Off {
	var got []alloc.Off
	for i := 0; i < n; i++ {
		offs := h.liveOffs()
		switch op := r.IntN(10); {
		case op < 5 || len(offs) == 0:
			al := uint64(0)
			if r.IntN(6) == 0 {
				al = 1 << r.UintN(16)
			}
			off, err := h.tryAlloc(randSize(r, 1, maxSize), al)
			if err == nil {
				got = append(got, off)
			}
		case op < 8:
			h.free(offs[r.IntN(len(offs))])
		default:
			n, err := h.realloc(offs[r.IntN(len(offs))], randSize(r, 1, maxSize))
			if err == nil {
				got = append(got, n)
			}
		}
	}
	return got
}

func testRandom(t *testing.T, c alloc.Component) {
	h := newHeap(t, c, 4<<20)
	r := rand.New(rand.NewPCG(9, 10))
	randomOps(h, r, 1000, 96<<10)
	h.verifyAll(true)
	h.freeAll(r)
}

func testDeterminism(t *testing.T, c alloc.Component) {
	var runs [2][]alloc.Off
	var walks [2][]walkBlock
	for i := range runs {
		h := newHeap(t, c, 2<<20)
		runs[i] = randomOps(h, rand.New(rand.NewPCG(11, 12)), 600, 32<<10)
		walks[i] = h.walk()
	}
	if !slices.Equal(runs[0], runs[1]) {
		t.Fatalf("two fresh regions given the same calls returned different offsets")
	}
	if !slices.Equal(walks[0], walks[1]) {
		t.Fatalf("two fresh regions given the same calls ended with different blocks")
	}
}

func testBadFree(t *testing.T, c alloc.Component) {
	size := uint64(1 << 20)
	h := newHeap(t, c, size)
	big := h.alloc(1000, 0)
	small := h.alloc(16, 0)
	gone := h.alloc(200, 0)
	h.alloc(300, 64)
	h.free(gone)
	// Blocks freed beside a free neighbour: a coalescing allocator merges
	// them, so their offsets lie inside a free block whose metadata may
	// still look like a used block's there. Allocated in a row, so that
	// each pair is adjacent in an allocator that places blocks in order.
	back1, back2 := h.alloc(256, 0), h.alloc(256, 0)
	fwd1, fwd2 := h.alloc(256, 0), h.alloc(256, 0)
	h.alloc(64, 0) // keeps fwd2 from merging with the free space after it
	h.free(back1)
	h.free(back2) // merges into back1
	h.free(fwd2)
	h.free(fwd1) // absorbs fwd2
	st := h.a.Stats()
	bad := map[string]alloc.Off{
		"double free": gone,
		"double free after merging into the free block before it":  back2,
		"double free of a block that merged with the one after it": fwd1,
		"double free of a block merged into the one before it":     fwd2,
		"interior +16":              big + 16,
		"interior +8":               big + 8,
		"interior +1":               big + 1,
		"interior middle":           big + 512,
		"interior near the end":     big + alloc.Off(h.live[big].usable) - 16,
		"misaligned":                small + 3,
		"offset 0":                  0,
		"region header":             64,
		"metadata":                  alloc.Off(st.Overhead / 2 &^ 15),
		"region end":                alloc.Off(size),
		"past the end":              alloc.Off(size + 16),
		"far past the end":          1 << 40,
		"largest offset":            ^alloc.Off(0),
		"largest aligned offset":    ^alloc.Off(15),
		"just below the region end": alloc.Off(size - 16),
	}
	for what, off := range bad {
		h.expectErr(alloc.ErrBadFree, "Free ("+what+")", func() error { return h.a.Free(off) })
		h.expectErr(alloc.ErrBadFree, "Realloc ("+what+")", func() error {
			_, err := h.a.Realloc(off, 64)
			return err
		})
		h.expectErr(alloc.ErrBadFree, "UsableSize ("+what+")", func() error {
			_, err := h.a.UsableSize(off)
			return err
		})
	}
	h.verifyAll(true)
}

func testHuge(t *testing.T, c alloc.Component) {
	size := uint64(1 << 20)
	h := newHeap(t, c, size)
	keep := h.alloc(500, 0)
	for _, n := range []uint64{8e12, size, size + 1, 1 << 62, 1 << 63, 1<<64 - 1, 1<<64 - 16, 1<<64 - alloc.MaxAlign} {
		for _, al := range []uint64{0, 64, alloc.MaxAlign} {
			h.expectErr(alloc.ErrOutOfMemory, "huge Alloc", func() error {
				_, err := h.a.Alloc(n, al)
				return err
			})
		}
		h.expectErr(alloc.ErrOutOfMemory, "huge Realloc", func() error {
			_, err := h.a.Realloc(keep, n)
			return err
		})
	}
	h.free(keep)
}

// testOddSize uses a region whose size is neither a power of two nor a
// multiple of the page size, and exhausts it.
func testOddSize(t *testing.T, c alloc.Component) {
	size := uint64(3<<20 + 12345)
	h := newHeap(t, c, size)
	h.fullEvery = 1 << 30
	fresh := h.snapshot()
	for _, n := range []uint64{64 << 10, 4096, 256, 16} {
		for {
			if _, err := h.tryAlloc(n, 0); err != nil {
				break
			}
		}
	}
	if st := h.a.Stats(); st.InUse < (size-st.Overhead)/2 {
		t.Errorf("exhausted heap has only %d bytes in use of %d", st.InUse, size-st.Overhead)
	}
	h.verifyAll(true)
	h.freeAll(rand.New(rand.NewPCG(13, 14)))
	if w := h.walk(); !slices.Equal(w, fresh.walk) {
		t.Fatalf("after freeing everything the heap is not back to its fresh state")
	}
}

// testAttach maps one region twice, at different addresses, as two
// processes would.
func testAttach(t *testing.T, c alloc.Component) {
	size := uint64(2 << 20)
	ma, mb := NewSharedRegion(t, size)
	if &ma[0] == &mb[0] {
		t.Fatal("the two mappings share an address")
	}
	if _, err := c.Attach(mb); err == nil {
		t.Fatal("Attach of an unformatted region succeeded")
	}
	h := formatHeap(t, c, ma)
	r := rand.New(rand.NewPCG(15, 16))
	randomOps(h, r, 200, 16<<10)
	b, err := c.Attach(mb)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	if _, err := c.Attach(mb[:size-4096]); err == nil {
		t.Error("Attach with a mapping of another size succeeded")
	}
	for _, o := range alloc.Components() {
		if o.Name != c.Name {
			if _, err := o.Attach(mb); err == nil {
				t.Errorf("component %s attached to a %s region", o.Name, c.Name)
			}
		}
	}
	hb := &heap{t: t, c: c, mem: mb, a: b, live: h.live, seed: 100, fullEvery: 1}
	if sa, sb := h.snapshot(), hb.snapshot(); sa.st != sb.st || !slices.Equal(sa.walk, sb.walk) {
		t.Fatalf("the second mapping sees another heap")
	}
	hb.check("Attach") // the second view sees the same blocks, with their contents
	// Free and allocate through the second view; the first sees it.
	offs := h.liveOffs()
	for i, off := range offs {
		if i%2 == 0 {
			hb.free(off)
		}
	}
	for i := 0; i < 20; i++ {
		hb.alloc(randSize(r, 16, 4096), 0)
	}
	h.seed = hb.seed
	h.check("allocations through the other mapping")
	h.verifyAll(true)
	h.freeAll(r)
	hb.check("frees through the other mapping")
}

// testLarge uses a sparse region above 4 GiB: offsets and sizes must be
// 64-bit throughout. Blocks are not filled (that would commit the memory):
// only their first and last bytes are written.
func testLarge(t *testing.T, c alloc.Component) {
	if testing.Short() {
		t.Skip("large sparse region skipped in -short mode")
	}
	size := uint64(5<<30 + 12345)
	mem, err := mapRegion(t, size)
	if err != nil {
		// Strict overcommit (vm.overcommit_memory=2) ignores MAP_NORESERVE.
		t.Skipf("cannot map a sparse %d-byte region here: %v", size, err)
	}
	a, err := c.Format(mem)
	if err != nil {
		t.Fatalf("Format of %d bytes: %v", size, err)
	}
	if err := a.Check(); err != nil {
		t.Fatal(err)
	}
	fresh := a.Stats()
	type blk struct {
		off alloc.Off
		us  uint64
	}
	var blocks []blk
	var top uint64
	tag := func(b blk, v byte) {
		mem[b.off] = v
		mem[uint64(b.off)+b.us-1] = v
	}
	for i := 0; i < 40; i++ {
		l := a.Stats().LargestFree
		if l < 64<<20 {
			break
		}
		n := l/2 + 1
		al := uint64(0)
		if i%3 == 1 {
			n, al = 1000, alloc.MaxAlign
		}
		off, err := a.Alloc(n, al)
		if err != nil {
			t.Fatalf("Alloc(%d, %d) with LargestFree %d: %v", n, al, l, err)
		}
		us, err := a.UsableSize(off)
		if err != nil || us < n || uint64(off)+us > size {
			t.Fatalf("block %#x usable %d for %d bytes (region %d): %v", off, us, n, size, err)
		}
		b := blk{off, us}
		tag(b, byte(i+1))
		blocks = append(blocks, b)
		top = max(top, uint64(off)+us)
	}
	if top <= 1<<32 {
		t.Fatalf("no block reaches past 4 GiB (highest end %#x)", top)
	}
	if _, err := a.Alloc(8e12, 0); !errors.Is(err, alloc.ErrOutOfMemory) {
		t.Fatalf("Alloc(8e12) = %v", err)
	}
	if err := a.Check(); err != nil {
		t.Fatal(err)
	}
	for i, b := range blocks {
		if mem[b.off] != byte(i+1) || mem[uint64(b.off)+b.us-1] != byte(i+1) {
			t.Fatalf("block %#x lost its contents", b.off)
		}
		if err := a.Free(b.off); err != nil {
			t.Fatalf("Free(%#x): %v", b.off, err)
		}
	}
	if err := a.Check(); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); st.LargestFree != fresh.LargestFree || st.Free != fresh.Free {
		t.Fatalf("after freeing everything: LargestFree %d Free %d, fresh %d %d", st.LargestFree, st.Free, fresh.LargestFree, fresh.Free)
	}
}

func testProbe(t *testing.T, c alloc.Component) {
	if c.Probe == nil {
		return
	}
	if err := c.Probe(1 << 20); err != nil {
		t.Errorf("Probe(1 MiB) = %v", err)
	}
	if err := c.Probe(4096); err == nil {
		t.Errorf("Probe(4096) accepts a region too small for the metadata")
	} else if _, ferr := c.Format(NewRegion(t, 4096)); ferr == nil {
		t.Errorf("Probe refuses 4096 bytes but Format accepts them")
	}
}
