package team

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Topology: which PEs synchronise among themselves first.
//
// A dissemination barrier's early rounds pair PEs that lie close in its
// order (round r pairs positions 2^r apart), so PEs that share a last-level
// cache (L3) should lie next to each other in it, and the L3s of one NUMA
// node next to each other: the many transfers of the early rounds then
// stay inside an L3, and only the last rounds cross between caches and
// sockets. Each PE publishes a topology key at Init (barrierHead.key): its
// NUMA node in the high 32 bits, its L3's id (the lowest CPU sharing it)
// in the low 32. The CPU it is read for is the one the PE is expected to
// run on: the CPU the pacing's placement moves it to, or the one CPU it is
// bound to (unix.HomeCPU). A key that cannot be read is 0, which sorts
// every such PE by rank alone. A team's order is its ranks sorted by
// (key, rank), the same computation on every member (and in the C library,
// capi/coll.c barrier_order): every member reads the same published keys.

// sysRoot is where the topology is read from; tests point it at a fake
// tree.
var sysRoot = "/sys/devices/system"

// topoKey returns the topology key of cpu read under root (a copy of
// /sys/devices/system): NUMA node << 32 | the lowest CPU that shares its
// last-level cache. What cannot be read counts as 0.
func topoKey(root string, cpu int) uint64 {
	if cpu < 0 {
		return 0
	}
	cpuDir := filepath.Join(root, "cpu", "cpu"+strconv.Itoa(cpu))
	// The highest cache level this CPU has: the L3 where there is one.
	var llc uint64
	level := 0
	idx, _ := filepath.Glob(filepath.Join(cpuDir, "cache", "index*"))
	for _, d := range idx {
		lv, err := readInt(filepath.Join(d, "level"))
		if err != nil || lv < level {
			continue
		}
		list, err := os.ReadFile(filepath.Join(d, "shared_cpu_list"))
		if err != nil {
			continue
		}
		if lo, ok := lowestCPU(string(list)); ok {
			level, llc = lv, uint64(lo)
		}
	}
	// The NUMA node whose CPU list holds cpu.
	var node uint64
	nodes, _ := filepath.Glob(filepath.Join(root, "node", "node[0-9]*"))
	for _, d := range nodes {
		list, err := os.ReadFile(filepath.Join(d, "cpulist"))
		if err != nil || !inList(string(list), cpu) {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "node")); err == nil && n >= 0 {
			node = uint64(n)
		}
		break
	}
	return node<<32 | llc&0xffffffff
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// cpuRanges parses a kernel CPU list ("0-3,8,10-11").
func cpuRanges(list string) [][2]int {
	var r [][2]int
	for _, part := range strings.Split(strings.TrimSpace(list), ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		r = append(r, [2]int{a, b})
	}
	return r
}

func lowestCPU(list string) (int, bool) {
	r := cpuRanges(list)
	if len(r) == 0 {
		return 0, false
	}
	lo := r[0][0]
	for _, x := range r {
		lo = min(lo, x[0])
	}
	return lo, true
}

func inList(list string, cpu int) bool {
	for _, x := range cpuRanges(list) {
		if cpu >= x[0] && cpu <= x[1] {
			return true
		}
	}
	return false
}

// barrierOrder returns a team's order for its dissemination barrier: its
// ranks sorted by (key, rank), keys[i] being rank i's topology key. PEs
// with one key (one L3) are then adjacent, and L3s of one NUMA node too.
func barrierOrder(keys []uint64) []int {
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(keys[a], keys[b]) })
	return order
}

// orderOf returns the barrier order of keys and rank's position in it.
func orderOf(keys []uint64, rank int) (order []int, pos int) {
	order = barrierOrder(keys)
	for i, r := range order {
		if r == rank {
			pos = i
		}
	}
	return order, pos
}
