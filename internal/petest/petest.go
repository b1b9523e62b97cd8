// Package petest runs a test function on real PEs: it re-executes the test
// binary N times as one symheap job (through package launch, so with the
// same environment contract as shrun) and each PE runs the function.
//
//	func TestBarrier(t *testing.T) {
//		petest.Run(t, 4, func(t *testing.T) {
//			pe, err := symheap.Init(symheap.Config{})
//			...
//		}, petest.Heap("64m"))
//	}
//
// # How it works
//
//  1. In the test process (the parent), Run starts N copies of the test
//     binary with -test.run selecting exactly the calling test (each level
//     of a subtest name anchored and quoted), -test.v and -test.count=1, and
//     with SYMHEAP_PETEST set to the test's name.
//  2. In a copy (a child), the same test function runs up to the same Run
//     call, which finds SYMHEAP_PETEST naming its test and calls fn(t). The
//     child's own testing framework reports fn's failures and sets the
//     child's exit status. When fn returns, Run ends the child's test with
//     t.SkipNow, so that the code after Run executes in the parent only (a
//     child test that passed is therefore reported as skipped in its own
//     output); fn's failures still make the child fail.
//  3. The parent waits for the job (Timeout, 60 s by default; on timeout it
//     first sends SIGQUIT, so that every PE prints its goroutines' stacks),
//     logs the PEs' output tagged "[pe N] " (shown on failure or with -v),
//     and fails the test naming the first PE that failed and its status. If
//     the PEs skip (fn called t.Skip), the parent skips too. When a PE
//     fails in a test that does not ExpectFailure, the launcher stops the
//     others with SIGQUIT rather than SIGTERM, so their stacks show where
//     they were (still starting, say, or waiting for the PE that failed).
//
// Everything the test function does before Run happens in every child
// too; so do subtests started before Run. Keep Run first, or alone. When
// Run is called in a subtest, the enclosing test goes on in the child after
// the subtest has ended there: guard what only the parent may do after
// its subtests with IsChild.
//
// For tests that act on running PEs, Start returns a Job:
//
//	j := petest.Start(t, 3, func(t *testing.T) {
//		fmt.Println("ready")
//		time.Sleep(time.Hour)
//	}, petest.ExpectFailure())
//	j.WaitOutput("ready", 3)
//	j.Kill(1, syscall.SIGKILL)
//	res := j.Wait() // res.Status == 137, res.FirstFailed == 1
//
// Every job is stopped, if it still runs, and checked in t.Cleanup: no PE
// may be left running and no file of the job left in /dev/shm.
//
// Children get none of the parent's test flags but -test.short and
// -test.gocoverdir: a child that wrote -test.coverprofile, a CPU profile
// or a trace would overwrite the parent's. Coverage counters of the
// children go to the parent's -test.gocoverdir, where `go test -cover`
// merges them with the parent's, so code that only PEs run is counted.
// -race needs nothing: the children are the same binary. Children get
// GORACE=atexit_sleep_ms=0 added, or each would wait a second before
// exiting under -race.
package petest

import (
	"cmp"
	"flag"
	"fmt"
	"math"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/symheap/symheap/internal/config"
)

// EnvTest marks a child: it holds the name of the test the child runs.
const EnvTest = "SYMHEAP_PETEST"

// DefaultTimeout bounds a job unless the Timeout option says otherwise.
const DefaultTimeout = 60 * time.Second

// Option adjusts a job.
type Option func(*settings)

type settings struct {
	env           []string
	timeout       time.Duration
	expectFailure bool
}

// Env adds "KEY=value" entries to every PE's environment. Empty strings
// are ignored, so that an optional entry can be passed as a variable that
// may be empty.
func Env(kv ...string) Option {
	return func(s *settings) {
		for _, e := range kv {
			if e != "" {
				s.env = append(s.env, e)
			}
		}
	}
}

// Heap sets the symmetric heap size of every PE (SHMEM_SYMMETRIC_SIZE).
func Heap(size string) Option { return Env(config.EnvHeap + "=" + size) }

// Allocator chooses the memheap component (SYMHEAP_ALLOCATOR).
func Allocator(name string) Option { return Env(config.EnvAllocator + "=" + name) }

// OffsetMode makes the PEs work without the same-address mapping
// (SYMHEAP_OFFSET_MODE=1).
func OffsetMode() Option { return Env(config.EnvOffsetMode + "=1") }

// Timeout bounds the job; past it the test fails.
func Timeout(d time.Duration) Option {
	return func(s *settings) { s.timeout = d }
}

// ExpectFailure is for tests in which a PE is meant to fail or die: Run
// returns the job's Result instead of failing the test, and the caller
// checks it. A timeout still fails the test.
func ExpectFailure() Option {
	return func(s *settings) { s.expectFailure = true }
}

// IsChild reports whether this process is a PE started by petest.
func IsChild() bool { return os.Getenv(EnvTest) != "" && os.Getenv(config.EnvPE) != "" }

// Rank returns this PE's rank, or -1 outside a job.
func Rank() int { return envInt(config.EnvPE) }

// Size returns the number of PEs of the job, or -1 outside a job.
func Size() int { return envInt(config.EnvNPES) }

func envInt(key string) int {
	n, err := strconv.Atoi(os.Getenv(key))
	if err != nil {
		return -1
	}
	return n
}

// runPattern is the -test.run value that selects exactly the test called
// name: -test.run matches each level of a test name (split at '/') with the
// pattern's element at the same level.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// passedFlags are the test flags a child inherits from the parent. All
// others stay behind: output files (-test.coverprofile, -test.cpuprofile,
// -test.trace, ...) would be overwritten by every child, -test.paniconexit0
// would turn a PE's os.Exit(0) into a panic, and -test.count, -test.cpu,
// -test.shuffle, -test.failfast concern the parent's schedule.
var passedFlags = []string{"test.short", "test.gocoverdir"}

// childArgs returns the arguments of a child that runs test name.
func childArgs(name string) []string {
	args := []string{"-test.run=" + runPattern(name), "-test.v", "-test.count=1"}
	for _, name := range passedFlags {
		f := flag.Lookup(name)
		if f == nil || f.Value.String() == f.DefValue {
			continue
		}
		args = append(args, fmt.Sprintf("-%s=%s", name, f.Value.String()))
	}
	return args
}

// childEnv returns the environment entries petest adds for a child of test
// name, after the caller's.
func childEnv(s *settings, name string) []string {
	race := os.Getenv("GORACE")
	for _, kv := range s.env {
		if v, ok := strings.CutPrefix(kv, "GORACE="); ok {
			race = v
		}
	}
	env := append([]string(nil), s.env...)
	return append(env, EnvTest+"="+name, "GORACE="+strings.TrimSpace(race+" atexit_sleep_ms=0"))
}

// Allocs is what AllocsPerRun measured: allocations per call of f, and
// where they were made.
type Allocs struct {
	PerRun float64
	// Where names the allocating calls of the try counted, the most
	// frequent first (a function outside the runtime and the line, then
	// its callers), at most three; empty when PerRun is 0.
	Where []string
}

// String reads "N allocations per call" and, when there are any, where.
func (a Allocs) String() string {
	s := fmt.Sprintf("%.2f allocations per call", a.PerRun)
	if len(a.Where) > 0 {
		s += ", at " + strings.Join(a.Where, "; ")
	}
	return s
}

// AllocsPerRun is testing.AllocsPerRun for a PE of a job: the fewest
// allocations per call of f over tries measurements of runs calls each,
// and where they were made. testing.AllocsPerRun counts every allocation
// of the process, and on a loaded machine the runtime allocates in the
// background of a PE that waits (its monitor starting a thread for a P it
// took back from a system call, its scavenger's timers), often enough to
// show in every try. So a try that counts any allocation counts again
// from a memory profile of every allocation, leaving out the runtime's
// own: an allocation of f itself shows in every try. Every PE calls f the
// same number of times, tries*(runs+1), so f may be collective.
func AllocsPerRun(tries, runs int, f func()) Allocs {
	least := Allocs{PerRun: math.Inf(1)}
	for range tries {
		if a := allocsPerRun(runs, f); a.PerRun < least.PerRun {
			least = a
		}
	}
	return least
}

// allocsPerRun is one try of AllocsPerRun: runs+1 calls of f, the first
// a warm-up, with every allocation profiled.
func allocsPerRun(runs int, f func()) Allocs {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // as testing.AllocsPerRun
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = old }()
	f() // warm-up
	var m0, m1 runtime.MemStats
	runtime.GC() // publishes the profile of what came before
	before := ownAllocs()
	runtime.ReadMemStats(&m0)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&m1)
	if m1.Mallocs == m0.Mallocs {
		return Allocs{}
	}
	runtime.GC()
	after := ownAllocs()
	var total int64
	type site struct {
		where string
		n     int64
	}
	var sites []site
	for stack, n := range after {
		if d := n - before[stack]; d > 0 {
			total += d
			sites = append(sites, site{describe(stack), d})
		}
	}
	slices.SortFunc(sites, func(a, b site) int { return cmp.Compare(b.n, a.n) })
	a := Allocs{PerRun: float64(total) / float64(runs)}
	for _, s := range sites[:min(3, len(sites))] {
		a.Where = append(a.Where, fmt.Sprintf("%s (%d)", s.where, s.n))
	}
	return a
}

// ownAllocs counts the objects the memory profile says were allocated,
// by call stack, but for the runtime's own (stacks with no function
// outside package runtime, and its thread creation, allocm) and this
// count's own.
func ownAllocs() map[[32]uintptr]int64 {
	n, _ := runtime.MemProfile(nil, true)
	recs := make([]runtime.MemProfileRecord, n+64)
	n, _ = runtime.MemProfile(recs, true)
	counts := make(map[[32]uintptr]int64, n)
	for _, r := range recs[:n] {
		if !runtimeOwn(r.Stack()) {
			counts[r.Stack0] += r.AllocObjects
		}
	}
	return counts
}

// runtimeOwn reports whether stack allocates for the runtime itself (a
// background goroutine of the runtime, or a new thread, M), or for
// ownAllocs.
func runtimeOwn(stack []uintptr) bool {
	frames := runtime.CallersFrames(stack)
	own := true
	for {
		fr, more := frames.Next()
		switch fr.Function {
		case "runtime.allocm", "runtime.newm", "github.com/symheap/symheap/internal/petest.ownAllocs":
			return true
		}
		if !strings.HasPrefix(fr.Function, "runtime.") {
			own = false
		}
		if !more {
			return own
		}
	}
}

// describe names the first two functions of stack outside package
// runtime, with their lines: the allocating call and its caller.
func describe(stack [32]uintptr) string {
	frames := runtime.CallersFrames(stack[:])
	var names []string
	for len(names) < 2 {
		fr, more := frames.Next()
		if fr.Function != "" && !strings.HasPrefix(fr.Function, "runtime.") {
			names = append(names, fmt.Sprintf("%s:%d", fr.Function[strings.LastIndex(fr.Function, "/")+1:], fr.Line))
		}
		if !more {
			break
		}
	}
	return strings.Join(names, " < ")
}
