package mutate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Outcome is how one go test run ended.
type Outcome int

const (
	// Passed: go test exited with status 0.
	Passed Outcome = iota
	// Failed: a test binary ran and failed (a test failed, panicked, or
	// timed out under go test's -timeout).
	Failed
	// BuildFailed: a package or its tests did not build or did not pass
	// vet, or go test failed before running any test binary.
	BuildFailed
	// Stopped: the runner stopped go test, at its hard deadline or on
	// an interrupt.
	Stopped
)

func (o Outcome) String() string {
	switch o {
	case Passed:
		return "passed"
	case Failed:
		return "failed"
	case BuildFailed:
		return "build failed"
	case Stopped:
		return "stopped"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// TestRun is the result of one go test run.
type TestRun struct {
	Outcome Outcome
	Failed  []string // the failing tests (Classify)
	Ran     []string // packages in which tests ran and passed
	Output  []byte   // go test's stdout and stderr
	Took    time.Duration
	Err     error // why it was Stopped, or why go test could not start
}

var (
	// A package whose build, or vet, failed.
	reBuildFailed = regexp.MustCompile(`(?m)^FAIL\s+\S+\s+\[(?:build|setup) failed\]`)
	// A test binary that ran and failed: "FAIL<tab>pkg<tab>1.23s".
	rePkgFailed = regexp.MustCompile(`(?m)^FAIL\s+\S+\s+[0-9.]+s\s*$`)
	// A failing test, in go test's own output or in the output of a PE
	// that petest relays, tagged "[pe N] ".
	reTestFailed = regexp.MustCompile(`^\s*(?:\[[^\]]*\]\s*)?--- FAIL: (\S+)`)
	reTimedOut   = regexp.MustCompile(`^(?:\[[^\]]*\]\s*)?panic: test timed out after`)
	reRunning    = regexp.MustCompile(`^\s+(\S+) \([^)]*\)$`)
	// A package whose selected tests passed: not "[no tests to run]".
	reRan = regexp.MustCompile(`(?m)^ok\s+(\S+)\s+[0-9.]+s\s*$`)
)

// Classify reads go test's output and exit status (nil for status 0) and
// returns the outcome, the failing tests and the packages in which tests
// ran and passed (not those with no test files, or none that -run
// selects). The failing tests are the "--- FAIL:" lines' names, the tests
// still running when go test's -timeout fired (marked "(timed out)"), and
// the packages that failed without naming a test; of a test and its
// subtests only the failing subtests are kept, as they say more.
func Classify(out []byte, exit error) (Outcome, []string, []string) {
	var ran []string
	for _, m := range reRan.FindAllSubmatch(out, -1) {
		ran = append(ran, string(m[1]))
	}
	if exit == nil {
		return Passed, nil, ran
	}
	if reBuildFailed.Match(out) {
		return BuildFailed, nil, ran
	}
	var names []string
	lines := strings.Split(string(out), "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if m := reTestFailed.FindStringSubmatch(l); m != nil {
			names = append(names, m[1])
			continue
		}
		if reTimedOut.MatchString(l) {
			// "panic: test timed out after 9m0s\n\trunning tests:\n\t\tTestX (9m0s)"
			for i+1 < len(lines) && strings.TrimSpace(lines[i+1]) == "running tests:" {
				i++
			}
			for i+1 < len(lines) {
				m := reRunning.FindStringSubmatch(lines[i+1])
				if m == nil {
					break
				}
				names = append(names, m[1]+" (timed out)")
				i++
			}
		}
	}
	pkgFailed := rePkgFailed.FindAll(out, -1)
	if len(names) == 0 && len(pkgFailed) == 0 {
		return BuildFailed, nil, ran
	}
	if len(names) == 0 {
		for _, l := range pkgFailed {
			names = append(names, "package "+strings.Fields(string(l))[1]+" (no test named)")
		}
	}
	return Failed, leaves(names), ran
}

// leaves drops duplicates and every name that has a subtest in names (a
// name is its first word: "TestA (timed out)" is TestA).
func leaves(names []string) []string {
	base := func(n string) string { b, _, _ := strings.Cut(n, " "); return b }
	var out []string
	for _, n := range names {
		if slices.Contains(out, n) {
			continue
		}
		if slices.ContainsFunc(names, func(o string) bool { return strings.HasPrefix(base(o), base(n)+"/") }) {
			continue
		}
		out = append(out, n)
	}
	return out
}

// Runner runs go test in a directory, one run at a time.
type Runner struct {
	Dir string
	// Limit is how long a run may take, building included; the runner
	// then stops it. go test's own -timeout is set a tenth below, so that
	// a test that hangs normally fails with go test's stack dump (which
	// names it) before the runner has to step in.
	Limit time.Duration
	// Grace is how long a stopped run gets between SIGINT and SIGKILL.
	Grace time.Duration
	// Stream, if set, gets go test's output as it comes.
	Stream io.Writer
}

// Test runs the selection. When ctx is done or the limit passes, go test
// and its test binaries are sent SIGINT, then SIGKILL after Grace: go test
// runs in a process group of its own (so that a terminal's Ctrl-C reaches
// only the runner, which decides), and the runner signals that group.
// The PEs that tests start run in groups of their own and die with their
// test binary (launch: Pdeathsig).
func (r *Runner) Test(ctx context.Context, sel Selection) TestRun {
	start := time.Now()
	goTimeout := r.Limit - r.Limit/10
	cmd := exec.Command("go", sel.Args(goTimeout.String())...)
	cmd.Dir = r.Dir
	var buf bytes.Buffer
	var w io.Writer = &buf
	if r.Stream != nil {
		w = io.MultiWriter(&buf, r.Stream)
	}
	// One writer for both: os/exec then calls it from one goroutine at a
	// time.
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A process that inherited the output pipe and outlived go test must
	// not hold Wait forever.
	cmd.WaitDelay = r.Grace
	if err := cmd.Start(); err != nil {
		return TestRun{Outcome: BuildFailed, Err: fmt.Errorf("starting go test: %w", err), Took: time.Since(start)}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	limit := time.NewTimer(r.Limit)
	defer limit.Stop()
	var exit, stopped error
	select {
	case exit = <-done:
	case <-ctx.Done():
		stopped = fmt.Errorf("interrupted after %v", time.Since(start).Round(time.Second))
		exit = r.stop(cmd.Process.Pid, done)
	case <-limit.C:
		stopped = fmt.Errorf("still running after %v: stopped", r.Limit)
		exit = r.stop(cmd.Process.Pid, done)
	}
	run := TestRun{Output: buf.Bytes(), Took: time.Since(start)}
	if stopped != nil {
		run.Outcome, run.Err = Stopped, stopped
		return run
	}
	var ee *exec.ExitError
	if exit != nil && !errors.As(exit, &ee) {
		run.Outcome, run.Err = BuildFailed, fmt.Errorf("go test: %w", exit)
		return run
	}
	run.Outcome, run.Failed, run.Ran = Classify(run.Output, exit)
	return run
}

// stop sends SIGINT to the process group pgid, then SIGKILL if it has not
// exited after Grace, and returns the result of Wait.
func (r *Runner) stop(pgid int, done <-chan error) error {
	syscall.Kill(-pgid, syscall.SIGINT)
	select {
	case err := <-done:
		return err
	case <-time.After(r.Grace):
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	return <-done
}
