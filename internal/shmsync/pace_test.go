package shmsync

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	sysunix "golang.org/x/sys/unix"
)

// TestBudgets: the pacing follows the machine and the job ("Pacing").
func TestBudgets(t *testing.T) {
	fast := Machine{Cores: 2, Poll: 10 * time.Nanosecond, Line: 60 * time.Nanosecond}
	slow := Machine{Cores: 2, Poll: 40 * time.Nanosecond, Line: 60 * time.Nanosecond}
	far := Machine{Cores: 2, Poll: 10 * time.Nanosecond, Line: 210 * time.Nanosecond}

	// With a core per PE: poll for SpinLines transfers, whatever a poll costs.
	pf, ps := budgets(fast, 2), budgets(slow, 2)
	if pf.polls == 0 || pf.polls != 4*ps.polls {
		t.Errorf("polls with a 10 ns poll %d, with a 40 ns poll %d: want the same time, four times the polls", pf.polls, ps.polls)
	}
	if got, want := time.Duration(pf.polls)*fast.Poll, SpinLines*fast.Line; got != want {
		t.Errorf("polling time %v, want %d transfers of %v = %v", got, SpinLines, fast.Line, want)
	}
	if pr := budgets(far, 2); pr.polls <= pf.polls {
		t.Errorf("a slower transfer (%v) polls %d times, a faster one (%v) %d: want longer", far.Line, pr.polls, fast.Line, pf.polls)
	}
	// Bounded both ways.
	if p := budgets(Machine{Cores: 2, Poll: time.Nanosecond, Line: time.Microsecond}, 2); time.Duration(p.polls) > maxSpin {
		t.Errorf("polling time %v ns beyond the bound %v", p.polls, maxSpin)
	}
	if p := budgets(Machine{Cores: 2, Poll: time.Nanosecond, Line: time.Nanosecond}, 2); time.Duration(p.polls) < minSpin {
		t.Errorf("polling time %v ns below the bound %v", p.polls, minSpin)
	}
	// More PEs than cores: no polling, and more yields the more PEs share a core.
	p4, p8, p16 := budgets(fast, 4), budgets(fast, 8), budgets(fast, 16)
	if p4.polls != 0 || p8.polls != 0 {
		t.Errorf("oversubscribed jobs poll (%d, %d times): want 0", p4.polls, p8.polls)
	}
	if !(p16.yields > p8.yields && p4.yields > 0) {
		t.Errorf("yields for 4, 8, 16 PEs on 2 cores: %d, %d, %d; want growing", p4.yields, p8.yields, p16.yields)
	}
	// With a core per PE the yields go on for YieldSpan; an oversubscribed
	// node just counts them ("Sleeping costs more than its wake-up").
	if pf.yieldFor != YieldSpan || p4.yieldFor != 0 {
		t.Errorf("yields go on for %v with a core per PE, %v with 2 PEs a core: want %v and 0", pf.yieldFor, p4.yieldFor, YieldSpan)
	}
	// Only with a core per PE are the yields timed (a hand-over teaches
	// something only there).
	if pf.handOver == 0 || p4.handOver != 0 || p8.handOver != 0 {
		t.Errorf("yields timed against %v with a core per PE, %v and %v with 2 and 4 PEs a core: want > 0, 0 and 0", pf.handOver, p4.handOver, p8.handOver)
	}
	// A yield lasts at LongYield up to 10 PEs a core; above, the other
	// PEs' turns on the core make it longer by design, up to maxLongYield
	// ("A yield that lasts").
	p64, p256 := budgets(fast, 64), budgets(fast, 256)
	if pf.longYield != LongYield || p4.longYield != LongYield || p16.longYield != LongYield {
		t.Errorf("long yield with a core per PE, 2 and 8 PEs a core: %v, %v, %v; want %v", pf.longYield, p4.longYield, p16.longYield, LongYield)
	}
	if p64.longYield != 32*yieldTurn || p256.longYield != maxLongYield {
		t.Errorf("long yield with 32 and 128 PEs a core: %v, %v; want %v and %v", p64.longYield, p256.longYield, 32*yieldTurn, maxLongYield)
	}
	// An unmeasured transfer time takes the default.
	if a, b := budgets(Machine{Cores: 2, Poll: 10 * time.Nanosecond}, 2), budgets(Machine{Cores: 2, Poll: 10 * time.Nanosecond, Line: defaultLine}, 2); *a != *b {
		t.Errorf("unmeasured line: %+v, want the default's %+v", *a, *b)
	}
}

// TestPacer: a Pacer polls, then yields, then tells its caller to sleep.
func TestPacer(t *testing.T) {
	// No lasting yields remembered from other tests: on a loaded machine
	// one of this Pacer's yields may last, and with three before it in
	// the record the waits would sleep ("A yield that lasts"); two yields
	// alone never make the share.
	yieldAgain.Store(0)
	lastYields.Store(0)
	p := Pacer{polls: 3, yields: 2}
	steps := 0
	for p.Next() {
		steps++
	}
	if steps != 5 || p.Next() {
		t.Errorf("%d steps, want 3 polls and 2 yields, then none", steps)
	}
	// A span of yields: every step until it has passed, then none.
	span := 2 * time.Millisecond
	y := Pacer{polls: 3, yields: 2, yieldFor: span}
	yieldAgain.Store(0) // no lasting yields remembered from other tests
	lastYields.Store(0)
	start, steps := time.Now(), 0
	for y.Next() {
		steps++
	}
	// A Pacer that ignored the span would stop after 5 quick steps. On a
	// loaded machine the 2 counted yields may outlast the span by
	// themselves, and then 5 steps are right; yields that lasted LongYield
	// may end the Pacer early ("A yield that lasts": TestLongYieldSleeps).
	if took := time.Since(start); !y.lasted && (took < span || steps < 5) || y.Next() {
		t.Errorf("a Pacer yielding for %v stopped after %v and %d steps", span, took, steps)
	}
	n := 0
	q := Pacer{polls: 100}
	if !q.Until(func() bool { n++; return n == 10 }) || n != 10 {
		t.Errorf("Until stopped after %d polls, want 10", n)
	}
	if (&Pacer{}).Until(func() bool { return false }) {
		t.Error("a spent Pacer's Until reported true")
	}
}

// TestCalibrate: the measurement gives figures in a plausible range on
// any machine (the exact ones are the machine's). The bounds come from
// the measurement's own duration, not from a fixed ceiling, which a
// preempted run on a loaded machine could pass: a poll is the best run's
// time over its polls, and the best of measureRuns runs is at most their
// mean. The transfer time is the best of runs cut off at a millisecond
// (pingPong), or the default: bounded by construction.
func TestCalibrate(t *testing.T) {
	m := Calibrate()
	if m.Cores < 1 || m.Poll <= 0 || m.Line <= 0 || m.Line > 100*time.Microsecond {
		t.Fatalf("Calibrate: %+v", m)
	}
	t.Logf("machine: %+v", m)
	start := time.Now()
	p := measure().Poll
	took := time.Since(start)
	if limit := max(took/(measureRuns*measurePolls), time.Nanosecond); p <= 0 || p > limit {
		t.Errorf("poll time %v from a measurement of %v (%d runs of %d polls): not the time of one poll", p, took, measureRuns, measurePolls)
	}
}

// TestAdapt: a wait that ends right after handing the core over cuts the
// polling share to the least, the time going to yields; waits that end
// while polling win it back ("Adapting").
func TestAdapt(t *testing.T) {
	SetPEs(2)
	defer SetPEs(1)
	defer pollShift.Store(0)
	pollShift.Store(0)
	// Each wait here yields: on a loaded machine a yield may last, and
	// enough of them would make the waits sleep ("A yield that lasts"),
	// which is not what this test is about.
	calm := func() { yieldAgain.Store(0); lastYields.Store(0) }
	calm()
	full := Pace()
	if full.polls == 0 {
		t.Skip("this machine's plan does not poll (one core)")
	}
	// Ends at the first test after a yield that was quick (nothing else
	// ran): no lesson.
	calm()
	p := Pace()
	p.handOver = time.Hour
	n := int32(0)
	if !p.Until(func() bool { n++; return n == p.polls+2 }) {
		t.Fatal("Until gave up")
	}
	if s := pollShift.Load(); s != 0 {
		t.Fatalf("after a wait that ended on a quick yield, pollShift %d, want 0", s)
	}
	// Ends at the first test after a yield that handed the core over (here
	// any yield counts as one): the peer needed our core.
	calm()
	p = Pace()
	p.handOver = time.Nanosecond
	n = 0
	if !p.Until(func() bool { n++; return n == p.polls+2 }) {
		t.Fatal("Until gave up")
	}
	if s := pollShift.Load(); s != maxShift {
		t.Fatalf("after a wait that ended on a yield, pollShift %d, want %d", s, maxShift)
	}
	cut, pl := Pace(), currentPlan()
	if cut.polls >= full.polls || cut.polls < pl.minPolls {
		t.Errorf("cut pacing %d polls; full %d: want fewer, not below %d", cut.polls, full.polls, pl.minPolls)
	}
	// The polling time cut goes to yields, at their measured cost.
	if want := full.yields + min((full.polls-cut.polls)/pl.yieldPolls, 4*full.yields); cut.yields != want {
		t.Errorf("cut pacing %d yields, want %d (full %d, and one per %d polls cut)", cut.yields, want, full.yields, pl.yieldPolls)
	}
	// A wait that ends while polling, after a failed poll, wins a step back.
	n = 0
	q := Pace()
	if !q.Until(func() bool { n++; return n == 2 }) {
		t.Fatal("Until gave up")
	}
	if s := pollShift.Load(); s != maxShift-1 {
		t.Errorf("after a wait that ended while polling, pollShift %d, want %d", s, maxShift-1)
	}
	// A condition that holds at once teaches nothing.
	r := Pace()
	r.Until(func() bool { return true })
	if s := pollShift.Load(); s != maxShift-1 {
		t.Errorf("after a wait that did not wait, pollShift %d, want %d", s, maxShift-1)
	}
}

// TestSettlePolls: a transfer's worth of polls, and the third of it a
// pair barrier settles for, with a core per PE; none where PEs share
// cores.
func TestSettlePolls(t *testing.T) {
	defer SetPEs(1)
	SetPEs(runtime.NumCPU() + 1)
	if tp, sp := TransferPolls(), SettlePolls(); tp != 0 || sp != 0 {
		t.Errorf("more PEs than cores: TransferPolls %d, SettlePolls %d; want 0 and 0", tp, sp)
	}
	SetPEs(1)
	tp, sp := TransferPolls(), SettlePolls()
	if tp < 1 || tp > 64 || sp < 1 || sp > max(tp/3, 1) {
		t.Errorf("a core per PE: TransferPolls %d, SettlePolls %d; want 1..64 and 1..max(%d/3, 1)", tp, sp, tp)
	}
}

// TestLongYieldShare feeds the record of yields by hand: yields that last
// now and then among quick ones (the end of the job's turn, when the busy
// processes are in other sessions) never make the waits sleep, however
// long it goes on; a share of LongYieldShare in LongYieldWindow does, and
// so does one more, at once, once the memory has run out and the
// neighbours are still there.
func TestLongYieldShare(t *testing.T) {
	defer lastYields.Store(0)
	lastYields.Store(0)
	// Two in a row, then quick ones, over and over: the earlier rule's
	// trigger. Every third yield lasting stays below the share too.
	for i := range 1000 {
		if recordYield(i%20 < 2) {
			t.Fatalf("yield %d: two that lasted in twenty made the waits sleep", i)
		}
	}
	for i := range 1000 {
		if recordYield(i%3 == 0) {
			t.Fatalf("yield %d: one in three lasting made the waits sleep", i)
		}
	}
	lastYields.Store(0)
	fired := -1
	for i := range LongYieldWindow {
		if recordYield(i%2 == 1) { // every other yield lasts: half
			fired = i
			break
		}
	}
	if fired != 2*LongYieldShare-1 {
		t.Fatalf("every other yield lasting: the waits slept after yield %d, want %d", fired, 2*LongYieldShare-1)
	}
	if !recordYield(true) {
		t.Errorf("one more yield that lasted, after the memory: the waits yield on")
	}
	// Quick yields clear the record: the load has gone.
	for range LongYieldWindow {
		recordYield(false)
	}
	if recordYield(true) {
		t.Errorf("one yield that lasted after %d quick ones made the waits sleep", LongYieldWindow)
	}
}

// TestLongYieldSleeps ("A yield that lasts"): once a yield of this
// process has lasted LongYield (here: a busy thread shares this thread's
// one CPU, and a yield hands it the core for a slice of the scheduler's),
// the next waits of the process make no yield at all: they poll, then go
// to sleep. Counted, not timed: the yields a wait makes.
func TestLongYieldSleeps(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set sysunix.CPUSet
	if err := sysunix.SchedGetaffinity(0, &set); err != nil {
		t.Skip(err)
	}
	cpu := -1
	for i := 0; i < 1024 && cpu < 0; i++ {
		if set.IsSet(i) {
			cpu = i
		}
	}
	var one sysunix.CPUSet
	one.Set(cpu)
	if err := sysunix.SchedSetaffinity(0, &one); err != nil {
		t.Skip(err)
	}
	defer sysunix.SchedSetaffinity(0, &set)
	var stop, started atomic.Bool
	done := make(chan struct{})
	go func() { // the busy neighbour, on the same CPU
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if sysunix.SchedSetaffinity(0, &one) != nil {
			return
		}
		started.Store(true)
		for !stop.Load() {
		}
	}()
	defer func() { stop.Store(true); <-done }()
	for !started.Load() {
		runtime.Gosched()
	}
	never := func() bool { return false }
	before := LongYields()
	for try := 0; LongYields() == before && try < 1000; try++ {
		yieldAgain.Store(0) // yield, whatever an earlier try did
		p := Pace()
		p.Until(never)
	}
	if LongYields() == before {
		t.Skip("no yield handed the core to the busy thread for LongYield in 1000 waits")
	}
	// The waits that follow, within LongYieldMemory: no yield.
	for i := range 10 {
		p := Pace()
		p.Until(never)
		if yields := p.n - p.polls; yields != 0 {
			t.Fatalf("wait %d after a yield that lasted: %d yields, want none (it should sleep at once)", i, yields)
		}
	}
	// A wait made when the memory has run out yields again.
	yieldAgain.Store(Monotonic() - 1)
	p := Pace()
	p.Until(never)
	if p.n == p.polls {
		t.Errorf("a wait after LongYieldMemory made no yield")
	}
}
