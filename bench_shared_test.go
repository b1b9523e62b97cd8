package symheap

import (
	"os"
	"testing"
)

// BenchmarkSharedPairs is the small alloc+free pair workload of symheap
// bench (cmd/symheap/bench_alloc.go: sizes 16 B .. 4 KiB from one
// xorshift sequence, a window of 256 live blocks; ns/op is ns per pair)
// with SharedAlloc and SharedFree on a lone PE, in this process: the
// figure to profile (-cpuprofile) when the bench's moves.
func BenchmarkSharedPairs(b *testing.B) {
	if os.Getenv("SYMHEAP_PE") != "" {
		b.Skip("runs outside a job only")
	}
	pe, err := Init(Config{HeapSize: 8 << 20, SharedSize: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer pe.Close()
	rng := uint64(0x9E3779B97F4A7C15)
	next := func() uint64 {
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		return rng
	}
	size := func(r uint64) int {
		base := uint64(16) << (r % 8)
		return int(base + (r>>8)%base)
	}
	slots := make([][]byte, 256)
	for i := range slots {
		if slots[i], err = SharedAlloc[byte](pe, size(next())); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := next()
		k := (r >> 32) % 256
		if err := SharedFree(pe, slots[k]); err != nil {
			b.Fatal(err)
		}
		s, err := SharedAlloc[byte](pe, size(r))
		if err != nil {
			b.Fatal(err)
		}
		s[0] = byte(i)
		slots[k] = s
	}
	b.StopTimer()
	for _, s := range slots {
		if err := SharedFree(pe, s); err != nil {
			b.Fatal(err)
		}
	}
	if err := pe.CheckHeaps(); err != nil {
		b.Fatal(err)
	}
}
