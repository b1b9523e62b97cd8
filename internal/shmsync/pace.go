package shmsync

import (
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/symheap/symheap/internal/unix"
)

// # Pacing
//
// Every wait of the runtime polls its condition for a while before it
// sleeps, and one policy decides how long: a Pacer, made by Pace (waits on
// other processes) or PaceLocal (waits on goroutines of this process).
// The budgets come from what the machine shows, measured once per process
// (Calibrate; the transfer time between the PEs themselves at Init where
// they have a core each: probe.go), and from the job (SetPEs), not from
// constants tuned on one machine:
//
//   - While the node has a core for every PE, a waiter polls with a
//     Pause between polls for SpinLines cache-line transfers' worth of
//     time: about what a peer needs for the shared-memory work between
//     two waits (a collective round, a message). The poll count is that
//     time over the measured cost of one poll, which differs threefold
//     between CPUs (PAUSE is 10 to 140 cycles). It then yields for
//     YieldSpan (see "Sleeping costs more than its wake-up") and sleeps.
//   - With more PEs than cores, polling only keeps the PE we wait for off
//     the core, so the waiter does not poll: it yields, enough times for
//     every PE sharing its core to run once or twice (each yield hands
//     the core to a runnable process), then sleeps.
//
// Sleeping is the caller's: a futex on a word in shared memory (WaitWord,
// WaitCount and the root's signal waits), or a short nap for in-process
// waits.
//
// # Sleeping costs more than its wake-up
//
// A PE with a core of its own gains nothing by sleeping early: the core
// has nothing else to run, and a sleep costs far more than the futex
// wake-up it takes.
//
//   - The wake-up itself: a few microseconds when the sleeper's core is
//     still awake, up to milliseconds in a VM once the kernel has halted
//     the idle virtual CPU.
//   - The Go runtime's monitor thread (sysmon): a blocking system call
//     re-arms it to wake every 20 µs for the next 50 rounds or more; on a
//     node whose PEs fill the cores each of its rounds preempts a PE,
//     which stalls every PE waiting for that one.
//
// In plain loops of 2-PE barriers a sleep was the start of such a chain:
// the peer, preempted by its monitor, missed the waiter's 16 yields; the
// waiter slept, re-arming its own monitor, which preempted it in turn. So
// with a core per PE the yields go on until YieldSpan has passed; an
// oversubscribed node keeps its count of yields, which hands the core
// over at once, and sleeps after. The traces and figures behind this:
// docs/bench/design-measurements.md ("the yield span").
//
// # Adapting to the cores the PEs get
//
// A core per PE on paper is not always one in fact: other processes take
// cores, and the kernel often runs both PEs of a pair on one core (a futex
// wake-up places the woken process beside its waker, and processes that
// spend their time polling and yielding look light to the load balancer).
// Then every poll is wasted: the peer we wait for runs only once we yield,
// and a waiter that polls for its whole budget first makes each hand-over
// cost that budget (a 2-PE barrier then cost ten times what yielding at
// once costs, for as long as the pair shared the core;
// docs/bench/design-measurements.md).
// So each process keeps one share of the polling budget (pollShift: the
// budget is halved that many times, down to MinSpinLines transfers), fed
// back by the waits that go through Until or WaitCount:
//
//   - a wait that found its condition while polling, after at least one
//     poll that failed (the peer was running on another core), doubles
//     the share back, up to the whole budget;
//   - a wait whose condition held right after a yield that handed the core
//     over (at the first test after the first yield, or after a yield
//     that lasted twice an idle one: somebody ran) cuts it to the least at
//     once: the peer needed our core.
//
// The time taken from polling goes to yields (their measured cost), so a
// wait spends about as long before it sleeps whatever its share.

// # A yield that lasts
//
// A yield hands the core to whatever else is runnable on it. Another PE
// gives it back within microseconds (it waits too, or works between two
// waits); a process that wants the core for itself (a busy neighbour on a
// loaded machine) keeps it for a whole slice of the scheduler's, a
// millisecond or more, and every further yield gives it another. A sleep
// on the futex costs less then: the kernel runs a woken sleeper ahead of
// a process that has been running (its wake-up preempts), so the waiter
// is back a few microseconds after the writer's wake-up instead of after
// the neighbours' slices. One such yield costs the slice already, and the
// neighbours stay: so once a yield lasts LongYield and so did
// LongYieldShare of the process's last LongYieldWindow (one alone may be
// a hiccup, see LongYield), the waits of this process do not yield for
// LongYieldMemory (a wait that polls still polls first); they sleep at
// once. The first wait after that yields again and finds
// out whether the neighbours are still there: the record of the last
// yields is kept, so one more that lasts is enough. The C library's waits
// (capi/wait.c) keep the same rule. With 4 PEs and 4 busy processes on 2
// cores, a Go barrier took 1.6–5 ms at p50 when each wait yielded (a
// yield lasted 2.9 ms on average), 0.17 ms when it slept at once; quiet,
// the yields are worth keeping (40 µs against 150 µs): docs/bench/load.md.
// LongYields counts the yields that lasted.
//
// It is the share of the yields that tells, not two in a row. Linux
// shares the cores between sessions (autogroup) or cgroups first, then
// between the processes of each. When the busy processes are in the
// job's own group, a yield gives one of them the core whenever it is
// queued there: with the rule off, 50-65% of the yields of a 4-PE C
// barrier under 4 busy processes lasted, at 1-3 yields apart. When they
// are in other groups, as other users' jobs and batch scripts are, a
// yield passes the core among the job's own PEs and lasts only when it
// meets the end of the group's turn, and then the other groups run
// whatever this process does, for a sleeper as for a yielder: 15-50
// yields of 12,000-70,000 lasted, most 256 or more apart, and two in a
// row came once or twice a run (start-up), enough for the earlier rule
// (two in a row) to make every wait sleep: the barrier's p50 3.1-5.8 µs
// against 2.2-4.1 with this one (Open MPI 2.1-2.3); with the busy
// processes in the job's session both rules sleep (9-25 µs; Open MPI
// 4.8-6.4 ms). docs/bench/load.md.
//
// On a node with many PEs a core, a yield that hands the core over runs
// the other PEs that share it, each for a turn, and lasts that long by
// design: 64 PEs on 2 cores took their yields of 200 µs for a busy
// neighbour's, and every wait slept at once, each sleep a FUTEX_WAIT and
// its writer's FUTEX_WAKE (12 futex calls and 17 context switches a PE a
// barrier, where Open MPI's waits made 5 switches). So there a yield
// lasts at the plan's longYield: the PEs a core has times yieldTurn, from
// LongYield up to maxLongYield, below a neighbour's slice (a millisecond
// or more). Up to 10 PEs a core it is LongYield. docs/bench/scale.md has
// the figures.

// LongYield is how long a yield lasts, at least, when the core went to a
// process that kept it for a slice of its own; once LongYieldShare of
// the last LongYieldWindow yields lasted as long, the waits sleep. One
// alone proves little: a virtual CPU the hypervisor stops for a while,
// an interrupt, a PE that computes between its waits make a yield last
// as long now and then, and a process that took them for load slept
// where it should have polled (a quiet 2-PE barrier then cost 26 µs
// instead of 0.35).
const LongYield = 200 * time.Microsecond

// yieldTurn is the time one PE that shares a core with this one may take
// of a yield, between its own waits, and maxLongYield the most a yield
// may last on an oversubscribed node before it counts as lasting (the
// plan's longYield, budgets).
const (
	yieldTurn    = 20 * time.Microsecond
	maxLongYield = time.Millisecond
)

// LongYieldShare is how many of the last LongYieldWindow yields of this
// process's waits must last LongYield ("A yield that lasts"). The record
// is a word of 32 bits (lastYields, and the C library's).
const (
	LongYieldShare  = 4
	LongYieldWindow = 8
	_               = uint(32 - LongYieldWindow) // a compile error past 32
)

// LongYieldMemory is how long the waits of a process sleep without
// yielding after a yield that lasted LongYield.
const LongYieldMemory = 100 * time.Millisecond

// longYields counts this process's waits that stopped yielding;
// yieldAgain is when its waits may yield again (Monotonic; 0: now).
// lastYields has a bit for each of the process's last LongYieldWindow
// yields, over its waits, the latest lowest: set if it lasted. Any
// goroutine; a lost update costs one yield's record.
var (
	longYields atomic.Uint64
	yieldAgain atomic.Int64
	lastYields atomic.Uint32
)

// lastedYield records a wait whose yields lasted, the last ending at now
// (Monotonic).
func lastedYield(now int64) {
	longYields.Add(1)
	yieldAgain.Store(now + int64(LongYieldMemory))
}

// recordYield records one yield of a wait, whether it lasted, and
// reports whether the waits should sleep at once from now on: it lasted,
// and so did LongYieldShare of the last LongYieldWindow.
func recordYield(lasted bool) bool {
	h := lastYields.Load() << 1
	if lasted {
		h |= 1
	}
	h &= 1<<LongYieldWindow - 1
	lastYields.Store(h)
	return lasted && bits.OnesCount32(h) >= LongYieldShare
}

// mayYield reports whether a wait starting now may yield: no yield of
// this process lasted LongYield in the last LongYieldMemory.
func mayYield() bool {
	a := yieldAgain.Load()
	return a == 0 || Monotonic() >= a
}

// LongYields returns how many of this process's waits stopped yielding
// because LongYieldShare of their last yields lasted LongYield ("A
// yield that lasts").
func LongYields() uint64 { return longYields.Load() }

// SpinLines is how many cache-line transfers' worth of time a waiter
// polls before it yields, when it has a core of its own.
const SpinLines = 100

// YieldSpan is how long a waiter with a core of its own yields before it
// sleeps ("Sleeping costs more than its wake-up"): a yield with nothing
// else to run returns at once, so this is polling that lets any other
// thread of the core's run first.
const YieldSpan = 200 * time.Microsecond

// MinSpinLines is the least polling, in transfers, that a waiter keeps when
// its polls kept failing (see "Adapting"): a peer running on another core
// answers within a few.
const MinSpinLines = 4

// maxShift bounds pollShift: SpinLines>>maxShift is about MinSpinLines.
const maxShift = 5

// pollShift is this process's share of the polling budget ("Adapting"):
// the budget is halved pollShift times. Any goroutine; plain loads and
// stores (a lost update only delays the adaptation by one wait).
var pollShift atomic.Int32

// Bounds of the polling time, whatever the measurements say.
const (
	minSpin = 2 * time.Microsecond
	maxSpin = 50 * time.Microsecond
)

// Machine is what the waits are paced by: this process's measurement of
// the machine.
type Machine struct {
	Cores  int           // cores this process may run on
	Poll   time.Duration // one Pause and one poll of a cached word
	Line   time.Duration // one cache-line transfer between two cores (0: not measured)
	Yield  time.Duration // one sched_yield with nobody else to run
	Static bool          // Line was not measured (one core, or no core free in time); a default stands in
}

// defaultLine stands in for a transfer time that could not be measured.
const defaultLine = 100 * time.Nanosecond

var (
	machineMu sync.Mutex
	machine   Machine
	measured  bool                 // machine holds Cores, Poll and Yield
	lineTried bool                 // machine.Line was measured, or could not be
	pes       atomic.Int32         // PEs on this node (SetPEs); 0: unknown, taken as 1
	plans     atomic.Pointer[plan] // the budgets for the current PEs and machine
)

// plan is the budgets of the Pacers.
type plan struct {
	polls, yields      int32         // for waits on other processes
	localPolls, gosche int32         // for waits on this process's goroutines
	minPolls           int32         // the polls a wait keeps at the largest pollShift
	yieldPolls         int32         // polls one yield stands in for, when polls give way to yields
	handOver           time.Duration // a yield at least this long handed the core over
	yieldFor           time.Duration // the yields go on this long, at least (0: just count them)
	longYield          time.Duration // a yield this long went to a process that kept the core ("A yield that lasts")
}

// Calibrate measures the machine once per process and returns the
// result; later calls return the same. It is quick, and slower on a
// machine with no second core free (where the PEs of a job that fills the
// cores all start at once, say), but a job's start-up is then within
// noise of what it was without it (measured:
// docs/bench/design-measurements.md, «internal/shmsync/pace.go,
// Calibrate»).
func Calibrate() Machine { return calibrate(true) }

// TransferPolls is a cache-line transfer's worth of polls (Pause and
// load), 1 to 64, on a node with a core per PE; 0 where PEs share cores.
// A waiter that has just written a line its peer will answer in does not
// look at the peer's line for that long: the answer cannot come sooner,
// and a look in between takes the line from the writer, whose store must
// then fetch it back (the fast box's "Quiet" in internal/msg, the pair
// barrier in internal/team).
func TransferPolls() int {
	if int(max(pes.Load(), 1)) > runtime.NumCPU() {
		return 0
	}
	m := Calibrate()
	return int(min(max(m.Line/max(m.Poll, time.Nanosecond), 1), 64))
}

// SettlePolls is the pauses a waiter makes between publishing its own
// count and its first look at a peer's count that may be on its way at
// the same moment (the pair barriers of internal/team and of the C
// library): a third of TransferPolls, at least one; 0 where PEs share
// cores. A peer arriving then has its store to the line under way; a
// look would take the line from it before the store landed, and the
// store would fetch it back. Waiting a whole transfer (TransferPolls)
// delays every barrier whose peer had already arrived
// (docs/bench/design-measurements.md).
func SettlePolls() int {
	if n := TransferPolls(); n > 0 {
		return max(n/3, 1)
	}
	return 0
}

// calibrate is Calibrate, measuring the transfer time only if line.
func calibrate(line bool) Machine {
	machineMu.Lock()
	defer machineMu.Unlock()
	if !measured {
		m := measure()
		m.Line, m.Static = machine.Line, machine.Static // DeferLine's
		machine, measured = m, true
	}
	if line && !lineTried {
		machine.Line, machine.Static = measureLine(machine.Cores)
		lineTried = true
	}
	return machine
}

// SetPEs tells the pacing how many PEs run on this node, so that it can
// tell whether each has a core. Init calls it once the job is known.
func SetPEs(n int) {
	pes.Store(int32(max(n, 1)))
	plans.Store(nil)
}

// currentPlan returns the budgets, computing them on first use. The
// transfer time is measured only for a job with a core per PE, the only
// budgets that use it: an oversubscribed job spends no core on it.
func currentPlan() *plan {
	if p := plans.Load(); p != nil {
		return p
	}
	n := int(max(pes.Load(), 1))
	m := calibrate(n <= runtime.NumCPU())
	p := budgets(m, n)
	plans.Store(p)
	return p
}

// budgets derives the pacing from the machine and the number of PEs on
// the node ("Pacing").
func budgets(m Machine, n int) *plan {
	line := m.Line
	if line == 0 {
		line = defaultLine
	}
	spin := min(max(SpinLines*line, minSpin), maxSpin)
	polls := int32(spin / max(m.Poll, time.Nanosecond))
	yield := max(m.Yield, 100*time.Nanosecond)
	p := &plan{polls: polls, yields: 16, localPolls: polls, gosche: 64,
		minPolls:   int32(min(MinSpinLines*line, spin) / max(m.Poll, time.Nanosecond)),
		yieldPolls: int32(max(yield/max(m.Poll, time.Nanosecond), 1)),
		handOver:   2 * yield, yieldFor: YieldSpan, longYield: LongYield}
	if cores := max(m.Cores, 1); n > cores {
		// More PEs than cores: no polling, and no timing of the yields
		// (two clock reads each): a hand-over is the rule here, and what
		// one teaches (Adapting, Placement) is for a core per PE.
		perCore := (n + cores - 1) / cores
		p.polls, p.yields, p.minPolls, p.yieldFor, p.handOver = 0, int32(max(4*perCore, 16)), 0, 0, 0
		// A yield runs the other PEs that share the core, each for a
		// turn: longer by design, up to below a busy neighbour's slice.
		p.longYield = min(max(LongYield, time.Duration(perCore)*yieldTurn), maxLongYield)
	}
	return p
}

// A Pacer paces the polls of one wait: Next after each poll that found
// the condition false.
type Pacer struct {
	n, polls, yields int32
	local            bool
	handOver         time.Duration // a yield this long handed the core over (0: not told)
	handed           bool          // the last yield did
	lasted           bool          // LongYieldShare of the last yields lasted LongYield: sleep now ("A yield that lasts")
	longYield        time.Duration // a yield this long lasted ("A yield that lasts"; 0: LongYield)
	yieldFor         time.Duration // yield until this long after the first yield, at least
	yieldFrom        time.Duration // the first yield, since paceEpoch (monotonic; a Pacer stays small)
}

// paceEpoch is the origin of Pacer.yieldFrom.
var paceEpoch = time.Now()

// Pace returns the Pacer of a wait for other processes: polls, then
// sched_yields, the polls cut to this process's share ("Adapting") and
// the time cut given to yields.
func Pace() Pacer {
	p := currentPlan()
	q := Pacer{polls: p.polls, yields: p.yields, handOver: p.handOver, yieldFor: p.yieldFor, longYield: p.longYield}
	if !mayYield() {
		q.lasted = true // "A yield that lasts": polls, then sleeps
	}
	if s := pollShift.Load(); s > 0 && p.polls > p.minPolls {
		q.polls = max(p.polls>>s, p.minPolls)
		q.yields += min((p.polls-q.polls)/p.yieldPolls, 4*p.yields)
	}
	return q
}

// learn feeds the outcome of a wait back into pollShift ("Adapting"): ok
// is whether its condition held when it stopped.
func (p *Pacer) learn(ok bool) {
	if p.local || p.n == 0 {
		return
	}
	switch s := pollShift.Load(); {
	case ok && p.n <= p.polls:
		if s > 0 {
			pollShift.Store(s - 1)
		}
	case ok && p.handed:
		if Place() {
			// Moved onto a core of its own: the peer is not on ours
			// any more, and polling pays again.
			pollShift.Store(0)
		} else if s < maxShift {
			pollShift.Store(maxShift)
		}
	}
}

// # Placement
//
// A wait whose yield handed the core over, in a job with a core per PE,
// found its peer running on its own core while the node has another: the
// kernel put the pair on one core (it places a woken process beside its
// waker, and processes that poll and yield look too light to its load
// balancer to be parted again), and every wait now costs a hand-over
// instead of a transfer. So the PE moves itself once onto a core of its
// own, the one its index among the node's PEs names (unix.Nudge: moved,
// not bound), at most once per PlaceEvery (two system calls and a
// migration: a small share of a PE's time even where something else
// keeps taking its core), and keeps its whole polling share, since the
// peer is no longer on its core. In plain loops of 2-PE barriers, ten
// jobs in a row, the slow jobs were those whose PEs shared a core for
// much of the loop; moving made the median job much faster (measured:
// docs/bench/design-measurements.md, «internal/shmsync/pace.go,
// placement»). The C library's waits do the same (capi/wait.c): their
// polls yield now and then, and a C PE whose peer shared its core spent
// 1.2 µs a 2-PE barrier handing it over (0.1 on cores of their own).

// PlaceEvery bounds how often a PE moves itself.
const PlaceEvery = time.Millisecond

var (
	home      atomic.Int32 // this PE's index among the node's PEs, plus one; 0: none (SetHome)
	lastPlace atomic.Int64 // when the PE last moved itself (Unix ns)
)

// SetHome tells the pacing this PE's index among the PEs of its node,
// which names the core it moves to when it finds its peer on its own
// ("Placement"). Init calls it with SetPEs.
func SetHome(i int) { home.Store(int32(i) + 1) }

// Place moves this PE onto its own core if it may ("Placement"), and
// reports whether it did: for a wait whose condition held right after a
// yield that handed the core over (Pacer.learn, and the C library's
// waits, whose yields last Budget.HandOver then).
func Place() bool {
	h := home.Load()
	if h == 0 || pes.Load() < 2 || currentPlan().polls == 0 {
		// No index; or no other PE on this node that could share our
		// core (a PE alone on its node waits for other nodes'); or more
		// PEs than cores.
		return false
	}
	now := time.Now().UnixNano()
	if last := lastPlace.Load(); now-last < int64(PlaceEvery) || !lastPlace.CompareAndSwap(last, now) {
		return false
	}
	return unix.Nudge(int(h-1)) == nil // a failure leaves the PE where it is
}

// PaceLocal returns the Pacer of a wait for another goroutine of this
// process (an in-process lock): polls, then runtime.Gosched, which hands
// the P to the goroutine we wait for if it is runnable.
func PaceLocal() Pacer {
	p := currentPlan()
	return Pacer{polls: p.localPolls, yields: p.gosche, local: true}
}

// Next takes one step of the wait: a Pause while the polling budget
// lasts, then a yield; it reports false, taking no step, once both
// budgets are spent: the caller then sleeps (or naps, and calls Next
// again, which keeps reporting false).
func (p *Pacer) Next() bool {
	switch {
	case p.n < p.polls:
		Pause()
	case p.lasted:
		return false
	case p.n < p.polls+p.yields || p.yieldMore():
		if p.n == p.polls && p.yieldFor > 0 {
			p.yieldFrom = time.Since(paceEpoch)
		}
		if p.local {
			runtime.Gosched()
			break
		}
		t := Monotonic()
		unix.SchedYield()
		now := Monotonic()
		d := time.Duration(now - t)
		p.handed = p.handOver > 0 && d >= p.handOver
		if recordYield(d >= max(p.longYield, LongYield)) {
			p.lasted = true
			lastedYield(now)
		}
	default:
		return false
	}
	p.n++
	return true
}

// yieldMore reports whether a wait past its count of yields yields on:
// until yieldFor after its first yield (which Next times; with no counted
// yields, this is it).
func (p *Pacer) yieldMore() bool {
	return p.yieldFor > 0 && (p.n == p.polls || time.Since(paceEpoch)-p.yieldFrom < p.yieldFor)
}

// Polling reports whether the wait is still in its polling phase (Next
// pauses rather than yields): a condition that spaces its loads out
// with pauses of its own does so only then.
func (p *Pacer) Polling() bool { return p.n < p.polls }

// Nap is how long a wait with no futex to sleep on (an in-process lock)
// sleeps between polls once its Pacer is spent: about the shortest sleep
// the Go runtime's timers give.
const Nap = 20 * time.Microsecond

// Step is Next for a wait with no futex to sleep on: once the budgets are
// spent it naps for Nap instead of returning.
func (p *Pacer) Step() {
	if !p.Next() {
		time.Sleep(Nap)
	}
}

// Until polls cond under the pacing of p until it holds (true) or the
// budgets are spent (false), and feeds the outcome back into the polling
// share ("Adapting").
func (p *Pacer) Until(cond func() bool) bool {
	for {
		if cond() {
			p.learn(true)
			return true
		}
		if !p.Next() {
			p.learn(false)
			return false
		}
	}
}

// measure measures the machine (Machine) but for the transfer time, which
// comes from a ping-pong of one word between two goroutines locked to
// threads (measureLine), which the kernel runs on two cores when two are
// free; it gives up after a millisecond when they are not (the default
// stands in then).
// measure's poll timing: the best of measureRuns runs of measurePolls
// polls.
const measureRuns, measurePolls = 3, 2000

func measure() Machine {
	m := Machine{Cores: runtime.NumCPU()}
	var w atomic.Uint32
	best := time.Duration(math.MaxInt64)
	for range measureRuns {
		t := time.Now()
		for range measurePolls {
			Pause()
			if w.Load() != 0 {
				break
			}
		}
		best = min(best, time.Since(t))
	}
	m.Poll = max(best/measurePolls, time.Nanosecond)
	// The cheapest of 16 yields, each timed: a yield with nothing else to
	// run. Their mean counted the yields that did hand the core over (at
	// start-up the PEs and the runtime's threads all want one, and the
	// kernel may have put two PEs on one core), and a yield time that
	// high made every later hand-over look like an idle yield (handOver
	// is twice it), so a pair that shared a core never moved apart
	// ("Placement").
	y := time.Duration(math.MaxInt64)
	for range 16 {
		t := time.Now()
		unix.SchedYield()
		y = min(y, time.Since(t))
	}
	m.Yield = max(y, time.Nanosecond)
	return m
}

// measureLine measures the transfer time (Machine.Line), or returns the
// default with static true when it cannot.
func measureLine(cores int) (line time.Duration, static bool) {
	if cores < 2 || runtime.GOMAXPROCS(0) < 2 {
		return defaultLine, true
	}
	if l, ok := pingPong(100, time.Millisecond); ok {
		return l, false
	}
	return defaultLine, true
}

// pingPong returns the time of one cache-line transfer: half a round trip
// of a word bounced rounds times between two threads, the best of three
// runs, unless a run takes longer than limit.
func pingPong(rounds int, limit time.Duration) (time.Duration, bool) {
	var w atomic.Uint64
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(done)
		for i := uint64(1); !stop.Load(); {
			if w.Load() == i {
				w.Store(i + 1)
				i += 2
			} else {
				Pause()
			}
		}
	}()
	defer func() { stop.Store(true); <-done }()
	best := time.Duration(math.MaxInt64)
	v := uint64(0)
	for range 3 {
		t := time.Now()
		for range rounds {
			w.Store(v + 1)
			for i := 1; w.Load() != v+2; i++ {
				Pause()
				if i&1023 == 0 && time.Since(t) > limit {
					return 0, false
				}
			}
			v += 2
		}
		best = min(best, time.Since(t))
	}
	return best / time.Duration(2*rounds), true
}

// A Budget is the pacing of a wait for other processes, for waits that
// run outside Go (the C library's, which take LongYieldShare,
// LongYieldWindow, LongYieldMemory and PlaceEvery as they are).
type Budget struct {
	Polls, Yields int           // polls, then yields (Pace)
	YieldFor      time.Duration // the yields go on this long at least
	LongYield     time.Duration // a yield this long lasted ("A yield that lasts")
	HandOver      time.Duration // a yield this long handed the core over ("Placement"; 0: none can)
}

// Budgets returns the current plan's Budget.
func Budgets() Budget {
	p := currentPlan()
	return Budget{Polls: int(p.polls), Yields: int(p.yields), YieldFor: p.yieldFor, LongYield: p.longYield, HandOver: p.handOver}
}
