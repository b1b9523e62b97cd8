package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
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
	case "env":
		for _, k := range []string{"SYMHEAP_JOB", "SYMHEAP_PE", "SYMHEAP_NPES", "SHMEM_SYMMETRIC_SIZE", "SYMHEAP_ALLOCATOR", "SYMHEAP_OFFSET_MODE"} {
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

func TestExitStatus(t *testing.T) {
	t.Setenv(peEnv, "2=exit:3,*=sleep")
	start := time.Now()
	status, _, stderr := run("-n", "3", self(t))
	if status != 3 || !strings.Contains(stderr, "PE 2") || !strings.Contains(stderr, "exit status 3") {
		t.Errorf("status %d, stderr %q; want 3 naming PE 2", status, stderr)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v", d)
	}
	t.Setenv(peEnv, "sleep")
	status, _, stderr = run("-n", "2", "--timeout", "200ms", self(t))
	if status != 124 || !strings.Contains(stderr, "timed out") {
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
