package symheap_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/internal/inspect"
	"github.com/symheap/symheap/internal/petest"
)

// collConfig is one way of running a job for the team and collective
// tests: a number of PEs, an allocator component and the mapping mode.
type collConfig struct {
	n         int
	allocator string // "" for the default choice
	offset    bool   // forced offset mode
}

func (c collConfig) String() string {
	s := fmt.Sprintf("%dPE", c.n)
	if c.allocator != "" {
		s += "-" + c.allocator
	}
	if c.offset {
		s += "-offset"
	}
	return s
}

// collConfigs covers 2, 3, 4 and 8 PEs, the default and the buddy
// component, and the forced offset mode, in few launches.
var collConfigs = []collConfig{
	{n: 2},
	{n: 2, allocator: "buddy", offset: true},
	{n: 3, offset: true},
	{n: 4, allocator: "buddy"},
	{n: 6},
	{n: 8},
}

// forEachCollConfig runs fn on the PEs of every configuration, each in a
// subtest of its own; fn gets an initialised PE, closed after it.
func forEachCollConfig(t *testing.T, fn func(t *testing.T, pe *symheap.PE)) {
	for _, c := range collConfigs {
		t.Run(c.String(), func(t *testing.T) {
			if c.allocator != "" {
				if _, ok := alloc.Lookup(c.allocator); !ok {
					t.Skipf("allocator component %q is not registered in this build (have %v)", c.allocator, alloc.Names())
				}
			}
			opts := []petest.Option{petest.Heap("8m"), petest.Env("SYMHEAP_SHARED_SIZE=1m"), petest.Timeout(90 * time.Second)}
			if c.allocator != "" {
				opts = append(opts, petest.Allocator(c.allocator))
			}
			if c.offset {
				opts = append(opts, petest.OffsetMode())
			}
			petest.Run(t, c.n, func(t *testing.T) {
				pe, err := symheap.Init(symheap.Config{})
				if err != nil {
					t.Fatal(err)
				}
				defer func() {
					if err := pe.Close(); err != nil {
						t.Errorf("Close: %v", err)
					}
				}()
				if c.offset && pe.SameAddress() {
					t.Errorf("offset mode asked for, but the job runs at the same address")
				}
				if c.allocator != "" && pe.AllocatorName() != c.allocator {
					t.Errorf("allocator %q, want %q", pe.AllocatorName(), c.allocator)
				}
				fn(t, pe)
			}, opts...)
		})
	}
}

func TestTeams(t *testing.T) {
	forEachCollConfig(t, func(t *testing.T, pe *symheap.PE) {
		teamWorld(t, pe)
		teamSplits(t, pe)
		teamBadTriplets(t, pe)
		teamExhaustion(t, pe)
		teamMisuse(t, pe)
		checkTeamsInUse(t, pe, 1, "after the tests")
		if n := pe.TeamHandles(); n != 0 {
			t.Errorf("TeamHandles %d after every team was destroyed", n)
		}
	})
}

func teamWorld(t *testing.T, pe *symheap.PE) {
	w := pe.World()
	if w.Rank() != pe.Rank() || w.Size() != pe.Size() {
		t.Fatalf("world team rank %d size %d, PE rank %d size %d", w.Rank(), w.Size(), pe.Rank(), pe.Size())
	}
	// Sync is a barrier: what every PE stored before it, every PE sees
	// after it. Each round every PE stores the round number in its own
	// element of PE 0's copy, then checks every element.
	marks, err := symheap.Calloc[int64](pe, pe.Size())
	if err != nil {
		t.Fatal(err)
	}
	at0 := symheap.Ptr(pe, marks, 0)
	for round := int64(1); round <= 50; round++ {
		at0[pe.Rank()] = round
		if err := w.Sync(); err != nil {
			t.Fatalf("Sync %d: %v", round, err)
		}
		for p, got := range at0 {
			if got != round {
				t.Fatalf("round %d: after Sync PE %d's mark is %d", round, p, got)
			}
		}
		if err := w.Sync(); err != nil { // nobody starts the next round before all checked
			t.Fatalf("Sync %d: %v", round, err)
		}
	}
	// Sync and Barrier refuse to overlap another call of the PE on the
	// team, without arriving: on PE 0 a goroutine waits in Sync, which
	// the other PEs join only once PE 0's overlapping calls were refused.
	flag, err := symheap.Calloc[int64](pe, 1)
	if err != nil {
		t.Fatal(err)
	}
	if pe.Rank() == 0 {
		in := make(chan error, 1)
		go func() { in <- w.Sync() }()
		time.Sleep(50 * time.Millisecond) // the goroutine is waiting in Sync by now
		for _, call := range []func() error{w.Sync, pe.Barrier} {
			if err := call(); !errors.Is(err, symheap.ErrBadArg) {
				t.Fatalf("Sync or Barrier during another Sync: %v, want ErrBadArg", err)
			}
		}
		for p := 1; p < pe.Size(); p++ {
			symheap.AtomicSet(pe, &flag[0], 1, p)
		}
		if err := <-in; err != nil {
			t.Fatal(err)
		}
	} else {
		if err := symheap.WaitUntil(pe, &flag[0], symheap.CmpEQ, 1); err != nil {
			t.Fatal(err)
		}
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	at0[pe.Rank()] = -1
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	for p, got := range at0 {
		if got != -1 {
			t.Fatalf("after the refused Syncs and a Barrier, PE %d's mark is %d", p, got)
		}
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	if err := symheap.Free(pe, flag); err != nil {
		t.Fatal(err)
	}
	if err := symheap.Free(pe, marks); err != nil {
		t.Fatal(err)
	}
	checkWorldRanks(t, pe, w)
}

// checkWorldRanks checks that FCollect of the world ranks gives the team's
// members in rank order.
func checkWorldRanks(t *testing.T, pe *symheap.PE, team *symheap.Team) {
	t.Helper()
	buf, err := symheap.Malloc[int64](pe, 1+symheap.MaxTeams)
	if err != nil {
		t.Fatal(err)
	}
	defer symheap.Free(pe, buf)
	if team == nil {
		// Not a member: only the allocation was collective.
		return
	}
	src, dst := buf[:1], buf[1:1+team.Size()]
	src[0] = int64(pe.Rank())
	if err := symheap.FCollect(team, dst, src); err != nil {
		t.Fatalf("FCollect on a team of %d: %v", team.Size(), err)
	}
	for r, got := range dst {
		if want := int64(team.WorldRank(r)); got != want {
			t.Errorf("team of %d: rank %d is PE %d, want PE %d", team.Size(), r, got, want)
		}
		if team.TeamRank(int(got)) != r {
			t.Errorf("TeamRank(%d) = %d, want %d", got, team.TeamRank(int(got)), r)
		}
	}
}

func teamSplits(t *testing.T, pe *symheap.PE) {
	w := pe.World()
	n, me := pe.Size(), pe.Rank()

	// Evens and odds.
	evens, err := w.Split(0, 2, (n+1)/2)
	if err != nil {
		t.Fatal(err)
	}
	odds, err := w.Split(1, 2, n/2)
	if err != nil {
		t.Fatal(err)
	}
	mine, other := evens, odds
	if me%2 == 1 {
		mine, other = odds, evens
	}
	if other != nil || mine == nil {
		t.Fatalf("PE %d: own parity team %v, other %v", me, mine, other)
	}
	if mine.Rank() != me/2 {
		t.Errorf("PE %d: rank %d in its parity team, want %d", me, mine.Rank(), me/2)
	}
	checkTeamsInUse(t, pe, 3, "with two split teams")

	// Each parity team reduces its members' world ranks, concurrently
	// with the other.
	v, err := symheap.Malloc[int64](pe, 2)
	if err != nil {
		t.Fatal(err)
	}
	v[0] = int64(me)
	if err := symheap.Reduce(mine, v[1:], v[:1], symheap.OpSum); err != nil {
		t.Fatal(err)
	}
	var want int64
	for p := me % 2; p < n; p += 2 {
		want += int64(p)
	}
	if v[1] != want {
		t.Errorf("PE %d: sum over parity team %d, want %d", me, v[1], want)
	}

	// Nested: the parity team without its first member.
	var inner *symheap.Team
	if mine.Size() >= 2 {
		inner, err = mine.Split(1, 1, mine.Size()-1)
		if err != nil {
			t.Fatal(err)
		}
		if (inner == nil) != (mine.Rank() == 0) {
			t.Errorf("PE %d: nested split gave %v at parity rank %d", me, inner, mine.Rank())
		}
		if inner != nil {
			if inner.Rank() != mine.Rank()-1 || inner.WorldRank(inner.Rank()) != me {
				t.Errorf("PE %d: nested rank %d, world rank %d", me, inner.Rank(), inner.WorldRank(inner.Rank()))
			}
			if err := symheap.Reduce(inner, v[1:], v[:1], symheap.OpMax); err != nil {
				t.Fatal(err)
			}
			if top := int64(mine.WorldRank(mine.Size() - 1)); v[1] != top {
				t.Errorf("PE %d: max over nested team %d, want %d", me, v[1], top)
			}
		}
	}
	// Parents may be destroyed before their children.
	if err := mine.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := other.Destroy(); err != nil { // nil: nothing
		t.Fatal(err)
	}
	if inner != nil {
		if err := inner.Sync(); err != nil {
			t.Fatalf("child team after its parent's Destroy: %v", err)
		}
		if err := inner.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	symheap.Free(pe, v)

	// Reversed: rank r is PE n-1-r.
	rev, err := w.Split(n-1, -1, n)
	if err != nil {
		t.Fatal(err)
	}
	if rev.Rank() != n-1-me {
		t.Errorf("PE %d: rank %d in the reversed team, want %d", me, rev.Rank(), n-1-me)
	}
	checkWorldRanks(t, pe, rev)

	// Stride 3 from 1 in the reversed team, when there is room.
	if n >= 5 {
		sub, err := rev.Split(1, 3, (n-2)/3+1)
		if err != nil {
			t.Fatal(err)
		}
		checkWorldRanks(t, pe, sub)
		if err := sub.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rev.Destroy(); err != nil {
		t.Fatal(err)
	}

	// Teams of one, each PE in turn, with every collective.
	buf, err := symheap.Malloc[int64](pe, 2000)
	if err != nil {
		t.Fatal(err)
	}
	defer symheap.Free(pe, buf)
	for k := range n {
		one, err := w.Split(k, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if (one != nil) != (k == me) {
			t.Fatalf("PE %d: team of PE %d is %v", me, k, one)
		}
		checkWorldRanks(t, pe, one)
		if one != nil {
			collectivesOnTeamOfOne(t, pe, one, buf)
		}
		if err := one.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
}

// collectivesOnTeamOfOne runs every collective on a team of one PE: they
// are local copies. No collective allocation may happen here.
func collectivesOnTeamOfOne(t *testing.T, pe *symheap.PE, one *symheap.Team, buf []int64) {
	if one.Size() != 1 || one.Rank() != 0 || one.WorldRank(0) != pe.Rank() {
		t.Fatalf("team of one: size %d rank %d world %d", one.Size(), one.Rank(), one.WorldRank(0))
	}
	if err := one.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{3, 1000} {
		src, dst := buf[:n], buf[n:2*n]
		for i := range src {
			src[i] = int64(i * 7)
		}
		if err := symheap.Broadcast(one, dst, src, 0); err != nil {
			t.Fatal(err)
		}
		if err := symheap.Reduce(one, dst, src, symheap.OpProd); err != nil {
			t.Fatal(err)
		}
		if err := symheap.FCollect(one, dst, src); err != nil {
			t.Fatal(err)
		}
		if err := symheap.AllToAll(one, dst, src); err != nil {
			t.Fatal(err)
		}
		for i := range dst {
			if dst[i] != int64(i*7) {
				t.Fatalf("team of one, %d elements: dst[%d] = %d, want %d", n, i, dst[i], i*7)
			}
		}
	}
}

// checkTeamsInUse checks the number of team ids in use, as symheap stat
// reads it (a read-only attachment to the job's segment), between two
// world barriers: the first lets every PE see the ids freed before it
// (Destroy's leader frees after the team's last barrier), the second keeps
// any PE from taking a new one before every PE has looked.
func checkTeamsInUse(t *testing.T, pe *symheap.PE, want int, when string) {
	t.Helper()
	if err := pe.World().Sync(); err != nil {
		t.Fatal(err)
	}
	v, err := inspect.Open(pe.Job())
	if err != nil {
		t.Fatal(err)
	}
	if got := v.TeamsInUse(); got != want {
		t.Errorf("TeamsInUse %d %s, want %d", got, when, want)
	}
	v.Close()
	if err := pe.World().Sync(); err != nil {
		t.Fatal(err)
	}
}

func teamBadTriplets(t *testing.T, pe *symheap.PE) {
	w := pe.World()
	n := pe.Size()
	for _, tr := range [][3]int{
		{0, 1, 0}, {0, 1, -1}, {-1, 1, 1}, {n, 1, 1}, {0, 0, 2}, {0, 1, n + 1},
		{n - 1, 1, 2}, {0, -1, 2}, {1, 1 << 62, 3}, {n - 1, -(1 << 62), 3},
	} {
		nt, err := w.Split(tr[0], tr[1], tr[2])
		if !errors.Is(err, symheap.ErrBadArg) || nt != nil {
			t.Errorf("Split%v: team %v, error %v; want ErrBadArg", tr, nt, err)
		}
	}
	// The team is still in step after the refusals.
	checkTeamsInUse(t, pe, 1, "after refused splits")
}

func teamExhaustion(t *testing.T, pe *symheap.PE) {
	w := pe.World()
	var teams []*symheap.Team
	for {
		nt, err := w.Split(0, 1, pe.Size())
		if err != nil {
			if !errors.Is(err, symheap.ErrOutOfMemory) {
				t.Fatalf("Split %d: %v, want ErrOutOfMemory", len(teams)+1, err)
			}
			break
		}
		teams = append(teams, nt)
		if len(teams) > symheap.MaxTeams {
			t.Fatalf("made %d teams, more than MaxTeams %d", len(teams), symheap.MaxTeams)
		}
	}
	if len(teams) != symheap.MaxTeams-1 {
		t.Errorf("made %d teams before exhaustion, want %d", len(teams), symheap.MaxTeams-1)
	}
	// Every one of them works, the last one too.
	if err := teams[len(teams)-1].Sync(); err != nil {
		t.Fatal(err)
	}
	for _, nt := range teams {
		if err := nt.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	// The ids are reusable, and a reused slot starts in step.
	for range 3 {
		nt, err := w.Split(0, 1, pe.Size())
		if err != nil {
			t.Fatal(err)
		}
		checkWorldRanks(t, pe, nt)
		if err := nt.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
}

func teamMisuse(t *testing.T, pe *symheap.PE) {
	var none *symheap.Team
	if err := none.Sync(); !errors.Is(err, symheap.ErrBadArg) {
		t.Errorf("Sync on a nil team: %v, want ErrBadArg", err)
	}
	if _, err := none.Split(0, 1, 1); !errors.Is(err, symheap.ErrBadArg) {
		t.Errorf("Split of a nil team: %v, want ErrBadArg", err)
	}
	if none.Rank() != -1 || none.Size() != 0 || none.WorldRank(0) != -1 || none.TeamRank(0) != -1 {
		t.Errorf("nil team: rank %d size %d", none.Rank(), none.Size())
	}
	if err := pe.World().Destroy(); !errors.Is(err, symheap.ErrBadArg) {
		t.Errorf("Destroy of the world team: %v, want ErrBadArg", err)
	}
	nt, err := pe.World().Split(0, 1, pe.Size())
	if err != nil {
		t.Fatal(err)
	}
	if err := nt.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := nt.Sync(); !errors.Is(err, symheap.ErrBadArg) {
		t.Errorf("Sync after Destroy: %v, want ErrBadArg", err)
	}
	if err := nt.Destroy(); !errors.Is(err, symheap.ErrBadArg) {
		t.Errorf("second Destroy: %v, want ErrBadArg", err)
	}
}

// TestTeamPeerLost: a member that dies turns a team's Sync on the others
// into ErrPeerLost at the first liveness check after the death
// (lossWatch).
func TestTeamPeerLost(t *testing.T) {
	res := petest.Run(t, 3, func(t *testing.T) {
		pe, err := symheap.Init(symheap.Config{})
		if err != nil {
			t.Fatal(err)
		}
		team, err := pe.World().Split(0, 2, 2) // PEs 0 and 2
		if err != nil {
			t.Fatal(err)
		}
		if err := pe.Barrier(); err != nil {
			t.Fatal(err)
		}
		if pe.Rank() == 2 {
			// Gone without Close, and with status 0 so that the
			// launcher leaves the others running.
			petest.Exit(0)
		}
		defer pe.Close() // reports the loss again; the segment goes with the last PE
		w := watchLoss(t, pe, 2)
		start := time.Now()
		var syncErr error
		if team != nil {
			syncErr = team.Sync()
		} else {
			syncErr = pe.World().Sync()
		}
		took := time.Since(start)
		if !errors.Is(syncErr, symheap.ErrPeerLost) {
			t.Fatalf("Sync with a dead member: %v, want ErrPeerLost", syncErr)
		}
		sleeps, checks, after := w.firstCheck(t, "Sync with a dead member")
		t.Logf("PE %d: %v after %v: %d sleeps, %d liveness checks, %d after the death", pe.Rank(), syncErr, took, sleeps, checks, after)
	}, petest.Heap("1m"), petest.Env("SYMHEAP_SHARED_SIZE=1m"), petest.Timeout(30*time.Second))
	if res.Status != 0 {
		t.Errorf("job status %d", res.Status)
	}
}
