package team

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/symheap/symheap/internal/core"
)

// simPostTeams is simTeams with every member's team slot (its post and
// gather lines) in this process's memory: the real small-collective code
// (postReduce, postBcast) runs on it, a goroutine per member.
func simPostTeams(n int) []*Team {
	ts := simTeams(n, nil, func() error { return nil })
	slots := make([]teamSlot, n)
	for _, t := range ts {
		t.slots = make([]*teamSlot, n)
		for j := range slots {
			t.slots[j] = &slots[j]
		}
		t.gathBase = make([]uint32, n)
		t.postBase = make([]uint32, n)
		t.doneBase = make([]uint32, n)
		t.seenDone = make([]uint32, n)
	}
	return ts
}

// runPostReduces has every member of ts make k small int64 sum reductions
// of m elements at once (member r contributes r+1+call+i at element i)
// and checks every result.
func runPostReduces(t *testing.T, ts []*Team, k, m int) {
	t.Helper()
	n := len(ts)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n))
	var wg sync.WaitGroup
	errc := make(chan error, n)
	for r, tm := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src, dst := make([]int64, m), make([]int64, m)
			sp, _ := core.SliceData(src)
			dp, _ := core.SliceData(dst)
			for c := range k {
				for i := range src {
					src[i] = int64(r + 1 + c + i)
				}
				if err := tm.postReduce(dp, sp, m, uint64(8*m), OpSum, combine[int64]); err != nil {
					errc <- fmt.Errorf("member %d, call %d: %w", r, c, err)
					return
				}
				for i, v := range dst {
					if want := int64(n*(n+1)/2 + n*(c+i)); v != want {
						errc <- fmt.Errorf("member %d, call %d, element %d: %d, want %d", r, c, i, v, want)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}

// TestPostReduceSim: the small Reduce, flat and by the tree, gives every
// member the sum for teams of every shape, call after call (the gather
// lines are reused every other call).
func TestPostReduceSim(t *testing.T) {
	for _, n := range []int{2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 31, 33} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			runPostReduces(t, simPostTeams(n), 40, 7)
		})
	}
}
