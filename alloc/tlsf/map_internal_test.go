package tlsf

import (
	"math/bits"
	"testing"
)

// TestMapping compares the branch-free class computations with their
// textbook form (Masmano et al.) for every block size up to 1 MiB and for
// powers of two and their neighbours above.
func TestMapping(t *testing.T) {
	ref := func(s uint64) (uint, uint) {
		if s < smallSize {
			return 0, uint(s >> alignLog2)
		}
		f := uint(bits.Len64(s)) - 1
		return f - (flShift - 1), uint(s>>(f-slLog2)) ^ slCount
	}
	refSearch := func(s uint64) (uint, uint) {
		if s >= smallSize {
			s += 1<<(uint(bits.Len64(s))-1-slLog2) - 1
		}
		return ref(s)
	}
	sizes := []uint64{}
	for s := uint64(16); s <= 1<<20; s += 16 {
		sizes = append(sizes, s)
	}
	for k := 20; k < 62; k++ {
		for _, d := range []int64{-32, -16, 0, 16, 32} {
			sizes = append(sizes, uint64(int64(1)<<k+d))
		}
	}
	for _, s := range sizes {
		if f, l := mapping(s); true {
			if rf, rl := ref(s); f != rf || l != rl {
				t.Fatalf("mapping(%d) = %d,%d, want %d,%d", s, f, l, rf, rl)
			}
		}
		if f, l := searchClass(s); true {
			if rf, rl := refSearch(s); f != rf || l != rl {
				t.Fatalf("searchClass(%d) = %d,%d, want %d,%d", s, f, l, rf, rl)
			}
		}
	}
}
