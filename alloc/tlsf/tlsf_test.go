package tlsf_test

import (
	"testing"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/alloc/alloctest"
	"github.com/symheap/symheap/alloc/tlsf"
)

func component(t testing.TB) alloc.Component {
	c, ok := alloc.Lookup(tlsf.Name)
	if !ok {
		t.Fatal("tlsf is not registered")
	}
	return c
}

func TestConformance(t *testing.T) { alloctest.Run(t, component(t)) }

func FuzzOps(f *testing.F) { alloctest.Fuzz(f, component(f)) }

func TestOverhead(t *testing.T) {
	for _, size := range []uint64{tlsf.MinRegion, 1 << 20, 1<<30 + 4096} {
		mem := alloctest.NewRegion(t, size)
		a, err := tlsf.Format(mem)
		if err != nil {
			t.Fatal(err)
		}
		st := a.Stats()
		if st.Overhead != tlsf.Overhead(size) || st.LargestFree != size-tlsf.Overhead(size) {
			t.Errorf("%d bytes: Stats %+v, Overhead() %d", size, st, tlsf.Overhead(size))
		}
		// Stated bound: headers (< 17 KiB) + size/128 for the start bitmap
		// + 64 bytes of alignment, size word and sentinel.
		if bound := 17<<10 + size/128 + 64; st.Overhead > bound {
			t.Errorf("%d bytes: overhead %d above the stated %d", size, st.Overhead, bound)
		}
	}
}
