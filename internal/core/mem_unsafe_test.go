package core

import (
	"fmt"
	"testing"
	"unsafe"
)

// BenchmarkCopyBytes measures CopyBytes, the copy of every Put, Get and
// collective, per size, warm (the same buffers again and again) and cold
// (the next slice of two 256 MiB pools each time, so that memory is read
// and written rather than cache; 64 MiB is the largest size). Compare with glibc's memcpy on the same
// machine with `symheap bench --peers --tests copy`, which runs Go's copy
// and the C harness alternately (docs/bench/floors.md has the figures).
func BenchmarkCopyBytes(b *testing.B) {
	const pool = 256 << 20
	var pdst, psrc []byte // the cold pools, made once
	for _, cold := range []bool{false, true} {
		name := "warm"
		if cold {
			name = "cold"
		}
		for n := uint64(64); n <= 64<<20; n *= 4 {
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				size := n
				dst, src := make([]byte, n), make([]byte, n)
				if cold {
					if pdst == nil {
						pdst, psrc = make([]byte, pool), make([]byte, pool)
					}
					size, dst, src = pool, pdst, psrc
				}
				for i := range src {
					src[i], dst[i] = 1, 2
				}
				d, s := Ptr(unsafe.SliceData(dst)), Ptr(unsafe.SliceData(src))
				slots, slot := size/n, uint64(0)
				b.SetBytes(int64(n))
				b.ResetTimer()
				for b.Loop() {
					CopyBytes[byte](Add(d, slot*n), Add(s, slot*n), n)
					if slot++; slot == slots {
						slot = 0
					}
				}
			})
		}
	}
}
