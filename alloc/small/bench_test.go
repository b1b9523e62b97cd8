package small_test

import (
	"testing"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/alloc/alloctest"
	"github.com/symheap/symheap/alloc/small"
	"github.com/symheap/symheap/alloc/tlsf"
)

// BenchmarkPairs is the alloc+free pair workload of alloc/bench_test.go
// and cmd/symheap's bench_alloc.go (ns/op is ns per pair) on the front
// end over tlsf, called directly; the small class only (16 B .. 4 KiB,
// window 256), and tlsf alone beside it.
func BenchmarkPairs(b *testing.B) {
	b.Run("small", func(b *testing.B) {
		mem := alloctest.NewRegion(b, 64<<20)
		in, err := tlsf.Format(mem)
		if err != nil {
			b.Fatal(err)
		}
		h, err := small.Format(in, mem, nil)
		if err != nil {
			b.Fatal(err)
		}
		pairs(b, h, mem)
	})
	b.Run("tlsf", func(b *testing.B) {
		mem := alloctest.NewRegion(b, 64<<20)
		in, err := tlsf.Format(mem)
		if err != nil {
			b.Fatal(err)
		}
		pairs(b, in, mem)
	})
}

const pairSeed = 0x9E3779B97F4A7C15

func pairs[A alloc.Allocator](b *testing.B, a A, mem []byte) {
	rng := uint64(pairSeed)
	next := func() uint64 {
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		return rng
	}
	size := func(r uint64) uint64 {
		base := uint64(16) << (r % 8)
		return base + (r>>8)%base
	}
	slots := make([]alloc.Off, 256)
	for i := range slots {
		off, err := a.Alloc(size(next()), 0)
		if err != nil {
			b.Fatal(err)
		}
		slots[i] = off
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := next()
		k := (r >> 32) % 256
		if err := a.Free(slots[k]); err != nil {
			b.Fatal(err)
		}
		off, err := a.Alloc(size(r), 0)
		if err != nil {
			b.Fatal(err)
		}
		mem[off] = byte(i)
		slots[k] = off
	}
}
