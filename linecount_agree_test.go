//go:build linecount

package symheap

import (
	"fmt"
	"math/bits"
	"testing"

	"github.com/symheap/symheap/internal/petest"
	"github.com/symheap/symheap/internal/team"
)

// TestLineCountAgreePEs: the collective allocation's exchange on real
// processes of 2 to 16 PEs (oversubscribed on a small machine: the counts
// do not depend on time). Above team.AgreeFlat PEs every Malloc and every
// Free is one phase of the agreement (internal/team, agree.go), in which
// each PE writes ⌈log₂ N⌉ post lines and reads ⌈log₂ N⌉ of other PEs; up
// to it (the flat records, each PE reading N-1 record lines a phase) no
// phase runs the agreement. In-process runs check N up to 256 and the
// critical path (internal/team, TestLineCountAgree).
func TestLineCountAgreePEs(t *testing.T) {
	for _, n := range []int{2, 3, 4, 8, 16} {
		t.Run(fmt.Sprintf("%dPE", n), func(t *testing.T) {
			petest.Run(t, n, func(t *testing.T) {
				pe, err := Init(Config{HeapSize: 1 << 20, SharedSize: 1 << 20})
				if err != nil {
					t.Fatal(err)
				}
				defer pe.Close()
				const k = 10
				r := bits.Len(uint(n - 1))
				phases := 2 * k
				if n <= team.AgreeFlat {
					phases, r = 0, 0
				}
				before := pe.ext.teams.AgreeCounts()
				for i := range k {
					s, err := Malloc[byte](pe, 64+i)
					if err != nil {
						t.Fatal(err)
					}
					if err := Free(pe, s); err != nil {
						t.Fatal(err)
					}
				}
				after := pe.ext.teams.AgreeCounts()
				if c, w, rd := after.Calls-before.Calls, after.Writes-before.Writes, after.Reads-before.Reads; c != phases || w != phases*r || rd != phases*r {
					t.Errorf("%d Malloc+Free on %d PEs: %d phases, %d lines written, %d read; want %d, %d, %d",
						k, n, c, w, rd, phases, phases*r, phases*r)
				}
			})
		})
	}
}
