package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/internal/config"
	"github.com/symheap/symheap/internal/segment"
	"github.com/symheap/symheap/internal/unix"
	"github.com/symheap/symheap/launch"
)

// The test binary plays two parts besides running the tests: shrun itself
// when mainEnv is set (for the tests that must signal a real shrun
// process), and a PE when peEnv is set and SYMHEAP_PE says it was started
// as one. peEnv's value is "ACTION" or a comma-separated "RANK=ACTION" list
// with "*=ACTION" for the rest:
//
//	exit:N      exit with status N
//	sleep       print "ready", sleep until killed
//	ignoreint   ignore SIGINT, print "ready", sleep until killed
//	waitterm    print "ready", wait for SIGTERM, print "got terminated", exit 0
//	env         print the job variables and the arguments, exit 0
//	init:DIR    join the job (symheap.Init), print "ready <job> <pid>", sleep until killed;
//	            what the runtime writes to os.Stderr from then on goes to DIR/pe-<rank>.err
//	print:DIR   as init, then print a line every millisecond until killed
//	selfstop    print "ready", stop itself (SIGSTOP), print "continued", exit 0
//	mark:DIR    create the file DIR/pe-<rank>, exit 0
const (
	mainEnv = "SHRUN_TEST_MAIN"
	peEnv   = "SHRUN_TEST_PE"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(peEnv); spec != "" && os.Getenv("SYMHEAP_PE") != "" {
		os.Exit(pe(spec))
	}
	if os.Getenv(mainEnv) != "" {
		main()
	}
	// Race-enabled PEs would sleep a second at exit (GORACE atexit_sleep_ms).
	os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	os.Exit(m.Run())
}

func pe(spec string) int {
	rank := os.Getenv("SYMHEAP_PE")
	var action string
	for _, part := range strings.Split(spec, ",") {
		r, a, found := strings.Cut(part, "=")
		switch {
		case !found:
			action = part
		case r == rank || (r == "*" && action == ""):
			action = a
		}
	}
	switch a, arg, _ := strings.Cut(action, ":"); a {
	case "exit":
		var code int
		fmt.Sscan(arg, &code)
		return code
	case "ignoreint":
		signal.Ignore(syscall.SIGINT)
		fallthrough
	case "sleep":
		fmt.Println("ready")
		for {
			time.Sleep(time.Hour) // a goroutine blocked forever in select{} is a deadlock to the runtime
		}
	case "waitterm":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		fmt.Println("ready")
		fmt.Printf("got %v\n", <-c)
		return 0
	case "init", "print":
		pe, err := symheap.Init(symheap.Config{HeapSize: 1 << 20, SharedSize: 1 << 20})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		// Past shrun's death the runtime's farewell can be read only
		// from a file.
		if f, err := os.Create(filepath.Join(arg, "pe-"+rank+".err")); err == nil {
			os.Stderr = f
		}
		fmt.Printf("ready %s %d\n", pe.Job(), os.Getpid())
		for i := 0; ; i++ {
			if a == "print" {
				fmt.Printf("line %d\n", i) // fails with EPIPE once shrun is gone
				time.Sleep(time.Millisecond)
				continue
			}
			time.Sleep(time.Hour)
		}
	case "selfstop":
		fmt.Println("ready")
		// Stop this very thread: a stop sent to the process takes effect
		// when some thread takes it, and this one could run on meanwhile.
		runtime.LockOSThread()
		syscall.Tgkill(os.Getpid(), syscall.Gettid(), syscall.SIGSTOP)
		fmt.Println("continued")
		return 0
	case "mark":
		os.WriteFile(filepath.Join(arg, "pe-"+rank), nil, 0o644)
		return 0
	case "env":
		for _, k := range []string{"SYMHEAP_JOB", "SYMHEAP_PE", "SYMHEAP_NPES", "SHMEM_SYMMETRIC_SIZE", "SYMHEAP_ALLOCATOR", "SYMHEAP_OFFSET_MODE", "SHRUN_X_A", "SHRUN_X_B"} {
			fmt.Printf("%s=%s\n", k, os.Getenv(k))
		}
		fmt.Printf("args %q\n", os.Args[1:])
		return 0
	}
	return 99
}

func self(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func run(args ...string) (status int, stdout, stderr string) {
	var o, e bytes.Buffer
	status = shrun(args, &o, &e)
	return status, o.String(), e.String()
}

func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "no program given"},
		{[]string{"true"}, "give the number of PEs"},
		{[]string{"-n", "0", "true"}, "give the number of PEs"},
		{[]string{"-n", "2"}, "no program given"},
		{[]string{"-n", "x", "true"}, "invalid value"},
		{[]string{"--bogus", "-n", "2", "true"}, "flag provided but not defined"},
		{[]string{"-n", "2", "--heap", "12q", "true"}, "k, m, g, t"},
		{[]string{"-n", "2", "--heap", "-5m", "true"}, "negative"},
		{[]string{"-n", "2", "--heap=0", "true"}, "must not be empty"},
		{[]string{"-n", "2", "--timeout", "-1s", "true"}, "must not be negative"},
		{[]string{"-n", "2", "--timeout", "soon", "true"}, "invalid value"},
	} {
		status, stdout, stderr := run(c.args...)
		if status != 2 || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "usage: shrun") || stdout != "" {
			t.Errorf("shrun %q: status %d, stderr %q; want 2 and %q with the usage", c.args, status, stderr, c.want)
		}
	}
	if status, _, stderr := run("-h"); status != 0 || !strings.Contains(stderr, "usage: shrun") {
		t.Errorf("shrun -h: status %d, %q", status, stderr)
	}
}

func TestCannotStart(t *testing.T) {
	status, _, stderr := run("-n", "2", "/no/such/program")
	if status != 1 || !strings.Contains(stderr, "/no/such/program") {
		t.Errorf("status %d, stderr %q; want 1 naming the program", status, stderr)
	}
}

// TestFlagsReachPEs: flags become the job's environment, and everything
// from the program on, flags included, goes to the PEs as is.
func TestFlagsReachPEs(t *testing.T) {
	t.Setenv(peEnv, "env")
	status, stdout, stderr := run("--n=2", "--tag", "--heap", "64M", "-allocator", "buddy", "--offset-mode",
		self(t), "-n", "5", "--tag", "x y")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	for _, want := range []string{"[pe 1] SYMHEAP_PE=1", "[pe 0] SYMHEAP_NPES=2", "[pe 0] SHMEM_SYMMETRIC_SIZE=64M",
		"[pe 1] SYMHEAP_ALLOCATOR=buddy", "[pe 1] SYMHEAP_OFFSET_MODE=1", `[pe 0] args ["-n" "5" "--tag" "x y"]`} {
		if !strings.Contains(stdout, want+"\n") {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

// TestOpenMPIFlags: the names mpirun and oshrun users type: -np, -x
// (with a value, and taking shrun's own), --tag-output; and --version,
// --help listing them, --man.
func TestOpenMPIFlags(t *testing.T) {
	t.Setenv(peEnv, "env")
	t.Setenv("SHRUN_X_B", "from shrun")
	status, stdout, stderr := run("-np", "2", "--tag-output", "-x", "SHRUN_X_A=a=b c", "-x", "SHRUN_X_B", self(t))
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	for _, want := range []string{"[pe 0] SYMHEAP_NPES=2", "[pe 1] SYMHEAP_PE=1", "[pe 0] SHRUN_X_A=a=b c", "[pe 1] SHRUN_X_B=from shrun"} {
		if !strings.Contains(stdout, want+"\n") {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-np", "2", "-x", "SHRUN_X_UNSET_HERE", "true"}, "not set in shrun's environment"},
		{[]string{"-np", "2", "-x", "=v", "true"}, "not VAR or VAR=value"},
	} {
		os.Unsetenv("SHRUN_X_UNSET_HERE")
		if status, _, stderr := run(c.args...); status != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("shrun %q: status %d, %q; want 2 and %q", c.args, status, stderr, c.want)
		}
	}
	status, stdout, _ = run("--version")
	if status != 0 || stdout != "shrun (symheap) "+config.Version+"\n" {
		t.Errorf("--version: status %d, %q", status, stdout)
	}
	status, _, stderr = run("--help")
	for _, want := range []string{"-np N", "-x VAR[=value]", "-tag-output", "-timeout duration", "-version"} {
		if status != 0 || !strings.Contains(stderr, want) {
			t.Errorf("--help: status %d, lacks %q:\n%s", status, want, stderr)
		}
	}
	status, stdout, _ = run("--man")
	if status != 0 || !strings.HasPrefix(stdout, ".\\\" Generated") || !strings.Contains(stdout, `.B "\-np N"`) {
		t.Errorf("--man: status %d, %q", status, stdout)
	}
}

// TestPrograms: mpirun's colon form, one job of several programs
// (MPMD): ranks in the order of the programs, each with its arguments,
// every PE of the one job; and its usage errors.
func TestPrograms(t *testing.T) {
	t.Setenv(peEnv, "env")
	status, stdout, stderr := run("-n", "2", "--tag", "-x", "SHRUN_X_A=all", self(t), "first", ":", "--np=1", self(t), "second", "x", ":", "-n", "1", self(t))
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	for _, want := range []string{`[pe 0] args ["first"]`, `[pe 1] args ["first"]`, `[pe 2] args ["second" "x"]`, `[pe 3] args []`,
		"[pe 3] SYMHEAP_NPES=4", "[pe 2] SYMHEAP_PE=2", "[pe 3] SHRUN_X_A=all"} {
		if !strings.Contains(stdout, want+"\n") {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	job := regexp.MustCompile(`SYMHEAP_JOB=(\S+)`).FindAllStringSubmatch(stdout, -1)
	if len(job) != 4 || job[0][1] != job[1][1] || job[0][1] != job[2][1] || job[0][1] != job[3][1] {
		t.Errorf("the PEs are not of one job: %q", job)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", "2", "true", ":", "true"}, "-n 0: give its number of PEs"},
		{[]string{"-n", "2", "true", ":", "-n", "2"}, "no program given"},
		{[]string{"-n", "2", "true", ":"}, "no program given"},
		{[]string{"-n", "2", ":", "-n", "1", "true"}, "no program before the first ':'"},
		{[]string{"-n", "2", "true", ":", "--heap", "1m", "true"}, "each program after a ':' takes -n N"},
		{[]string{"-n", "2", "true", ":", "-n", "511", "true"}, "a job has at most"},
	} {
		if status, _, stderr := run(c.args...); status != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("shrun %q: status %d, %q; want 2 and %q", c.args, status, stderr, c.want)
		}
	}
}

func TestExitStatus(t *testing.T) {
	t.Setenv(peEnv, "2=exit:3,*=sleep")
	start := time.Now()
	status, _, stderr := run("-n", "3", self(t))
	if status != 3 || !strings.Contains(stderr, "PE 2") || !strings.Contains(stderr, "exit status 3") {
		t.Errorf("status %d, stderr %q; want 3 naming PE 2", status, stderr)
	}
	// The sleepers ended because shrun stopped them after PE 2's failure
	// (it says so), not by a timeout: a shrun that never stops them
	// meets the test's timeout. No bound on the time.
	if !strings.Contains(stderr, "stopped the 2 PEs still running") {
		t.Errorf("stderr %q does not say shrun stopped the 2 sleeping PEs", stderr)
	}
	t.Logf("shrun ended %v after its start", time.Since(start))
	t.Setenv(peEnv, "sleep")
	status, _, stderr = run("-n", "2", "--timeout", "200ms", self(t))
	if status != 124 || !strings.Contains(stderr, "timed out") || !strings.Contains(stderr, "past --timeout 200ms") {
		t.Errorf("status %d, stderr %q; want 124 and a timeout", status, stderr)
	}
	t.Setenv(peEnv, "exit:0")
	if status, _, stderr := run("-n", "2", self(t)); status != 0 {
		t.Errorf("status %d, stderr %q; want 0", status, stderr)
	}
}

func TestBuildsPackage(t *testing.T) {
	status, stdout, stderr := run("-n", "2", "--tag", "../../launch/testdata/hello")
	if status != 0 || !strings.Contains(stdout, "[pe 1] hello from pe 1 of 2\n") {
		t.Errorf("status %d, stdout %q, stderr %q", status, stdout, stderr)
	}
}

// TestSignals sends signals to a real shrun process: they must reach the
// PEs once, and a second interrupt must stop PEs that ignore the first.
func TestSignals(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		pe     string
		sigs   []syscall.Signal
		status int
		output string
	}{
		{"forwarded", "waitterm", []syscall.Signal{syscall.SIGTERM}, 0, "got terminated"},
		{"fatal", "sleep", []syscall.Signal{syscall.SIGINT}, 130, ""},
		{"twice", "ignoreint", []syscall.Signal{syscall.SIGINT, syscall.SIGINT}, 143, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(self(t), "-n", "2", "--tag", self(t))
			cmd.Env = append(os.Environ(), mainEnv+"=1", peEnv+"="+c.pe)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			pipe, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			sc := bufio.NewScanner(pipe)
			var out []string
			for ready := 0; ready < 2 && sc.Scan(); {
				out = append(out, sc.Text())
				if strings.HasSuffix(sc.Text(), "] ready") {
					ready++
				}
			}
			for _, s := range c.sigs {
				cmd.Process.Signal(s)
				time.Sleep(50 * time.Millisecond)
			}
			rest, _ := io.ReadAll(pipe)
			out = append(out, strings.Split(strings.TrimSpace(string(rest)), "\n")...)
			cmd.Wait()
			if got := cmd.ProcessState.ExitCode(); got != c.status {
				t.Errorf("shrun exit status %d, want %d; stderr:\n%s", got, c.status, stderr.String())
			}
			if c.output != "" {
				n := 0
				for _, l := range out {
					if strings.HasSuffix(l, "] "+c.output) {
						n++
					}
				}
				if n != 2 {
					t.Errorf("%d lines %q, want one per PE; output %q", n, c.output, out)
				}
			}
		})
	}
}

// TestTooManyPEs: a job larger than a segment holds is refused before
// anything starts, with one error naming the bound.
func TestTooManyPEs(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(peEnv, "mark:"+dir)
	status, stdout, stderr := run("-n", "10000", self(t))
	if status != 2 || stdout != "" || !strings.Contains(stderr, fmt.Sprintf("-n 10000: a job has at most %d PEs", segment.MaxPEs)) || strings.Count(stderr, "10000") != 1 {
		t.Errorf("shrun -n 10000: status %d, stdout %q, stderr %q; want 2 and one error naming the bound", status, stdout, stderr)
	}
	if started, _ := os.ReadDir(dir); len(started) > 0 {
		t.Errorf("shrun -n 10000 started %d PEs", len(started))
	}
	if launch.MaxPEs != segment.MaxPEs {
		t.Errorf("launch.MaxPEs = %d, want the bound Init applies, segment.MaxPEs = %d", launch.MaxPEs, segment.MaxPEs)
	}
}

// TestStoppedPE: a PE stopped (SIGSTOP) after the others have exited would
// hold the job for ever; after the peer timeout shrun kills it, fails,
// and says which PE and why.
func TestStoppedPE(t *testing.T) {
	t.Setenv(peEnv, "1=selfstop,*=exit:0")
	t.Setenv("SYMHEAP_PEER_TIMEOUT", "300ms")
	status, stdout, stderr := run("-n", "2", "--tag", self(t))
	if status != launch.StatusStalled {
		t.Fatalf("status %d, want %d; stdout %q, stderr %q", status, launch.StatusStalled, stdout, stderr)
	}
	for _, want := range []string{"PE 1 (pid ", "stopped", "every other PE had exited", "SYMHEAP_PEER_TIMEOUT is 300ms"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q does not say %q", stderr, want)
		}
	}
	if strings.Contains(stdout, "continued") {
		t.Errorf("the stopped PE went on: %q", stdout)
	}
}

// TestKilledShrun: shrun killed with SIGKILL during a job whose PEs hold
// its segment: the PEs leave the job and exit, saying so, and the last one
// out removes the segment, also when they write their output into the
// pipes to the dead shrun. (Killed at once, they could not, and another
// job's start-up would remove the segment only later, by chance.) The
// bound on the wait is generous; the time it took is logged.
func TestKilledShrun(t *testing.T) {
	t.Parallel()
	for _, action := range []string{"init", "print"} {
		t.Run(action, func(t *testing.T) {
			t.Parallel()
			const n = 3
			cmd := exec.Command(self(t), "-n", strconv.Itoa(n), "--tag", self(t))
			errDir := t.TempDir()
			cmd.Env = append(os.Environ(), mainEnv+"=1", peEnv+"="+action+":"+errDir)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			pipe, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var job string
			var pids []int
			t.Cleanup(func() {
				cmd.Process.Kill()
				cmd.Wait()
				for _, pid := range pids {
					syscall.Kill(pid, syscall.SIGKILL)
				}
				if job != "" {
					launch.RemoveSegmentFiles(job)
				}
			})
			sc := bufio.NewScanner(pipe)
			for len(pids) < n && sc.Scan() {
				// "[pe N] ready JOB PID"
				if f := strings.Fields(sc.Text()); len(f) == 5 && f[2] == "ready" {
					job = f[3]
					pid, _ := strconv.Atoi(f[4])
					pids = append(pids, pid)
				}
			}
			if len(pids) < n {
				t.Fatalf("%d PEs ready, want %d: %v\n%s", len(pids), n, sc.Err(), stderr.String())
			}
			if files, _ := launch.SegmentFiles(job); len(files) == 0 {
				t.Fatalf("job %s has no segment in /dev/shm while its PEs run", job)
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			start := time.Now()
			const bound = 20 * time.Second
			for {
				files, _ := launch.SegmentFiles(job)
				var running []int
				for _, pid := range pids {
					if st, err := unix.ProcessState(pid); err == nil && st != 'Z' {
						running = append(running, pid)
					}
				}
				if len(files) == 0 && len(running) == 0 {
					break
				}
				if time.Since(start) > bound {
					t.Fatalf("%v after shrun was killed: job %s still has %v in /dev/shm and PEs %v running (of %v)", bound, job, files, running, pids)
				}
				time.Sleep(5 * time.Millisecond)
			}
			t.Logf("segment and PEs gone %v after shrun's SIGKILL", time.Since(start).Round(time.Millisecond))
			for r := range n {
				b, _ := os.ReadFile(filepath.Join(errDir, fmt.Sprintf("pe-%d.err", r)))
				want := fmt.Sprintf("PE %d of job %q: its launcher (pid %d) is gone: left the job", r, job, cmd.Process.Pid)
				if !strings.Contains(string(b), want) {
					t.Errorf("PE %d wrote %q, want it to say %q", r, b, want)
				}
			}
		})
	}
}
