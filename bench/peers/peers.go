package peers

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Harness names.
const (
	OSH       = "osh"       // Open MPI OSHMEM (OpenSHMEM 1.4), via oshrun
	SymheapC  = "oshc"      // the same osh_bench.c on symheap's C library (symcc), via shrun
	MPI       = "mpi"       // Open MPI, via mpirun
	Memcpy    = "memcpy"    // glibc memcpy, one process
	Cacheline = "cacheline" // cache-line ping-pong, two threads or processes
)

// DefaultTimeout bounds a Run whose Spec sets no Timeout.
const DefaultTimeout = 2 * time.Minute

// buildTimeout bounds a Build whose context has no deadline (it may install
// packages).
const buildTimeout = 20 * time.Minute

type harness struct {
	binary   string
	launcher string // "" for harnesses that run directly
	tests    []string
}

var harnesses = map[string]harness{
	OSH: {"osh_bench", "oshrun", []string{"put_lat", "get_lat", "put_bw", "put_rate",
		"fadd_lat", "barrier_lat", "bcast_lat", "reduce_lat", "fcollect_lat", "malloc_lat"}},
	SymheapC: {"osh_bench_symheap", "shrun", []string{"put_lat", "get_lat", "put_bw", "put_rate",
		"fadd_lat", "barrier_lat", "bcast_lat", "reduce_lat", "fcollect_lat", "malloc_lat"}},
	MPI: {"mpi_bench", "mpirun", []string{"pingpong_lat", "stream_bw", "stream_rate", "barrier_lat",
		"bcast_lat", "allreduce_lat"}},
	Memcpy:    {"memcpy_bench", "", []string{"memcpy_bw", "memcpy_shm_bw", "memcpy_odd_bw", "memcpy_cold_bw"}},
	Cacheline: {"cacheline_pingpong", "", []string{"thread_lat", "proc_lat"}},
}

// launcherFlags are the flags Open MPI 4.1 on Debian 12 needs here (see the
// package comment for why).
var launcherFlags = map[string][]string{
	OSH: {"--allow-run-as-root", "--oversubscribe",
		"--mca", "opal_common_ucx_opal_mem_hooks", "0",
		"--mca", "pml", "ob1", "--mca", "btl", "self,vader"},
	MPI: {"--allow-run-as-root", "--oversubscribe",
		"--mca", "pml", "ob1", "--mca", "btl", "self,vader"},
}

// Harnesses returns the harness names, in a fixed order.
func Harnesses() []string { return []string{OSH, SymheapC, MPI, Memcpy, Cacheline} }

// Tests returns the tests of a harness; each test reports the metric of the
// same name. Nil for an unknown harness.
func Tests(h string) []string {
	return append([]string(nil), harnesses[h].tests...)
}

// Spec says what to run. Zero fields take the harness's defaults.
type Spec struct {
	Harness string   // OSH, MPI, Memcpy or Cacheline
	Tests   []string // tests of the harness; nil: all of them
	NP      int      // processes for OSH and MPI; 0: 2. Ignored by the others
	Sizes   []int64  // bytes; nil: each test's default sizes (-s)

	Iters    int           // most timed iterations per repetition (-i)
	MinIters int           // fewest timed iterations per repetition (-m)
	Warmup   int           // most warm-up iterations (-w)
	Reps     int           // repetitions, the best is reported (-r)
	Window   int           // messages in flight for bandwidth and rate (-W)
	Budget   time.Duration // time per size, all repetitions together (-t)
	// Batch, when set, asks the collectives of OSH and SymheapC for their
	// tail (-b): the 50th and 99th percentiles of batches of Batch calls,
	// metrics <test>_p50 and <test>_p99, instead of the mean.
	Batch int

	Timeout      time.Duration // hard limit for the whole run; 0: DefaultTimeout
	Dir          string        // where Build put the binaries; "": DefaultDir()
	LauncherArgs []string      // extra oshrun/mpirun arguments, e.g. "--bind-to", "none"
}

// DefaultDir is where Build and Run put and find the binaries when given no
// directory: $SYMHEAP_PEERS_DIR if set, else symheap/peers in the user's
// cache directory.
func DefaultDir() string {
	if d := os.Getenv("SYMHEAP_PEERS_DIR"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "symheap", "peers")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("symheap-peers-%d", os.Getuid()))
}

//go:embed build.sh csrc/peers_common.h csrc/osh_bench.c csrc/mpi_bench.c csrc/memcpy_bench.c csrc/cacheline_pingpong.c
var sources embed.FS

// Build builds every harness into outdir ("" for DefaultDir()): it writes
// the embedded sources and build.sh to outdir/src (leaving unchanged files
// alone, so that an up-to-date build is not redone) and runs build.sh, which
// installs missing Debian packages when it can. The error names what is
// missing; the gcc-only harnesses are built even then.
func Build(ctx context.Context, outdir string) error {
	if outdir == "" {
		outdir = DefaultDir()
	}
	src := filepath.Join(outdir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return fmt.Errorf("peers: build: %w", err)
	}
	err := fs.WalkDir(sources, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := sources.ReadFile(name)
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		dst := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return writeIfChanged(dst, data, mode)
	})
	if err != nil {
		return fmt.Errorf("peers: build: writing sources: %w", err)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		return fmt.Errorf("peers: build: bash not found: %w", err)
	}
	timeout := time.Duration(0)
	if _, ok := ctx.Deadline(); !ok {
		timeout = buildTimeout
	}
	out, err := runSession(ctx, timeout, []string{bash, filepath.Join(src, "build.sh"), outdir})
	if err != nil {
		return fmt.Errorf("peers: build.sh %s: %w%s%s", outdir, err, lastLine(out.stderr), tailText(out.stderr))
	}
	return nil
}

func writeIfChanged(path string, data []byte, mode os.FileMode) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm() == mode {
			return nil
		}
		return os.Chmod(path, mode)
	}
	// A temporary file and a rename: concurrent Builds into one directory
	// never see a half-written source.
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr, os.Chmod(f.Name(), mode)); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

// needs lists the commands a harness needs to build and run.
func needs(h string) []string {
	switch h {
	case OSH:
		return []string{"oshcc", "oshrun"}
	case MPI:
		return []string{"mpicc", "mpirun"}
	case SymheapC:
		return []string{"symcc", "shrun"}
	}
	return []string{"gcc"}
}

// HarnessAvailable says what harness h is missing to be built and run, or nil.
// It looks the commands up in PATH; it does not run anything.
func HarnessAvailable(h string) error {
	if _, ok := harnesses[h]; !ok {
		return fmt.Errorf("peers: unknown harness %q (have %s)", h, strings.Join(Harnesses(), ", "))
	}
	var missing []string
	for _, c := range needs(h) {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return missingError(missing)
}

// Available says what is missing for any of the harnesses, or nil when
// gcc, oshcc, oshrun, mpicc and mpirun are all in PATH.
func Available() error {
	var missing []string
	for _, c := range []string{"gcc", "oshcc", "oshrun", "mpicc", "mpirun"} {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return missingError(missing)
}

func missingError(missing []string) error {
	pkgs := "openmpi-bin libopenmpi-dev"
	if len(missing) == 1 && missing[0] == "gcc" {
		pkgs = "gcc"
	}
	if slices.Contains(missing, "symcc") || slices.Contains(missing, "shrun") {
		return fmt.Errorf("peers: %s not found in PATH (make build puts symcc and shrun in .bin)", strings.Join(missing, ", "))
	}
	return fmt.Errorf("peers: %s not found in PATH (Debian packages: %s; bench/peers/build.sh or peers.Build installs them as root)",
		strings.Join(missing, ", "), pkgs)
}

// CommandLine returns the command Run would start for spec.
func CommandLine(spec Spec) ([]string, error) {
	argv, _, err := command(spec)
	return argv, err
}

// command returns the command for spec and the harness binary in it.
func command(spec Spec) (argv []string, bin string, err error) {
	h, ok := harnesses[spec.Harness]
	if !ok {
		return nil, "", fmt.Errorf("peers: unknown harness %q (have %s)", spec.Harness, strings.Join(Harnesses(), ", "))
	}
	for _, t := range spec.Tests {
		if !contains(h.tests, t) {
			return nil, "", fmt.Errorf("peers: harness %s has no test %q (have %s)", spec.Harness, t, strings.Join(h.tests, " "))
		}
	}
	dir := spec.Dir
	if dir == "" {
		dir = DefaultDir()
	}
	bin = filepath.Join(dir, h.binary)
	if h.launcher != "" {
		launcher, err := exec.LookPath(h.launcher)
		if err != nil {
			return nil, "", missingError([]string{h.launcher})
		}
		np := spec.NP
		if np == 0 {
			np = 2
		}
		if np < 1 {
			return nil, "", fmt.Errorf("peers: bad NP %d", spec.NP)
		}
		argv = append(argv, launcher)
		argv = append(argv, launcherFlags[spec.Harness]...)
		if spec.Harness == SymheapC {
			argv = append(argv, "-n", strconv.Itoa(np)) // shrun's flag
		} else {
			argv = append(argv, "-np", strconv.Itoa(np))
		}
		argv = append(argv, spec.LauncherArgs...)
	}
	argv = append(argv, bin)
	if len(spec.Sizes) > 0 {
		s := make([]string, len(spec.Sizes))
		for i, v := range spec.Sizes {
			if v < 0 {
				return nil, "", fmt.Errorf("peers: negative size %d", v)
			}
			s[i] = strconv.FormatInt(v, 10)
		}
		argv = append(argv, "-s", strings.Join(s, ","))
	}
	intFlag := func(flag string, v, min int) error {
		if v == 0 {
			return nil
		}
		if v < min {
			return fmt.Errorf("peers: %s %d is below %d", flag, v, min)
		}
		argv = append(argv, flag, strconv.Itoa(v))
		return nil
	}
	for _, f := range []struct {
		flag   string
		v, min int
	}{{"-i", spec.Iters, 1}, {"-m", spec.MinIters, 1}, {"-w", spec.Warmup, 1},
		{"-r", spec.Reps, 1}, {"-W", spec.Window, 1}, {"-b", spec.Batch, 1}} {
		if err := intFlag(f.flag, f.v, f.min); err != nil {
			return nil, "", err
		}
	}
	if spec.Budget < 0 {
		return nil, "", fmt.Errorf("peers: negative budget %v", spec.Budget)
	}
	if spec.Budget > 0 {
		argv = append(argv, "-t", strconv.FormatFloat(spec.Budget.Seconds(), 'g', -1, 64))
	}
	if len(spec.Tests) == 0 {
		argv = append(argv, "all")
	} else {
		argv = append(argv, spec.Tests...)
	}
	return argv, bin, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// ErrTimeout is wrapped by Run's and Build's error when the time limit ran
// out and the processes were killed.
var ErrTimeout = errors.New("timed out")

// Run runs one harness as spec says and returns its measurements. The
// harness starts in a session of its own; when spec.Timeout (or ctx) ends
// first, the launcher gets SIGTERM and, a few seconds later, every process
// left in the session SIGKILL (errors.Is(err, ErrTimeout) then). A non-zero
// exit is an error that carries the end of the harness's stderr. The
// results parsed before a failure are returned with the error.
func Run(ctx context.Context, spec Spec) ([]Result, error) {
	argv, bin, err := command(spec)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() {
		return nil, fmt.Errorf("peers: %s is not built (run peers.Build or bench/peers/build.sh): %v", bin, err)
	}
	timeout := spec.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	out, runErr := runSession(ctx, timeout, argv)
	results, parseErr := Parse(bytes.NewReader(out.stdout))
	np := spec.NP
	if np == 0 {
		np = 2
	}
	for i := range results {
		if results[i].PEs == 0 && harnesses[spec.Harness].launcher != "" {
			results[i].PEs = np
		}
		if spec.Harness == SymheapC && results[i].Harness == OSH {
			results[i].Harness = SymheapC // osh_bench.c names itself osh
		}
	}
	cmd := strings.Join(argv, " ")
	switch {
	case runErr != nil:
		return results, fmt.Errorf("peers: %s: %w%s", cmd, runErr, tailText(out.stderr))
	case parseErr != nil:
		return results, fmt.Errorf("peers: %s: %w", cmd, parseErr)
	case len(results) == 0:
		return nil, fmt.Errorf("peers: %s printed no measurements%s", cmd, tailText(out.stderr))
	}
	return results, nil
}

// Measure runs one test of a harness at one size (ignored by tests without
// sizes, such as barrier_lat) and returns that figure: the building block
// for running ours and theirs alternately.
func Measure(ctx context.Context, spec Spec, test string, size int64) (Result, error) {
	spec.Tests = []string{test}
	spec.Sizes = []int64{size}
	rs, err := Run(ctx, spec)
	if err != nil {
		return Result{}, err
	}
	for _, r := range rs {
		if r.Metric == test {
			return r, nil
		}
	}
	return Result{}, fmt.Errorf("peers: %s %s printed no %s figure", spec.Harness, test, test)
}

// lastLine returns ": " and the last non-empty line of b, or "".
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
		return ": " + l
	}
	return ""
}

// tailText formats the last lines of a process's stderr for an error.
func tailText(b []byte) string {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return ""
	}
	const max = 2048
	if len(s) > max {
		s = "..." + s[len(s)-max:]
	}
	return "\nstderr:\n" + s
}
