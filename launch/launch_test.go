package launch_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/segment"
	"github.com/symheap/symheap/internal/unix"
	"github.com/symheap/symheap/launch"
)

// start starts n PEs of the helper with spec and registers a clean-up that
// stops and waits for them should the test end early.
func start(t *testing.T, opts launch.Options, spec string) (*launch.Group, *outBuf) {
	t.Helper()
	out := new(outBuf)
	opts.Env = append(opts.Env, helperEnv+"="+spec)
	if opts.Stdout == nil {
		opts.Stdout, opts.Stderr, opts.Tag = out, out, true
	}
	g, err := launch.Start(context.Background(), opts, self(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		g.Stop()
		res, _ := g.Wait()
		noneAlive(t, res)
		noShmLeft(t, res.Job)
	})
	return g, out
}

func TestAllExitZero(t *testing.T) {
	t.Parallel()
	res, err := launch.Run(context.Background(), launch.Options{N: 3, Env: []string{helperEnv + "=exit:0"}}, self(t))
	if err != nil || res.Status != 0 || res.FirstFailed != -1 {
		t.Fatalf("Run = %+v, %v; want status 0, no failure", res, err)
	}
	if len(res.PEs) != 3 {
		t.Fatalf("%d PE statuses, want 3", len(res.PEs))
	}
	for i, pe := range res.PEs {
		if pe.Rank != i || pe.Pid <= 0 || pe.ExitCode != 0 || pe.Signal != 0 || pe.Stopped || pe.Failed() {
			t.Errorf("PE %d: %+v", i, pe)
		}
	}
	if !strings.HasPrefix(res.Job, "j"+strconv.Itoa(os.Getpid())+"-") {
		t.Errorf("job id %q: want j<pid>-<hex>", res.Job)
	}
	noneAlive(t, res)
}

// TestEnvironment checks the job contract, including the scrubbing of the
// variables of other launchers and of an outer job.
func TestEnvironment(t *testing.T) {
	for _, kv := range []string{"OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=9", "PMI_RANK=5", "PMI_SIZE=9",
		"PMIX_RANK=5", "SLURM_PROCID=5", "SLURM_NTASKS=9", "SYMHEAP_JOB=outer", "SYMHEAP_PE=5", "SYMHEAP_NPES=9",
		"SLURM_JOB_ID=77", "LAUNCH_TEST_KEPT=yes", "SYMHEAP_ALLOCATOR=outer-alloc"} {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	out := new(outBuf)
	res, err := launch.Run(context.Background(), launch.Options{
		N: 3, Heap: "64m", Allocator: "buddy", Job: "envtest-" + launch.NewJobID(),
		Env:    []string{helperEnv + "=env", "EXTRA=1", "SYMHEAP_OFFSET_MODE=1", "SYMHEAP_PE=42"},
		Stdout: out, Tag: true,
	}, self(t))
	if err != nil {
		t.Fatal(err)
	}
	for rank := range 3 {
		env := map[string]string{}
		prefix := fmt.Sprintf("[pe %d] env ", rank)
		for _, l := range out.Lines() {
			if kv, ok := strings.CutPrefix(l, prefix); ok {
				k, v, _ := strings.Cut(kv, "=")
				if _, dup := env[k]; dup {
					t.Errorf("PE %d: %s appears twice", rank, k)
				}
				env[k] = v
			}
		}
		want := map[string]string{
			"SYMHEAP_JOB": res.Job, "SYMHEAP_PE": strconv.Itoa(rank), "SYMHEAP_NPES": "3",
			"SHMEM_SYMMETRIC_SIZE": "64m", "SYMHEAP_ALLOCATOR": "buddy", "EXTRA": "1",
			"SYMHEAP_OFFSET_MODE": "1", "SLURM_JOB_ID": "77", "LAUNCH_TEST_KEPT": "yes",
			"SYMHEAP_LAUNCHER": strconv.Itoa(os.Getpid()),
		}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("PE %d: %s=%q, want %q", rank, k, env[k], v)
			}
		}
		for _, k := range []string{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
			"PMIX_RANK", "SLURM_PROCID", "SLURM_NTASKS"} {
			if v, ok := env[k]; ok {
				t.Errorf("PE %d: inherited %s=%s was not removed", rank, k, v)
			}
		}
	}
}

// TestKill9 is the central supervision test: one PE of a group of
// sleepers is killed with SIGKILL from outside; the job must end because
// of it (the others stopped by the launcher's SIGTERM; a hang meets the
// test's timeout) with status 137 naming that PE, leave no process and no /dev/shm
// file behind.
func TestKill9(t *testing.T) {
	t.Parallel()
	job := launch.NewJobID()
	seg := segment.Path(unix.Getuid(), job)
	decoy := seg + "x" // another job's name: must survive
	for _, f := range []string{seg, seg + "-lock", seg + ".tmp", decoy} {
		if err := os.WriteFile(f, []byte("fake"), 0o600); err != nil {
			t.Fatal(err)
		}
		// A shared flock, as an attached PE holds, so that a `symheap
		// clean` beside this test (another package's) does not take the
		// files for stale segments and remove them.
		fd, err := unix.Open(f, unix.ORdonly, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		if err := unix.Flock(fd, unix.LockShared, true); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.Remove(decoy) })

	g, out := start(t, launch.Options{N: 3, Job: job}, "sleep")
	out.waitLines(t, "ready", 3)
	var procs []proc
	for _, pid := range g.Pids() {
		procs = append(procs, procOf(t, pid))
	}
	victim := g.Pids()[1]
	killed := time.Now()
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	res, err := g.Wait()
	took := time.Since(killed)
	t.Logf("job ended %v after kill -9 of PE 1: %v", took, err)
	if res.Status != 137 || res.FirstFailed != 1 || !errors.Is(err, launch.ErrFailed) {
		t.Errorf("status %d, first failed %d, err %v; want 137, 1, ErrFailed", res.Status, res.FirstFailed, err)
	}
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("PE 1 (pid %d) killed by signal 9", victim)) {
		t.Errorf("error %v does not name PE 1 and its signal", err)
	}
	if pe := res.PEs[1]; pe.Signal != syscall.SIGKILL || pe.Stopped || pe.Status() != 137 {
		t.Errorf("PE 1: %+v", pe)
	}
	for _, r := range []int{0, 2} {
		if pe := res.PEs[r]; pe.Signal != syscall.SIGTERM || !pe.Stopped {
			t.Errorf("PE %d: %+v; want stopped by SIGTERM", r, pe)
		}
	}
	waitGone(t, 0, procs...)
	noShmLeft(t, job)
	if len(res.Removed) != 3 {
		t.Errorf("removed %v, want the segment and its 2 helper files", res.Removed)
	}
	if _, err := os.Stat(decoy); err != nil {
		t.Errorf("the file of another job was removed: %v", err)
	}
}

// TestStopSignal: with StopSignal SIGQUIT, the PEs a failure stops get
// SIGQUIT instead of SIGTERM, so that a Go PE prints where its goroutines
// were as it ends; the job's status is still the failing PE's.
func TestStopSignal(t *testing.T) {
	t.Parallel()
	g, out := start(t, launch.Options{N: 2, StopSignal: syscall.SIGQUIT}, "0=usr1exit:4,1=sleep")
	out.waitLines(t, "ready", 2)
	if err := g.SignalPE(0, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	res, err := g.Wait()
	if res.Status != 4 || res.FirstFailed != 0 || !errors.Is(err, launch.ErrFailed) {
		t.Fatalf("status %d, first failed %d, err %v; want 4 from PE 0", res.Status, res.FirstFailed, err)
	}
	// The Go runtime answers SIGQUIT with every goroutine's stack and
	// exit status 2.
	if pe := res.PEs[1]; !pe.Stopped || pe.ExitCode != 2 {
		t.Errorf("PE 1: %+v; want stopped, exit status 2 after SIGQUIT", pe)
	}
	if o := out.String(); !strings.Contains(o, "[pe 1] SIGQUIT: quit") || !strings.Contains(o, "launch_test.helper(") {
		t.Errorf("PE 1 printed no stacks; output:\n%s", o)
	}
}

// TestFirstFailure: the job's status is that of the first PE to fail, not
// of a later one, and neither a PE that exited 0 before nor the PEs it
// stopped count as failures.
func TestFirstFailure(t *testing.T) {
	t.Parallel()
	g, out := start(t, launch.Options{N: 4}, "0=after:10000:5,1=sleep,2=usr1exit:7,3=exit:0")
	out.waitLines(t, "ready", 2)
	// Wait until the launcher has seen PE 3 end: a probe with signal 0
	// fails with ErrProcessDone from then on.
	for deadline := time.Now().Add(10 * time.Second); g.SignalPE(3, syscall.Signal(0)) == nil; {
		if time.Now().After(deadline) {
			t.Fatal("PE 3 did not end")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := g.SignalPE(2, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	res, err := g.Wait()
	if res.Status != 7 || res.FirstFailed != 2 || !errors.Is(err, launch.ErrFailed) {
		t.Fatalf("status %d, first failed %d, err %v; want 7 from PE 2", res.Status, res.FirstFailed, err)
	}
	if pe := res.PEs[3]; pe.ExitCode != 0 || pe.Failed() || pe.Stopped {
		t.Errorf("PE 3 exited 0 by itself: %+v", pe)
	}
	for _, r := range []int{0, 1} {
		if pe := res.PEs[r]; !pe.Stopped || pe.Signal != syscall.SIGTERM {
			t.Errorf("PE %d: %+v; want stopped by SIGTERM", r, pe)
		}
	}
}

// TestEscalation: PEs that ignore SIGTERM are killed after the grace
// period, and the job still ends within a second of the failure.
func TestEscalation(t *testing.T) {
	t.Parallel()
	g, out := start(t, launch.Options{N: 3}, "ignoreterm")
	out.waitLines(t, "ready", 3)
	failed := time.Now()
	if err := g.SignalPE(0, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	res, err := g.Wait()
	took := time.Since(failed)
	if res.Status != 137 || res.FirstFailed != 0 {
		t.Fatalf("status %d, first failed %d (%v); want 137 from PE 0", res.Status, res.FirstFailed, err)
	}
	for _, r := range []int{1, 2} {
		if pe := res.PEs[r]; pe.Signal != syscall.SIGKILL || !pe.Stopped {
			t.Errorf("PE %d: %+v; want stopped by SIGKILL", r, pe)
		}
	}
	// SIGKILL follows SIGTERM after the grace period, not before: a lower
	// bound, which load cannot break. No upper bound: that the SIGKILL
	// came at all (the PEs ignore SIGTERM) is checked above, and a job it
	// never ends meets the test's timeout.
	if took < launch.DefaultGrace {
		t.Errorf("job ended %v after the failure, before the grace period %v", took, launch.DefaultGrace)
	}
	t.Logf("job ended %v after the failure (grace %v)", took, launch.DefaultGrace)
	if err := g.SignalPE(1, syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("SignalPE after the end: %v, want os.ErrProcessDone", err)
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	g, out := start(t, launch.Options{N: 2, Timeout: 300 * time.Millisecond}, "sleep")
	res, err := g.Wait()
	if !errors.Is(err, launch.ErrTimeout) || !res.TimedOut || res.Status != launch.StatusTimeout || res.FirstFailed != -1 {
		t.Fatalf("Wait = %+v, %v; want a timeout, status 124", res, err)
	}
	if !strings.Contains(err.Error(), "300ms") {
		t.Errorf("error %q does not give the timeout", err)
	}
	// Ended by the timeout (TimedOut, status 124 above), not a speed
	// check: the time is logged.
	t.Logf("timed-out job took %v", res.Elapsed)
	_ = out
}

func TestCancelAndStop(t *testing.T) {
	t.Parallel()
	t.Run("context", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		out := new(outBuf)
		g, err := launch.Start(ctx, launch.Options{N: 2, Env: []string{helperEnv + "=sleep"}, Stdout: out}, self(t))
		if err != nil {
			t.Fatal(err)
		}
		out.waitLines(t, "ready", 2)
		cancel()
		res, err := g.Wait()
		if !errors.Is(err, context.Canceled) || res.Status != launch.StatusStopped || res.FirstFailed != -1 {
			t.Fatalf("Wait = %+v, %v; want context.Canceled, status %d", res, err, launch.StatusStopped)
		}
		noneAlive(t, res)
	})
	t.Run("stop", func(t *testing.T) {
		t.Parallel()
		g, out := start(t, launch.Options{N: 2}, "sleep")
		out.waitLines(t, "ready", 2)
		g.Stop()
		g.Stop() // idempotent
		res, err := g.Wait()
		if !errors.Is(err, launch.ErrStopped) || res.Status != launch.StatusStopped {
			t.Fatalf("Wait = %+v, %v; want ErrStopped", res, err)
		}
		select {
		case <-g.Done():
		default:
			t.Error("Done not closed after Wait")
		}
	})
}

// TestOutput: with Tag, every line of every PE arrives whole, prefixed with
// its rank, in the order the PE wrote it, on the stream it was written to.
func TestOutput(t *testing.T) {
	t.Parallel()
	const n, lines = 4, 300
	var stdout, stderr outBuf
	_, err := launch.Run(context.Background(), launch.Options{
		N: n, Tag: true, Stdout: &stdout, Stderr: &stderr, Env: []string{helperEnv + "=lines:" + strconv.Itoa(lines)},
	}, self(t))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^\[pe (\d+)\] (out|err) line (\d+) of pe (\d+) ?(x*)$`)
	for _, c := range []struct {
		name string
		buf  *outBuf
	}{{"out", &stdout}, {"err", &stderr}} {
		next := make([]int, n)
		for _, l := range c.buf.Lines() {
			m := re.FindStringSubmatch(l)
			if m == nil || m[1] != m[4] || m[2] != c.name {
				t.Fatalf("std%s: mangled line %q", c.name, l)
			}
			pe, _ := strconv.Atoi(m[1])
			i, _ := strconv.Atoi(m[3])
			if i != next[pe] || (c.name == "out" && len(m[5]) != i%50) {
				t.Fatalf("std%s: PE %d line %d came as %q, want line %d", c.name, pe, i, l, next[pe])
			}
			next[pe]++
		}
		for pe, got := range next {
			if got != lines {
				t.Errorf("std%s: PE %d: %d lines, want %d", c.name, pe, got, lines)
			}
		}
	}
}

// TestUntaggedOutput: without Tag, lines still arrive whole and as written.
func TestUntaggedOutput(t *testing.T) {
	t.Parallel()
	var out outBuf
	if _, err := launch.Run(context.Background(), launch.Options{
		N: 2, Stdout: &out, Env: []string{helperEnv + "=lines:50"},
	}, self(t)); err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^out line \d+ of pe [01] x*$`)
	lines := out.Lines()
	if len(lines) != 100 {
		t.Fatalf("%d lines, want 100", len(lines))
	}
	for _, l := range lines {
		if !re.MatchString(l) {
			t.Fatalf("mangled line %q", l)
		}
	}
}

func TestSignalForwarding(t *testing.T) {
	t.Parallel()
	t.Run("handled", func(t *testing.T) {
		t.Parallel()
		g, out := start(t, launch.Options{N: 3}, "waitsig")
		out.waitLines(t, "ready", 3)
		c := make(chan os.Signal, 1)
		g.Forward(c)
		c <- syscall.SIGUSR1
		res, err := g.Wait()
		if err != nil || res.Status != 0 {
			t.Fatalf("Wait = %+v, %v; want every PE to handle SIGUSR1 and exit 0", res, err)
		}
		out.waitLines(t, "got user defined signal 1", 3)
	})
	t.Run("fatal", func(t *testing.T) {
		t.Parallel()
		g, out := start(t, launch.Options{N: 2}, "sleep")
		out.waitLines(t, "ready", 2)
		if err := g.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		res, err := g.Wait()
		if res.Status != 130 || !errors.Is(err, launch.ErrFailed) {
			t.Fatalf("Wait = %+v, %v; want status 130 (SIGINT)", res, err)
		}
		for _, pe := range res.PEs {
			// The PE that died first set off the stop, and the SIGTERM
			// of the stop may beat the SIGINT pending in another PE.
			if pe.Signal != syscall.SIGINT && (pe.Rank == res.FirstFailed || !pe.Stopped) {
				t.Errorf("PE %d: %+v; want killed by the forwarded SIGINT", pe.Rank, pe)
			}
		}
	})
}

// TestProcessGroups: each PE leads a process group of its own, and what a
// PE leaves running in it when it ends is killed.
func TestProcessGroups(t *testing.T) {
	t.Parallel()
	g, out := start(t, launch.Options{N: 2}, "0=spawn,1=sleep")
	out.waitLines(t, "ready", 1)
	for _, pid := range g.Pids()[1:] {
		if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
			t.Errorf("PE pid %d: process group %d, %v; want its own", pid, pgid, err)
		}
	}
	out.waitLines(t, "", 2)
	var grandchild int
	for _, l := range out.Lines() {
		if s, ok := strings.CutPrefix(l, "[pe 0] grandchild "); ok {
			grandchild, _ = strconv.Atoi(s)
		}
	}
	if grandchild == 0 {
		t.Fatalf("no grandchild pid in output:\n%s", out)
	}
	// PE 0 has ended (or is about to): the grandchild it left in its
	// process group must go too, while the job still runs (PE 1 sleeps
	// until the Stop below, so only PE 0's end can have killed it).
	gc := proc{pid: grandchild}
	gc.start, _ = unix.ProcessStartTime(grandchild)
	took := waitGone(t, hangLimit, gc)
	t.Logf("grandchild gone %v later", took)
	g.Stop()
	g.Wait()
}

// TestPdeathsig: the PEs die with their launcher, even when it is killed
// with SIGKILL and cannot stop them itself.
func TestPdeathsig(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(self(t))
	cmd.Env = append(os.Environ(), helperEnv+"=launcher")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var pids []int
	ready := 0
	sc := bufio.NewScanner(stdout)
	for (pids == nil || ready < 2) && sc.Scan() {
		l := sc.Text()
		if f := strings.Fields(l); len(f) == 3 && f[0] == "pids" {
			for _, s := range f[1:] {
				pid, _ := strconv.Atoi(s)
				pids = append(pids, pid)
			}
		}
		if strings.HasSuffix(l, "] ready") {
			ready++
		}
	}
	if pids == nil || ready < 2 {
		t.Fatalf("launcher ended early: %v", sc.Err())
	}
	var procs []proc
	for _, pid := range pids {
		procs = append(procs, procOf(t, pid))
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// The PEs sleep until stopped and their launcher cannot stop them:
	// only the parent-death signal can end them.
	took := waitGone(t, hangLimit, procs...)
	t.Logf("PEs gone %v after SIGKILL of their launcher", took)
}

// TestBuild runs Go packages, named by directory or by import path, and
// rejects what is neither an executable nor a main package.
func TestBuild(t *testing.T) {
	t.Parallel()
	for _, prog := range []string{"./testdata/hello", "github.com/symheap/symheap/launch/testdata/hello"} {
		t.Run(strings.ReplaceAll(prog, "/", "_"), func(t *testing.T) {
			t.Parallel()
			var out outBuf
			res, err := launch.Run(context.Background(), launch.Options{N: 2, Tag: true, Stdout: &out}, prog, "a b", "c")
			if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			lines := out.Lines()
			slices.Sort(lines)
			want := []string{`[pe 0] args ["a b" "c"]`, "[pe 0] hello from pe 0 of 2", `[pe 1] args ["a b" "c"]`, "[pe 1] hello from pe 1 of 2"}
			if !slices.Equal(lines, want) {
				t.Errorf("output %q, want %q", lines, want)
			}
			noneAlive(t, res)
		})
	}
	t.Run("path", func(t *testing.T) {
		t.Parallel()
		if _, err := exec.LookPath("true"); err != nil {
			t.Skip("no true(1) in PATH")
		}
		if res, err := launch.Run(context.Background(), launch.Options{N: 2}, "true"); err != nil || res.Status != 0 {
			t.Errorf("Run(true) = %+v, %v", res, err)
		}
	})
	t.Run("errors", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		plain := filepath.Join(dir, "plain")
		os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644)
		for prog, want := range map[string]string{
			plain:                               "not executable",
			dir:                                 "without .go files",
			"./no/such/dir":                     "not a Go package",
			"github.com/symheap/symheap/launch": "not a main package",
			"":                                  "empty program",
		} {
			_, err := launch.Run(context.Background(), launch.Options{N: 1}, prog)
			if !errors.Is(err, launch.ErrProgram) || !strings.Contains(err.Error(), want) {
				t.Errorf("Run(%q) error %v, want ErrProgram saying %q", prog, err, want)
			}
		}
	})
}

func TestBadOptions(t *testing.T) {
	t.Parallel()
	for _, o := range []launch.Options{
		{N: 0}, {N: -1}, {N: launch.MaxPEs + 1}, {N: 1, Heap: "12q"}, {N: 1, Heap: "-1"},
		{N: 1, Env: []string{"NOEQUALS"}}, {N: 1, Env: []string{"=x"}}, {N: 1, Timeout: -time.Second},
		{N: 1, StopSignal: syscall.SIGKILL}, {N: 1, StopSignal: syscall.SIGUSR1},
	} {
		_, err := launch.Run(context.Background(), o, "/bin/true")
		if !errors.Is(err, errs.ErrBadConfig) {
			t.Errorf("Run(%+v): %v, want ErrBadConfig", o, err)
		}
	}
}

// TestNoGoroutineLeft: once a job has ended, none of its goroutines (the
// fork thread, the reapers, the supervisor, Forward) is left.
func TestNoGoroutineLeft(t *testing.T) {
	before := runtime.NumGoroutine()
	g, out := start(t, launch.Options{N: 2}, "waitsig")
	out.waitLines(t, "ready", 2)
	c := make(chan os.Signal)
	g.Forward(c)
	g.Signal(syscall.SIGUSR1)
	if _, err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(hangLimit) // a guard against a leak, not a speed check
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, %d before the job:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStoppedLastPE: when the PEs left after the others have exited all
// stay stopped (SIGSTOP) for the peer timeout, nothing would ever end the
// job: the launcher kills them and fails the job, naming them.
func TestStoppedLastPE(t *testing.T) {
	t.Parallel()
	g, out := start(t, launch.Options{N: 3, PeerTimeout: 200 * time.Millisecond}, "2=selfstop,*=exit:0")
	res, err := g.Wait()
	if !errors.Is(err, launch.ErrStalled) || res.Status != launch.StatusStalled || !slices.Equal(res.Stalled, []int{2}) {
		t.Fatalf("Wait = %+v, %v; want ErrStalled, status %d, PE 2 stalled\n%s", res, err, launch.StatusStalled, out)
	}
	for _, want := range []string{fmt.Sprintf("PE 2 (pid %d)", res.PEs[2].Pid), "stopped", "every other PE had exited", "SYMHEAP_PEER_TIMEOUT"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if pe := res.PEs[2]; pe.Signal != syscall.SIGKILL || !pe.Stopped || res.FirstFailed != -1 {
		t.Errorf("PE 2 %+v, first failed %d; want killed by the launcher, no failure of its own", pe, res.FirstFailed)
	}
	if strings.Contains(out.String(), "continued") {
		t.Errorf("the stopped PE went on:\n%s", out)
	}
}

// TestStoppedPEResumed: a PE stopped for less than the peer timeout is
// not the launcher's business: resumed, it finishes the job normally.
func TestStoppedPEResumed(t *testing.T) {
	t.Parallel()
	g, out := start(t, launch.Options{N: 3, PeerTimeout: 5 * time.Minute}, "2=selfstop,*=exit:0")
	pids := g.Pids()
	// Wait until the others have ended and PE 2 is stopped: the launcher
	// then polls a job whose only PE left is stopped.
	waitGone(t, hangLimit, procIfAny(pids[0]), procIfAny(pids[1]))
	deadline := time.Now().Add(20 * time.Second)
	for {
		if st, err := unix.ProcessState(pids[2]); err == nil && st == 'T' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PE 2 did not stop itself within 20s\n%s", out)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := g.SignalPE(2, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	res, err := g.Wait()
	if err != nil || res.Status != 0 || res.Stalled != nil {
		t.Fatalf("Wait = %+v, %v; want status 0\n%s", res, err, out)
	}
	if !strings.Contains(out.String(), "[pe 2] continued") {
		t.Errorf("PE 2 did not go on:\n%s", out)
	}
}

// TestBadPeerTimeout: a malformed SYMHEAP_PEER_TIMEOUT for the PEs is
// refused before anything starts, naming the variable.
func TestBadPeerTimeout(t *testing.T) {
	t.Parallel()
	_, err := launch.Run(context.Background(), launch.Options{N: 1, Env: []string{"SYMHEAP_PEER_TIMEOUT=soon"}}, "/bin/true")
	if !errors.Is(err, errs.ErrBadConfig) || !strings.Contains(err.Error(), "SYMHEAP_PEER_TIMEOUT") {
		t.Errorf("Run with SYMHEAP_PEER_TIMEOUT=soon: %v, want ErrBadConfig naming the variable", err)
	}
}

// TestStartAppsRefuses: a job of several programs whose counts are
// wrong is refused before anything starts.
func TestStartAppsRefuses(t *testing.T) {
	for _, c := range []struct {
		n    int
		apps []launch.App
		want string
	}{
		{0, nil, "in 0 programs"},
		{0, []launch.App{{N: 1, Prog: "true"}, {N: 0, Prog: "false"}}, "program 2 (false): number of PEs 0"},
		{3, []launch.App{{N: 1, Prog: "true"}, {N: 1, Prog: "true"}}, "3 PEs in Options.N, 2 in 2 programs"},
		{0, []launch.App{{N: launch.MaxPEs, Prog: "true"}, {N: 1, Prog: "true"}}, "want 1 to"},
	} {
		g, err := launch.StartApps(context.Background(), launch.Options{N: c.n}, c.apps)
		if g != nil || !errors.Is(err, errs.ErrBadConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("StartApps(N %d, %v): %v, %v; want ErrBadConfig saying %q", c.n, c.apps, g, err, c.want)
		}
	}
}
