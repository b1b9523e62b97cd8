package peers

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	in := `# osh_bench: Open MPI OSHMEM 4.1.4, OpenSHMEM 1.4
# npes 2
# <harness> <metric> <size-bytes> <value>
# unit put_lat us shmem_putmem+shmem_quiet to PE 1, per op
osh put_lat 8 0.0315
osh put_lat 4194304 359.8432

[1795251147.641635] [vm:6275 :0]     ucp_context.c:1849 UCX  INFO  Version 1.13.1
# unit put_bw MB/s window of puts
osh put_bw 1048576 28586.7996
osh put_rate 8 74933607.6526
# npes 8
osh barrier_lat 0 9.4645
malloc malloc_pair 64 1.5e-2
`
	got, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Result{
		{"osh", "put_lat", 8, 0.0315, "us", 2},
		{"osh", "put_lat", 4194304, 359.8432, "us", 2},
		{"osh", "put_bw", 1048576, 28586.7996, "MB/s", 2},
		{"osh", "put_rate", 8, 74933607.6526, "msg/s", 2}, // unit from the suffix
		{"osh", "barrier_lat", 0, 9.4645, "us", 8},
		{"malloc", "malloc_pair", 64, 0.015, "", 8}, // another harness, no unit known
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Parse:\n got %v\nwant %v", got, want)
	}
	if r, ok := Find(got, "put_lat", 4194304); !ok || r.Value != 359.8432 {
		t.Errorf("Find(put_lat, 4M) = %v, %v", r, ok)
	}
	if _, ok := Find(got, "put_lat", 16); ok {
		t.Errorf("Find(put_lat, 16) found a result")
	}
}

func TestParseUnitLineOverridesSuffix(t *testing.T) {
	got, err := Parse(strings.NewReader("# unit thread_lat ns ping-pong\ncacheline thread_lat 64 53.7\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Unit != "ns" || got[0].PEs != 0 {
		t.Fatalf("got %v", got)
	}
}

func TestParseNoise(t *testing.T) {
	// Lines that are not measurements and do not start with a harness name
	// are skipped, whatever they look like.
	in := "--------------------------------------------------------------------------\n" +
		"WARNING: There was an error initializing an OpenFabrics device.\n" +
		"vader 1 2 3\n" + // an unknown first word, then numbers: noise
		"mpi pingpong_lat 0 0.24\n" +
		"   \t\n"
	got, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Metric != "pingpong_lat" {
		t.Fatalf("got %v", got)
	}
}

func TestParseMalformed(t *testing.T) {
	for _, line := range []string{
		"osh put_lat 8",           // too few fields
		"osh put_lat 8 0.3 extra", // too many
		"mpi pingpong_lat -8 0.3", // negative size
		"mpi pingpong_lat 8 fast", // value not a number
		"memcpy memcpy_bw 4M 1.0", // size with a suffix
		"cacheline 9lat 64 1.0",   // metric not a name
	} {
		in := "osh put_lat 16 0.5\n" + line + "\n"
		got, err := Parse(strings.NewReader(in))
		if err == nil {
			t.Errorf("Parse(%q) accepted it: %v", line, got)
			continue
		}
		if !strings.Contains(err.Error(), "line 2") {
			t.Errorf("Parse(%q) error %q does not name line 2", line, err)
		}
		if len(got) != 1 {
			t.Errorf("Parse(%q) returned %d results before the error, want 1", line, len(got))
		}
	}
	if _, err := Parse(strings.NewReader("# npes two\n")); err == nil {
		t.Errorf("bad npes accepted")
	}
}

func TestParseSpecialValues(t *testing.T) {
	got, err := Parse(strings.NewReader("osh put_bw 8 inf\nosh put_lat 8 1e-3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsInf(got[0].Value, 1) || got[1].Value != 0.001 {
		t.Fatalf("got %v", got)
	}
}

func TestCommandLine(t *testing.T) {
	argv, err := CommandLine(Spec{Harness: Memcpy, Dir: "/x", Sizes: []int64{8, 4 << 20},
		Iters: 100, MinIters: 2, Warmup: 10, Reps: 1, Window: 16, Budget: 50 * time.Millisecond,
		Tests: []string{"memcpy_bw"}})
	if err != nil {
		t.Fatal(err)
	}
	want := "/x/memcpy_bench -s 8,4194304 -i 100 -m 2 -w 10 -r 1 -W 16 -t 0.05 memcpy_bw"
	if got := strings.Join(argv, " "); got != want {
		t.Errorf("CommandLine = %q, want %q", got, want)
	}
	argv, err = CommandLine(Spec{Harness: Cacheline, Dir: "/x"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(argv, " "); got != "/x/cacheline_pingpong all" {
		t.Errorf("CommandLine = %q", got)
	}
	// Tail mode: -b with the batch.
	argv, err = CommandLine(Spec{Harness: Memcpy, Dir: "/x", Batch: 10, Tests: []string{"memcpy_bw"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(argv, " "); got != "/x/memcpy_bench -b 10 memcpy_bw" {
		t.Errorf("CommandLine = %q", got)
	}

	for _, bad := range []Spec{
		{Harness: "nope"},
		{Harness: Memcpy, Tests: []string{"put_lat"}},
		{Harness: Memcpy, Sizes: []int64{-1}},
		{Harness: Memcpy, Reps: -1},
		{Harness: Memcpy, Batch: -1},
		{Harness: Memcpy, Budget: -time.Second},
	} {
		if _, err := CommandLine(bad); err == nil {
			t.Errorf("CommandLine(%+v) accepted it", bad)
		}
	}
}

func TestCommandLineLauncher(t *testing.T) {
	if err := HarnessAvailable(OSH); err != nil {
		t.Skipf("launcher flags not checked: %v", err)
	}
	argv, err := CommandLine(Spec{Harness: OSH, Dir: "/x", NP: 4, Tests: []string{"barrier_lat"},
		LauncherArgs: []string{"--bind-to", "none"}})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(argv[1:], " ")
	want := "--allow-run-as-root --oversubscribe --mca opal_common_ucx_opal_mem_hooks 0 " +
		"--mca pml ob1 --mca btl self,vader -np 4 --bind-to none /x/osh_bench barrier_lat"
	if got != want {
		t.Errorf("CommandLine = %q, want %q", got, want)
	}
}

func TestTailBuffer(t *testing.T) {
	b := &tailBuffer{max: 8}
	b.Write([]byte("hello "))
	b.Write([]byte("world, again"))
	if got := string(b.Bytes()); got != "d, again" {
		t.Errorf("tail = %q", got)
	}
}

func TestTestsTable(t *testing.T) {
	for _, h := range Harnesses() {
		if len(Tests(h)) == 0 {
			t.Errorf("harness %s has no tests", h)
		}
		for _, name := range Tests(h) {
			if !isName(name) {
				t.Errorf("test %q of %s is not a name", name, h)
			}
		}
	}
	if Tests("nope") != nil {
		t.Errorf("Tests(nope) not nil")
	}
}

// The "symheap (C)" harness runs osh_bench built with symcc under shrun,
// whose flag for the number of PEs is -n.
func TestCommandLineShrun(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "shrun"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	argv, err := CommandLine(Spec{Harness: SymheapC, Dir: "/x", NP: 3, Tests: []string{"put_lat"}})
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, "shrun") + " -n 3 /x/osh_bench_symheap put_lat"
	if got := strings.Join(argv, " "); got != want {
		t.Errorf("CommandLine = %q, want %q", got, want)
	}
	if err := HarnessAvailable(SymheapC); err == nil || !strings.Contains(err.Error(), "symcc") {
		t.Errorf("HarnessAvailable without symcc = %v, want an error naming symcc", err)
	}
}
