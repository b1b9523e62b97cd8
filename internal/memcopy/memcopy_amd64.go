//go:build !race

package memcopy

import (
	"unsafe"

	xcpu "golang.org/x/sys/cpu"
)

// Implemented in memcopy_amd64.s.

//go:noescape
func repMovsb(dst, src unsafe.Pointer, n uintptr)

func cpuid(leaf, sub uint32) (a, b, c, d uint32)

// ntMove copies n >= 256 bytes between blocks that do not overlap with
// streaming stores, and ends with SFENCE.
//
//go:noescape
func ntMove(dst, src unsafe.Pointer, n uintptr)

// useRep and streamFrom are the rule's CPU inputs (see the package doc),
// read once from CPUID.
var useRep, streamFrom = probe(cpuid)

// useVec: whether Move takes the vector copy from Small to LocalMax bytes
// (see the package doc), from CPUID and what the kernel saves (x/sys/cpu
// checks XCR0 for the AVX-512 state).
var useVec = vecRule(xcpu.X86.HasAVX512F && xcpu.X86.HasAVX512VL, xcpu.X86.HasAVXVNNI, isAMD(cpuid))

// vecBelow: on AMD, where useVec holds, Move takes the vector copy also
// for copies from Large up to this size (amdStreamFrom); 0 elsewhere.
var vecBelow = amdStreamFrom(useVec, cpuid)

// amdStreamFrom returns, on an AMD CPU with the vector copy (vec), the
// size from which Move streams there, and 0 elsewhere. From the
// second-level cache's size (where glibc's REP MOVSB stops on AMD,
// x86_rep_movsb_stop_threshold) to its non-temporal threshold, glibc
// copies with a loop of four 64-byte loads and aligned 64-byte stores that
// go through the caches, as the vector copy does; the runtime's memmove
// streams from 1 MiB.
//
// glibc's threshold is a quarter of the L3 as leaf 0x80000006 reports it
// (EDX bits 31-18, 512 KiB units) when the CPU does not list its caches
// in leaf 0x8000001D: the rule of glibc 2.38, which Debian 12's 2.36
// (2.36-9+deb12u14) has taken. A VM may report there the L3 of the whole
// socket: on the 2-vCPU AMD EPYC VM of docs/bench/p2p.md, 1016 x 512 KiB,
// and its ld.so prints glibc.cpu.x86_non_temporal_threshold 0x7f00000
// (127 MiB). A core uses only its complex's L3 (32 MiB on Zen 3 to 5
// servers), and there a Put of 8 MiB or more ran faster streamed than
// through the caches, and one of 1 and 4 MiB slower (docs/bench/p2p.md,
// «Large Puts on AMD»). So Move streams from the smaller of glibc's
// threshold and a quarter of a complex's L3 (ccxL3), and from Large at
// the least.
func amdStreamFrom(vec bool, id func(leaf, sub uint32) (a, b, c, d uint32)) uintptr {
	if !vec || !isAMD(id) {
		return 0
	}
	if maxExt, _, _, _ := id(0x80000000, 0); maxExt < 0x80000006 {
		return 0
	}
	_, _, _, d := id(0x80000006, 0)
	l3 := uintptr(d>>18) << 19
	return max(min(l3, ccxL3)/4, Large)
}

// ccxL3 is the L3 of one core complex (CCX) of AMD's Zen 3, 4 and 5
// server CPUs, which every core of it shares.
const ccxL3 = 32 << 20

// vecRule is glibc's rule (2.36, cpu_features.c and ifunc-memmove.h) for
// its 64-byte memcpy: AVX-512F and VL usable, and on Intel only where the
// CPU has AVX-VNNI, the mark of the cores (Sapphire Rapids, Alder Lake
// and after) whose clock does not drop for 512-bit loads and stores; on
// Skylake-SP and Ice Lake servers it would, and glibc keeps to 32-byte
// registers there, as the runtime's memmove does.
func vecRule(avx512, avxVNNI, amd bool) bool {
	return avx512 && (avxVNNI || amd)
}

func isAMD(id func(leaf, sub uint32) (a, b, c, d uint32)) bool {
	_, b, c, d := id(0, 0)
	return b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163 // "Auth" "enti" "cAMD"
}

// probe reads the rule's inputs through id (CPUID, or a table in tests):
// whether the CPU prefers string moves, and the size from which Move
// streams (0: never), glibc's non-temporal threshold.
//
// glibc 2.36 (Debian 12's) sets that threshold to three quarters of one
// thread's share of the shared cache (its tunable
// glibc.cpu.x86_non_temporal_threshold; `ld.so --list-tunables` prints
// it), where the share is the last-level cache over the logical
// processors that share it, plus, when that cache does not include the
// second level, the second-level cache over its own sharers: on a VM of
// 2 vCPUs with a 48 MiB L3 and a 1.25 MiB L2, (24 + 1.25) x 3/4 = 18.9
// MiB, the figure its ld.so prints there. (From 2.38 glibc takes a
// quarter of the whole L3 instead; a copy between the two thresholds then
// streams here and not there.)
func probe(id func(leaf, sub uint32) (a, b, c, d uint32)) (bool, uintptr) {
	maxLeaf, b, c, d := id(0, 0)
	intel := b == 0x756e6547 && d == 0x49656e69 && c == 0x6c65746e // "Genu" "ineI" "ntel"
	if !intel || maxLeaf < 7 {
		return false, 0
	}
	_, b7, _, d7 := id(7, 0)
	erms, fsrm := b7&(1<<9) != 0, d7&(1<<4) != 0
	if !erms || !fsrm {
		return false, 0
	}
	// Leaf 4: one subleaf per cache. Size = ways x partitions x line
	// size x sets; EAX[25:14]+1 logical processors share it; EDX bit 1:
	// it includes the levels below.
	type cacheInfo struct {
		share     uint64 // size over sharers
		inclusive bool
	}
	var byLevel [8]cacheInfo
	top := uint32(0)
	for sub := uint32(0); sub < 16; sub++ {
		a, b, c, d := id(4, sub)
		kind := a & 31
		if kind == 0 {
			break
		}
		if kind == 2 { // instruction cache
			continue
		}
		lv := (a >> 5) & 7
		size := uint64(b>>22+1) * uint64((b>>12)&0x3ff+1) * uint64(b&0xfff+1) * uint64(c+1)
		byLevel[lv] = cacheInfo{share: size / uint64((a>>14)&0xfff+1), inclusive: d&2 != 0}
		top = max(top, lv)
	}
	if top < 2 || byLevel[top].share == 0 {
		return false, 0
	}
	share := byLevel[top].share
	if top > 2 && !byLevel[top].inclusive {
		share += byLevel[2].share
	}
	from := share * 3 / 4
	if from <= Large {
		return false, 0
	}
	return true, uintptr(from)
}
