package petest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/unix"
	"github.com/symheap/symheap/launch"
)

// skipMarker is the line a child prints when fn skipped the test, so that
// the parent can skip too; doneMarker the line it prints when fn returned
// (or the PE ended the test on purpose with Exit). A PE that exits with
// status 0 having printed neither ran nothing: its -test.run selected no
// test, or it left the test body early. The parent fails the test then.
const (
	skipMarker = "petest: this PE skipped the test"
	doneMarker = "petest: this PE ran the test body to its end"
)

// Run runs fn on n PEs and waits for them (package comment, steps 1-3). In
// the parent it fails the test if a PE fails, unless ExpectFailure is
// given, and returns the job's Result. In a child it runs fn and does not
// return.
func Run(t *testing.T, n int, fn func(t *testing.T), opts ...Option) launch.Result {
	t.Helper()
	j := Start(t, n, fn, opts...)
	if j.g == nil {
		return launch.Result{FirstFailed: -1}
	}
	res, err := j.wait()
	switch {
	case err != nil && !j.s.expectFailure:
		t.Fatalf("petest: %v\n%s", err, statusTable(res))
	case err == nil && j.s.expectFailure:
	case err == nil:
		if missing := j.unaccounted(); len(missing) > 0 {
			t.Fatalf("petest: job %s: PE %v exited with status 0 but did not run the test body to its end "+
				"(no test selected in the child, or an early os.Exit: end a PE on purpose with petest.Exit)\n%s",
				j.ID(), missing, statusTable(res))
		}
		if ranks := j.skipped(); len(ranks) > 0 {
			t.Skipf("petest: PE %v skipped the test (see the log above)", ranks)
		}
	}
	return res
}

// Job is a running job of PEs started by Start.
type Job struct {
	t   *testing.T
	s   settings
	g   *launch.Group // nil for an inert job (see Start)
	out *syncBuffer

	procs []proc // for the leftover check

	waited bool // Wait has been called
	res    launch.Result
	err    error
}

type proc struct {
	pid   int
	start uint64
}

// Start starts fn on n PEs and returns without waiting, for tests that act
// on the PEs while they run (kill one, signal them). The job is stopped
// and checked for leftovers in t.Cleanup. In a child, Start runs fn and
// does not return.
//
// In a child of one of its subtests, a test's own Start does nothing and
// returns an inert Job whose Wait returns a zero Result.
func Start(t *testing.T, n int, fn func(t *testing.T), opts ...Option) *Job {
	t.Helper()
	j := &Job{t: t, s: settings{timeout: DefaultTimeout}}
	for _, o := range opts {
		o(&j.s)
	}
	if target := os.Getenv(EnvTest); target != "" {
		switch {
		case target == t.Name():
			runChild(t, fn) // does not return
		case strings.HasPrefix(target, t.Name()+"/"):
			t.Logf("petest: in a child for %s: not starting PEs for %s", target, t.Name())
			return j
		default:
			t.Fatalf("petest: a child for %s runs %s: -test.run did not select the test", target, t.Name())
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("petest: %v", err)
	}
	j.out = new(syncBuffer)
	// A PE that fails where no failure is expected fails the test; the
	// launcher then stops the others with SIGQUIT, so that the log shows
	// where each of them was (a PE still starting, say), not only that it
	// was stopped.
	stop := syscall.SIGQUIT
	if j.s.expectFailure {
		stop = syscall.SIGTERM
	}
	g, err := launch.Start(context.Background(), launch.Options{
		N: n, Tag: true, Stdout: j.out, Stderr: j.out, Env: childEnv(&j.s, t.Name()), StopSignal: stop,
	}, exe, childArgs(t.Name())...)
	if err != nil {
		t.Fatalf("petest: %v", err)
	}
	j.g = g
	for _, pid := range g.Pids() {
		st, _ := unix.ProcessStartTime(pid) // 0 if already gone
		j.procs = append(j.procs, proc{pid, st})
	}
	t.Cleanup(j.cleanup)
	return j
}

// runChild is step 2 of the package comment.
func runChild(t *testing.T, fn func(t *testing.T)) {
	t.Helper()
	returned := false
	defer func() {
		if !returned && t.Skipped() {
			fmt.Println(skipMarker)
		}
	}()
	fn(t)
	returned = true
	fmt.Println(doneMarker)
	t.Logf("petest: PE %d of %d finished; ending the test here in the child so that "+
		"the code after petest.Run runs in the parent only (hence SKIP)", Rank(), Size())
	t.SkipNow()
}

// Pids returns the process ids of the PEs by rank.
func (j *Job) Pids() []int {
	if j.g == nil {
		return nil
	}
	return j.g.Pids()
}

// ID returns the job id (SYMHEAP_JOB of the PEs).
func (j *Job) ID() string {
	if j.g == nil {
		return ""
	}
	return j.g.Job()
}

// Kill sends sig to the PE of this rank.
func (j *Job) Kill(rank int, sig syscall.Signal) error {
	if j.g == nil {
		return errors.New("petest: inert job")
	}
	return j.g.SignalPE(rank, sig)
}

// Output returns what the PEs have written so far, each line tagged
// "[pe N] ".
func (j *Job) Output() string {
	if j.out == nil {
		return ""
	}
	return j.out.String()
}

// WaitOutput waits until count lines of the output contain text, for at
// most the job's timeout; it fails the test if they do not come, or if the
// job ends before.
func (j *Job) WaitOutput(text string, count int) {
	j.t.Helper()
	if j.g == nil {
		return
	}
	deadline := time.Now().Add(j.s.timeout)
	for {
		if j.out.count(text) >= count {
			return
		}
		select {
		case <-j.g.Done():
			if j.out.count(text) >= count {
				return
			}
			j.t.Fatalf("petest: job %s ended before %d lines said %q; output:\n%s", j.ID(), count, text, j.Output())
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			j.t.Fatalf("petest: waited %v for %d lines saying %q; output:\n%s", j.s.timeout, count, text, j.Output())
		}
	}
}

// Wait waits for the job to end and returns its Result; it fails the test
// only if the job times out. The caller judges the Result.
func (j *Job) Wait() launch.Result {
	j.t.Helper()
	res, _ := j.wait()
	return res
}

// wait is Wait with the job's error (step 3). Only the first call waits
// and logs; it must come from the test's goroutine.
func (j *Job) wait() (launch.Result, error) {
	j.t.Helper()
	if j.g == nil {
		return launch.Result{FirstFailed: -1}, nil
	}
	if j.waited {
		return j.res, j.err
	}
	j.waited = true
	timedOut := false
	timer := time.NewTimer(j.s.timeout)
	select {
	case <-j.g.Done():
	case <-timer.C:
		timedOut = true
		// Go PEs answer SIGQUIT with their goroutines' stacks.
		j.g.Signal(syscall.SIGQUIT)
		select {
		case <-j.g.Done():
		case <-time.After(2 * time.Second):
			j.g.Stop()
		}
	}
	timer.Stop()
	j.res, j.err = j.g.Wait()
	j.logOutput()
	if timedOut {
		j.t.Fatalf("petest: job %s timed out after %v (stacks in the output above)\n%s", j.ID(), j.s.timeout, statusTable(j.res))
	}
	return j.res, j.err
}

// logOutput logs the PEs' output; the test log shows it on failure or with
// -v.
func (j *Job) logOutput() {
	j.t.Helper()
	j.t.Logf("petest: job %s, %d PEs, ended in %v with status %d; output:\n%s",
		j.ID(), len(j.res.PEs), j.res.Elapsed.Round(time.Millisecond), j.res.Status, j.Output())
}

// skipped returns the ranks of the PEs that skipped the test.
func (j *Job) skipped() []int { return j.marked(skipMarker) }

// unaccounted returns the ranks of the PEs that said neither that they
// ran the test body to its end nor that they skipped it.
func (j *Job) unaccounted() []int {
	seen := make(map[int]bool)
	for _, r := range append(j.marked(doneMarker), j.marked(skipMarker)...) {
		seen[r] = true
	}
	var ranks []int
	for r := range j.res.PEs {
		if !seen[r] {
			ranks = append(ranks, r)
		}
	}
	return ranks
}

// marked returns the ranks of the PEs that printed the line marker.
func (j *Job) marked(marker string) []int {
	var ranks []int
	for _, l := range strings.Split(j.Output(), "\n") {
		rest, ok := strings.CutPrefix(l, "[pe ")
		if !ok {
			continue
		}
		rank, msg, _ := strings.Cut(rest, "] ")
		if msg == marker {
			r, _ := strconv.Atoi(rank)
			ranks = append(ranks, r)
		}
	}
	slices.Sort(ranks)
	return ranks
}

// Exit ends this PE's process with code, saying first that it reached
// the end of its part of the test on purpose: a test whose PEs leave
// without returning from the test body (to show what a vanished PE does
// to the others, say) ends them with Exit, not os.Exit, or the parent
// takes a PE that exits 0 for one that ran nothing.
func Exit(code int) {
	fmt.Println(doneMarker)
	os.Exit(code)
}

// cleanup stops the job if it still runs and checks that it left neither a
// process nor a /dev/shm file behind.
func (j *Job) cleanup() {
	j.g.Stop()
	<-j.g.Done()
	if !j.waited {
		j.res, j.err = j.g.Wait()
		j.logOutput()
	}
	for _, p := range j.procs {
		if p.start == 0 {
			continue
		}
		if st, err := unix.ProcessStartTime(p.pid); err == nil && st == p.start {
			if state, _ := unix.ProcessState(p.pid); state != 'Z' {
				j.t.Errorf("petest: PE pid %d of job %s still runs", p.pid, j.ID())
				unix.Kill(p.pid, syscall.SIGKILL)
			}
		}
	}
	left, err := launch.SegmentFiles(j.ID())
	if err != nil {
		j.t.Errorf("petest: %v", err)
	}
	if len(left) > 0 {
		j.t.Errorf("petest: job %s left %v in /dev/shm", j.ID(), left)
		launch.RemoveSegmentFiles(j.ID())
	}
}

func statusTable(res launch.Result) string {
	var b strings.Builder
	for _, pe := range res.PEs {
		note := ""
		if pe.Stopped {
			note = " (stopped by the launcher)"
		}
		fmt.Fprintf(&b, "  %v%s\n", pe, note)
	}
	return b.String()
}

// syncBuffer is the job's output, written by the launcher and read by the
// test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *syncBuffer) count(text string) int {
	n := 0
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, text) {
			n++
		}
	}
	return n
}
