package main

// The PE side of `symheap bench`: `symheap __bench-pe -test NAME ...`.
//
// The parent (bench.go) starts its own executable as the N PEs of a job
// with package launch; every PE runs one test over a list of sizes, and PE
// 0 prints the figures in bench/peers' line format,
//
//	# unit <metric> <unit> <what>
//	symheap <metric> <size-bytes> <value>
//
// so that the parent reads ours and the C peers' output with one parser
// (peers.Parse).
//
// # How a figure is measured (the C harnesses do the same)
//
//  1. Warm-up: the loop runs w iterations, w = benchParams.Warmup but at
//     most what moves 64 MiB (at least 1). Its time per iteration gives the
//     timed count n = min(Iters, Budget/Reps/per-iteration), at least
//     MinIters: every size gets about the same wall time.
//  2. Reps repetitions of n iterations are timed; the best repetition's
//     mean time per iteration is the figure.
//  3. Who runs the loop (benchMode): soloMode, PE 0 alone (one-sided
//     tests: the target does nothing, as in OpenSHMEM); pairMode, PEs 0
//     and 1 together (send/recv), with PE 0's count agreed; allMode, every
//     PE (collectives), where the count comes from the slowest PE's
//     warm-up and a repetition's time is the slowest PE's mean.
//
// Agreement uses only Put and Barrier (allMax), so that a fault in a
// collective under test cannot hang the others' bookkeeping.
//
// On an error the PE returns without Close: Close is collective and the
// other PEs may never reach it. main exits 1, package launch stops the
// rest of the job and removes its segment.

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/symheap/symheap"
)

// hiddenBenchPE is the hidden subcommand of the per-PE worker.
const hiddenBenchPE = "__bench-pe"

// ourHarness is the harness name of our figures in the shared line format.
const ourHarness = "symheap"

// benchParams are a run's iteration settings, the same knobs as the C
// harnesses' -i -m -w -r -W -t.
type benchParams struct {
	Sizes    []int64
	Iters    int           // most timed iterations per repetition
	MinIters int           // fewest timed iterations per repetition
	Warmup   int           // most warm-up iterations
	Reps     int           // repetitions; the best is the figure
	Window   int           // operations in flight for bandwidth and rate
	Budget   time.Duration // time per size, all repetitions together
	Pairs    int           // alloc+free pairs of the pair workload
	// Batch, when set, makes the collectives report their tail: calls
	// per timed batch (tail).
	Batch int `json:",omitempty"`
}

// args renders p as __bench-pe flags.
func (p benchParams) args() []string {
	s := make([]string, len(p.Sizes))
	for i, v := range p.Sizes {
		s[i] = strconv.FormatInt(v, 10)
	}
	return []string{
		"-sizes", strings.Join(s, ","),
		"-iters", strconv.Itoa(p.Iters), "-min-iters", strconv.Itoa(p.MinIters),
		"-warmup", strconv.Itoa(p.Warmup), "-reps", strconv.Itoa(p.Reps),
		"-window", strconv.Itoa(p.Window), "-budget", p.Budget.String(),
		"-pairs", strconv.Itoa(p.Pairs), "-batch", strconv.Itoa(p.Batch),
	}
}

// warmupCount is step 1's w for an iteration that moves bytes bytes.
func (p benchParams) warmupCount(bytes int64) int {
	n := p.Warmup
	if bytes > 0 && int64(n) > (64<<20)/bytes {
		n = int((64 << 20) / bytes)
	}
	return max(n, 1)
}

// timedCount is step 1's n for an iteration that took per seconds.
func (p benchParams) timedCount(per float64) int {
	n := float64(p.Iters)
	if per > 0 {
		n = min(n, p.Budget.Seconds()/float64(p.Reps)/per)
	}
	return max(int(n), p.MinIters, 1)
}

// window is the number of operations in flight for size bytes: at most
// 64 MiB, at least one.
func (p benchParams) window(size int64) int {
	w := p.Window
	if size > 0 && int64(w) > (64<<20)/size {
		w = int((64 << 20) / size)
	}
	return max(w, 1)
}

type benchMode int

const (
	soloMode benchMode = iota // PE 0 runs the loop; the others wait
	pairMode                  // PEs 0 and 1 run it, with PE 0's count
	allMode                   // every PE runs it; the slowest PE counts
)

// peBench is one PE's state in a benchmark job.
type peBench struct {
	pe    *symheap.PE
	rank  int
	p     benchParams
	slots []float64 // symmetric, one per PE: allMax's exchange
	out   *bufio.Writer
}

// peTests are the tests a worker can run, by name.
var peTests = map[string]func(b *peBench) error{
	"put_lat":      func(b *peBench) error { return b.putGet(false) },
	"get_lat":      func(b *peBench) error { return b.putGet(true) },
	"put_bw":       func(b *peBench) error { return b.putWindow("put_bw") },
	"put_rate":     func(b *peBench) error { return b.putWindow("put_rate") },
	"fadd_lat":     (*peBench).fetchAdd,
	"barrier_lat":  (*peBench).barrier,
	"bcast_lat":    func(b *peBench) error { return b.vector("bcast_lat") },
	"reduce_lat":   func(b *peBench) error { return b.vector("reduce_lat") },
	"fcollect_lat": func(b *peBench) error { return b.vector("fcollect_lat") },
	"malloc_lat":   (*peBench).mallocFree,
	"shared_alloc": (*peBench).sharedAlloc,
	"msg_lat":      (*peBench).pingPong,
	"msg_bw":       func(b *peBench) error { return b.stream(false) },
	"msg_rate":     func(b *peBench) error { return b.stream(true) },
	"floor":        (*peBench).floor,
}

// runBenchPE is `symheap __bench-pe`.
func runBenchPE(args []string) error {
	fs := flag.NewFlagSet(hiddenBenchPE, flag.ContinueOnError)
	test := fs.String("test", "", "test to run")
	sizes := fs.String("sizes", "", "comma-separated sizes in bytes")
	var p benchParams
	fs.IntVar(&p.Iters, "iters", 10000, "most timed iterations per repetition")
	fs.IntVar(&p.MinIters, "min-iters", 10, "fewest timed iterations per repetition")
	fs.IntVar(&p.Warmup, "warmup", 1000, "most warm-up iterations")
	fs.IntVar(&p.Reps, "reps", 3, "repetitions")
	fs.IntVar(&p.Window, "window", 64, "operations in flight")
	fs.DurationVar(&p.Budget, "budget", 100*time.Millisecond, "time per size")
	fs.IntVar(&p.Pairs, "pairs", 1_000_000, "alloc+free pairs")
	fs.IntVar(&p.Batch, "batch", 0, "collectives: calls per timed batch, and report p50 and p99 (0: the mean)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	run, ok := peTests[*test]
	if !ok {
		return fmt.Errorf("%s: unknown test %q", hiddenBenchPE, *test)
	}
	if *sizes != "" {
		for _, f := range strings.Split(*sizes, ",") {
			v, err := strconv.ParseInt(f, 10, 64)
			if err != nil || v < 0 {
				return fmt.Errorf("%s: bad size %q", hiddenBenchPE, f)
			}
			p.Sizes = append(p.Sizes, v)
		}
	}
	if p.Iters < 1 || p.MinIters < 1 || p.Warmup < 1 || p.Reps < 1 || p.Window < 1 || p.Budget <= 0 || p.Pairs < 1 || p.Batch < 0 {
		return fmt.Errorf("%s: iteration settings must be positive: %+v", hiddenBenchPE, p)
	}
	p.MinIters = min(p.MinIters, p.Iters)

	pe, err := symheap.Init(symheap.Config{})
	if err != nil {
		return err
	}
	slots, err := symheap.Calloc[float64](pe, pe.Size())
	if err != nil {
		return err
	}
	b := &peBench{pe: pe, rank: pe.Rank(), p: p, slots: slots, out: bufio.NewWriter(os.Stdout)}
	if b.rank == 0 {
		fmt.Fprintf(b.out, "# npes %d\n", pe.Size())
	}
	if err := run(b); err != nil {
		b.out.Flush()
		return fmt.Errorf("PE %d: %s: %w", b.rank, *test, err)
	}
	if err := b.out.Flush(); err != nil {
		return err
	}
	if err := symheap.Free(pe, slots); err != nil {
		return err
	}
	return pe.Close()
}

func (b *peBench) unit(metric, unit, what string) {
	if b.rank == 0 {
		fmt.Fprintf(b.out, "# unit %s %s %s\n", metric, unit, what)
	}
}

// result prints one figure (PE 0 only) and flushes it, so that the figures
// measured before a failure reach the parent.
func (b *peBench) result(metric string, size int64, v float64) {
	if b.rank == 0 {
		fmt.Fprintf(b.out, "%s %s %d %.6g\n", ourHarness, metric, size, v)
		b.out.Flush()
	}
}

// need2 refuses point-to-point tests on fewer than 2 PEs.
func (b *peBench) need2() error {
	if b.pe.Size() < 2 {
		return errors.New("point-to-point tests need at least 2 PEs")
	}
	return nil
}

// allMax returns the largest v of all PEs, on every PE.
func (b *peBench) allMax(v float64) (float64, error) {
	mine := []float64{v}
	for t := 0; t < b.pe.Size(); t++ {
		if err := symheap.Put(b.pe, b.slots[b.rank:b.rank+1], mine, t); err != nil {
			return 0, err
		}
	}
	// Barrier completes every PE's puts into our slots...
	if err := b.pe.Barrier(); err != nil {
		return 0, err
	}
	m := slices.Max(b.slots)
	// ...and this one keeps the next allMax from overwriting them before
	// every PE has read them.
	return m, b.pe.Barrier()
}

// measure times loop as the package comment says and returns seconds per
// iteration (meaningful on PE 0). bytes is what one iteration moves.
func (b *peBench) measure(mode benchMode, bytes int64, loop func(n int) error) (float64, error) {
	active := mode == allMode || b.rank == 0 || mode == pairMode && b.rank == 1
	timed := func(n int) (float64, error) {
		if !active {
			return 0, nil
		}
		t0 := time.Now()
		if err := loop(n); err != nil {
			return 0, err
		}
		return time.Since(t0).Seconds() / float64(n), nil
	}
	if mode == soloMode {
		best := math.Inf(1)
		if b.rank == 0 {
			w := b.p.warmupCount(bytes)
			per, err := timed(w)
			if err != nil {
				return 0, err
			}
			n := b.p.timedCount(per)
			for r := 0; r < b.p.Reps; r++ {
				t, err := timed(n)
				if err != nil {
					return 0, err
				}
				best = min(best, t)
			}
		}
		return best, b.pe.Barrier()
	}
	if err := b.pe.Barrier(); err != nil {
		return 0, err
	}
	per, err := timed(b.p.warmupCount(bytes))
	if err != nil {
		return 0, err
	}
	if mode == pairMode && b.rank != 0 {
		per = 0 // PE 0's count
	}
	if per, err = b.allMax(per); err != nil {
		return 0, err
	}
	n := b.p.timedCount(per)
	best := math.Inf(1)
	for r := 0; r < b.p.Reps; r++ {
		if err := b.pe.Barrier(); err != nil {
			return 0, err
		}
		t, err := timed(n)
		if err != nil {
			return 0, err
		}
		if mode == allMode {
			if t, err = b.allMax(t); err != nil {
				return 0, err
			}
		}
		best = min(best, t)
	}
	return best, b.pe.Barrier()
}

// minBatches is the fewest samples of a tail: enough that the 99th
// percentile is not the largest sample (as the C harnesses'
// PEERS_MIN_BATCHES).
const minBatches = 200

// batchCount is the number of timed batches of a tail when one call took
// per seconds in the warm-up: as many as the timed calls of all
// repetitions make, at least minBatches.
func (p benchParams) batchCount(per float64) int {
	return max(p.timedCount(per)*p.Reps/p.Batch, minBatches)
}

// percentile sorts v and returns its p-th percentile (p in 1..100) by
// nearest rank: the smallest sample with at least p% of the samples at or
// below it (as the C harnesses' peers_percentile).
func percentile(v []float64, p int) float64 {
	slices.Sort(v)
	k := (p*len(v) + 99) / 100
	return v[min(max(k, 1), len(v))-1]
}

// tail measures loop, run by every PE, as batches of p.Batch calls, each
// timed on its own: a sample is one batch's mean seconds per call on one
// PE. It returns the 50th and 99th percentiles of this PE's samples, each
// the largest over PEs. The batch count comes from the slowest PE's
// warm-up, as measure's count does.
func (b *peBench) tail(bytes int64, loop func(n int) error) (p50, p99 float64, err error) {
	if err := b.pe.Barrier(); err != nil {
		return 0, 0, err
	}
	w := b.p.warmupCount(bytes)
	t0 := time.Now()
	if err := loop(w); err != nil {
		return 0, 0, err
	}
	per, err := b.allMax(time.Since(t0).Seconds() / float64(w))
	if err != nil {
		return 0, 0, err
	}
	v := make([]float64, b.p.batchCount(per))
	if err := b.pe.Barrier(); err != nil {
		return 0, 0, err
	}
	for i := range v {
		t0 := time.Now()
		if err := loop(b.p.Batch); err != nil {
			return 0, 0, err
		}
		v[i] = time.Since(t0).Seconds() / float64(b.p.Batch)
	}
	if p50, err = b.allMax(percentile(v, 50)); err != nil {
		return 0, 0, err
	}
	if p99, err = b.allMax(percentile(v, 99)); err != nil {
		return 0, 0, err
	}
	return p50, p99, b.pe.Barrier()
}

// collUnit prints the unit lines of a collective's metric: the mean, or
// with p.Batch its tail's metric_p50 and metric_p99.
func (b *peBench) collUnit(metric, what string) {
	if b.p.Batch == 0 {
		b.unit(metric, "us", what+", slowest PE's mean")
		return
	}
	for _, p := range []string{"50", "99"} {
		b.unit(metric+"_p"+p, "us", fmt.Sprintf("%s, %sth percentile of batches of %d calls (mean per call), slowest PE's", what, p, b.p.Batch))
	}
}

// collective measures loop, a collective every PE runs, and prints its
// figure at size: the slowest PE's mean per call (metric), or with
// p.Batch its tail (metric_p50, metric_p99). bytes is what one call moves.
func (b *peBench) collective(metric string, size, bytes int64, loop func(n int) error) error {
	if b.p.Batch == 0 {
		t, err := b.measure(allMode, bytes, loop)
		if err != nil {
			return err
		}
		b.result(metric, size, t*1e6)
		return nil
	}
	p50, p99, err := b.tail(bytes, loop)
	if err != nil {
		return err
	}
	b.result(metric+"_p50", size, p50*1e6)
	b.result(metric+"_p99", size, p99*1e6)
	return nil
}

func maxSize(sizes []int64) int64 {
	m := int64(1)
	for _, s := range sizes {
		m = max(m, s)
	}
	return m
}

// touched returns n bytes of ordinary Go memory with every page written.
func touched(n int64) []byte {
	buf := make([]byte, n)
	for i := range buf {
		buf[i] = 0x5a
	}
	return buf
}

// putGet: Put + Quiet into PE 1, or Get from PE 1, per operation; the
// local side is ordinary Go memory.
func (b *peBench) putGet(get bool) error {
	if err := b.need2(); err != nil {
		return err
	}
	metric, what := "put_lat", "Put+Quiet of size bytes into PE 1, per op"
	if get {
		metric, what = "get_lat", "Get of size bytes from PE 1, per op"
	}
	b.unit(metric, "us", what)
	m := maxSize(b.p.Sizes)
	sym, err := symheap.Malloc[byte](b.pe, int(m))
	if err != nil {
		return err
	}
	local := touched(m)
	for _, s := range b.p.Sizes {
		d, l := sym[:s], local[:s]
		loop := func(n int) error {
			for i := 0; i < n; i++ {
				if err := symheap.Put(b.pe, d, l, 1); err != nil {
					return err
				}
				b.pe.Quiet()
			}
			return nil
		}
		if get {
			loop = func(n int) error {
				for i := 0; i < n; i++ {
					if err := symheap.Get(b.pe, l, d, 1); err != nil {
						return err
					}
				}
				return nil
			}
		}
		t, err := b.measure(soloMode, s, loop)
		if err != nil {
			return err
		}
		b.result(metric, s, t*1e6)
	}
	return symheap.Free(b.pe, sym)
}

// putWindow: a window of PutNBI into PE 1, then Quiet; bandwidth (put_bw)
// or messages per second (put_rate).
func (b *peBench) putWindow(metric string) error {
	if err := b.need2(); err != nil {
		return err
	}
	if metric == "put_bw" {
		b.unit(metric, "MB/s", "window of PutNBI into PE 1 then Quiet, 10^6 B/s")
	} else {
		b.unit(metric, "msg/s", "window of PutNBI into PE 1 then Quiet")
	}
	m := maxSize(b.p.Sizes)
	sym, err := symheap.Malloc[byte](b.pe, int(m))
	if err != nil {
		return err
	}
	local := touched(m)
	for _, s := range b.p.Sizes {
		d, l, w := sym[:s], local[:s], b.p.window(s)
		t, err := b.measure(soloMode, s*int64(w), func(n int) error {
			for i := 0; i < n; i++ {
				for j := 0; j < w; j++ {
					if err := symheap.PutNBI(b.pe, d, l, 1); err != nil {
						return err
					}
				}
				b.pe.Quiet()
			}
			return nil
		})
		if err != nil {
			return err
		}
		if metric == "put_bw" {
			b.result(metric, s, float64(s)*float64(w)/t/1e6)
		} else {
			b.result(metric, s, float64(w)/t)
		}
	}
	return symheap.Free(b.pe, sym)
}

// fetchAdd: AtomicFetchAdd on PE 1's int64, per op.
func (b *peBench) fetchAdd() error {
	if err := b.need2(); err != nil {
		return err
	}
	b.unit("fadd_lat", "us", "AtomicFetchAdd on PE 1's int64, per op")
	v, err := symheap.Calloc[int64](b.pe, 1)
	if err != nil {
		return err
	}
	t, err := b.measure(soloMode, 0, func(n int) error {
		for i := 0; i < n; i++ {
			if _, err := symheap.AtomicFetchAdd(b.pe, &v[0], 1, 1); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	b.result("fadd_lat", 8, t*1e6)
	return symheap.Free(b.pe, v)
}

func (b *peBench) barrier() error {
	b.collUnit("barrier_lat", "Barrier, per call")
	return b.collective("barrier_lat", 0, 0, func(n int) error {
		for i := 0; i < n; i++ {
			if err := b.pe.Barrier(); err != nil {
				return err
			}
		}
		return nil
	})
}

// vector: Broadcast from PE 0, Reduce (sum, every PE gets it), or
// FCollect (every PE's block to every PE), of size/8 int64 over the world
// team.
func (b *peBench) vector(metric string) error {
	switch metric {
	case "bcast_lat":
		b.collUnit(metric, "Broadcast of size/8 int64 from PE 0")
	case "reduce_lat":
		b.collUnit(metric, "Reduce (OpSum) of size/8 int64")
	default:
		b.collUnit(metric, "FCollect of size/8 int64 from each PE")
	}
	w := b.pe.World()
	for _, s := range b.p.Sizes {
		nelem := int(max(s/8, 1))
		ndst := nelem
		if metric == "fcollect_lat" {
			ndst *= b.pe.Size()
		}
		buf, err := symheap.Calloc[int64](b.pe, nelem+ndst)
		if err != nil {
			return err
		}
		src, dst := buf[:nelem], buf[nelem:]
		for i := range src {
			src[i] = 1
		}
		op := func() error { return symheap.Broadcast(w, dst, src, 0) }
		switch metric {
		case "reduce_lat":
			op = func() error { return symheap.Reduce(w, dst, src, symheap.OpSum) }
		case "fcollect_lat":
			op = func() error { return symheap.FCollect(w, dst, src) }
		}
		err = b.collective(metric, int64(nelem)*8, int64(nelem)*8, func(n int) error {
			for i := 0; i < n; i++ {
				if err := op(); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if metric == "reduce_lat" && dst[0] != int64(b.pe.Size()) {
			return fmt.Errorf("reduce of %d int64 gave %d, want %d", nelem, dst[0], b.pe.Size())
		}
		if metric == "fcollect_lat" && dst[len(dst)-1] != 1 {
			return fmt.Errorf("fcollect of %d int64 gave %d from the last PE, want 1", nelem, dst[len(dst)-1])
		}
		if err := symheap.Free(b.pe, buf); err != nil {
			return err
		}
	}
	return nil
}

// mallocFree: collective Malloc + Free pair of size bytes.
func (b *peBench) mallocFree() error {
	b.collUnit("malloc_lat", "collective Malloc+Free pair")
	for _, s := range b.p.Sizes {
		if s == 0 {
			continue // Malloc of 0 is nil without a barrier: nothing to measure
		}
		err := b.collective("malloc_lat", s, 0, func(n int) error {
			for i := 0; i < n; i++ {
				p, err := symheap.Malloc[byte](b.pe, int(s))
				if err != nil {
					return err
				}
				if err := symheap.Free(b.pe, p); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// sharedAlloc: the pair workload (bench_alloc.go) with SharedAlloc and
// SharedFree on PE 0's local shared heap. Sizes are the classes' lo (16:
// small, 4096: large). As in malloc_bench.c, one timed pass of Pairs pairs
// after an untimed fill.
func (b *peBench) sharedAlloc() error {
	b.unit("shared_alloc", "ns", "SharedAlloc+SharedFree pair, xorshift size sequence")
	for _, s := range b.p.Sizes {
		c, ok := pairClassOf(s)
		if !ok {
			return fmt.Errorf("no pair class starts at %d bytes (have 16, 4096)", s)
		}
		var ns float64
		if b.rank == 0 {
			var err error
			if ns, err = sharedPairs(b.pe, c, b.p.Pairs); err != nil {
				return err
			}
		}
		if err := b.pe.Barrier(); err != nil {
			return err
		}
		b.result("shared_alloc", s, ns)
	}
	return nil
}

// msgBuffers returns a send and a receive buffer of n bytes: in this PE's
// local shared heap (shm) or ordinary Go memory, every page touched.
func (b *peBench) msgBuffers(shm bool, n int64) (sbuf, rbuf []byte, free func() error, err error) {
	if !shm {
		return touched(n), touched(n), func() error { return nil }, nil
	}
	if sbuf, err = symheap.SharedAlloc[byte](b.pe, int(n)); err != nil {
		return nil, nil, nil, err
	}
	if rbuf, err = symheap.SharedAlloc[byte](b.pe, int(n)); err != nil {
		return nil, nil, nil, errors.Join(err, symheap.SharedFree(b.pe, sbuf))
	}
	for i := range sbuf {
		sbuf[i], rbuf[i] = 0x5a, 0x5a
	}
	return sbuf, rbuf, func() error {
		return errors.Join(symheap.SharedFree(b.pe, sbuf), symheap.SharedFree(b.pe, rbuf))
	}, nil
}

const (
	tagData = 1
	tagAck  = 2
)

// pingPong: Send/Recv ping-pong between PEs 0 and 1, half a round trip,
// with buffers in the local shared heap (msg_lat_shm) and in ordinary Go
// memory (msg_lat_heap).
func (b *peBench) pingPong() error {
	if err := b.need2(); err != nil {
		return err
	}
	for _, shm := range []bool{true, false} {
		metric, what := "msg_lat_heap", "Send/Recv ping-pong, half round trip, ordinary Go buffers"
		if shm {
			metric, what = "msg_lat_shm", "Send/Recv ping-pong, half round trip, buffers in the local shared heap"
		}
		b.unit(metric, "us", what)
		sbuf, rbuf, free, err := b.msgBuffers(shm, maxSize(b.p.Sizes))
		if err != nil {
			return err
		}
		for _, s := range b.p.Sizes {
			sb, rb := sbuf[:s], rbuf[:s]
			t, err := b.measure(pairMode, 2*s, func(n int) error {
				for i := 0; i < n; i++ {
					switch b.rank {
					case 0:
						if err := b.pe.Send(sb, 1, tagData); err != nil {
							return err
						}
						if _, err := b.pe.Recv(rb, 1, tagData); err != nil {
							return err
						}
					case 1:
						if _, err := b.pe.Recv(rb, 0, tagData); err != nil {
							return err
						}
						if err := b.pe.Send(sb, 0, tagData); err != nil {
							return err
						}
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			b.result(metric, s, t/2*1e6)
		}
		if err := free(); err != nil {
			return err
		}
	}
	return nil
}

// stream: PE 0 posts a window of Isend, PE 1 a window of Irecv, both wait,
// PE 1 acknowledges with 4 bytes (as mpi_bench's stream_bw and
// stream_rate); shared-heap buffers (msg_bw_shm) and ordinary ones
// (msg_bw_heap). With rate, the figure is messages per second
// (msg_rate_shm, msg_rate_heap), and the window ends with WaitAll, which
// releases every request, as MPI_Waitall frees Open MPI's: the loop then
// allocates nothing.
func (b *peBench) stream(rate bool) error {
	if err := b.need2(); err != nil {
		return err
	}
	ack := make([]byte, 4)
	reqs := make([]*symheap.Request, b.p.Window)
	for _, shm := range []bool{true, false} {
		metric, what, unit := "msg_bw_heap", "window of Isend/Irecv + ack, ordinary Go buffers, 10^6 B/s", "MB/s"
		if shm {
			metric, what = "msg_bw_shm", "window of Isend/Irecv + ack, buffers in the local shared heap, 10^6 B/s"
		}
		if rate {
			metric, what, unit = "msg_rate_heap", "window of Isend/Irecv, WaitAll (releasing them), + ack, ordinary Go buffers, messages per second", "msg/s"
			if shm {
				metric, what = "msg_rate_shm", "window of Isend/Irecv, WaitAll (releasing them), + ack, buffers in the local shared heap, messages per second"
			}
		}
		b.unit(metric, unit, what)
		sbuf, rbuf, free, err := b.msgBuffers(shm, maxSize(b.p.Sizes))
		if err != nil {
			return err
		}
		for _, s := range b.p.Sizes {
			if s == 0 {
				continue
			}
			sb, rb, w := sbuf[:s], rbuf[:s], b.p.window(s)
			t, err := b.measure(pairMode, s*int64(w), func(n int) error {
				for i := 0; i < n; i++ {
					var err error
					switch b.rank {
					case 0:
						for j := 0; j < w && err == nil; j++ {
							reqs[j], err = b.pe.Isend(sb, 1, tagData)
						}
						if err == nil {
							err = waitAll(reqs[:w], rate)
						}
						if err == nil {
							_, err = b.pe.Recv(ack, 1, tagAck)
						}
					case 1:
						for j := 0; j < w && err == nil; j++ {
							reqs[j], err = b.pe.Irecv(rb, 0, tagData)
						}
						if err == nil {
							err = waitAll(reqs[:w], rate)
						}
						if err == nil {
							err = b.pe.Send(ack, 0, tagAck)
						}
					}
					if err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			if rate {
				b.result(metric, s, float64(w)/t)
			} else {
				b.result(metric, s, float64(s)*float64(w)/t/1e6)
			}
		}
		if err := free(); err != nil {
			return err
		}
	}
	return nil
}

// waitAll waits for every request: with release by symheap.WaitAll,
// which also releases them (as MPI_Waitall frees Open MPI's), else by
// each one's Wait, leaving them to the garbage collector.
func waitAll(reqs []*symheap.Request, release bool) error {
	if release {
		return symheap.WaitAll(reqs, nil)
	}
	for _, r := range reqs {
		if _, err := r.Wait(); err != nil {
			return err
		}
	}
	return nil
}
