package dlmalloc_test

import (
	"testing"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/alloc/alloctest"
	"github.com/symheap/symheap/alloc/dlmalloc"
)

func component(t testing.TB) alloc.Component {
	c, ok := alloc.Lookup(dlmalloc.Name)
	if !ok {
		t.Fatal("dlmalloc is not registered")
	}
	return c
}

func TestConformance(t *testing.T) { alloctest.Run(t, component(t)) }

func FuzzOps(f *testing.F) { alloctest.Fuzz(f, component(f)) }

func TestOverhead(t *testing.T) {
	for _, size := range []uint64{dlmalloc.MinRegion, 1 << 20, 1<<30 + 4096} {
		mem := alloctest.NewRegion(t, size)
		a, err := dlmalloc.Format(mem)
		if err != nil {
			t.Fatal(err)
		}
		st := a.Stats()
		if st.Overhead != dlmalloc.Overhead(size) || st.LargestFree != size-dlmalloc.Overhead(size) {
			t.Errorf("%d bytes: Stats %+v, Overhead() %d", size, st, dlmalloc.Overhead(size))
		}
		// Stated bound: headers (< 7 KiB) + size/128 for the start bitmap
		// + 64 bytes of alignment, size word and sentinel.
		if bound := 7<<10 + size/128 + 64; st.Overhead > bound {
			t.Errorf("%d bytes: overhead %d above the stated %d", size, st.Overhead, bound)
		}
	}
}
