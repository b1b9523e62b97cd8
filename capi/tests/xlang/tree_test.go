//go:build linecount

package xlang

import (
	"fmt"
	"math/bits"
	"os/exec"
	"strings"
	"testing"

	"github.com/symheap/symheap/internal/cabi/cabitest"
)

// TestLineCountTreeC: the C library's tree broadcast (capi/shmemi_tree.h,
// the world's broadcasts of 57 to 512 bytes above 4 PEs in coll.c) in its
// line-count build, a thread per PE (capi/tests/x_tree.c), for N = 2 ..
// 256, many calls back to back with the root and the size changing every
// call and every byte checked. Per PE per call it asserts the tree's
// bound, as internal/team's TestLineCountPostReduce does for Go: one
// arrival line written, at most one read (the parent's) on the path, at
// most ⌈log₂ N⌉ children's lines of an earlier call read before a buffer
// is reused, the parent's buffer (at most 8 lines) read, at most twice
// the bytes copied, and a critical path of the tree's height: at most
// ⌈log₂ N⌉, exactly that for powers of two. It logs the rows of
// docs/bench/scale.md's table beside the two syncs the world broadcast
// made before (modelled: 2·⌈log₂ N⌉ lines each way, the root's source
// read by N-1 members).
func TestLineCountTreeC(t *testing.T) {
	const calls = 120
	prog := cabitest.Build(t, "x_tree", []string{"capi/tests/x_tree.c"})
	ns := []int{2, 3, 4, 5, 8, 12, 16, 32, 64, 100, 128, 256}
	args := []string{fmt.Sprint(calls)}
	for _, n := range ns {
		args = append(args, fmt.Sprint(n))
	}
	out, err := exec.Command(prog, args...).Output()
	if err != nil {
		msg := ""
		if e, ok := err.(*exec.ExitError); ok {
			msg = string(e.Stderr)
		}
		t.Fatalf("x_tree: %v\n%s", err, msg)
	}
	t.Logf("| N | sync lines written / read / reuse reads, per PE per call (max) | data lines read | critical path | before: sync lines written / read, path | before: readers of the root's lines |")
	got := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(line, "sum ") {
			continue
		}
		var n, c, sw, sr, rr, dr, by, path int
		if _, err := fmt.Sscan(line, &n, &c, &sw, &sr, &rr, &dr, &by, &path); err != nil {
			t.Fatalf("x_tree line %q: %v", line, err)
		}
		got++
		r := bits.Len(uint(n - 1))
		height := 0
		for v := range n {
			height = max(height, bits.OnesCount(uint(v)))
		}
		if c != calls || sw != 1 || sr > 1 || rr > r || dr > 8 || by > 2*512 || path != height || path > r {
			t.Errorf("N=%d: %d calls, per call at most %d lines written, %d read, %d reuse reads, %d data lines read, %d bytes; path %d; want %d calls, 1 written, ≤ 1 read, ≤ %d reuse, ≤ 8 data lines, ≤ 1024 bytes, path %d (≤ %d)",
				n, c, sw, sr, rr, dr, by, path, calls, r, height, r)
		}
		if n&(n-1) == 0 && path != r {
			t.Errorf("N=%d: path %d, want log₂ N = %d", n, path, r)
		}
		t.Logf("| %d | %d / %d / %d | %d | %d | %d / %d, %d | %d |", n, sw, sr, rr, dr, path, 2*r, 2*r, 2*r+1, n-1)
	}
	if got != len(ns) {
		t.Errorf("x_tree reported %d sizes, want %d:\n%s", got, len(ns), out)
	}
}
