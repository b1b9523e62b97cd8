package memcopy

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
)

// pattern fills b with bytes that differ at every offset of a period
// that is not a power of two, so that a misplaced block shows.
func pattern(b []byte, seed int) {
	for i := range b {
		b[i] = byte((i*7 + seed) % 251)
	}
}

// TestBytes copies blocks around the sizes where the rule changes, at
// aligned and unaligned destinations, and checks every byte of the
// destination and its neighbours against copy's result.
func TestBytes(t *testing.T) {
	for _, n := range []int{0, 1, 100, Large - 1, Large, Large + 1, 3<<20 + 5} {
		for _, doff := range []int{0, 1, 8, 16, 33} {
			for _, soff := range []int{0, 3} {
				src := make([]byte, n+64)
				pattern(src, 1)
				got, want := make([]byte, n+64), make([]byte, n+64)
				pattern(got, 2)
				pattern(want, 2)
				if c := Bytes(got[doff:doff+n], src[soff:soff+n]); c != n {
					t.Fatalf("n %d: Bytes returned %d", n, c)
				}
				copy(want[doff:doff+n], src[soff:soff+n])
				if !bytes.Equal(got, want) {
					t.Fatalf("n %d, dst+%d, src+%d: copy differs at byte %d", n, doff, soff, firstDiff(got, want))
				}
			}
		}
	}
	// Shorter of the two, as copy.
	if c := Bytes(make([]byte, 5), make([]byte, Large+8)); c != 5 {
		t.Errorf("Bytes into 5 bytes returned %d", c)
	}
}

// TestBytesVector sweeps the sizes of the vector copy (every size up to
// 640 bytes, then steps to past VecMax) at destination and source offsets
// across a 64-byte line, with guard bytes on both sides of the block.
func TestBytesVector(t *testing.T) {
	if !Vector() {
		t.Log("no vector copy on this CPU: Bytes is the runtime's copy, checked all the same")
	}
	var sizes []int
	for n := 0; n <= 640; n++ {
		sizes = append(sizes, n)
	}
	for n := 641; n <= VecMax+300; n += 1 + n/37 {
		sizes = append(sizes, n)
	}
	sizes = append(sizes, VecMax-1, VecMax, VecMax+1)
	sweep(t, sizes, []int{0, 1, 8, 31, 32, 63, 64}, Bytes)
}

// sweep copies n bytes with cp for every n of sizes, at each destination
// offset of doffs and source offsets 0, 5 and 64, with guard bytes on both
// sides of the block, and checks the result and the count against copy's.
func sweep(t *testing.T, sizes, doffs []int, cp func(dst, src []byte) int) {
	t.Helper()
	m := slices.Max(sizes)
	src := make([]byte, m+512)
	pattern(src, 1)
	got, want := make([]byte, m+512), make([]byte, m+512)
	for _, n := range sizes {
		for _, doff := range doffs {
			for _, soff := range []int{0, 5, 64} {
				pattern(got, 2)
				pattern(want, 2)
				d := 64 + doff
				if c := cp(got[d:d+n], src[soff:soff+n]); c != n {
					t.Fatalf("n %d: the copy returned %d", n, c)
				}
				copy(want[d:d+n], src[soff:soff+n])
				if !bytes.Equal(got, want) {
					t.Fatalf("n %d, dst+%d, src+%d: copy differs at byte %d", n, doff, soff, firstDiff(got, want))
				}
			}
		}
	}
}

// TestBytesOverlap copies within one buffer, both ways, by less than the
// block's length: the forward string move must not take the case where
// the destination starts inside the source.
func TestBytesOverlap(t *testing.T) {
	for _, n := range []int{Small, 100, 300, 5000, VecMax, 2<<20 + 3} {
		for _, shift := range []int{-4097, -65, -9, -1, 1, 9, 65, 4097} {
			if shift >= n || -shift >= n {
				continue
			}
			buf := make([]byte, n+16384)
			pattern(buf, 5)
			want := bytes.Clone(buf)
			s, d := 8192, 8192+shift
			Bytes(buf[d:d+n], buf[s:s+n])
			copy(want[d:d+n], want[s:s+n])
			if !bytes.Equal(buf, want) {
				t.Errorf("n %d, shift %d: overlapping copy differs at byte %d", n, shift, firstDiff(buf, want))
			}
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// BenchmarkBytes compares Bytes with copy, per size, for a 16-byte
// aligned destination and one 8 bytes off, warm (the same buffers again
// and again). `symheap bench --peers --tests copy` sets both against
// glibc's memcpy, alternating (docs/bench/floors.md).
func BenchmarkBytes(b *testing.B) {
	for _, n := range []int{64, 512, 2 << 10, 16 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20} {
		for _, off := range []int{0, 8} {
			src, dst := make([]byte, n), make([]byte, n+64)
			pattern(src, 1)
			pattern(dst, 2)
			d := dst[off : off+n]
			for _, how := range []string{"copy", "memcopy"} {
				b.Run(fmt.Sprintf("%s/dst+%d/%d", how, off, n), func(b *testing.B) {
					b.SetBytes(int64(n))
					for b.Loop() {
						if how == "copy" {
							copy(d, src)
						} else {
							Bytes(d, src)
						}
					}
				})
			}
		}
	}
}

// TestBytesLocal checks BytesLocal's count and copy around the bounds
// of BetterLocal, into a destination at an odd offset.
func TestBytesLocal(t *testing.T) {
	src := make([]byte, LocalMax+600)
	pattern(src, 7)
	for _, n := range []int{0, 1, Small - 1, Small, VecMax + 1, 5000, LocalMax, LocalMax + 1, LocalMax + 500} {
		got, want := make([]byte, n+80), make([]byte, n+80)
		pattern(got, 8)
		pattern(want, 8)
		if c := BytesLocal(got[3:3+n], src[:n+7]); c != n {
			t.Fatalf("n %d: BytesLocal returned %d", n, c)
		}
		copy(want[3:3+n], src[:n])
		if !bytes.Equal(got, want) {
			t.Fatalf("n %d: copy differs at byte %d", n, firstDiff(got, want))
		}
	}
}
