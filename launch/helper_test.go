package launch_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/unix"
	"github.com/symheap/symheap/launch"
)

// The tests run the test binary itself as the PE program, as os/exec's
// tests do with TestHelperProcess: when helperEnv is set, TestMain plays a
// PE instead of running tests. Its value says what each rank does:
// "ACTION" for every rank, or a comma-separated list of "RANK=ACTION" and
// "*=ACTION". Actions:
//
//	exit:N        exit with status N
//	after:MS:N    sleep MS milliseconds, then exit with status N
//	sleep         print "ready", then sleep until killed
//	ignoreterm    ignore SIGTERM, print "ready", sleep until killed
//	waitsig       print "ready", wait for SIGUSR1, print "got <signal>", exit 0
//	usr1exit:N    print "ready", wait for SIGUSR1, exit with status N
//	env           print every environment entry as "env KEY=value", exit 0
//	lines:K       write K numbered lines to stdout and to stderr, in fragments
//	spawn         start a grandchild that sleeps, print "grandchild <pid>", exit 0
//	launcher      launch a nested job of 2 sleeping PEs, print "pids <pid> <pid>", sleep
//	selfstop      print "ready", stop itself (SIGSTOP), print "continued", exit 0
const helperEnv = "LAUNCH_TEST_HELPER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		os.Exit(helper(spec))
	}
	// A binary built with -race sleeps a second before it exits, to let
	// late races be reported (GORACE atexit_sleep_ms). The helpers have
	// nothing left to report when they exit, and the tests time exits.
	os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	os.Exit(m.Run())
}

func helper(spec string) int {
	rank := os.Getenv("SYMHEAP_PE")
	var action, fallback string
	for _, part := range strings.Split(spec, ",") {
		switch r, a, found := strings.Cut(part, "="); {
		case !found:
			fallback = part
		case r == "*":
			fallback = a
		case r == rank:
			action = a
		}
	}
	if action == "" {
		action = fallback
	}
	f := strings.Split(action, ":")
	num := func(i int) int {
		n, _ := strconv.Atoi(f[i])
		return n
	}
	switch f[0] {
	case "exit":
		return num(1)
	case "after":
		time.Sleep(time.Duration(num(1)) * time.Millisecond)
		return num(2)
	case "ignoreterm":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		for {
			time.Sleep(time.Hour) // a goroutine blocked forever in select{} is a deadlock to the runtime
		}
	case "sleep":
		fmt.Println("ready")
		for {
			time.Sleep(time.Hour) // a goroutine blocked forever in select{} is a deadlock to the runtime
		}
	case "usr1exit":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGUSR1)
		fmt.Println("ready")
		<-c
		return num(1)
	case "waitsig":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGUSR1)
		fmt.Println("ready")
		fmt.Printf("got %v\n", <-c)
		return 0
	case "selfstop":
		fmt.Println("ready")
		// Stop this very thread: a stop sent to the process takes effect
		// when some thread takes it, and this one could run on meanwhile.
		runtime.LockOSThread()
		syscall.Tgkill(os.Getpid(), syscall.Gettid(), syscall.SIGSTOP)
		fmt.Println("continued")
		return 0
	case "env":
		for _, kv := range os.Environ() {
			fmt.Printf("env %s\n", kv)
		}
		return 0
	case "lines":
		for i := range num(1) {
			// Fragments: the launcher must reassemble each line.
			fmt.Fprintf(os.Stdout, "out line %d ", i)
			fmt.Fprintf(os.Stderr, "err line %d ", i)
			fmt.Fprintf(os.Stdout, "of pe %s %s\n", rank, strings.Repeat("x", i%50))
			fmt.Fprintf(os.Stderr, "of pe %s\n", rank)
		}
		return 0
	case "spawn":
		exe, _ := os.Executable()
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), helperEnv+"=sleep")
		cmd.Stdout = os.Stdout
		if err := cmd.Start(); err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Printf("grandchild %d\n", cmd.Process.Pid)
		return 0
	case "launcher":
		exe, _ := os.Executable()
		g, err := launch.Start(context.Background(), launch.Options{
			N: 2, Env: []string{helperEnv + "=sleep"}, Stdout: os.Stdout, Stderr: os.Stderr, Tag: true,
		}, exe)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Printf("pids %d %d\n", g.Pids()[0], g.Pids()[1])
		for {
			time.Sleep(time.Hour) // a goroutine blocked forever in select{} is a deadlock to the runtime
		}
	}
	fmt.Fprintf(os.Stderr, "helper: no action for rank %s in %q\n", rank, spec)
	return 99
}

// self is the path of the test binary, the PE program of most tests.
func self(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// outBuf collects output and lets a test wait for lines to appear. It is
// safe for concurrent use.
type outBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *outBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *outBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *outBuf) Lines() []string {
	s := strings.TrimSuffix(b.String(), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// waitLines waits until n lines end with suffix.
func (b *outBuf) waitLines(t *testing.T, suffix string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		count := 0
		for _, l := range b.Lines() {
			if strings.HasSuffix(l, suffix) {
				count++
			}
		}
		if count >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 20s for %d lines ending in %q; output:\n%s", n, suffix, b.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// proc names a process by pid and start time, so that a reused pid is not
// taken for it.
type proc struct {
	pid   int
	start uint64
}

func procOf(t *testing.T, pid int) proc {
	t.Helper()
	st, err := unix.ProcessStartTime(pid)
	if err != nil {
		t.Fatalf("pid %d: %v", pid, err)
	}
	return proc{pid, st}
}

// procIfAny is procOf for a process that may have ended already (and
// been reaped): then its proc is never alive.
func procIfAny(pid int) proc {
	st, _ := unix.ProcessStartTime(pid) // 0 when gone: no process starts at 0
	return proc{pid, st}
}

// alive reports whether the process still runs (a zombie does not).
func (p proc) alive() bool {
	st, err := unix.ProcessStartTime(p.pid)
	if err != nil || st != p.start {
		return false
	}
	state, err := unix.ProcessState(p.pid)
	return err == nil && state != 'Z'
}

// hangLimit bounds the waits for processes to end: a guard against a
// hang, which only a process that is never going to end reaches, not a
// check of speed (the tests check what ended the processes, and log the
// time).
const hangLimit = 30 * time.Second

// waitGone waits up to limit for every process to end and returns how long
// it took; it fails the test if one is still alive then.
func waitGone(t *testing.T, limit time.Duration, procs ...proc) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		var left []int
		for _, p := range procs {
			if p.alive() {
				left = append(left, p.pid)
			}
		}
		if len(left) == 0 {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			for _, pid := range left {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Fatalf("processes %v still alive %v later", left, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// noneAlive fails the test if a PE of the result still runs.
func noneAlive(t *testing.T, res launch.Result) {
	t.Helper()
	for _, pe := range res.PEs {
		if unix.ProcessExists(pe.Pid) {
			if s, err := unix.ProcessState(pe.Pid); err == nil && s != 'Z' {
				// A pid is reused only after wrapping around; report it
				// with its state so that a reuse can be told apart.
				t.Errorf("PE %d pid %d still exists (state %c)", pe.Rank, pe.Pid, s)
			}
		}
	}
}

// noShmLeft fails the test if a /dev/shm file of the job is left.
func noShmLeft(t *testing.T, job string) {
	t.Helper()
	files, err := launch.SegmentFiles(job)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) > 0 {
		t.Errorf("job %s left %v", job, files)
	}
}
