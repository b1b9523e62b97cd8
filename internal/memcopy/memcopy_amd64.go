//go:build !race

package memcopy

import "unsafe"

// Implemented in memcopy_amd64.s.

//go:noescape
func repMovsb(dst, src unsafe.Pointer, n uintptr)

func cpuid(leaf, sub uint32) (a, b, c, d uint32)

// useRep and repBelow are the rule's CPU inputs (see the package doc),
// read once from CPUID.
var useRep, repBelow = probe(cpuid)

// probe reads the rule's inputs through id (CPUID, or a table in tests):
// whether the CPU prefers string moves, and the size below which REP
// MOVSB is used (0: never).
func probe(id func(leaf, sub uint32) (a, b, c, d uint32)) (bool, uintptr) {
	max, b, c, d := id(0, 0)
	intel := b == 0x756e6547 && d == 0x49656e69 && c == 0x6c65746e // "Genu" "ineI" "ntel"
	if !intel || max < 7 {
		return false, 0
	}
	_, b7, _, d7 := id(7, 0)
	erms, fsrm := b7&(1<<9) != 0, d7&(1<<4) != 0
	if !erms || !fsrm {
		return false, 0
	}
	// Leaf 4: one subleaf per cache; the last-level one is the largest
	// level. Size = ways x partitions x line size x sets; EAX[25:14]+1
	// logical processors share it.
	var llc uint64
	var level, sharing uint32
	for sub := uint32(0); sub < 16; sub++ {
		a, b, c, _ := id(4, sub)
		kind := a & 31
		if kind == 0 {
			break
		}
		if kind == 2 { // instruction cache
			continue
		}
		lv := (a >> 5) & 7
		size := uint64(b>>22+1) * uint64((b>>12)&0x3ff+1) * uint64(b&0xfff+1) * uint64(c+1)
		if lv >= level {
			level, llc, sharing = lv, size, (a>>14)&0xfff+1
		}
	}
	if llc == 0 {
		return false, 0
	}
	below := llc / uint64(sharing) * 3 / 4
	if below <= Large {
		return false, 0
	}
	return true, uintptr(below)
}
