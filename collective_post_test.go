package symheap_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/internal/petest"
)

// postRing is the number of post lines in a small Broadcast's ring
// (internal/team): a root runs at most that many calls ahead.
const postRing = 32

// TestBroadcastRingWrap: a root makes postRing+1 small Broadcasts while
// the other members hold back. The first postRing return at once; the
// last must wait until every member is done with the call whose line it
// reuses, and every member must read every call's value, in order.
func TestBroadcastRingWrap(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("%dPE", n), func(t *testing.T) { testBroadcastRingWrap(t, n) })
	}
}

func testBroadcastRingWrap(t *testing.T, n int) {
	{
		res := petest.Run(t, n, func(t *testing.T) {
			pe, err := symheap.Init(symheap.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer pe.Close()
			w := pe.World()
			buf, err := symheap.Calloc[int64](pe, 4) // src, dst, and the readers' "started" count
			if err != nil {
				t.Fatal(err)
			}
			src, dst, started := buf[0:2], buf[2:3], &buf[3]
			for round := range 3 {
				if err := pe.Barrier(); err != nil {
					t.Fatal(err)
				}
				if pe.Rank() == 0 {
					for i := range postRing + 1 {
						src[0] = int64(round*100 + i)
						if err := symheap.Broadcast(w, dst, src[:1], 0); err != nil {
							t.Fatal(err)
						}
					}
					// The last call reused the first call's line: it waited
					// for every reader to start.
					if got, _ := symheap.AtomicFetch(pe, started, 0); got != int64((round+1)*(n-1)) {
						t.Errorf("round %d: call %d returned with %d of %d readers started: it did not wait for its line",
							round, postRing+1, got-int64(round*(n-1)), n-1)
					}
				} else {
					time.Sleep(100 * time.Millisecond) // the root runs ahead meanwhile
					if err := symheap.AtomicAdd(pe, started, 1, 0); err != nil {
						t.Fatal(err)
					}
					for i := range postRing + 1 {
						if err := symheap.Broadcast(w, dst, src[:1], 0); err != nil {
							t.Fatal(err)
						}
						if want := int64(round*100 + i); dst[0] != want {
							t.Fatalf("round %d, call %d: got %d, want %d", round, i, dst[0], want)
						}
					}
				}
			}
		}, petest.Heap("1m"), petest.Env("SYMHEAP_SHARED_SIZE=1m"), petest.Timeout(60*time.Second))
		if res.Status != 0 {
			t.Errorf("%d PEs: job status %d", n, res.Status)
		}
	}
}

// TestSmallCollectivesMixed: small Broadcasts from changing roots, small
// and large Reduces, Syncs and split teams, back to back, with the
// members' speeds uneven; every result is checked.
func TestSmallCollectivesMixed(t *testing.T) {
	res := petest.Run(t, 3, func(t *testing.T) {
		pe, err := symheap.Init(symheap.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer pe.Close()
		me, n := pe.Rank(), pe.Size()
		buf, err := symheap.Malloc[int64](pe, 16)
		if err != nil {
			t.Fatal(err)
		}
		src, dst := buf[:7], buf[8:15]
		for it := range 2000 {
			team := pe.World()
			if it%500 == 499 {
				// A new team on the world's slot ids: its lines start from
				// where the last team's left them.
				nt, err := team.Split(0, 1, n)
				if err != nil {
					t.Fatal(err)
				}
				team = nt
			}
			m := 1 + it%7
			root := (it / 3) % n
			for i := range m {
				src[i] = int64(it*100 + me*10 + i)
			}
			if it%97 == me {
				time.Sleep(time.Millisecond) // a slow member
			}
			if err := symheap.Broadcast(team, dst[:m], src[:m], root); err != nil {
				t.Fatal(err)
			}
			for i := range m {
				if want := int64(it*100 + root*10 + i); dst[i] != want {
					t.Fatalf("call %d: Broadcast of %d from %d: [%d] = %d, want %d", it, m, root, i, dst[i], want)
				}
			}
			if err := symheap.Reduce(team, dst[:m], src[:m], symheap.OpSum); err != nil {
				t.Fatal(err)
			}
			for i := range m {
				var want int64
				for r := range n {
					want += int64(it*100 + r*10 + i)
				}
				if dst[i] != want {
					t.Fatalf("call %d: Reduce of %d: [%d] = %d, want %d", it, m, i, dst[i], want)
				}
			}
			if it%5 == 0 {
				if err := team.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			if team != pe.World() {
				if err := team.Destroy(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}, petest.Heap("1m"), petest.Env("SYMHEAP_SHARED_SIZE=1m"), petest.Timeout(90*time.Second))
	if res.Status != 0 {
		t.Errorf("job status %d", res.Status)
	}
}

// TestSmallCollectivePeerLost: a member waiting in a small Broadcast for
// a root that died, or in a small Reduce for a member that died, gets
// ErrPeerLost at the first liveness check after the death (lossWatch).
func TestSmallCollectivePeerLost(t *testing.T) {
	for _, what := range []string{"Broadcast", "Reduce"} {
		t.Run(what, func(t *testing.T) { testSmallCollectivePeerLost(t, what) })
	}
}

func testSmallCollectivePeerLost(t *testing.T, what string) {
	{
		res := petest.Run(t, 2, func(t *testing.T) {
			pe, err := symheap.Init(symheap.Config{})
			if err != nil {
				t.Fatal(err)
			}
			buf, err := symheap.Malloc[int64](pe, 2)
			if err != nil {
				t.Fatal(err)
			}
			if err := pe.Barrier(); err != nil {
				t.Fatal(err)
			}
			if pe.Rank() == 0 {
				petest.Exit(0) // gone without Close, status 0: the launcher leaves PE 1 running
			}
			defer pe.Close()
			w := watchLoss(t, pe, 0)
			start := time.Now()
			if what == "Broadcast" {
				err = symheap.Broadcast(pe.World(), buf[1:], buf[:1], 0)
			} else {
				err = symheap.Reduce(pe.World(), buf[1:], buf[:1], symheap.OpSum)
			}
			took := time.Since(start)
			if !errors.Is(err, symheap.ErrPeerLost) {
				t.Fatalf("%s with a dead member: %v, want ErrPeerLost", what, err)
			}
			sleeps, checks, after := w.firstCheck(t, what+" with a dead member")
			t.Logf("ErrPeerLost after %v: %d sleeps, %d liveness checks, %d after the death", took, sleeps, checks, after)
		}, petest.Heap("1m"), petest.Env("SYMHEAP_SHARED_SIZE=1m"), petest.Timeout(30*time.Second))
		if res.Status != 0 {
			t.Errorf("%s: job status %d", what, res.Status)
		}
	}
}

// TestPairBarrierStaysBroken: the full barrier of a team of two (a sync
// line per member) turns a member that died into ErrPeerLost at the first
// liveness check after the death, and every later one fails the same way
// at once, without a sleep (lossWatch).
func TestPairBarrierStaysBroken(t *testing.T) {
	res := petest.Run(t, 3, func(t *testing.T) {
		pe, err := symheap.Init(symheap.Config{})
		if err != nil {
			t.Fatal(err)
		}
		pair, err := pe.World().Split(0, 2, 2) // PEs 0 and 2
		if err != nil {
			t.Fatal(err)
		}
		for range 1000 {
			if pair != nil {
				if err := pair.Sync(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := pe.Barrier(); err != nil {
			t.Fatal(err)
		}
		switch pe.Rank() {
		case 2:
			petest.Exit(0) // gone without Close, status 0: the launcher leaves the others running
		case 1:
			pe.Close() // reports the loss; nothing to check here
			return
		}
		defer pe.Close()
		w := watchLoss(t, pe, 2)
		for i := range 3 {
			start := time.Now()
			err := pair.Sync()
			if !errors.Is(err, symheap.ErrPeerLost) || !strings.Contains(err.Error(), "PE 2") {
				t.Fatalf("Sync %d with a dead member: %v, want ErrPeerLost naming PE 2", i+1, err)
			}
			t.Logf("Sync %d: ErrPeerLost after %v", i+1, time.Since(start))
			what := fmt.Sprintf("Sync %d with a dead member", i+1)
			if i == 0 {
				w.firstCheck(t, what)
			} else {
				// Broken for good: no wait, not even one sleep.
				w.noSleep(t, what)
			}
		}
	}, petest.Heap("1m"), petest.Env("SYMHEAP_SHARED_SIZE=1m"), petest.Timeout(30*time.Second))
	if res.Status != 0 {
		t.Errorf("job status %d", res.Status)
	}
}
