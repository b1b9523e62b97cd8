package team

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/symheap/symheap/internal/errs"
)

// simTeams makes n handles of one team whose members are goroutines of
// this process: the real barrier code (dissemBarrier, awaitPost, publish,
// the pacing and the futex sleep) over barrier words in this process's
// memory instead of control blocks. keys are the members' topology keys
// (nil: all alike); live is every member's liveness check.
func simTeams(n int, keys []uint64, live func() error) []*Team {
	if keys == nil {
		keys = make([]uint64, n)
	}
	r := rounds(n)
	counts := make([]barrierCount, n)
	lines := make([][]barrierRound, n)
	for i := range lines {
		lines[i] = make([]barrierRound, r)
	}
	linesOf := func(i int) []*barrierRound {
		ls := make([]*barrierRound, r)
		for k := range ls {
			ls[k] = &lines[i][k]
		}
		return ls
	}
	l := &Layer{} // not relaxed: seq-cst publication, no membarrier needed to sleep
	members := make([]int, n)
	for i := range members {
		members[i] = i
	}
	ts := make([]*Team, n)
	for i := range ts {
		t := &Team{l: l, size: n, rank: i, members: members, live: live, barBase: make([]uint32, n)}
		t.bar.count = &counts[i].count
		t.bar.place(i, keys, t.barBase, func() []*barrierRound { return linesOf(i) }, linesOf)
		ts[i] = t
	}
	return ts
}

// runBarriers has every member of ts make k full barriers at once, and
// checks after each that every member had entered it: a member leaves
// barrier b only when every member has entered it.
func runBarriers(t *testing.T, ts []*Team, k int) {
	t.Helper()
	n := len(ts)
	// A thread per member, as a process per PE: a member that polls or
	// yields (a raw sched_yield, as between processes) must not hold the
	// P that the member it waits for needs.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n))
	entered := make([]int32, n) // barriers entered, per member; under mu
	var mu sync.Mutex
	var wg sync.WaitGroup
	errc := make(chan error, n)
	for i, tm := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := 1; b <= k; b++ {
				mu.Lock()
				entered[i] = int32(b)
				mu.Unlock()
				if err := tm.fullBarrier(false, nil); err != nil {
					errc <- fmt.Errorf("member %d, barrier %d: %w", i, b, err)
					return
				}
				mu.Lock()
				for j, e := range entered {
					if e < int32(b) {
						mu.Unlock()
						errc <- fmt.Errorf("member %d left barrier %d before member %d entered it (it entered %d)", i, b, j, e)
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
		t.Error(err)
	}
}

// TestDissemBarrierSim: the barrier separates the members' calls, for
// team sizes that are powers of two and not, with and without a topology.
func TestDissemBarrierSim(t *testing.T) {
	for _, n := range []int{2, 3, 4, 5, 7, 8, 12, 16, 33, 64} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			runBarriers(t, simTeams(n, nil, func() error { return nil }), 20)
			// Two L3s, interleaved by rank.
			keys := make([]uint64, n)
			for i := range keys {
				keys[i] = uint64(i % 2)
			}
			runBarriers(t, simTeams(n, keys, func() error { return nil }), 20)
		})
	}
}

// TestDissemBarrierLost: a member that never arrives fails every other
// member's barrier with the liveness check's error (the runtime's is
// ErrPeerLost, within a sleep slice), and the barrier stays broken.
func TestDissemBarrierLost(t *testing.T) {
	const n, dead = 6, 4
	lost := fmt.Errorf("PE %d: %w", dead, errs.ErrPeerLost)
	ts := simTeams(n, nil, func() error { return lost })
	var wg sync.WaitGroup
	for i, tm := range ts {
		if i == dead {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := tm.fullBarrier(false, nil)
			if !errors.Is(err, errs.ErrPeerLost) {
				t.Errorf("member %d: %v, want ErrPeerLost", i, err)
			}
			if again := tm.fullBarrier(false, nil); again == nil || again.Error() != err.Error() {
				t.Errorf("member %d: the next barrier returned %v, want the same error", i, again)
			}
		}()
	}
	wg.Wait()
}

// TestBarrierOrder: members that share a key are adjacent in the order,
// ranks within a key in order, and the partners of the first rounds
// share the member's L3.
func TestBarrierOrder(t *testing.T) {
	// 8 PEs, two L3s (lowest CPUs 0 and 4) on one node, ranks placed
	// round-robin as a launcher might.
	keys := []uint64{0, 4, 0, 4, 0, 4, 0, 4}
	got := barrierOrder(keys)
	want := []int{0, 2, 4, 6, 1, 3, 5, 7}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	ts := simTeams(8, keys, func() error { return nil })
	for i, tm := range ts {
		// Rounds 0 and 1 reach 1 and 2 places back in a group of 4: the
		// same L3 for the group's last members; round 2 crosses.
		for r := range 2 {
			j := tm.bar.fromRank[r]
			pos := func(x int) int {
				for p, y := range got {
					if y == x {
						return p
					}
				}
				return -1
			}
			if pos(i)%4 >= 1<<r && keys[j] != keys[i] {
				t.Errorf("rank %d round %d waits for rank %d of another L3", i, r, j)
			}
		}
	}
	runBarriers(t, ts, 5)
}

// TestRounds: ⌈log₂ n⌉.
func TestRounds(t *testing.T) {
	for n, want := range map[int]int{1: 0, 2: 1, 3: 2, 4: 2, 5: 3, 8: 3, 9: 4, 16: 4, 17: 5, 256: 8, 512: 9} {
		if got := rounds(n); got != want {
			t.Errorf("rounds(%d) = %d, want %d", n, got, want)
		}
	}
}

// TestBarrierAreaGrowsWithLogN: a PE's barrier area (the agreement's
// lines included) is O(log N), where the old farsync area was 8 N bytes,
// the old C world barrier touched N counters and the collective
// allocation read N records.
func TestBarrierAreaGrowsWithLogN(t *testing.T) {
	for _, n := range []int{2, 16, 256, 512} {
		size := barrierArea.Size(n)
		if want := uint64(64 + MaxTeams*(64+128*rounds(n)) + 256*rounds(n)); size != want {
			t.Errorf("%d PEs: area %d B, want %d", n, size, want)
		}
		t.Logf("%d PEs: %d B of barrier area per PE", n, size)
	}
}
