//go:build !race

package memcopy

import (
	"bytes"
	"testing"
	"unsafe"
)

// cpu is a CPUID table for probe.
type cpu struct {
	vendor     [3]uint32 // EBX, EDX, ECX of leaf 0
	maxLeaf    uint32
	ebx7, edx7 uint32
	caches     [][4]uint32 // leaf 4 subleafs: EAX, EBX, ECX, EDX
	maxExt     uint32      // EAX of leaf 0x80000000
	l3x512K    uint32      // leaf 0x80000006: the L3 in 512 KiB units
}

func (c cpu) id(leaf, sub uint32) (a, b, cc, d uint32) {
	switch leaf {
	case 0:
		return c.maxLeaf, c.vendor[0], c.vendor[2], c.vendor[1]
	case 7:
		return 0, c.ebx7, 0, c.edx7
	case 0x80000000:
		return c.maxExt, 0, 0, 0
	case 0x80000006:
		return 0, 0, 0, c.l3x512K << 18
	case 4:
		if int(sub) < len(c.caches) {
			r := c.caches[sub]
			return r[0], r[1], r[2], r[3]
		}
	}
	return 0, 0, 0, 0
}

var (
	intel = [3]uint32{0x756e6547, 0x49656e69, 0x6c65746e}
	amd   = [3]uint32{0x68747541, 0x69746e65, 0x444d4163} // "Auth" "enti" "cAMD"
)

// cache builds a leaf-4 subleaf: type (1 data, 2 instruction, 3 unified),
// level, sharing threads, and the size as ways x 64-byte lines x sets.
func cache(kind, level, sharing, ways, sets uint32) [4]uint32 {
	return [4]uint32{kind | level<<5 | (sharing-1)<<14, (ways-1)<<22 | 63, sets - 1, 0}
}

func TestProbe(t *testing.T) {
	l1d := cache(1, 1, 2, 12, 64)     // 48 KiB
	l1i := cache(2, 1, 2, 8, 128)     // 64 KiB, ignored
	l2 := cache(3, 2, 2, 16, 2048)    // 2 MiB
	l3 := cache(3, 3, 16, 16, 32768)  // 32 MiB for 16 threads: 2 MiB each
	tiny := cache(3, 3, 64, 16, 4096) // 4 MiB for 64 threads
	incl := l3
	incl[3] |= 2 // EDX bit 1: the L3 includes the L2
	ermsFSRM := func(c cpu) cpu { c.ebx7, c.edx7 = 1<<9, 1<<4; return c }
	for _, tc := range []struct {
		name  string
		c     cpu
		rep   bool
		below uintptr
	}{
		// (2 MiB of L3 + 1 MiB of L2, not included in the L3) x 3/4
		{"intel", ermsFSRM(cpu{vendor: intel, maxLeaf: 0x20, caches: [][4]uint32{l1d, l1i, l2, l3}}), true, 9 << 18},
		{"intel, L3 listed first", ermsFSRM(cpu{vendor: intel, maxLeaf: 0x20, caches: [][4]uint32{l3, l1d, l2}}), true, 9 << 18},
		{"intel, inclusive L3", ermsFSRM(cpu{vendor: intel, maxLeaf: 0x20, caches: [][4]uint32{l1d, l1i, l2, incl}}), true, 3 << 19}, // 2 MiB x 3/4
		// The VM of docs/bench/p2p.md: glibc 2.36's ld.so prints 0x12f0000.
		{"48 MiB L3 for 2, 1.25 MiB L2", ermsFSRM(cpu{vendor: intel, maxLeaf: 0x1b, caches: [][4]uint32{l1d, l1i, cache(3, 2, 1, 20, 1024), cache(3, 3, 2, 12, 65536)}}), true, 0x12f0000},
		{"no FSRM", cpu{vendor: intel, maxLeaf: 0x20, ebx7: 1 << 9, caches: [][4]uint32{l3}}, false, 0},
		{"no ERMS", cpu{vendor: intel, maxLeaf: 0x20, edx7: 1 << 4, caches: [][4]uint32{l3}}, false, 0},
		{"amd", ermsFSRM(cpu{vendor: amd, maxLeaf: 0x20, caches: [][4]uint32{l3}}), false, 0},
		{"no leaf 7", ermsFSRM(cpu{vendor: intel, maxLeaf: 4, caches: [][4]uint32{l3}}), false, 0},
		{"no cache leaf", ermsFSRM(cpu{vendor: intel, maxLeaf: 0x20}), false, 0},
		{"share below 1 MiB", ermsFSRM(cpu{vendor: intel, maxLeaf: 0x20, caches: [][4]uint32{l2, tiny}}), false, 0},
	} {
		rep, below := probe(tc.c.id)
		if rep != tc.rep || below != tc.below {
			t.Errorf("%s: probe = %v, %d; want %v, %d", tc.name, rep, below, tc.rep, tc.below)
		}
	}
}

func TestVecRule(t *testing.T) {
	intelCPU, amdCPU := cpu{vendor: intel, maxLeaf: 0x20}, cpu{vendor: amd, maxLeaf: 0x20}
	if isAMD(intelCPU.id) || !isAMD(amdCPU.id) {
		t.Fatal("isAMD mistakes the vendor")
	}
	for _, tc := range []struct {
		name                 string
		avx512, avxVNNI, amd bool
		want                 bool
	}{
		{"Sapphire Rapids", true, true, false, true},
		{"Ice Lake server, Skylake-SP", true, false, false, false},
		{"Zen 4, Zen 5", true, false, true, true},
		{"Alder Lake client (AVX-512 off)", false, true, false, false},
		{"Zen 3", false, false, true, false},
	} {
		if got := vecRule(tc.avx512, tc.avxVNNI, tc.amd); got != tc.want {
			t.Errorf("%s: vecRule = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestAMDStreamFrom(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    cpu
		vec  bool
		want uintptr
	}{
		// The VM of docs/bench/p2p.md: glibc 2.36's ld.so prints 0x7f00000,
		// a quarter of the socket's L3; a quarter of one complex's is less.
		{"EPYC VM, 1016 x 512 KiB of L3", cpu{vendor: amd, maxLeaf: 0x10, maxExt: 0x80000021, l3x512K: 1016}, true, 8 << 20},
		{"32 MiB L3", cpu{vendor: amd, maxLeaf: 0x10, maxExt: 0x80000021, l3x512K: 64}, true, 8 << 20},
		{"16 MiB L3", cpu{vendor: amd, maxLeaf: 0x10, maxExt: 0x80000021, l3x512K: 32}, true, 4 << 20},
		{"L3 below 4 MiB", cpu{vendor: amd, maxLeaf: 0x10, maxExt: 0x80000021, l3x512K: 4}, true, Large},
		{"no AVX-512", cpu{vendor: amd, maxLeaf: 0x10, maxExt: 0x80000021, l3x512K: 64}, false, 0},
		{"no leaf 0x80000006", cpu{vendor: amd, maxLeaf: 0x10, maxExt: 0x80000005, l3x512K: 64}, true, 0},
		{"intel", cpu{vendor: intel, maxLeaf: 0x20, maxExt: 0x80000008, l3x512K: 64}, true, 0},
	} {
		if got := amdStreamFrom(tc.vec, tc.c.id); got != tc.want {
			t.Errorf("%s: amdStreamFrom = %#x, want %#x", tc.name, got, tc.want)
		}
	}
}

// TestVectorBelow checks Move on both sides of vecBelow, lowered to a few
// MiB so that the test need not copy the real threshold's megabytes, at
// destination offsets across a line (TestBytesOverlap checks overlapping
// blocks of these sizes).
func TestVectorBelow(t *testing.T) {
	if vecBelow == 0 {
		t.Skip("no vector copy from Large on this CPU (not AMD with AVX-512)")
	}
	saved := vecBelow
	vecBelow = Large + 4096
	defer func() { vecBelow = saved }()
	sweep(t, []int{Large, Large + 1, Large + 4095, Large + 4096, Large + 4097}, []int{0, 1, 8, 63, 64}, Bytes)
}

// TestStream checks the streaming copy on its own, at every size from
// its smallest (128 bytes: the head and the saved tail then cover it) to
// past two rounds, then in steps, at destination offsets across a line;
// and Bytes around the size from which it streams on this CPU.
func TestStream(t *testing.T) {
	var sizes []int
	for n := 128; n <= 2*128+64+128+64; n++ {
		sizes = append(sizes, n)
	}
	for n := 513; n <= 1100; n += 1 + n/37 {
		sizes = append(sizes, n)
	}
	stream := func(dst, src []byte) int {
		ntMove(unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(unsafe.SliceData(src)), uintptr(len(dst)))
		return len(dst)
	}
	sweep(t, sizes, []int{0, 1, 8, 16, 63, 64}, stream)
	sweep(t, []int{4096, 65536 + 17, Large + 3}, []int{0, 8, 33}, stream)
	rep, from := Rule()
	if !rep {
		t.Logf("Move does not stream on this CPU (no REP MOVSB rule): Bytes checked below the threshold only")
		return
	}
	n := int(from) + 64
	src := make([]byte, n+64)
	pattern(src, 3)
	fill, got, want := make([]byte, n+64), make([]byte, n+64), make([]byte, n+64)
	pattern(fill, 4)
	for _, size := range []int{int(from) - 1, int(from), int(from) + 1, n} {
		for _, doff := range []int{0, 8, 33} {
			copy(got, fill)
			copy(want, fill)
			Bytes(got[doff:doff+size], src[:size])
			copy(want[doff:doff+size], src[:size])
			if !bytes.Equal(got, want) {
				t.Fatalf("n %d, dst+%d: copy differs at byte %d", size, doff, firstDiff(got, want))
			}
		}
	}
}
