package main

// `symheap bench --load K`: the collectives' tail on a busy machine.
//
//  1. K busy processes per CPU start (this executable with the hidden
//     subcommand __busy: one thread spinning at the bench's own priority)
//     and run until the report is done (busyLoad). With --load 0 none
//     start: the same report on a quiet machine, for the table beside it.
//  2. Barrier, Broadcast, Reduce, FCollect and collective Malloc+Free run
//     at 2 and 4 PEs (or at --pes) in tail mode (benchParams.Batch): every PE times batches of
//     --batch calls, each batch on its own. A sample is one batch's mean
//     time per call on one PE; a run's p50 and p99 are the percentiles of
//     each PE's samples, the larger over PEs. Ours in Go (a job of
//     __bench-pe workers), ours in C and Open MPI's OpenSHMEM (osh_bench.c
//     with -b, built by symcc and oshcc) run alternately, round after
//     round, all under the same load.
//  3. Each cell is the median of the rounds' figures, with their range.
//
// # The busy processes never outlive the bench
//
// Each is started with Pdeathsig = SIGKILL from one goroutine locked to
// its OS thread for as long as the load runs (Linux sends the signal when
// the thread that forked the child ends, and the Go runtime ends threads:
// launch's doc, "the fork thread"), so a bench killed with SIGKILL takes
// them with it. The bench kills and reaps them when it ends (and on
// SIGINT/SIGTERM, which end it); and each also stops by itself once its
// parent is no longer the bench.
//
// # Each busy process is a job of its own
//
// Each busy process leads a session of its own (Setsid), as a job started
// by another user or another batch script does, and so does each job
// measured: the peers' (runSession in bench/peers) and ours in Go, whose
// PEs are the bench's children in the bench's session, where nothing else
// runs. Linux's autogroup scheduling (kernel.sched_autogroup_enabled, on
// by default in Debian's kernels) shares the CPUs between sessions first,
// then between the processes of each. With the busy processes in one
// session, the bench's, an earlier form of this report gave the C and
// Open MPI jobs, each in a session of its own, half the machine against
// them all, and the Go job, in their session, a process's share: under 2
// busy processes per CPU a Go 4-PE malloc+free took 250-570 µs at p50
// against C's 17-52, and the same Go loop run in a session of its own
// took 29-64 µs against C's 48-136 (docs/bench/load.md).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/symheap/symheap/bench/peers"
)

// hiddenBusy is the hidden subcommand of a busy process.
const hiddenBusy = "__busy"

// loadTests are the tests of the load report, in order.
var loadTests = []string{"barrier", "bcast", "reduce", "fcollect", "malloc"}

// The load report's sizes: Broadcast at the three sizes its algorithm
// changes by (a post line, scratch buffers, the source read by every
// member), Reduce at one and 1024 int64, FCollect at one int64 a PE.
var (
	loadBcastSizes    = []int64{8, 512, 8192}
	loadFCollectSizes = []int64{8}
)

// loadPEs are the job sizes of the load report.
var loadPEs = []int{2, 4}

// busyLoad is the busy processes of one run.
type busyLoad struct {
	pids []int
	stop chan struct{}
	done chan struct{}
}

// startLoad starts n busy processes (this executable, exe, as __busy),
// each in a session of its own.
func startLoad(exe string, n int) (*busyLoad, error) {
	l := &busyLoad{stop: make(chan struct{}), done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// The fork thread: the busy processes' Pdeathsig is tied to it,
		// so it stays locked, and alive, until they are reaped.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(l.done)
		cmds, err := spawnBusy(exe, n)
		for _, c := range cmds {
			l.pids = append(l.pids, c.Process.Pid)
		}
		started <- err
		if err == nil {
			<-l.stop
		}
		if len(cmds) > 0 {
			// Every signal first (a pid cannot be reused before it is
			// reaped below), then reap each.
			for _, c := range cmds {
				_ = c.Process.Kill()
			}
			for _, c := range cmds {
				_ = c.Wait()
			}
		}
	}()
	if err := <-started; err != nil {
		<-l.done
		return nil, fmt.Errorf("bench: --load: starting busy processes: %w", err)
	}
	return l, nil
}

// spawnBusy starts n busy processes; on an error, those started so far
// are returned with it.
func spawnBusy(exe string, n int) ([]*exec.Cmd, error) {
	var cmds []*exec.Cmd
	env := append(os.Environ(), "GOMAXPROCS=1", "GOGC=off")
	for i := 0; i < n; i++ {
		c := exec.Command(exe, hiddenBusy, "-parent", strconv.Itoa(os.Getpid()))
		c.Env = env
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			return cmds, err
		}
		cmds = append(cmds, c)
	}
	return cmds, nil
}

// Stop kills the busy processes and waits until they are reaped. It may
// be called more than once.
func (l *busyLoad) Stop() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

// runBusy is `symheap __busy -parent PID`: spin until the parent is gone.
// It looks at its parent every 2^20 turns (well under a millisecond of
// CPU): Pdeathsig is the rule, this the fallback.
func runBusy(args []string) error {
	fs := flag.NewFlagSet(hiddenBusy, flag.ContinueOnError)
	parent := fs.Int("parent", 0, "the bench's pid")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var x uint64
	for os.Getppid() == *parent {
		for i := uint64(0); i < 1<<20; i++ {
			x = x*6364136223846793005 + i
		}
	}
	if x == 1 { // keeps the loop from being optimised away
		fmt.Fprintln(io.Discard, x)
	}
	return nil
}

// loadSettings are the flags of the load report.
type loadSettings struct {
	PerCPU int `json:"per_cpu"` // busy processes per CPU
	Busy   int `json:"busy"`    // busy processes in all
	Batch  int `json:"batch"`   // calls per timed sample
}

// loadTestList is --tests for the load report: the collectives of it, all
// four by default.
func loadTestList(list string, given bool) ([]string, error) {
	if !given || list == "all" {
		return slices.Clone(loadTests), nil
	}
	var out []string
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimSpace(t)
		if !slices.Contains(loadTests, t) {
			return nil, fmt.Errorf("bench: --load measures %s, not %q", strings.Join(loadTests, ", "), t)
		}
		out = append(out, t)
	}
	// In report order.
	return slices.DeleteFunc(slices.Clone(loadTests), func(t string) bool { return !slices.Contains(out, t) }), nil
}

// loadSection builds the tail table of test id at np PEs: the columns
// Go p50, Go p99, C p50, C p99, Open MPI p50, Open MPI p99.
func (r *runner) loadSection(id string, np int) *section {
	p := r.params
	s := &section{ID: id, Key: "size", Unit: "us", Better: "lower", PEs: np}
	var metric string
	var heap int64
	switch id {
	case "barrier":
		s.Title, metric, heap = "Barrier", "barrier_lat", 2<<20
	case "bcast":
		s.Title, metric, heap, p.Sizes = "Broadcast from PE 0", "bcast_lat", 4<<20, loadBcastSizes
	case "reduce":
		s.Title, metric, heap, p.Sizes = "Reduce (sum, every PE gets it)", "reduce_lat", 4<<20, vecSizes
	case "fcollect":
		s.Title, metric, heap, p.Sizes = "FCollect (every PE's block to every PE)", "fcollect_lat", 4<<20, loadFCollectSizes
	case "malloc":
		s.Title, metric, heap, p.Sizes = "Collective Malloc+Free", "malloc_lat", 2*maxSize(mallocSizes)+4<<20, mallocSizes
	default:
		return nil
	}
	s.What = fmt.Sprintf("us per call, batches of %d calls", p.Batch)
	for _, h := range []struct{ name, harness string }{{"Go", ourHarness}, {"C", peers.SymheapC}, {"Open MPI", peers.OSH}} {
		for _, q := range []string{"p50", "p99"} {
			s.Series = append(s.Series, &series{Label: h.name + " " + q, Column: h.name + " " + q,
				Ours: h.harness == ourHarness, Harness: h.harness, Metric: metric + "_" + q})
		}
	}
	ratio := func(num, den int) {
		s.Ratios = append(s.Ratios, ratioCol{Num: num, Den: den, Column: s.Series[num].Column + " x MPI"})
	}
	go1 := r.ourJob("symheap Go", metric, np, p, heap, 1<<20)
	go1.feeds = []int{0, 1}
	s.units = append(s.units, go1)
	if r.peers {
		osh := r.peerUnit("Open MPI", peers.OSH, []string{metric}, np, p.Sizes)
		osh.feeds = []int{4, 5}
		c := r.peerUnit("symheap C", peers.SymheapC, []string{metric}, np, p.Sizes)
		c.feeds = []int{2, 3}
		s.units = append(s.units, osh, c)
		ratio(0, 4)
		ratio(1, 5)
		ratio(2, 4)
		ratio(3, 5)
	} else {
		s.Series = s.Series[:2]
	}
	return s
}

// runLoadBench is `symheap bench --load K`.
func (r *runner) runLoadBench(ctx context.Context, o benchOutput, args []string) error {
	rep := &benchReport{
		Command:  "symheap bench " + strings.Join(args, " "),
		Machine:  machine(r.peers),
		Settings: benchSettings{PEs: 0, Rounds: r.rounds, Params: r.params, Quick: o.quick},
	}
	rep.Settings.Load = &loadSettings{PerCPU: r.load, Busy: r.load * runtime.NumCPU(), Batch: r.params.Batch}
	if r.peers {
		r.preparePeers(ctx, rep)
	}
	if r.load > 0 {
		r.prog.step(fmt.Sprintf("starting %d busy processes", rep.Settings.Load.Busy))
		l, err := startLoad(r.exe, rep.Settings.Load.Busy)
		if err != nil {
			return err
		}
		defer l.Stop()
	}
	out := io.Writer(os.Stdout)
	if !o.json {
		r.prog.clear()
		printLoadHeader(out, rep)
	}
	var failed []string
	for _, id := range r.tests {
		for _, np := range r.loadPEs {
			s := r.loadSection(id, np)
			if err := r.runSection(ctx, s); err != nil {
				return fmt.Errorf("bench: %s: %w", id, err)
			}
			rep.Sections = append(rep.Sections, s)
			if len(s.Errors) > 0 {
				failed = append(failed, fmt.Sprintf("%s (%d PEs)", id, np))
			}
			if !o.json {
				r.prog.clear()
				printLoadSection(out, s)
			}
		}
	}
	r.prog.done()
	if o.json {
		if err := writeJSON(out, rep); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("bench: tests failed: %s (see their sections)", strings.Join(failed, ", "))
	}
	return nil
}

func printLoadHeader(w io.Writer, rep *benchReport) {
	m, l := rep.Machine, rep.Settings.Load
	if l.PerCPU > 0 {
		fmt.Fprintf(w, "# symheap bench, under load: %d busy processes per CPU (%d in all) spinning at the bench's priority for the whole run\n", l.PerCPU, l.Busy)
	} else {
		fmt.Fprintln(w, "# symheap bench, tail report with no load started (--load 0)")
	}
	fmt.Fprintf(w, "# a sample is one batch of %d calls timed on its own, as its mean per call, on one PE; p50 and p99 over a run's samples (at least %d), the larger over the PEs\n",
		l.Batch, minBatches)
	fmt.Fprintf(w, "# %d round(s), ours and theirs alternating; each cell the median of the rounds [their range]\n", rep.Settings.Rounds)
	fmt.Fprintf(w, "# machine: %d CPUs, %s; %s; %s; load average %s\n", m.CPUs, m.CPUModel, m.Kernel, m.Go, m.LoadAvg)
	if m.OpenMPI != "" {
		fmt.Fprintf(w, "# peers: %s\n", m.OpenMPI)
	}
	for _, p := range rep.Peers {
		if !p.Available && (p.Name == peers.OSH || p.Name == peers.SymheapC) {
			fmt.Fprintf(w, "# peer %s unavailable: %s\n", p.Name, p.Reason)
		}
	}
}

// printLoadSection prints a tail table: a row per size, each series'
// median with its range over the rounds, then the ratios of the medians.
func printLoadSection(w io.Writer, s *section) {
	fmt.Fprintf(w, "\n# %s, %d PEs: %s\n", s.Title, s.PEs, s.What)
	ratios := shownRatios(s)
	header := []string{"Size"}
	for _, sr := range s.Series {
		header = append(header, sr.Column)
	}
	for _, rc := range ratios {
		header = append(header, rc.Column)
	}
	var rows [][]string
	for _, k := range s.rows() {
		row := []string{itoa(k)}
		for i := range s.Series {
			row = append(row, spreadCell(s.find(i, k), s.Unit))
		}
		row = append(row, s.ratioCells(ratios, k)...)
		rows = append(rows, row)
	}
	table(w, header, rows)
	for _, sr := range s.Series {
		if sr.Unavailable != "" {
			fmt.Fprintf(w, "# %s: unavailable: %s\n", sr.Label, oneLine(sr.Unavailable))
		}
	}
	for _, e := range s.Errors {
		fmt.Fprintf(w, "# ERROR %s\n", e)
	}
}

// spreadCell formats a point as its median and, with more than one
// round, the range of the rounds: "0.213 [0.201-0.250]".
func spreadCell(p *point, unit string) string {
	if p == nil {
		return "-"
	}
	v := fmtValue(p.Value, unit)
	if len(p.Runs) > 1 {
		v += " [" + fmtValue(slices.Min(p.Runs), unit) + "-" + fmtValue(slices.Max(p.Runs), unit) + "]"
	}
	return v
}

// errLoadFlags is the error of flags the load report does not take.
var errLoadFlags = errors.New("bench: --load reports Barrier, Broadcast, Reduce, FCollect and Malloc+Free; --sizes, --max-size, --plot and --targets do not apply")
