package symheap

import (
	"errors"
	"os"
	"sort"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/petest"
	"github.com/symheap/symheap/internal/shmsync"
)

// checkWaitRing passes a token around the ring of PEs, the writer using in
// turn AtomicSet, Put, AtomicAdd and PutNBI+Quiet.
func checkWaitRing(t *testing.T, pe *PE) {
	me, r := pe.Rank(), right(pe)
	flag := must(Calloc[int64](pe, 1))
	pass := func(round int64) {
		switch round % 4 {
		case 0:
			ok(t, AtomicSet(pe, &flag[0], round, r))
		case 1:
			ok(t, Put(pe, flag, []int64{round}, r))
		case 2:
			ok(t, AtomicAdd(pe, &flag[0], 1, r)) // flag was round-1
		case 3:
			ok(t, PutNBI(pe, flag, []int64{round}, r))
			pe.Quiet()
		}
	}
	for round := int64(1); round <= 40; round++ {
		if me == 0 {
			pass(round)
		}
		ok(t, WaitUntil(pe, &flag[0], CmpGE, round))
		if me != 0 {
			pass(round)
		}
	}
	barrier(t, pe)
	ok(t, Free(pe, flag))
}

// checkWaitPingPong: pairs of PEs bounce a counter with plain Puts (no
// fence on the writer's side, wait.go) for many rounds, on machines with
// fewer cores than PEs too, so that waiters often go to sleep just as the
// put arrives; every tenth round the writer first waits until its partner
// has gone to sleep, so that every run has sleeps to judge. No wake-up may
// be lost: no sleep of a wait for round r may run its slice out although
// the partner's Put of round r, wake-up step included, had returned
// before the slice's deadline (shmsync, "Lost wake-ups, counted"). How
// long the rounds take is not looked at: on a loaded machine that is the
// scheduler's doing, not the protocol's.
func checkWaitPingPong(t *testing.T, pe *PE) {
	me, n := pe.Rank(), pe.Size()
	const rounds = 300
	flag := must(Calloc[int64](pe, 1))
	// doneAt[r]: when the partner's Put of round r to this PE had
	// returned (shmsync.Monotonic, one clock for every PE of the node).
	doneAt := must(Calloc[int64](pe, rounds+1))
	partner := me ^ 1
	var waits [rounds + 1][]shmsync.Sleep // the sleeps of the wait for round r
	if partner < n {
		var cur []shmsync.Sleep // the wait under way; only this goroutine waits on word
		word := &pe.ctl[me].sig.word
		defer shmsync.TraceSleeps(func(s shmsync.Sleep) {
			if s.Word == word {
				cur = append(cur, s)
			}
		})()
		var mine [rounds + 1]int64 // when this PE's Put of round r had returned
		for round := int64(1); round <= rounds; round++ {
			put := func() {
				if round%10 == 0 {
					untilAsleep(pe, partner)
				}
				ok(t, Put(pe, flag, []int64{round}, partner))
				mine[round] = shmsync.Monotonic()
			}
			wait := func() {
				cur = nil
				ok(t, WaitUntil(pe, &flag[0], CmpEQ, round))
				waits[round] = cur
			}
			if me%2 == 0 {
				put()
				wait()
			} else {
				wait()
				put()
			}
		}
		ok(t, Put(pe, doneAt, mine[:], partner))
	}
	barrier(t, pe)
	if partner < n {
		waited, forced, sleeps, timedOut, lost := 0, 0, 0, 0, 0
		for r := 1; r <= rounds; r++ {
			if len(waits[r]) > 0 {
				waited++
				if r%10 == 0 {
					forced++
				}
			}
			for _, s := range waits[r] {
				sleeps++
				if s.TimedOut {
					timedOut++
				}
				if s.Missed(doneAt[r]) {
					lost++
					if lost <= 3 {
						t.Logf("round %d: a sleep of %v ran out although PE %d's put and wake-up had returned %v before its deadline",
							r, s.Slice, partner, time.Duration(s.Deadline()-doneAt[r]))
					}
				}
			}
		}
		t.Logf("%d round trips with PE %d: %d waits slept (%d of the %d forced to), %d sleeps, %d ran their slice out, %d lost wake-ups",
			rounds, partner, waited, forced, rounds/10, sleeps, timedOut, lost)
		if lost != 0 {
			t.Errorf("%d sleeps ran their slice out although PE %d's put had woken them before it ended: wake-ups are being lost", lost, partner)
		}
		if forced == 0 {
			t.Errorf("none of the %d waits whose writer waited for the sleep slept: no sleep was traced (shmsync.TraceSleeps), so none was judged", rounds/10)
		}
	}
	barrier(t, pe)
	ok(t, Free(pe, doneAt))
	ok(t, Free(pe, flag))
}

// untilAsleep returns once PE target has announced a sleep on its signal
// word (W1 in wait.go), and a moment more for it to reach the futex.
// Unbounded: the job's timeout ends a PE that never sleeps.
func untilAsleep(pe *PE, target int) {
	for pe.ctl[target].sig.sleepers.Load() == 0 { // seq-cst load; pairs with the waiter's W1
		time.Sleep(100 * time.Microsecond)
	}
	time.Sleep(time.Millisecond)
}

// checkWaitCmp: Test evaluates every comparison, signed and unsigned, and
// WaitUntil waits for each to become true by the left neighbour's write.
func checkWaitCmp(t *testing.T, pe *PE) {
	waitCmpRound[int32](t, pe)
	waitCmpRound[uint32](t, pe)
	waitCmpRound[int64](t, pe)
	waitCmpRound[uint64](t, pe)
	// Signedness matters.
	x := must(Calloc[int64](pe, 1))
	u := must(Calloc[uint64](pe, 1))
	ok(t, AtomicSet(pe, &x[0], -1, pe.Rank()))
	ok(t, AtomicSet(pe, &u[0], ^uint64(0), pe.Rank()))
	if yes := must(Test(pe, &x[0], CmpLT, 0)); !yes {
		t.Error("int64 -1 < 0 is false")
	}
	if yes := must(Test(pe, &u[0], CmpGT, 0)); !yes {
		t.Error("uint64 max > 0 is false")
	}
	barrier(t, pe)
	ok(t, Free(pe, u))
	ok(t, Free(pe, x))
}

func waitCmpRound[T Integer](t *testing.T, pe *PE) {
	me, r := pe.Rank(), right(pe)
	x := must(Calloc[T](pe, 1))
	tests := []struct {
		x    T
		cmp  Cmp
		v    T
		want bool
	}{
		{5, CmpEQ, 5, true}, {5, CmpEQ, 6, false},
		{5, CmpNE, 6, true}, {5, CmpNE, 5, false},
		{5, CmpGT, 4, true}, {5, CmpGT, 5, false},
		{5, CmpGE, 5, true}, {5, CmpGE, 6, false},
		{5, CmpLT, 6, true}, {5, CmpLT, 5, false},
		{5, CmpLE, 5, true}, {5, CmpLE, 4, false},
	}
	for _, tc := range tests {
		ok(t, AtomicSet(pe, &x[0], tc.x, me))
		if got := must(Test(pe, &x[0], tc.cmp, tc.v)); got != tc.want {
			t.Fatalf("%T: Test(%d %v %d) = %v", tc.x, tc.x, tc.cmp, tc.v, got)
		}
		if tc.want {
			ok(t, WaitUntil(pe, &x[0], tc.cmp, tc.v))
		}
	}
	ok(t, AtomicSet(pe, &x[0], 0, me))
	barrier(t, pe)
	// Each step's condition is false for the value before it.
	steps := []struct {
		cmp   Cmp
		v, to T
	}{{CmpEQ, 7, 7}, {CmpNE, 7, 8}, {CmpGT, 10, 11}, {CmpGE, 20, 20}, {CmpLT, 5, 3}, {CmpLE, 2, 2}}
	for i, s := range steps {
		if i%2 == 0 {
			ok(t, AtomicSet(pe, &x[0], s.to, r))
		} else {
			ok(t, Put(pe, x, []T{s.to}, r))
		}
		ok(t, WaitUntil(pe, &x[0], s.cmp, s.v))
		if x[0] != s.to {
			t.Fatalf("%T: after waiting for %v %d: %d", x[0], s.cmp, s.v, x[0])
		}
		barrier(t, pe)
	}
	ok(t, Free(pe, x))
}

// checkWaitPut: a PE waits for the last element of a Put; the whole put is
// there when it sees it.
func checkWaitPut(t *testing.T, pe *PE) {
	me, r, l := pe.Rank(), right(pe), left(pe)
	const n = 1000
	buf := must(Calloc[int64](pe, n))
	src := make([]int64, n)
	for round := int64(1); round <= 10; round++ {
		for i := range src {
			src[i] = round<<32 | int64(me)<<16 | int64(i)
		}
		ok(t, Put(pe, buf, src, r))
		ok(t, WaitUntil(pe, &buf[n-1], CmpEQ, round<<32|int64(l)<<16|(n-1)))
		for i, v := range buf {
			if want := round<<32 | int64(l)<<16 | int64(i); v != want {
				t.Fatalf("round %d: element %d is %#x, want %#x", round, i, v, want)
			}
		}
		barrier(t, pe)
	}
	ok(t, Free(pe, buf))
}

// checkWaitSleep: a waiter that has gone to sleep is woken by the writer's
// Put, not by its sleep slice running out; and while it sleeps it uses
// next to no CPU. Woken or not shows in how its sleeps ended, judged
// against when the writer's Put had returned (shmsync, "Lost wake-ups,
// counted"), not in the latency, which on a loaded machine includes the
// wait for a core.
func checkWaitSleep(t *testing.T, pe *PE) {
	me, r, l := pe.Rank(), right(pe), left(pe)
	const rounds = 6
	msg := must(Calloc[int64](pe, 2)) // [send time, round]
	// doneAt[round]: when the left neighbour's Put of round had returned
	// (shmsync.Monotonic).
	doneAt := must(Calloc[int64](pe, rounds+1))
	var mine [rounds + 1]int64
	var waits [rounds + 1][]shmsync.Sleep
	var cur []shmsync.Sleep // written by the waiting goroutine only, read after it is done
	word := &pe.ctl[me].sig.word
	defer shmsync.TraceSleeps(func(s shmsync.Sleep) {
		if s.Word == word {
			cur = append(cur, s)
		}
	})()
	var lat []time.Duration
	for round := int64(1); round <= rounds; round++ {
		if round == 4 {
			// The rest without asymmetric fences, as on a kernel without
			// membarrier: puts fence, waiters sleep in 1 ms slices,
			// and a sleep that timed out before the put is no loss.
			pe.rma.mb.Store(mbNone)
			defer pe.rma.mb.Store(mbReady)
		}
		cur = nil
		done := make(chan error, 1)
		go func() { done <- WaitUntil(pe, &msg[1], CmpEQ, round) }()
		waitSleeping(t, pe, r)
		ok(t, Put(pe, msg, []int64{time.Now().UnixNano(), round}, r))
		mine[round] = shmsync.Monotonic()
		ok(t, <-done)
		waits[round] = cur
		lat = append(lat, time.Duration(time.Now().UnixNano()-msg[0]))
		barrier(t, pe)
	}
	ok(t, Put(pe, doneAt, mine[:], r))
	barrier(t, pe)
	sleeps, timedOut, lost := 0, 0, 0
	for round := 1; round <= rounds; round++ {
		for _, s := range waits[round] {
			sleeps++
			if s.TimedOut {
				timedOut++
			}
			if s.Missed(doneAt[round]) {
				lost++
				t.Logf("round %d: a sleep of %v ran out although PE %d's put and wake-up had returned %v before its deadline",
					round, s.Slice, l, time.Duration(s.Deadline()-doneAt[round]))
			}
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("wake-up latencies %v; %d sleeps, %d ran their slice out, %d lost wake-ups", lat, sleeps, timedOut, lost)
	if lost != 0 {
		t.Errorf("%d sleeps ran their slice out although PE %d's put had woken them before it ended: the put does not wake the sleeper", lost, l)
	}
	// CPU used while waiting 300 ms for PE 0's put.
	barrier(t, pe)
	if pe.Rank() == 0 {
		time.Sleep(300 * time.Millisecond)
		for p := 0; p < pe.Size(); p++ {
			ok(t, AtomicSet(pe, &msg[1], -1, p))
		}
	} else {
		before := cpuTime()
		ok(t, WaitUntil(pe, &msg[1], CmpEQ, -1))
		if used := cpuTime() - before; used > 100*time.Millisecond {
			t.Errorf("waiting about 300 ms used %v of CPU", used)
		} else {
			t.Logf("waiting about 300 ms used %v of CPU", used)
		}
	}
	barrier(t, pe)
	ok(t, Free(pe, doneAt))
	ok(t, Free(pe, msg))
}

// cpuTime is the CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// checkWaitErrors: the variable must be this PE's own symmetric, aligned
// integer, and the comparison one of the six.
func checkWaitErrors(t *testing.T, pe *PE) {
	x := must(Calloc[int64](pe, 2))
	var goVar int64
	wantErr(t, "WaitUntil on a Go variable", WaitUntil(pe, &goVar, CmpEQ, 0), ErrNotSymmetric)
	theirs := Ptr(pe, x, right(pe))
	wantErr(t, "WaitUntil on another PE's copy", WaitUntil(pe, &theirs[0], CmpEQ, 0), ErrNotSymmetric, "own copy")
	_, err := Test(pe, &theirs[0], CmpEQ, 0)
	wantErr(t, "Test on another PE's copy", err, ErrNotSymmetric)
	wantErr(t, "WaitUntil with Cmp(6)", WaitUntil(pe, &x[0], Cmp(6), 0), ErrBadArg, "Cmp(6)")
	_, err = Test(pe, &x[0], Cmp(-1), 0)
	wantErr(t, "Test with Cmp(-1)", err, ErrBadArg)
	p, _ := core.SliceData(x)
	off, _ := pe.symOff(p, 8)
	mis := &core.SliceAt[int64](pe.sp.HeapAddr(pe.Rank(), core.HeapOff(off+4)), 1)[0]
	wantErr(t, "WaitUntil misaligned", WaitUntil(pe, mis, CmpEQ, 0), ErrBadAlign)
	barrier(t, pe)
	ok(t, Free(pe, x))
}

// TestPeerLost: a PE dies holding a lock while the others wait, one in
// SetLock and one in WaitUntil for a put the dead PE will never make: both
// get ErrPeerLost, found through the dead PE's liveness token (not the
// stall timeout), at the first liveness check after the death, instead of
// hanging. "First" is judged by the sleeps, not the clock: just before
// each liveness check the waiter looks at the token itself (the sleep
// tracer runs between the sleep and the check), and once it has seen it
// gone, the check that follows must end the wait.
func TestPeerLost(t *testing.T) {
	petest.Run(t, 3, func(t *testing.T) {
		pe, err := Init(Config{})
		if err != nil {
			t.Fatal(err)
		}
		x := must(Calloc[int64](pe, 2))
		if pe.Rank() == 0 {
			ok(t, pe.SetLock(&x[0]))
		}
		// Checks at which PE 0 was already gone; only the test's
		// goroutine sleeps on a signal word here.
		var goneAtCheck, checks atomic.Int32
		defer shmsync.TraceSleeps(func(s shmsync.Sleep) {
			if s.Check {
				checks.Add(1)
				if !pe.seg.Alive(0) {
					goneAtCheck.Add(1)
				}
			}
		})()
		barrier(t, pe)
		start := time.Now()
		switch pe.Rank() {
		case 0:
			time.Sleep(200 * time.Millisecond)
			petest.Exit(0) // without Close, holding the lock
		case 1:
			err := pe.SetLock(&x[0])
			wantErr(t, "SetLock of a dead holder's lock", err, ErrPeerLost, "holder, PE 0", "is gone")
		case 2:
			err := WaitUntil(pe, &x[1], CmpEQ, 1)
			wantErr(t, "WaitUntil for a dead PE", err, ErrPeerLost, "PE 0", "died")
		}
		if n := goneAtCheck.Load(); n > 1 {
			t.Errorf("the wait ran %d liveness checks after PE 0's token was gone; the first must end it", n)
		}
		t.Logf("PE %d: ErrPeerLost after %v, %d liveness checks, %d after the death", pe.Rank(),
			time.Since(start).Round(time.Millisecond), checks.Load(), goneAtCheck.Load())
		pe.Close() // its barrier fails: PE 0 is gone
	}, petest.Heap("8m"), petest.Env("SYMHEAP_SHARED_SIZE=1m"), petest.Timeout(60*time.Second))
}

// TestSleepFencedRetestsAfterCheck: the messaging and signal waits'
// sleep re-tests its condition after a failed liveness check, as
// shmsync's waits do ("Liveness"): a peer that made the condition true
// and then left is not reported lost.
func TestSleepFencedRetestsAfterCheck(t *testing.T) {
	if petest.IsChild() || os.Getenv("SYMHEAP_PE") != "" {
		t.Skip("runs outside a job only")
	}
	pe, err := Init(Config{HeapSize: 2 << 20, SharedSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer pe.Close()
	gone := errors.New("PE 1 closed: a PE of the job is gone")
	var word atomic.Uint32
	var done atomic.Bool
	err = pe.rma.sleepFenced(&word, done.Load, func() error {
		done.Store(true) // the peer's last store, then it leaves
		return gone
	})
	if err != nil {
		t.Fatalf("sleepFenced: %v; want nil (the condition held after the failed check)", err)
	}
	done.Store(false)
	if err := pe.rma.sleepFenced(&word, done.Load, func() error { return gone }); !errors.Is(err, gone) {
		t.Fatalf("sleepFenced with a lost peer: %v, want %v", err, gone)
	}
}
