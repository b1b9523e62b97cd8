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
