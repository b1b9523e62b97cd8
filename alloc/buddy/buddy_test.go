package buddy_test

import (
	"testing"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/alloc/alloctest"
	"github.com/symheap/symheap/alloc/buddy"
)

func component(t testing.TB) alloc.Component {
	c, ok := alloc.Lookup(buddy.Name)
	if !ok {
		t.Fatal("buddy is not registered")
	}
	return c
}

func TestConformance(t *testing.T) { alloctest.Run(t, component(t)) }

func FuzzOps(f *testing.F) { alloctest.Fuzz(f, component(f)) }

func TestOverhead(t *testing.T) {
	for _, size := range []uint64{buddy.MinRegion, 1 << 20, 1<<30 + 4096 + 7} {
		mem := alloctest.NewRegion(t, size)
		a, err := buddy.Format(mem)
		if err != nil {
			t.Fatal(err)
		}
		st := a.Stats()
		if st.Overhead != buddy.Overhead(size) || st.Free != size-st.Overhead {
			t.Errorf("%d bytes: Stats %+v, Overhead() %d", size, st, buddy.Overhead(size))
		}
		// Stated bound: size/64 + size/128 of bitmaps, a 2.3 KiB header,
		// word rounding per order, and the tail below 16 bytes.
		if bound := size/64 + size/128 + 3<<10 + 64*16; st.Overhead > bound {
			t.Errorf("%d bytes: overhead %d above the stated %d", size, st.Overhead, bound)
		}
		// The largest block is a power of two, at least a quarter of the
		// region once the metadata is small against it.
		if size >= 1<<20 && st.LargestFree < size/4 {
			t.Errorf("%d bytes: largest free block %d", size, st.LargestFree)
		}
	}
}

// TestOrderKept checks that Free finds a block's order from the offset
// alone, for every order, and that in-place growth and shrinking keep the
// tree consistent.
func TestOrderKept(t *testing.T) {
	mem := alloctest.NewRegion(t, 4<<20)
	a, err := buddy.Format(mem)
	if err != nil {
		t.Fatal(err)
	}
	var offs []alloc.Off
	for k := buddy.MinOrder; k <= 20; k++ {
		off, err := a.Alloc(1<<k, 0)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := a.UsableSize(off); n != 1<<k || uint64(off)%(1<<k) != 0 {
			t.Fatalf("order %d: block %#x of %d bytes", k, off, n)
		}
		offs = append(offs, off)
	}
	for _, off := range offs {
		if err := a.Free(off); err != nil {
			t.Fatal(err)
		}
		if err := a.Check(); err != nil {
			t.Fatal(err)
		}
	}
}
