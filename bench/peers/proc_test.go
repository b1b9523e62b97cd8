package peers

import (
	"context"
	"errors"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

func pidsFrom(t *testing.T, out []byte) []int {
	t.Helper()
	var pids []int
	for _, w := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(w); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func needProcSession(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("session members are found through /proc: Linux only")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not found in PATH")
	}
	return bash
}

// Like mpirun's ranks, the children here sit in process groups of their own
// (set -m), so killing the leader's group alone would leave them running.
func TestRunSessionTimeoutKillsOtherGroups(t *testing.T) {
	bash := needProcSession(t)
	start := time.Now()
	out, err := runSession(context.Background(), 300*time.Millisecond, []string{bash, "-c",
		`set -m; sleep 300 & echo $!; sleep 300 & echo $!; wait`})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	// Ended by the timeout (ErrTimeout; the sleeps last 300 s) with no
	// child left, checked below: the time is logged, not bounded.
	t.Logf("took %v", time.Since(start))
	pids := pidsFrom(t, out.stdout)
	if len(pids) != 2 {
		t.Fatalf("stdout %q: want two pids", out.stdout)
	}
	for _, pid := range pids {
		if processAlive(pid) {
			t.Errorf("pid %d survived", pid)
		}
	}
}

// A leader that ignores SIGTERM is killed after the grace period.
func TestRunSessionTermIgnored(t *testing.T) {
	if testing.Short() {
		t.Skip("waits the termination grace period")
	}
	bash := needProcSession(t)
	start := time.Now()
	out, err := runSession(context.Background(), 200*time.Millisecond, []string{bash, "-c",
		`trap '' TERM; set -m; sleep 300 & echo $!; while :; do sleep 0.05; done`})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	// Killed after the grace period, not before: a lower bound, which
	// load cannot break. The leader ignores SIGTERM and loops for ever,
	// so only the SIGKILL that follows the grace ends it; one that never
	// comes meets the test's deadline.
	if d := time.Since(start); d < termGrace {
		t.Errorf("took %v, less than the grace period %v", d, termGrace)
	} else {
		t.Logf("took %v (grace %v)", d, termGrace)
	}
	for _, pid := range pidsFrom(t, out.stdout) {
		if processAlive(pid) {
			t.Errorf("pid %d survived", pid)
		}
	}
}

// A process left behind by a leader that exited normally is killed too.
func TestRunSessionKillsOrphans(t *testing.T) {
	bash := needProcSession(t)
	out, err := runSession(context.Background(), 10*time.Second, []string{bash, "-c",
		`set -m; sleep 300 >/dev/null 2>&1 & echo $!; echo oops >&2; exit 3`})
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("err = %v, want exit status 3", err)
	}
	if strings.TrimSpace(string(out.stderr)) != "oops" {
		t.Errorf("stderr = %q", out.stderr)
	}
	pids := pidsFrom(t, out.stdout)
	if len(pids) != 1 || processAlive(pids[0]) {
		t.Errorf("orphan %v not killed", pids)
	}
}

func TestRunSessionCanceled(t *testing.T) {
	bash := needProcSession(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	_, err := runSession(ctx, 0, []string{bash, "-c", "sleep 300"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestRunNotBuilt(t *testing.T) {
	_, err := Run(context.Background(), Spec{Harness: Memcpy, Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "not built") {
		t.Fatalf("err = %v, want a not-built error", err)
	}
}
