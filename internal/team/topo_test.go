package team

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// fakeSys writes a /sys/devices/system tree: cpus CPUs, l3 of them per
// L3, nodes NUMA nodes of equal size.
func fakeSys(t *testing.T, cpus, l3, nodes int) string {
	t.Helper()
	root := t.TempDir()
	write := func(path, s string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(s+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	per := cpus / nodes
	for n := range nodes {
		write(filepath.Join(root, "node", "node"+itoa(n), "cpulist"), itoa(n*per)+"-"+itoa(n*per+per-1))
	}
	for c := range cpus {
		d := filepath.Join(root, "cpu", "cpu"+itoa(c), "cache")
		write(filepath.Join(d, "index0", "level"), "1")
		write(filepath.Join(d, "index0", "shared_cpu_list"), itoa(c))
		write(filepath.Join(d, "index2", "level"), "2")
		write(filepath.Join(d, "index2", "shared_cpu_list"), itoa(c))
		lo := c / l3 * l3
		write(filepath.Join(d, "index3", "level"), "3")
		write(filepath.Join(d, "index3", "shared_cpu_list"), itoa(lo)+"-"+itoa(lo+l3-1))
	}
	return root
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestTopoKey: the key of a CPU names its NUMA node and its L3 (the
// lowest CPU sharing it) in a fake two-socket tree of 16 CPUs, 4 per L3.
func TestTopoKey(t *testing.T) {
	root := fakeSys(t, 16, 4, 2)
	for cpu, want := range map[int]uint64{0: 0, 3: 0, 5: 4, 7: 4, 8: 1<<32 | 8, 13: 1<<32 | 12, 15: 1<<32 | 12} {
		if got := topoKey(root, cpu); got != want {
			t.Errorf("CPU %d: key %#x, want %#x", cpu, got, want)
		}
	}
	if got := topoKey(root, 99); got != 0 {
		t.Errorf("a CPU the tree does not have: key %#x, want 0", got)
	}
	if got := topoKey(t.TempDir(), 3); got != 0 {
		t.Errorf("an empty tree: key %#x, want 0", got)
	}
	// 8 PEs whose home CPUs are 0, 8, 1, 9, ... (a launcher's round robin
	// over the sockets): the order groups them by socket, then L3.
	keys := make([]uint64, 8)
	for r := range keys {
		keys[r] = topoKey(root, r/2+8*(r%2))
	}
	got := barrierOrder(keys)
	want := []int{0, 2, 4, 6, 1, 3, 5, 7}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
}

// TestTopoKeyHere: this machine's tree gives every CPU one key or
// another without failing (on this 2-core VM, one L3: all alike).
func TestTopoKeyHere(t *testing.T) {
	if _, err := os.Stat(sysRoot); err != nil {
		t.Skipf("no %s: %v", sysRoot, err)
	}
	t.Logf("CPU 0: key %#x", topoKey(sysRoot, 0))
}
