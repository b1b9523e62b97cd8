package memcopy

import (
	"bytes"
	"testing"
	"unsafe"
)

// TestMoveLocal sweeps BytesLocal over the sizes only BetterLocal sends
// to Move (past VecMax up to LocalMax and beyond), at destination and
// source offsets across a 64-byte line, with guard bytes around the block,
// and Move within one buffer by less than the block's length both ways.
func TestMoveLocal(t *testing.T) {
	var sizes []int
	for n := VecMax - 3; n <= LocalMax+300; n += 1 + n/29 {
		sizes = append(sizes, n)
	}
	sizes = append(sizes, LocalMax-1, LocalMax, LocalMax+1)
	for _, n := range sizes {
		if !BetterLocal[byte](uint64(n)) && Vector() && n <= LocalMax {
			t.Fatalf("BetterLocal(%d) is false with the vector copy", n)
		}
	}
	sweep(t, sizes, []int{0, 1, 8, 16, 63}, BytesLocal)
	for _, n := range sizes {
		for _, shift := range []int{-65, -1, 1, 65, n / 2} {
			buf := make([]byte, 2*n+4096)
			pattern(buf, 6)
			wantBuf := bytes.Clone(buf)
			s, d := 2048, 2048+shift
			Move(unsafe.Pointer(&buf[d]), unsafe.Pointer(&buf[s]), uintptr(n))
			copy(wantBuf[d:d+n], wantBuf[s:s+n])
			if !bytes.Equal(buf, wantBuf) {
				t.Fatalf("n %d, shift %d: overlapping Move differs at byte %d", n, shift, firstDiff(buf, wantBuf))
			}
		}
	}
}
