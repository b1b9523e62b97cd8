//go:build linecount

package team

import "testing"

// TestLineCountPostReduce runs the real small Reduce (postReduce; a
// goroutine per member over post lines in this process's memory, as
// TestLineCountModel does for the barrier) for N = 2 .. 256 and checks its
// bound per PE per call: flat (N <= postFlat) N-1 lines read and a path
// of N-1; the tree at most ⌈log₂ N⌉+1 lines read, at most 2 written, and a
// critical path of at most 2·⌈log₂ N⌉ line transfers (reads taken one
// after another: collCounter). It logs the rows of docs/bench/scale.md's
// table beside the flat form's, which every N used before.
func TestLineCountPostReduce(t *testing.T) {
	const k = 6
	t.Logf("| N | reads/PE (max) | writes/PE (max) | critical path | flat: reads/PE, path |")
	for _, n := range []int{2, 3, 4, 5, 8, 16, 32, 64, 100, 128, 256} {
		ts := simPostTeams(n)
		runPostReduces(t, ts, k, 1)
		r := rounds(n)
		maxReads, maxWrites, path := 0, 0, 0
		for i, tm := range ts {
			c := tm.CollCounts()
			if c.Calls != k {
				t.Fatalf("N=%d PE %d: %d calls counted, want %d", n, i, c.Calls, k)
			}
			maxReads, maxWrites, path = max(maxReads, c.Reads/k), max(maxWrites, c.Writes/k), max(path, c.MaxDepth)
			switch {
			case n <= postFlat && (c.Reads != k*(n-1) || c.Writes != k || c.MaxDepth != n-1):
				t.Errorf("N=%d PE %d (flat): %+v; want %d reads, 1 write per call, path %d", n, i, c, n-1, n-1)
			case n > postFlat && (c.Reads > k*(r+1) || c.Writes > 2*k || c.MaxDepth > 2*r):
				t.Errorf("N=%d PE %d (tree): %+v; want at most %d reads, 2 writes per call, path %d", n, i, c, r+1, 2*r)
			}
		}
		if n > postFlat && n&(n-1) == 0 && path != 2*r {
			t.Errorf("N=%d: longest path %d, want 2·log₂ N = %d (the tree's up and down)", n, path, 2*r)
		}
		t.Logf("| %d | %d | %d | %d | %d, %d |", n, maxReads, maxWrites, path, n-1, n-1)
	}
}
