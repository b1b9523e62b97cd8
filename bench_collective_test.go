package symheap_test

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/bench/peers"
	"github.com/symheap/symheap/launch"
)

// BenchmarkCollectives measures team synchronisation and collectives on
// real PEs, and Open MPI's OSHMEM doing the same on this machine in the
// same run when bench/peers' osh harness is built.
//
// Each sub-benchmark re-executes the test binary as a job of PEs (package
// launch) that runs only that sub-benchmark. The PEs agree on an iteration
// count from a timed warm-up (slowest PE), run the timed loop collBenchReps
// times, and PE 0 prints the best of the slowest PE's mean time per call
// (best of many short runs, which filters out the noise of other load on
// the node; the Open MPI harness is run with as many repetitions), which
// the parent reports as ns/op; the peer's figure is reported as
// openmpi-ns/op and the ratio ours/theirs as x-openmpi (below 1: faster).
// Under -benchtime=Nx each measurement gets a few milliseconds, so that
// `go test -bench . -benchtime=1x` stays quick.
func BenchmarkCollectives(b *testing.B) {
	for _, c := range collBenchCases {
		b.Run(c.name, func(b *testing.B) {
			if name := os.Getenv(envCollBench); name != "" {
				if name == b.Name() {
					collBenchPE(b, c)
				}
				return
			}
			collBenchParent(b, c)
		})
	}
}

// envCollBench names the sub-benchmark a PE of a benchmark job runs;
// envCollBudget is its time budget per repetition.
const (
	envCollBench  = "SYMHEAP_COLLBENCH"
	envCollBudget = "SYMHEAP_COLLBENCH_BUDGET"
	collBenchMark = "collbench-result"
)

type collBenchCase struct {
	name     string
	npes     int
	peerTest string // osh_bench test with the same measurement; "" if none
	peerSize int64
	// setup allocates (collectively) and returns the operation to time.
	setup func(pe *symheap.PE) (op func() error, err error)
}

var collBenchCases = []collBenchCase{
	{"Sync_2PE", 2, "barrier_lat", 0, func(pe *symheap.PE) (func() error, error) {
		return pe.World().Sync, nil
	}},
	{"Barrier_2PE", 2, "barrier_lat", 0, func(pe *symheap.PE) (func() error, error) {
		return pe.Barrier, nil
	}},
	{"Reduce_int64x1_2PE", 2, "reduce_lat", 8, benchReduce(1)},
	{"Reduce_int64x1024_2PE", 2, "reduce_lat", 8192, benchReduce(1024)},
	{"Broadcast_8B_2PE", 2, "bcast_lat", 8, benchBroadcast(1)},
	{"Broadcast_8KiB_2PE", 2, "bcast_lat", 8192, benchBroadcast(1024)},
	{"FCollect_8B_2PE", 2, "", 0, benchFCollect(1)},
	{"FCollect_8KiB_2PE", 2, "", 0, benchFCollect(1024)},
	{"AllToAll_8KiB_2PE", 2, "", 0, benchAllToAll(1024)},
}

func benchReduce(n int) func(pe *symheap.PE) (func() error, error) {
	return func(pe *symheap.PE) (func() error, error) {
		buf, err := symheap.Malloc[int64](pe, 2*n)
		if err != nil {
			return nil, err
		}
		src, dst := buf[:n], buf[n:]
		for i := range src {
			src[i] = 1
		}
		w := pe.World()
		return func() error { return symheap.Reduce(w, dst, src, symheap.OpSum) }, nil
	}
}

func benchBroadcast(n int) func(pe *symheap.PE) (func() error, error) {
	return func(pe *symheap.PE) (func() error, error) {
		buf, err := symheap.Malloc[int64](pe, 2*n)
		if err != nil {
			return nil, err
		}
		src, dst := buf[:n], buf[n:]
		w := pe.World()
		return func() error { return symheap.Broadcast(w, dst, src, 0) }, nil
	}
}

func benchFCollect(n int) func(pe *symheap.PE) (func() error, error) {
	return func(pe *symheap.PE) (func() error, error) {
		buf, err := symheap.Malloc[int64](pe, n+n*pe.Size())
		if err != nil {
			return nil, err
		}
		src, dst := buf[:n], buf[n:]
		w := pe.World()
		return func() error { return symheap.FCollect(w, dst, src) }, nil
	}
}

func benchAllToAll(n int) func(pe *symheap.PE) (func() error, error) {
	return func(pe *symheap.PE) (func() error, error) {
		buf, err := symheap.Malloc[int64](pe, 2*n)
		if err != nil {
			return nil, err
		}
		src, dst := buf[:n], buf[n:]
		w := pe.World()
		return func() error { return symheap.AllToAll(w, dst, src) }, nil
	}
}

// collBenchBudget returns the time budget of one repetition in the PEs,
// and whether the run is a quick one (-benchtime=Nx).
func collBenchBudget() (time.Duration, bool) {
	f := flag.Lookup("test.benchtime")
	if f == nil {
		return 300 * time.Millisecond, false
	}
	v := f.Value.String()
	if strings.HasSuffix(v, "x") {
		return 2 * time.Millisecond, true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		d = time.Second
	}
	return d / collBenchReps, false
}

// collBenchReps is the number of timed repetitions of a measurement, ours
// and Open MPI's.
const collBenchReps = 10

// collBenchFigures keeps each sub-benchmark's figures: the testing package
// may call a benchmark function again with a larger b.N, and a job of PEs
// measures with its own iteration count anyway, so one job is enough.
var collBenchFigures = map[string][][2]any{}

// collBenchParent launches the PEs, reports their figure and the peer's.
func collBenchParent(b *testing.B, c collBenchCase) {
	if figs, ok := collBenchFigures[b.Name()]; ok {
		for _, f := range figs {
			b.ReportMetric(f[0].(float64), f[1].(string))
		}
		return
	}
	var figs [][2]any
	report := func(v float64, unit string) {
		b.ReportMetric(v, unit)
		figs = append(figs, [2]any{v, unit})
	}
	defer func() { collBenchFigures[b.Name()] = figs }()
	budget, quick := collBenchBudget()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	prog, args := exe, []string{"-test.run=^$", "-test.bench=" + benchPattern(b.Name()), "-test.benchtime=1x", "-test.count=1"}
	if ts, err := exec.LookPath("taskset"); err == nil && c.npes <= runtime.NumCPU() {
		// Bind PE i to CPU i, as oshrun binds its ranks to cores by
		// default: figures then do not depend on where the scheduler
		// puts the PEs.
		args = append([]string{"-c", `exec "$0" -c "$SYMHEAP_PE" "$@"`, ts, exe}, args...)
		prog = "/bin/sh"
	}
	var out bytes.Buffer
	res, err := launch.Run(context.Background(), launch.Options{
		N: c.npes, Heap: "16m", Timeout: 2 * time.Minute, Stdout: &out, Stderr: &out,
		Env: []string{envCollBench + "=" + b.Name(), envCollBudget + "=" + budget.String(), "SYMHEAP_SHARED_SIZE=1m"},
	}, prog, args...)
	if err != nil || res.Status != 0 {
		b.Fatalf("benchmark job: %v (status %d); output:\n%s", err, res.Status, out.String())
	}
	ns := -1.0
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == collBenchMark && f[1] == b.Name() {
			ns, _ = strconv.ParseFloat(f[2], 64)
		}
	}
	if ns <= 0 {
		b.Fatalf("the PEs printed no figure; output:\n%s", out.String())
	}
	report(ns, "ns/op")
	if c.peerTest == "" {
		return
	}
	rs, err := oshFigures(quick)
	if err != nil {
		b.Logf("no Open MPI figure: %v", err)
		return
	}
	r, ok := peers.Find(rs, c.peerTest, c.peerSize)
	if !ok || r.Unit != "us" || r.Value <= 0 {
		b.Logf("no Open MPI figure for %s %d in %v", c.peerTest, c.peerSize, rs)
		return
	}
	theirs := r.Value * 1000
	report(theirs, "openmpi-ns/op")
	report(ns/theirs, "x-openmpi")
}

// benchPattern is the -test.bench value that selects exactly benchmark
// name (each level anchored).
func benchPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

var (
	oshOnce sync.Once
	oshRes  []peers.Result
	oshErr  error
)

// oshFigures runs Open MPI's OSHMEM harness once per process, for every
// figure the collective benchmarks compare with.
func oshFigures(quick bool) ([]peers.Result, error) {
	oshOnce.Do(func() {
		if err := peers.HarnessAvailable(peers.OSH); err != nil {
			oshErr = fmt.Errorf("skipping the comparison: %w", err)
			return
		}
		dir := ""
		for _, d := range []string{os.Getenv("SYMHEAP_PEERS_DIR"), filepath.Join("bench", "peers", "bin"), peers.DefaultDir()} {
			if d == "" {
				continue
			}
			if _, err := os.Stat(filepath.Join(d, "osh_bench")); err == nil {
				dir = d
				break
			}
		}
		if dir == "" {
			oshErr = fmt.Errorf("skipping the comparison: osh_bench is not built (make peers, or bench/peers/build.sh)")
			return
		}
		budget, _ := collBenchBudget()
		spec := peers.Spec{Harness: peers.OSH, Tests: []string{"barrier_lat", "bcast_lat", "reduce_lat"},
			NP: 2, Sizes: []int64{8, 8192}, Dir: dir, Timeout: 2 * time.Minute,
			Reps: collBenchReps, Budget: budget * collBenchReps}
		if quick {
			spec.Budget, spec.Reps, spec.Warmup, spec.MinIters = 20*time.Millisecond, 1, 50, 2
		}
		oshRes, oshErr = peers.Run(context.Background(), spec)
	})
	return oshRes, oshErr
}

// collBenchPE is one PE of a benchmark job.
func collBenchPE(b *testing.B, c collBenchCase) {
	budget, err := time.ParseDuration(os.Getenv(envCollBudget))
	if err != nil {
		b.Fatalf("%s: %v", envCollBudget, err)
	}
	pe, err := symheap.Init(symheap.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer pe.Close()
	op, err := c.setup(pe)
	if err != nil {
		b.Fatal(err)
	}
	w := pe.World()
	agree, err := symheap.Malloc[float64](pe, 2)
	if err != nil {
		b.Fatal(err)
	}
	// slowest returns the largest v over the PEs.
	slowest := func(v float64) float64 {
		agree[0] = v
		if err := symheap.Reduce(w, agree[1:], agree[:1], symheap.OpMax); err != nil {
			b.Fatal(err)
		}
		return agree[1]
	}
	loop := func(n int) float64 {
		if err := w.Sync(); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for range n {
			if err := op(); err != nil {
				b.Fatal(err)
			}
		}
		return slowest(float64(time.Since(start).Nanoseconds()) / float64(n))
	}
	count := func(per float64, share float64) int {
		return int(min(max(share*float64(budget.Nanoseconds())/per, 10), 1e7))
	}
	per := loop(100)            // warm-up, and a first estimate
	per = loop(count(per, 0.1)) // a better one, on a tenth of the budget
	iters := count(per, 1)
	best := loop(iters)
	for range collBenchReps - 1 {
		best = min(best, loop(iters))
	}
	if pe.Rank() == 0 {
		fmt.Printf("%s %s %.2f\n", collBenchMark, b.Name(), best)
	}
}
