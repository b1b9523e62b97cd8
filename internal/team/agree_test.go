package team

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// simAgree places n members of the agreement in this process: the real
// code (agreeOn, publish, the pacing and the futex sleep) over round
// lines in this process's memory instead of control blocks. keys are the
// members' topology keys (nil: all alike).
func simAgree(n int, keys []uint64) (*Layer, []*agreeLines) {
	if keys == nil {
		keys = make([]uint64, n)
	}
	lines := make([][]agreeRound, n)
	for i := range lines {
		lines[i] = make([]agreeRound, rounds(n))
	}
	linesOf := func(i int) []*agreeRound {
		ls := make([]*agreeRound, rounds(n))
		for k := range ls {
			ls[k] = &lines[i][k]
		}
		return ls
	}
	as := make([]*agreeLines, n)
	for i := range as {
		as[i] = &agreeLines{}
		as[i].place(i, keys, linesOf)
	}
	return &Layer{}, as // not relaxed: seq-cst publication, no membarrier needed to sleep
}

// runAgree has every member run phases 1..k at once; rec(i, s) is member
// i's record of phase s. It checks that a member leaves phase s only when
// every member has entered it, and returns every member's verdicts.
func runAgree(t *testing.T, l *Layer, as []*agreeLines, k int, rec func(i, s int) [AgreeWords]uint64) [][]bool {
	t.Helper()
	n := len(as)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n)) // a thread per member, as a process per PE
	entered := make([]int, n)                       // phases entered, per member; under mu
	verdicts := make([][]bool, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	errc := make(chan error, n)
	for i, a := range as {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := 1; s <= k; s++ {
				mu.Lock()
				entered[i] = s
				mu.Unlock()
				v := rec(i, s)
				ok, err := l.agreeOn(a, uint64(s), &v, func() error { return nil })
				if err != nil {
					errc <- fmt.Errorf("member %d, phase %d: %w", i, s, err)
					return
				}
				verdicts[i] = append(verdicts[i], ok)
				mu.Lock()
				for j, e := range entered {
					if e < s {
						mu.Unlock()
						errc <- fmt.Errorf("member %d left phase %d before member %d entered it (it entered %d)", i, s, j, e)
						return
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	return verdicts
}

// TestAgreeSim: the agreement separates phases like a barrier, and every
// member's verdict is "all alike" exactly when every member's record of
// the phase is alike: phases with one member's record different, in
// turn each member and each word, alternate with phases where all agree;
// team sizes powers of two and not, with and without a topology.
func TestAgreeSim(t *testing.T) {
	for _, n := range []int{2, 3, 4, 5, 7, 8, 12, 16, 33, 64, 256} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			k := 4 * n
			if k > 64 {
				k = 64
			}
			// Phase s: odd phases agree; in even phase s, member (s/2)%n
			// differs in word (s/2)%AgreeWords.
			differs := func(s int) (int, int, bool) { return (s / 2) % n, (s / 2) % AgreeWords, s%2 == 0 }
			rec := func(i, s int) [AgreeWords]uint64 {
				var v [AgreeWords]uint64
				for w := range v {
					v[w] = uint64(1000*s + w)
				}
				if d, w, ok := differs(s); ok && d == i {
					v[w]++
				}
				return v
			}
			for _, keys := range [][]uint64{nil, interleaved(n)} {
				l, as := simAgree(n, keys)
				verdicts := runAgree(t, l, as, k, rec)
				for i, vs := range verdicts {
					for s := 1; s <= k; s++ {
						_, _, bad := differs(s)
						if vs[s-1] == bad {
							t.Fatalf("member %d, phase %d: agreed %v, want %v", i, s, vs[s-1], !bad)
						}
					}
				}
			}
		})
	}
}

// interleaved is the topology keys of two L3s, interleaved by rank.
func interleaved(n int) []uint64 {
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = uint64(i % 2)
	}
	return keys
}
