// Package chaos is symheap's fault campaign: it runs jobs of 2 to 8 PEs
// under the real shrun, each PE allocating, putting, sending and freeing in
// a loop (chaospe), and at a random moment kills one PE with SIGKILL, or
// stops it with SIGSTOP (a hung PE). Every run must end within a bound of
// the fault with a non-zero status from shrun, leave no PE process and no
// /dev/shm segment behind, and the next job must start cleanly (it is the
// next run).
//
//	go run ./internal/chaos/cmd/chaos -runs 300   (make chaos)
//
// make test runs a short form (TestChaosShort). The command counts a run
// slower than its bound as a failure (TooSlow); the test only logs it and
// fails on the rest (Report.Defects), a run that never ends (Hung)
// included: a test must not fail because a loaded machine was slow.
//
// Bounds. A run must end within its bound of the fault (Config.Bound):
// what handling the fault takes on an idle machine, plus what the
// machine's load adds to each step of it, measured in the run.
//
//   - Idle. SIGKILL: shrun sees its PE die, stops the others (SIGTERM,
//     SIGKILL after launch's grace), removes the segment and exits, within
//     Slack. SIGSTOP: first the other PEs' waits must find the victim's
//     heartbeat stalled for SYMHEAP_PEER_TIMEOUT (Config.PeerTimeout,
//     which the campaign sets); then one exits with ErrPeerLost and shrun
//     stops the group as above (the stopped PE by SIGKILL once the grace
//     has run out): PeerTimeout plus Slack.
//   - Load. Every step above is a process or thread that wakes up (a
//     sleep slice runs out, a signal or a child's exit arrives, a timer
//     fires) and must then get a core; on a busy machine each gets it
//     late. The harness measures how late: how much later than asked a
//     short sleep of its own wakes up (LateProbes of them just before the
//     fault, then one after another from the fault until shrun has
//     exited), and allows KillSteps or StopSteps times the worst delay it
//     saw. A machine loaded by other jobs then lengthens the bound by what
//     it costs this run, and an idle one keeps it tight.
//
// Replay. A campaign is planned before it runs: Plan turns a seed into the
// list of jobs (how many PEs, which rank is faulted, how long after every
// PE is running, with which signal), and nothing else in a campaign draws
// a random number. The seed is printed when a campaign starts and is part
// of every failure line, so that a failure can be run again:
//
//	go run ./internal/chaos/cmd/chaos -seed N -fault kill -runs R
//	SYMHEAP_CHAOS_SEED=N go test -run TestChaosShort ./internal/chaos
//
// Plan(seed, R) is the first R jobs of Plan(seed, R') for any R' > R, so
// R only has to reach the failing run. What a seed cannot replay is the
// OS's part: where in its loop each PE is when the signal lands.
package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/symheap/symheap/internal/segment"
	"github.com/symheap/symheap/internal/unix"
)

// Config sets up a campaign.
type Config struct {
	Runs        int           // jobs to run
	Stop        bool          // SIGSTOP instead of SIGKILL
	PeerTimeout time.Duration // SYMHEAP_PEER_TIMEOUT for the PEs (SIGSTOP runs)
	Bin         string        // directory with shrun and chaospe (Build makes it)
	Seed        uint64        // the campaign's plan (see Plan); 0: NewSeed
	Log         io.Writer     // one line per run, or nil
	// Progress, if not nil, is called after each run with the runs done
	// and the report so far (the command prints a line per batch).
	Progress func(done int, r Report)
}

// Report sums a campaign up.
type Report struct {
	Seed          uint64 // the seed the campaign ran from: replays it
	Runs, Faults  int
	Survivors     int           // PE processes alive after their job ended
	SegmentsLeft  int           // symheap segments of this user left in /dev/shm
	BadStatus     int           // jobs that ended with status 0 after a fault
	TooSlow       int           // jobs that outlived their bound after the fault
	Hung          int           // jobs the harness killed, HangMargin past their bound: a hang, not a slow exit
	NoStart       int           // jobs whose PEs never got going
	LongestExit   time.Duration // from the fault to shrun's exit
	Bound         time.Duration // the bound on an idle machine (Config.Bound(0))
	Steps         int           // times the scheduling delay that a run's bound adds
	WorstLate     time.Duration // the largest scheduling delay measured in a run
	LongestBound  time.Duration // the longest bound a run had
	StatusCounts  map[int]int
	FirstFailures []string
}

// Parts of the bounds ("Bounds" in the package comment).
const (
	// Slack is what a run takes from the fault to shrun's exit on an
	// idle machine, but for the peer timeout: the PEs' sleep slices and
	// heartbeat period, launch's grace for the stopped PE, the exits and
	// the segment's removal, with room to spare.
	Slack = 2 * time.Second
	// KillSteps and StopSteps count the wake-ups from the fault to
	// shrun's exit that each may come late by the measured delay. After
	// SIGKILL: shrun learns of the death, the other PEs get their
	// SIGTERM and exit, shrun reaps them, cleans up and exits, and the
	// harness learns of that. After SIGSTOP, before those: the waits'
	// sleep slices that see the stalled heartbeat first and then find it
	// PeerTimeout old, the PE that exits, shrun's grace timer and the
	// SIGKILL. Each is doubled: a step is often two hand-overs (a signal
	// to a goroutine, a goroutine to a thread).
	KillSteps = 2 * 5
	StopSteps = 2 * 9
	// LateProbes is how many sleeps of LateSleep measure the delay just
	// before the fault.
	LateProbes = 10
	LateSleep  = time.Millisecond
	// HangMargin is how long past its bound a job runs before the
	// harness takes it for hung and kills it: far beyond any scheduling
	// delay, so that only a job that would never end reaches it.
	HangMargin = 30 * time.Second
)

// Bound is how long a run of this campaign may take from its fault to
// shrun's exit on a machine where a thread that wakes from a short sleep
// gets a core late by up to late.
func (c Config) Bound(late time.Duration) time.Duration {
	if c.Stop {
		return c.PeerTimeout + Slack + StopSteps*late
	}
	return Slack + KillSteps*late
}

// steps is KillSteps or StopSteps.
func (c Config) steps() int {
	if c.Stop {
		return StopSteps
	}
	return KillSteps
}

// lateness returns how much later than asked the latest of n sleeps of
// LateSleep woke up.
func lateness(n int) time.Duration {
	worst := time.Duration(0)
	for range n {
		t := time.Now()
		time.Sleep(LateSleep)
		worst = max(worst, time.Since(t)-LateSleep)
	}
	return worst
}

// lateMeter measures the scheduling delay while a run handles its fault:
// one sleep after another, keeping the worst lateness.
type lateMeter struct {
	worst atomic.Int64
	stop  chan struct{}
	done  chan struct{}
}

func startLateMeter(initial time.Duration) *lateMeter {
	m := &lateMeter{stop: make(chan struct{}), done: make(chan struct{})}
	m.worst.Store(int64(initial))
	go func() {
		defer close(m.done)
		for {
			select {
			case <-m.stop:
				return
			default:
			}
			if d := int64(lateness(1)); d > m.worst.Load() {
				m.worst.Store(d)
			}
		}
	}()
	return m
}

// late returns the worst delay seen so far.
func (m *lateMeter) late() time.Duration { return time.Duration(m.worst.Load()) }

// end stops the meter and returns the worst delay it saw.
func (m *lateMeter) end() time.Duration {
	close(m.stop)
	<-m.done
	return m.late()
}

// Build compiles shrun and chaospe into dir.
func Build(dir string) error {
	for pkg, name := range map[string]string{
		"github.com/symheap/symheap/cmd/shrun":              "shrun",
		"github.com/symheap/symheap/internal/chaos/chaospe": "chaospe",
	} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg).CombinedOutput()
		if err != nil {
			return fmt.Errorf("chaos: build %s: %v\n%s", pkg, err, out)
		}
	}
	return nil
}

// Job is one run of a campaign as planned before it starts.
type Job struct {
	PEs    int            // job size, 2 to 8
	Victim int            // rank of the PE faulted, below PEs
	Delay  time.Duration  // from every PE running to the fault
	Signal syscall.Signal // SIGKILL, or SIGSTOP (a hung PE)
}

// String names the fault the way a shell user would send it.
func (j Job) String() string {
	name := "kill -9"
	if j.Signal == syscall.SIGSTOP {
		name = "kill -STOP"
	}
	return fmt.Sprintf("%d PEs, %s PE %d after %v", j.PEs, name, j.Victim, j.Delay)
}

// NewSeed returns a seed from the clock, never 0 (0 asks for one).
func NewSeed() uint64 {
	if s := uint64(time.Now().UnixNano()); s != 0 {
		return s
	}
	return 1
}

// Plan returns the first runs jobs of the campaign of this seed; stop
// plans SIGSTOP faults instead of SIGKILL. Jobs are drawn one after the
// other from one generator, so a shorter plan is a prefix of a longer one
// (a failing run replays with -runs just reaching it).
func Plan(seed uint64, runs int, stop bool) []Job {
	// The fault kind picks the PCG stream: the kill and the stop campaign
	// of one invocation share its seed but do not fault the same ranks at
	// the same moments in lockstep.
	stream, sig := uint64(0x5eed), syscall.SIGKILL
	if stop {
		stream, sig = 0x5eed+1, syscall.SIGSTOP
	}
	rng := rand.New(rand.NewPCG(seed, stream))
	jobs := make([]Job, 0, max(runs, 0))
	for range runs {
		// The order of the draws is part of what a seed means: changing
		// it changes every recorded seed's campaign.
		n := 2 + rng.IntN(7)
		delay := time.Duration(20+rng.IntN(400)) * time.Millisecond
		jobs = append(jobs, Job{PEs: n, Victim: rng.IntN(n), Delay: delay, Signal: sig})
	}
	return jobs
}

// Run runs the campaign: the jobs of Plan(c.Seed, c.Runs, c.Stop), one
// after the other. Every failure line and error names the seed and the run.
func Run(ctx context.Context, c Config) (Report, error) {
	if c.Seed == 0 {
		c.Seed = NewSeed()
	}
	if c.Stop && c.PeerTimeout <= 0 {
		c.PeerTimeout = time.Second
	}
	r := Report{Seed: c.Seed, StatusCounts: map[int]int{}, Bound: c.Bound(0), Steps: c.steps()}
	for i, j := range Plan(c.Seed, c.Runs, c.Stop) {
		if ctx.Err() != nil {
			break
		}
		line, failed, err := runOne(ctx, c, &r, j)
		if err != nil {
			return r, fmt.Errorf("chaos: seed %d, run %d (%v): %w", c.Seed, i+1, j, err)
		}
		line = fmt.Sprintf("run %3d: %s", i+1, line)
		if failed && len(r.FirstFailures) < 10 {
			r.FirstFailures = append(r.FirstFailures, fmt.Sprintf("seed %d %s", c.Seed, line))
		}
		if c.Log != nil {
			fmt.Fprintln(c.Log, line)
		}
		if c.Progress != nil {
			c.Progress(i+1, r)
		}
	}
	return r, nil
}

// jobSegments lists this user's files in /dev/shm that belong to jobs
// started by the shrun process with this pid (shrun names its jobs
// "j<pid>-<random>"). Other symheap jobs running at the same time (tests
// of other packages) are not counted, and never touched.
func jobSegments(shrunPid int) []string {
	prefix := segment.Name(unix.Getuid(), fmt.Sprintf("j%d-", shrunPid))
	var out []string
	ents, _ := os.ReadDir(unix.ShmDir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// runOne runs job j and returns its line for the log, and whether it
// broke a bound (the line then says which).
func runOne(ctx context.Context, c Config, r *Report, j Job) (string, bool, error) {
	n := j.PEs
	r.Runs++
	cmd := exec.CommandContext(ctx, filepath.Join(c.Bin, "shrun"), "-n", strconv.Itoa(n), "--heap", "4m", "--timeout", "60s",
		filepath.Join(c.Bin, "chaospe"))
	cmd.Env = append(os.Environ(), "SYMHEAP_SHARED_SIZE=1m")
	if c.PeerTimeout > 0 {
		cmd.Env = append(cmd.Env, "SYMHEAP_PEER_TIMEOUT="+c.PeerTimeout.String())
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", false, err
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return "", false, err
	}
	var mu sync.Mutex
	pids := map[int]int{}
	running := 0
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		closed := false
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			mu.Lock()
			if len(f) == 3 && f[0] == "pid" {
				rank, _ := strconv.Atoi(f[1])
				pid, _ := strconv.Atoi(f[2])
				pids[rank] = pid
			}
			if len(f) == 2 && f[0] == "running" {
				running++
				if running == n && !closed {
					close(ready)
					closed = true
				}
			}
			mu.Unlock()
		}
		if !closed {
			close(ready)
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
	}
	time.Sleep(j.Delay)
	mu.Lock()
	pid, started := pids[j.Victim], running == n
	all := make([]int, 0, len(pids))
	for _, p := range pids {
		all = append(all, p)
	}
	mu.Unlock()
	if !started || pid == 0 {
		r.NoStart++
		cmd.Process.Kill()
		<-exited
		return fmt.Sprintf("%v: job did not get going", j), true, nil
	}
	// The scheduling delay now, then all through the fault's handling
	// ("Bounds").
	meter := startLateMeter(lateness(LateProbes))
	fault := time.Now()
	syscall.Kill(pid, j.Signal)
	r.Faults++
	var werr error
	hung := false
	tick := time.NewTicker(100 * time.Millisecond)
wait:
	for {
		select {
		case werr = <-exited:
			break wait
		case <-tick.C:
			// A job that hangs is ended HangMargin past its bound as it
			// stands.
			if time.Since(fault) > c.Bound(meter.late())+HangMargin {
				cmd.Process.Kill()
				werr = <-exited
				r.Hung++
				hung = true
				break wait
			}
		}
	}
	took := time.Since(fault)
	tick.Stop()
	late := meter.end()
	bound := c.Bound(late)
	r.LongestExit = max(r.LongestExit, took)
	r.WorstLate = max(r.WorstLate, late)
	r.LongestBound = max(r.LongestBound, bound)
	status := 0
	if ee, ok := werr.(*exec.ExitError); ok {
		status = ee.ExitCode()
	}
	r.StatusCounts[status]++
	problem := ""
	if status == 0 {
		r.BadStatus++
		problem += " STATUS-0"
	}
	if hung {
		problem += " HUNG"
	} else if took > bound {
		r.TooSlow++
		problem += " TOO-SLOW"
	}
	for _, name := range jobSegments(cmd.Process.Pid) {
		r.SegmentsLeft++
		problem += " SEGMENT-LEFT(" + name + ")"
		os.Remove(filepath.Join(unix.ShmDir, name))
	}
	for _, p := range all {
		if st, err := unix.ProcessState(p); err == nil && st != 'Z' {
			r.Survivors++
			problem += fmt.Sprintf(" SURVIVOR(pid %d, state %c)", p, st)
			syscall.Kill(p, syscall.SIGKILL)
		}
	}
	line := fmt.Sprintf("%v: shrun exited %d after %v (bound %v = %v + %d x %v late)%s", j, status, took.Round(time.Millisecond),
		bound.Round(time.Millisecond), c.Bound(0), c.steps(), late.Round(10*time.Microsecond), problem)
	return line, problem != "", nil
}

// String prints the campaign's summary.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: runs %d, faults %d, survivors %d, segments left %d, zero statuses %d, slower than their bound (%v + %d x the scheduling delay): %d, hung: %d, did not start: %d\n",
		r.Seed, r.Runs, r.Faults, r.Survivors, r.SegmentsLeft, r.BadStatus, r.Bound, r.Steps, r.TooSlow, r.Hung, r.NoStart)
	fmt.Fprintf(&b, "longest time to exit %v, longest bound %v, worst scheduling delay %v\n",
		r.LongestExit.Round(time.Millisecond), r.LongestBound.Round(time.Millisecond), r.WorstLate.Round(10*time.Microsecond))
	fmt.Fprintf(&b, "how the jobs ended (shrun's exit status):\n")
	codes := make([]int, 0, len(r.StatusCounts))
	for code := range r.StatusCounts {
		codes = append(codes, code)
	}
	slices.Sort(codes)
	for _, code := range codes {
		fmt.Fprintf(&b, "  %4d  %3d: %s\n", r.StatusCounts[code], code, StatusWords(code))
	}
	for _, f := range r.FirstFailures {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	return b.String()
}

// StatusWords says what shrun's exit status code means.
func StatusWords(code int) string {
	switch {
	case code == 0:
		return "every PE exited 0 (after a fault: wrong)"
	case code == 147:
		return "PEs stayed stopped after the others had exited; shrun killed them"
	case code > 128 && code < 128+65:
		sig := syscall.Signal(code - 128)
		return fmt.Sprintf("a PE ended by signal %d (%v), and shrun stopped the others", int(sig), sig)
	default:
		return fmt.Sprintf("a PE exited with status %d, and shrun stopped the others", code)
	}
}

// Failures counts the campaign's failures of every kind.
func (r Report) Failures() int {
	return r.Defects() + r.TooSlow
}

// Defects counts the failures that no load explains: everything but
// TooSlow, a time past a bound, which the tests log and do not fail on
// (a test must not fail because a loaded machine was slow; a job that
// never ends is Hung).
func (r Report) Defects() int {
	return r.Survivors + r.SegmentsLeft + r.BadStatus + r.Hung + r.NoStart
}

// OK reports whether the campaign met every bound.
func (r Report) OK() bool { return r.Failures() == 0 }
