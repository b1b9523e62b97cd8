package main

// `symheap bench`: the benchmark suite in one command.
//
//  1. Flags become a runner: PEs, tests, sizes, iteration settings
//     (benchParams), rounds.
//  2. With --peers, the C peer harnesses are built (bench/peers.Build, which
//     installs Open MPI when it can) and the C malloc harness
//     (bench/peers/build-malloc.sh); what cannot be had is recorded with
//     the reason, and the suite goes on with ours.
//  3. Each test is a section (bench_suite.go) whose units run round after
//     round, ours and theirs alternating; our units are jobs of real PEs:
//     this executable started by package launch with the hidden
//     subcommand __bench-pe (bench_worker.go).
//  4. Each section is printed as soon as it is done (bench_report.go), then
//     the targets table; or everything as JSON with --json. --plot writes
//     the charts (bench_plot.go).
//
// A progress line goes to stderr: rewritten in place on a terminal, plain
// lines otherwise.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/symheap/symheap/bench/peers"
	"github.com/symheap/symheap/internal/config"
)

const benchUsage = `usage: symheap bench [flags]

Runs the benchmark suite on real PEs (this executable, started as a job of
PEs) and prints OSU-style tables: put/get latency, put bandwidth and message
rate, fetch-add, barrier (2, 4, 8 PEs), broadcast, reduce, collective
malloc/free, alloc+free pairs (allocator components, SharedAlloc), send/recv
latency, bandwidth and small-message rate (shared-heap and ordinary
buffers), Go copy against C memcpy, then the targets.

Every latency is printed beside its floor (the cache-line transfers it
needs at least, times one transfer between PE 0 and PE 1, plus a memcpy of
its bytes) and every bandwidth beside memcpy, both measured in the same
run by a job of the same PEs, alternating with the other figures; memcpy
is glibc's when --peers built the C harness, else Go's copy.

With --peers it also builds and runs, alternating with ours, Open MPI's
OpenSHMEM and MPI, C memcpy, a cache-line ping-pong and the C mallocs
(glibc, jemalloc, mimalloc), and prints each ratio ours/theirs.

With --load K (0 included) it prints instead the tail report: p50 and p99
per call of the collectives, ours in Go and C against Open MPI's OpenSHMEM
with --peers, at 2 and 4 PEs or at --pes (up to 64, oversubscribed when
the machine has fewer cores), under K busy processes per CPU
(docs/bench/load.md, docs/bench/scale.md).

tests: ` + "put_lat get_lat put_bw put_rate fadd barrier bcast reduce malloc alloc msg_lat msg_bw msg_rate copy" + `
tests with --load: ` + "barrier bcast reduce fcollect malloc" + `

flags:
`

// runner holds one bench run's settings and state.
type runner struct {
	pes        int
	barrierPEs []int
	tests      []string
	params     benchParams
	rounds     int
	peers      bool
	quick      bool
	timeout    time.Duration
	load       int   // busy processes per CPU (bench_load.go); -1: not the load report
	loadPEs    []int // the load report's job sizes

	p2pSizes, msgLatSizes, msgBwSizes, msgRateSizes, copySizes []int64

	exe     string
	peerDir string
	peerErr map[string]error // harness (or "malloc:NAME") → why it cannot run
	prog    *progress
}

// runHidden runs the hidden subcommands: the benchmark's per-PE worker.
func runHidden(cmd string, args []string) (bool, error) {
	switch cmd {
	case hiddenBenchPE:
		return true, runBenchPE(args)
	case hiddenProbe:
		return true, runProbePE()
	case hiddenBusy:
		return true, runBusy(args)
	}
	return false, nil
}

// benchOutput is what a run prints and writes.
type benchOutput struct {
	json    bool
	plotDir string
	quick   bool
	targets bool // print the targets table even without --peers
}

func runBench(args []string) error {
	if underPMIx() {
		return runClusterBench(args)
	}
	r, o, err := parseBenchFlags(args)
	if err != nil || r == nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r.prog = newProgress(os.Stderr)
	defer r.prog.done()
	if r.load >= 0 {
		return r.runLoadBench(ctx, o, args)
	}

	rep := &benchReport{
		Command:  "symheap bench " + strings.Join(args, " "),
		Machine:  machine(r.peers),
		Settings: benchSettings{PEs: r.pes, Rounds: r.rounds, Params: r.params, Quick: o.quick},
	}
	if r.peers {
		r.preparePeers(ctx, rep)
	}
	out := io.Writer(os.Stdout)
	if !o.json {
		r.prog.clear()
		printHeader(out, rep)
	}
	var failed []string
	for _, id := range r.tests {
		s := r.newSection(id)
		if err := r.runSection(ctx, s); err != nil {
			return fmt.Errorf("bench: %s: %w", id, err)
		}
		rep.Sections = append(rep.Sections, s)
		if len(s.Errors) > 0 {
			failed = append(failed, id)
		}
		if !o.json {
			r.prog.clear()
			printSection(out, s)
		}
	}
	rep.Targets = evalTargets(rep.Sections)
	if o.plotDir != "" {
		r.prog.step("writing charts to " + o.plotDir)
		files, err := writePlots(o.plotDir, rep)
		if err != nil {
			return fmt.Errorf("bench: --plot: %w", err)
		}
		rep.Charts = files
	}
	r.prog.done()
	if o.json {
		if err := writeJSON(out, rep); err != nil {
			return err
		}
	} else if o.targets || r.peers {
		printTargets(out, rep)
		if len(rep.Charts) > 0 {
			fmt.Fprintf(out, "\n# charts: %s\n", strings.Join(rep.Charts, " "))
		}
	} else {
		printTargetSummary(out, rep)
		if len(rep.Charts) > 0 {
			fmt.Fprintf(out, "\n# charts: %s\n", strings.Join(rep.Charts, " "))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("bench: tests failed: %s (see their sections)", strings.Join(failed, ", "))
	}
	return nil
}

// parseBenchFlags turns the command line into a runner; a nil runner and
// error mean -h was asked for.
func parseBenchFlags(args []string) (*runner, benchOutput, error) {
	var o benchOutput
	fs, v := newBenchFlags(&o)
	pes, tests, sizes, maxSizeFlag, iters, budget, rounds, withPeers, peerDir, timeout :=
		v.pes, v.tests, v.sizes, v.maxSize, v.iters, v.budget, v.rounds, v.withPeers, v.peerDir, v.timeout
	load, batch := v.load, v.batch
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, o, nil
		}
		os.Exit(2)
	}
	bad := func(err error) (*runner, benchOutput, error) { return nil, o, err }
	if fs.NArg() > 0 {
		return bad(fmt.Errorf("bench: unexpected argument %q (see symheap bench -h)", fs.Arg(0)))
	}
	r := &runner{pes: *pes, peers: *withPeers, quick: o.quick, timeout: *timeout, peerDir: *peerDir, load: -1}
	if r.pes < 2 || r.pes > 64 {
		return bad(fmt.Errorf("bench: --pes %d: want 2 to 64", r.pes))
	}
	r.barrierPEs = []int{2, 4, 8}
	if !slices.Contains(r.barrierPEs, r.pes) {
		r.barrierPEs = append(r.barrierPEs, r.pes)
		slices.Sort(r.barrierPEs)
	}
	var err error
	if flagSet(fs, "load") {
		// The load report (bench_load.go).
		if *load < 0 || *load > 64 {
			return bad(fmt.Errorf("bench: --load %d: want 0 to 64 busy processes per CPU", *load))
		}
		if *batch < 1 {
			return bad(fmt.Errorf("bench: --batch %d: want at least 1 call per sample", *batch))
		}
		if flagSet(fs, "sizes") || flagSet(fs, "max-size") || o.plotDir != "" || o.targets {
			return bad(errLoadFlags)
		}
		r.load = *load
		r.loadPEs = slices.Clone(loadPEs)
		if flagSet(fs, "pes") {
			r.loadPEs = []int{r.pes}
		}
		if r.tests, err = loadTestList(*tests, flagSet(fs, "tests")); err != nil {
			return bad(err)
		}
	} else if flagSet(fs, "batch") {
		return bad(errors.New("bench: --batch is a setting of --load (the tail report)"))
	} else if r.tests, err = parseTests(*tests); err != nil {
		return bad(err)
	}

	// Iteration settings: the C harnesses' defaults, or quick ones.
	r.params = benchParams{Iters: 10000, MinIters: 10, Warmup: 1000, Reps: 3, Window: 64, Budget: *budget, Pairs: 1_000_000}
	r.p2pSizes = pow2(8, 4<<20)
	r.msgLatSizes = append([]int64{0}, pow2(1, 64<<20)...)
	r.msgBwSizes = pow2(1, 64<<20)
	r.msgRateSizes = pow2(1, 256)
	r.copySizes = pow2(64, 64<<20)
	if o.quick {
		r.params = benchParams{Iters: 200, MinIters: 2, Warmup: 10, Reps: 1, Window: 8, Budget: 3 * time.Millisecond, Pairs: 20_000}
		r.p2pSizes = []int64{8, 256, 8 << 10, 256 << 10, 4 << 20}
		r.msgLatSizes = []int64{0, 8, 1 << 10, 64 << 10, 1 << 20}
		r.msgBwSizes = []int64{8, 64 << 10, 1 << 20}
		r.msgRateSizes = []int64{8, 256}
		r.copySizes = []int64{64, 64 << 10, 1 << 20}
	}
	if flagSet(fs, "time") {
		r.params.Budget = *budget
	}
	if r.load >= 0 {
		// Even, as the C harness rounds it (its pSync alternation).
		r.params.Batch = *batch + *batch&1
	}
	if *iters < 0 || r.params.Budget <= 0 {
		return bad(errors.New("bench: --iters and --time must be positive"))
	}
	if *iters > 0 {
		r.params.Iters, r.params.MinIters = *iters, *iters
		r.params.Warmup = min(r.params.Warmup, *iters)
		r.params.Pairs = max(*iters, 1000)
	}
	r.rounds = 1
	if r.peers && !o.quick {
		r.rounds = 3
	}
	if *rounds < 0 {
		return bad(errors.New("bench: --rounds must be positive"))
	}
	if *rounds > 0 {
		r.rounds = *rounds
	}
	if *maxSizeFlag != "" {
		m, err := config.ParseSize(*maxSizeFlag)
		if err != nil {
			return bad(fmt.Errorf("bench: --max-size: %w", err))
		}
		if o.quick {
			r.p2pSizes, r.msgLatSizes, r.msgBwSizes, r.copySizes = upTo(r.p2pSizes, m), upTo(r.msgLatSizes, m), upTo(r.msgBwSizes, m), upTo(r.copySizes, m)
		} else {
			r.msgRateSizes = pow2(1, min(m, 256))
			r.p2pSizes, r.msgLatSizes, r.msgBwSizes, r.copySizes = pow2(8, m), append([]int64{0}, pow2(1, m)...), pow2(1, m), pow2(64, m)
		}
	}
	if *sizes != "" {
		list, err := parseSizes(*sizes)
		if err != nil {
			return bad(err)
		}
		r.p2pSizes, r.msgLatSizes = list, list
		r.msgBwSizes = slices.DeleteFunc(slices.Clone(list), func(v int64) bool { return v == 0 })
		r.msgRateSizes = r.msgBwSizes
		r.copySizes = r.msgBwSizes
	}
	if len(r.p2pSizes) == 0 || len(r.msgBwSizes) == 0 {
		return bad(errors.New("bench: no message sizes left (check --sizes and --max-size)"))
	}
	if r.exe, err = os.Executable(); err != nil {
		return bad(fmt.Errorf("bench: cannot find this executable to start PEs: %w", err))
	}

	return r, o, nil
}

// flagSet reports whether flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func parseTests(list string) ([]string, error) {
	if list == "" || list == "all" {
		return slices.Clone(benchTests), nil
	}
	want := map[string]bool{}
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimSpace(t)
		if !slices.Contains(benchTests, t) {
			return nil, fmt.Errorf("bench: unknown test %q (have %s)", t, strings.Join(benchTests, ", "))
		}
		want[t] = true
	}
	var out []string
	for _, t := range benchTests { // always in suite order
		if want[t] {
			out = append(out, t)
		}
	}
	return out, nil
}

// parseSizes reads "8,64,4k" or "A:B" (A, then powers of two from max(A,1)
// up to B), as the C harnesses' -s does.
func parseSizes(s string) ([]int64, error) {
	if lo, hi, ok := strings.Cut(s, ":"); ok {
		a, err := config.ParseSize(lo)
		if err != nil {
			return nil, fmt.Errorf("bench: --sizes: %w", err)
		}
		b, err := config.ParseSize(hi)
		if err != nil {
			return nil, fmt.Errorf("bench: --sizes: %w", err)
		}
		if b < a {
			return nil, fmt.Errorf("bench: --sizes %s: range upside down", s)
		}
		var out []int64
		if a == 0 {
			out = append(out, 0)
		}
		for v := max(a, 1); v <= b; v *= 2 {
			out = append(out, v)
		}
		return out, nil
	}
	var out []int64
	for _, f := range strings.Split(s, ",") {
		v, err := config.ParseSize(f)
		if err != nil {
			return nil, fmt.Errorf("bench: --sizes: %w", err)
		}
		out = append(out, v)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// pow2 returns the powers of two from lo (a power of two) up to hi.
func pow2(lo, hi int64) []int64 {
	var out []int64
	for v := lo; v <= hi; v *= 2 {
		out = append(out, v)
	}
	return out
}

func upTo(list []int64, m int64) []int64 {
	return slices.DeleteFunc(slices.Clone(list), func(v int64) bool { return v > m })
}

// preparePeers builds the peer harnesses and records, per harness, why it
// cannot run.
func (r *runner) preparePeers(ctx context.Context, rep *benchReport) {
	r.peerErr = map[string]error{}
	// symcc and shrun, which build and run the "symheap (C)" harness, are
	// beside this executable (make build puts them in .bin).
	if dir := filepath.Dir(r.exe); dir != "" {
		os.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	r.prog.step("building the peer harnesses in " + r.peerDir + " (the first run may install Open MPI)")
	buildErr := peers.Build(ctx, r.peerDir)
	for _, h := range peers.Harnesses() {
		err := peers.HarnessAvailable(h)
		if err == nil {
			if argv, cerr := peers.CommandLine(peers.Spec{Harness: h, Dir: r.peerDir}); cerr != nil {
				err = cerr
			} else if bin := harnessBinary(argv, r.peerDir); bin != "" {
				if _, serr := os.Stat(bin); serr != nil {
					err = fmt.Errorf("%s was not built: %v", bin, buildErr)
				}
			}
		}
		r.peerErr[h] = err
	}
	r.prog.step("building the C malloc harness (glibc, jemalloc, mimalloc)")
	have, merr := buildMallocPeers(ctx, r.peerDir)
	for _, n := range mallocPeers {
		switch {
		case slices.Contains(have, n):
			r.peerErr["malloc:"+n] = nil
		case merr != nil:
			r.peerErr["malloc:"+n] = merr
		default:
			r.peerErr["malloc:"+n] = fmt.Errorf("malloc_bench_%s was not built (is lib%s-dev installed?)", n, n)
		}
	}
	names := append(peers.Harnesses(), "malloc:glibc", "malloc:jemalloc", "malloc:mimalloc")
	for _, h := range names {
		st := peerStatus{Name: h, Available: r.peerErr[h] == nil}
		if err := r.peerErr[h]; err != nil {
			st.Reason = err.Error()
		}
		rep.Peers = append(rep.Peers, st)
	}
}

// harnessBinary picks the harness binary, the one argument under dir, out
// of a peers command line.
func harnessBinary(argv []string, dir string) string {
	prefix := filepath.Clean(dir) + string(os.PathSeparator)
	for _, a := range argv {
		if strings.HasPrefix(a, prefix) {
			return a
		}
	}
	return ""
}

// machineInfo describes where the figures were measured.
type machineInfo struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model"`
	Kernel    string `json:"kernel"`
	Go        string `json:"go"`
	OpenMPI   string `json:"openmpi,omitempty"`
	LoadAvg   string `json:"loadavg"`
	StartedAt string `json:"started_at"`
}

func machine(withPeers bool) machineInfo {
	m := machineInfo{CPUs: runtime.NumCPU(), Go: runtime.Version(), StartedAt: time.Now().UTC().Format(time.RFC3339)}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = runtime.GOOS + " " + strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	if withPeers {
		if out, err := exec.Command("mpirun", "--version").Output(); err == nil {
			m.OpenMPI = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
		}
	}
	return m
}

// progress writes the progress line to stderr: rewritten in place with \r
// on a terminal, one plain line per step otherwise.
type progress struct {
	w     io.Writer
	tty   bool
	start time.Time
	shown bool
}

func newProgress(f *os.File) *progress {
	fi, err := f.Stat()
	return &progress{w: f, tty: err == nil && fi.Mode()&os.ModeCharDevice != 0, start: time.Now()}
}

func (p *progress) step(msg string) {
	line := fmt.Sprintf("symheap bench [%s] %s", elapsedString(time.Since(p.start)), msg)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		p.shown = true
		return
	}
	fmt.Fprintln(p.w, line)
}

// clear removes the progress line before a table is printed.
func (p *progress) clear() {
	if p.tty && p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}

func (p *progress) done() {
	p.clear()
}

// itoa is strconv.Itoa for int64.
func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// benchFlagVals are the values of bench's flags that are not benchOutput's.
type benchFlagVals struct {
	pes, iters, rounds    *int
	tests, sizes, maxSize *string
	peerDir               *string
	budget, timeout       *time.Duration
	withPeers             *bool
	load, batch           *int
}

// newBenchFlags defines bench's flags (the same set makes -h and the
// manual page); the output flags go into o.
func newBenchFlags(o *benchOutput) (*flag.FlagSet, *benchFlagVals) {
	var v benchFlagVals
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchUsage)
		fs.PrintDefaults()
	}
	v.pes = fs.Int("pes", 2, "PEs of the point-to-point and collective tests (barrier also runs on 2, 4 and 8)")
	v.tests = fs.String("tests", "all", "comma-separated `list` of tests to run")
	v.sizes = fs.String("sizes", "", "message sizes of put/get and send/recv: `list` \"8,64,4k\" or range \"8:4m\" (powers of two)")
	v.maxSize = fs.String("max-size", "", "largest message `size` (default 4m for put/get, 64m for send/recv)")
	v.iters = fs.Int("iters", 0, "timed iterations per repetition (`n`; default: as many as --time allows)")
	v.budget = fs.Duration("time", 100*time.Millisecond, "time per point, all repetitions together")
	v.rounds = fs.Int("rounds", 0, "rounds of ours and theirs, the median is reported (`n`; default 3 with --peers, else 1)")
	fs.BoolVar(&o.quick, "quick", false, "small iteration counts and few sizes (for tests and make test)")
	fs.BoolVar(&o.json, "json", false, "print JSON instead of tables")
	fs.BoolVar(&o.targets, "targets", false, "print the table of targets (ours against the peers' figures and the floors), as --peers does")
	v.withPeers = fs.Bool("peers", false, "compare with Open MPI (OpenSHMEM, MPI), C memcpy, cache-line ping-pong and C mallocs")
	v.peerDir = fs.String("peers-dir", peers.DefaultDir(), "where the peer harnesses are built")
	fs.StringVar(&o.plotDir, "plot", "", "write PNG charts into `dir`")
	v.timeout = fs.Duration("timeout", 10*time.Minute, "limit for each job of PEs and each peer run")
	v.load = fs.Int("load", 0, "start `K` busy processes per CPU for the whole run and report p50 and p99 per call of barrier, broadcast, reduce, fcollect and malloc+free at 2 and 4 PEs, or at --pes (0: the same report with no load)")
	v.batch = fs.Int("batch", 10, "with --load: calls per timed sample (`n`, rounded up to even)")
	return fs, &v
}
