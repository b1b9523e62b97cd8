package symheap_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/launch"
)

// benchWorkers are the measurements a PE job can run; each returns the
// figure of the run (ns per operation) on PE 0.
var benchWorkers = map[string]func(pe *symheap.PE, iters int) (float64, error){
	"barrier": func(pe *symheap.PE, iters int) (float64, error) {
		for i := 0; i < 100; i++ { // warm up
			if err := pe.Barrier(); err != nil {
				return 0, err
			}
		}
		start := time.Now()
		for i := 0; i < iters; i++ {
			if err := pe.Barrier(); err != nil {
				return 0, err
			}
		}
		return float64(time.Since(start).Nanoseconds()) / float64(iters), nil
	},
}

// TestPEBenchWorker is the PE side of runPEBench; it does nothing in an
// ordinary test run.
func TestPEBenchWorker(t *testing.T) {
	name := os.Getenv("SYMHEAP_BENCH")
	if name == "" {
		t.Skip("PE side of the multi-PE benchmarks")
	}
	iters, _ := strconv.Atoi(os.Getenv("SYMHEAP_BENCH_ITERS"))
	pe, err := symheap.Init(symheap.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer pe.Close()
	v, err := benchWorkers[name](pe, iters)
	if err != nil {
		t.Fatal(err)
	}
	if pe.Rank() == 0 {
		fmt.Printf("BENCHRESULT %g\n", v)
	}
}

// runPEBench runs benchmark worker name on n real PEs and returns PE 0's
// figure.
func runPEBench(b *testing.B, name string, n, iters int) float64 {
	b.Helper()
	var out bytes.Buffer
	res, err := launch.Run(context.Background(), launch.Options{
		N: n, Heap: "4m", Timeout: 2 * time.Minute, Stdout: &out, Stderr: os.Stderr,
		Env: []string{"SYMHEAP_BENCH=" + name, "SYMHEAP_BENCH_ITERS=" + strconv.Itoa(iters),
			"SYMHEAP_SHARED_SIZE=1m", "GORACE=atexit_sleep_ms=0"},
	}, os.Args[0], "-test.run=^TestPEBenchWorker$", "-test.count=1")
	if err != nil || res.Status != 0 {
		b.Fatalf("%s on %d PEs: %v (status %d)\n%s", name, n, err, res.Status, out.String())
	}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "BENCHRESULT" {
			v, _ := strconv.ParseFloat(f[1], 64)
			return v
		}
	}
	b.Fatalf("%s: no result in output:\n%s", name, out.String())
	return 0
}

// BenchmarkBarrier measures Barrier on 2, 4 and 8 PEs (ns per barrier).
// The PEs run b.N barriers each, at least 2000.
func BenchmarkBarrier(b *testing.B) {
	for _, n := range []int{2, 4, 8} {
		b.Run(fmt.Sprintf("pes=%d", n), func(b *testing.B) {
			iters := max(b.N, 2000)
			ns := runPEBench(b, "barrier", n, iters)
			b.ReportMetric(ns, "ns/barrier")
			b.ReportMetric(0, "ns/op")
		})
	}
}
