//go:build linecount

package symheap_test

import (
	"fmt"
	"math/bits"
	"testing"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/internal/petest"
	"github.com/symheap/symheap/internal/team"
)

// TestLineCountPEs: the line-count model (internal/team, linecount_on.go)
// on real processes: jobs of 2 to 16 PEs (oversubscribed on a small
// machine: the counts do not depend on time) make Barriers and Syncs of
// the world team and of a split team, and every PE checks that each
// barrier wrote ⌈log₂ N⌉ lines, read ⌈log₂ N⌉ lines of other PEs and had
// a critical path of ⌈log₂ N⌉ line transfers. Larger N run in-process
// (internal/team, TestLineCountModel).
func TestLineCountPEs(t *testing.T) {
	for _, n := range []int{2, 3, 4, 8, 16} {
		t.Run(fmt.Sprintf("%dPE", n), func(t *testing.T) {
			petest.Run(t, n, func(t *testing.T) {
				pe, err := symheap.Init(symheap.Config{HeapSize: 1 << 20, SharedSize: 1 << 20})
				if err != nil {
					t.Fatal(err)
				}
				defer pe.Close()
				const k = 20
				check := func(what string, tm *symheap.Team, do func() error) {
					lt := (*team.Team)(tm)
					r := bits.Len(uint(tm.Size() - 1))
					before := lt.LineCounts()
					for range k {
						if err := do(); err != nil {
							t.Fatalf("%s: %v", what, err)
						}
					}
					after := lt.LineCounts()
					if b, w, rd := after.Barriers-before.Barriers, after.Writes-before.Writes, after.Reads-before.Reads; b != k || w != k*r || rd != k*r || after.Depth != r {
						t.Errorf("%s on %d PEs: %d barriers, %d lines written, %d read, last critical path %d; want %d, %d, %d, %d",
							what, tm.Size(), b, w, rd, after.Depth, k, k*r, k*r, r)
					}
				}
				check("Barrier", pe.World(), pe.Barrier)
				check("Sync", pe.World(), pe.World().Sync)
				if n >= 3 {
					sub, err := pe.World().Split(0, 1, n-1)
					if err != nil {
						t.Fatal(err)
					}
					if sub != nil {
						check("Sync of a split team", sub, sub.Sync)
						if err := sub.Destroy(); err != nil {
							t.Fatal(err)
						}
					}
				}
				if err := pe.Barrier(); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// TestLineCountCollectivesPEs: the line-count model of the collectives
// (internal/team, collCounter) on real processes of 2 to 16 PEs. Per PE
// per call: a Reduce of one int64 reads N-1 post lines up to 4 PEs and at
// most ⌈log₂ N⌉+1 above (the tree); a Reduce of 64 KiB copies and folds
// less than twice its bytes (plus a line per member for the shares'
// rounding), where folding every member's whole array moved N times its
// bytes; a Broadcast of 256 bytes (the scratch tree above 4 PEs) and one
// of 64 KiB copy at most twice their bytes. The critical paths are
// checked in-process (internal/team, TestLineCountPostReduce): a line's
// depth does not travel between processes.
func TestLineCountCollectivesPEs(t *testing.T) {
	for _, n := range []int{2, 4, 8, 16} {
		t.Run(fmt.Sprintf("%dPE", n), func(t *testing.T) {
			petest.Run(t, n, func(t *testing.T) {
				pe, err := symheap.Init(symheap.Config{HeapSize: 4 << 20, SharedSize: 1 << 20})
				if err != nil {
					t.Fatal(err)
				}
				defer pe.Close()
				w := pe.World()
				lt := (*team.Team)(w)
				r := bits.Len(uint(n - 1))
				const k = 8
				check := func(what string, do func() error, reads func(c team.CollCounts) bool, bytes uint64) {
					before := lt.CollCounts()
					for range k {
						if err := do(); err != nil {
							t.Fatalf("%s: %v", what, err)
						}
					}
					after := lt.CollCounts()
					d := team.CollCounts{Calls: after.Calls - before.Calls, Reads: after.Reads - before.Reads, Writes: after.Writes - before.Writes, Bytes: after.Bytes - before.Bytes}
					if !reads(d) || d.Bytes > k*bytes {
						t.Errorf("%s on %d PEs, %d calls: %+v; want at most %d bytes a call", what, n, k, d, bytes)
					}
				}
				one, err := symheap.Malloc[int64](pe, 2)
				if err != nil {
					t.Fatal(err)
				}
				check("Reduce of one int64", func() error { return symheap.Reduce(w, one[1:], one[:1], symheap.OpSum) },
					func(c team.CollCounts) bool {
						if n <= 4 {
							return c.Calls == k && c.Reads == k*(n-1)
						}
						return c.Calls == k && c.Reads <= k*(r+1) && c.Writes <= 2*k
					}, 0)
				const big = 8192 // int64s: 64 KiB
				arr, err := symheap.Malloc[int64](pe, 2*big)
				if err != nil {
					t.Fatal(err)
				}
				none := func(c team.CollCounts) bool { return c.Calls == 0 }
				check("Reduce of 64 KiB", func() error { return symheap.Reduce(w, arr[big:], arr[:big], symheap.OpSum) },
					none, 2*8*big+uint64(2*n*64))
				check("Broadcast of 256 B", func() error { return symheap.Broadcast(w, arr[big:big+32], arr[:32], 1%n) },
					none, 2*256)
				check("Broadcast of 64 KiB", func() error { return symheap.Broadcast(w, arr[big:], arr[:big], 0) },
					none, 8*big)
				if err := pe.Barrier(); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}
