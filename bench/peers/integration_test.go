package peers

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// quick keeps each harness run to a fraction of a second.
func quick(s Spec, dir string) Spec {
	s.Dir = dir
	s.Budget = 5 * time.Millisecond
	s.Reps = 1
	s.Warmup = 5
	if s.MinIters == 0 {
		s.MinIters = 2
	}
	if s.Timeout == 0 {
		// A bound on a hang, not a figure: Open MPI's PEs spin without
		// yielding, and 4 of them oversubscribed beside a competing load
		// took over 30 s for a handful of barriers.
		s.Timeout = 3 * time.Minute
	}
	return s
}

type want struct {
	metric string
	size   int64
	unit   string
}

func check(t *testing.T, rs []Result, harness string, pes int, wants []want) {
	t.Helper()
	for _, w := range wants {
		r, ok := Find(rs, w.metric, w.size)
		if !ok {
			t.Errorf("no %s %d in %v", w.metric, w.size, rs)
			continue
		}
		if r.Harness != harness || r.Unit != w.unit || r.PEs != pes ||
			!(r.Value > 0) || math.IsInf(r.Value, 0) {
			t.Errorf("bad result %+v (want harness %s, unit %s, %d PEs, finite value > 0)", r, harness, w.unit, pes)
		}
	}
	for _, r := range rs {
		t.Logf("%-9s %-13s %8d %12.4f %-5s (%d PEs)", r.Harness, r.Metric, r.Size, r.Value, r.Unit, r.PEs)
	}
}

// runsHere probes a launcher-based harness with the smallest run there is
// (Measure of barrier_lat) and skips the test, with the reason, when Open MPI
// is missing or cannot run here.
func runsHere(t *testing.T, ctx context.Context, h, dir string) {
	t.Helper()
	if err := HarnessAvailable(h); err != nil {
		t.Skipf("skipping %s harness: %v", h, err)
	}
	if _, err := os.Stat(filepath.Join(dir, harnesses[h].binary)); err != nil {
		t.Skipf("skipping %s harness: not built: %v", h, err)
	}
	r, err := Measure(ctx, quick(Spec{Harness: h, Iters: 2, MinIters: 1}, dir), "barrier_lat", 0)
	if err != nil {
		t.Skipf("skipping %s harness: Open MPI's %s cannot run here: %v", h, harnesses[h].launcher, err)
	}
	if r.Harness != h || r.Metric != "barrier_lat" || r.Unit != "us" || r.PEs != 2 || !(r.Value > 0) {
		t.Errorf("Measure(barrier_lat) = %+v", r)
	}
}

// TestIntegration builds every harness and runs each briefly. Build does not
// install packages here (PEERS_NO_INSTALL=1): the Open MPI parts skip,
// naming what is missing, unless bench/peers/build.sh ran before.
func TestIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the C harnesses")
	}
	// Open MPI's jobs are slow to start on a loaded machine (two of them
	// took over a minute together beside the competing load): the whole
	// test is bounded by the go test deadline, less a margin to report.
	limit := 10 * time.Minute
	if d, ok := t.Deadline(); ok {
		limit = min(limit, time.Until(d)-30*time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	dir := t.TempDir()
	t.Setenv("PEERS_NO_INSTALL", "1")
	start := time.Now()
	if err := Build(ctx, dir); err != nil {
		if HarnessAvailable(Memcpy) != nil {
			t.Skipf("cannot build the peer harnesses: %v", err)
		}
		if Available() == nil {
			t.Fatalf("Build: %v", err)
		}
		t.Logf("Build (Open MPI harnesses will skip): %v", err)
	}
	t.Logf("build took %v", time.Since(start))
	// A second build finds everything up to date: it rewrites no binary.
	before := modTimes(t, dir)
	if err := Build(ctx, dir); err != nil && Available() == nil {
		t.Fatalf("second Build: %v", err)
	}
	for name, mt := range modTimes(t, dir) {
		if !mt.Equal(before[name]) {
			t.Errorf("an up-to-date Build rewrote %s", name)
		}
	}

	t.Run("memcpy", func(t *testing.T) {
		rs, err := Run(ctx, quick(Spec{Harness: Memcpy, Sizes: []int64{4096, 4 << 20}}, dir))
		if err != nil {
			t.Fatal(err)
		}
		check(t, rs, Memcpy, 1, []want{{"memcpy_bw", 4096, "MB/s"}, {"memcpy_bw", 4 << 20, "MB/s"},
			{"memcpy_shm_bw", 4096, "MB/s"}, {"memcpy_shm_bw", 4 << 20, "MB/s"}})
	})
	t.Run("cacheline", func(t *testing.T) {
		rs, err := Run(ctx, quick(Spec{Harness: Cacheline, Iters: 20000, MinIters: 100}, dir))
		if err != nil {
			t.Fatal(err)
		}
		check(t, rs, Cacheline, 2, []want{{"thread_lat", 64, "ns"}, {"proc_lat", 64, "ns"}})
	})
	t.Run("mpi", func(t *testing.T) {
		runsHere(t, ctx, MPI, dir)
		rs, err := Run(ctx, quick(Spec{Harness: MPI, Sizes: []int64{0, 8, 65536}}, dir))
		if err != nil {
			t.Fatal(err)
		}
		check(t, rs, MPI, 2, []want{{"pingpong_lat", 0, "us"}, {"pingpong_lat", 8, "us"},
			{"pingpong_lat", 65536, "us"}, {"stream_bw", 8, "MB/s"}, {"stream_bw", 65536, "MB/s"},
			{"barrier_lat", 0, "us"}, {"bcast_lat", 8, "us"}, {"allreduce_lat", 8, "us"},
			{"allreduce_lat", 65536, "us"}})
		for _, m := range []string{"stream_bw", "bcast_lat", "allreduce_lat"} {
			if _, ok := Find(rs, m, 0); ok {
				t.Errorf("%s reported size 0", m)
			}
		}
	})
	t.Run("osh", func(t *testing.T) {
		runsHere(t, ctx, OSH, dir)
		rs, err := Run(ctx, quick(Spec{Harness: OSH, Sizes: []int64{8, 4096}}, dir))
		if err != nil {
			t.Fatal(err)
		}
		check(t, rs, OSH, 2, []want{{"put_lat", 8, "us"}, {"put_lat", 4096, "us"}, {"get_lat", 8, "us"},
			{"put_bw", 4096, "MB/s"}, {"put_rate", 8, "msg/s"}, {"fadd_lat", 8, "us"},
			{"barrier_lat", 0, "us"}, {"bcast_lat", 8, "us"}, {"reduce_lat", 4096, "us"},
			{"malloc_lat", 4096, "us"}})
		rs, err = Run(ctx, quick(Spec{Harness: OSH, NP: 4, Tests: []string{"barrier_lat"}}, dir))
		if err != nil {
			t.Fatal(err)
		}
		check(t, rs, OSH, 4, []want{{"barrier_lat", 0, "us"}})
	})
	t.Run("timeout", func(t *testing.T) {
		runsHere(t, ctx, MPI, dir)
		bin := filepath.Join(dir, "mpi_bench")
		start := time.Now()
		_, err := Run(ctx, Spec{Harness: MPI, Dir: dir, Tests: []string{"pingpong_lat"}, Sizes: []int64{8},
			Iters: 1 << 30, MinIters: 1 << 30, Budget: time.Hour, Timeout: 1500 * time.Millisecond})
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("err = %v, want ErrTimeout", err)
		}
		// Ended by the timeout (ErrTimeout; the run asked for 2^30
		// iterations), with no rank left: no bound on when, a Run that
		// ignores its timeout meets the test's deadline.
		t.Logf("Run returned %v after its start", time.Since(start))
		if pids := running(bin); len(pids) > 0 {
			t.Errorf("ranks left running: %v", pids)
		}
	})
}

// running lists live processes whose executable is bin.
func running(bin string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink("/proc/" + e.Name() + "/exe"); err == nil && exe == bin && processAlive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// modTimes returns the modification time of every file in dir.
func modTimes(t *testing.T, dir string) map[string]time.Time {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]time.Time{}
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && !strings.HasPrefix(e.Name(), ".") { // not the build's lock
			m[e.Name()] = fi.ModTime()
		}
	}
	return m
}
