package alloctest

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/symheap/symheap/alloc"
)

// FuzzRegion is the size of the region each fuzz input runs on.
const FuzzRegion = 1 << 20

// MaxFuzzOps bounds the operations of one input; the rest is ignored.
const MaxFuzzOps = 256

// Fuzz drives c with operation sequences decoded from the fuzzer's input
// and checks every step against the model of live blocks (contents,
// overlap, accounting, the component's own Check). A component's package
// calls it from its FuzzOps target; the seed corpus added here runs as an
// ordinary test.
//
// Each operation takes 4 bytes: an opcode byte and three argument bytes.
//
//	op%8 0-2  Alloc: size from the arguments (log-scaled), alignment
//	          2^(arg%24), 0, or (rarely) an invalid one
//	op%8 3-4  Free of the live block picked by the arguments
//	op%8 5    Realloc of a live block to a size from the arguments
//	op%8 6    Free, Realloc and UsableSize of an offset that is not a live
//	          block (must be ErrBadFree and change nothing)
//	op%8 7    a huge Alloc (must be ErrOutOfMemory and change nothing)
func Fuzz(f *testing.F, c alloc.Component) {
	for _, seed := range [][]byte{
		{},
		{0, 10, 0, 0, 0, 200, 1, 0, 3, 0, 0, 0},
		{0, 255, 255, 4, 1, 3, 0, 9, 5, 0, 255, 7, 6, 1, 2, 3, 7, 0, 0, 0},
		{2, 1, 0, 23, 0, 50, 9, 0, 1, 0, 0, 0, 4, 1, 0, 0, 5, 0, 0x80, 0xff, 3, 2, 0, 0},
		[]byte("allocate free realloc fuzz seed with some length to it, more ops than that"),
		func() []byte { // many small allocations, then frees in another order
			var b []byte
			for i := 0; i < 64; i++ {
				b = append(b, 0, byte(i*7), byte(i), 0)
			}
			for i := 0; i < 64; i++ {
				b = append(b, 3, byte(i*5), byte(i*3), 0, 6, byte(i), byte(i*11), byte(i*13))
			}
			return b
		}(),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) { Ops(t, c, data) })
}

// Ops runs one fuzz input (see Fuzz for its encoding) against a fresh
// region: the body of Fuzz, exported so that a failing input can be
// replayed from an ordinary test.
func Ops(t testing.TB, c alloc.Component, data []byte) {
	t.Helper()
	{
		if len(data) > 4*MaxFuzzOps {
			data = data[:4*MaxFuzzOps] // keep each input quick: checks are O(heap)
		}
		h := newHeap(t, c, FuzzRegion)
		h.fullEvery = 16
		for len(data) >= 4 {
			op, x, y, z := data[0], data[1], data[2], data[3]
			data = data[4:]
			arg := uint64(binary.LittleEndian.Uint16([]byte{x, y}))
			offs := h.liveOffs()
			switch op % 8 {
			case 0, 1, 2:
				size := fuzzSize(arg)
				var align uint64
				switch {
				case z == 255:
					align = uint64(x) | 3 // not a power of two
				case z&1 == 1:
					align = 1 << (z / 2 % 24)
				}
				if align != 0 && align&(align-1) != 0 {
					h.expectErr(alloc.ErrBadAlign, "Alloc with a bad alignment", func() error {
						_, err := h.a.Alloc(size, align)
						return err
					})
					continue
				}
				if _, err := h.tryAlloc(size, align); err != nil && !errors.Is(err, alloc.ErrOutOfMemory) {
					t.Fatalf("Alloc(%d, %d): %v", size, align, err)
				}
			case 3, 4:
				if len(offs) > 0 {
					h.free(offs[int(arg)%len(offs)])
				}
			case 5:
				if len(offs) > 0 {
					if _, err := h.realloc(offs[int(arg)%len(offs)], fuzzSize(uint64(z)<<8|uint64(x))); err != nil && !errors.Is(err, alloc.ErrOutOfMemory) {
						t.Fatalf("Realloc: %v", err)
					}
				}
			case 6:
				off := alloc.Off(uint64(binary.LittleEndian.Uint32([]byte{x, y, z, op})) % (FuzzRegion + 64))
				if len(offs) > 0 && z&1 == 0 {
					// An offset inside a live block, or just past its start.
					b := offs[int(x)%len(offs)]
					off = b + 1 + alloc.Off(uint64(y)<<4)%alloc.Off(h.live[b].usable)
				}
				if _, live := h.live[off]; live {
					continue
				}
				h.expectErr(alloc.ErrBadFree, "Free of a non-block", func() error { return h.a.Free(off) })
				h.expectErr(alloc.ErrBadFree, "Realloc of a non-block", func() error {
					_, err := h.a.Realloc(off, 16)
					return err
				})
				h.expectErr(alloc.ErrBadFree, "UsableSize of a non-block", func() error {
					_, err := h.a.UsableSize(off)
					return err
				})
			case 7:
				n := FuzzRegion + arg<<uint(z%44)
				h.expectErr(alloc.ErrOutOfMemory, "huge Alloc", func() error {
					_, err := h.a.Alloc(n, 0)
					return err
				})
			}
		}
		h.verifyAll(true)
		h.freeAll(fixedPerm{})
		if st := h.a.Stats(); st.Live != 0 || st.InUse != 0 {
			t.Fatalf("empty heap: %+v", st)
		}
	}
}

// fuzzSize maps 16 bits to a size from 0 to about 256 KiB, most of them
// small.
func fuzzSize(a uint64) uint64 {
	return (a & 0x3ff) << (a >> 10 % 9)
}

// fixedPerm frees in reverse offset order: deterministic for the fuzzer.
type fixedPerm struct{}

func (fixedPerm) Perm(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = n - 1 - i
	}
	return p
}
