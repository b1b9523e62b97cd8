package petest_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/petest"
	"github.com/symheap/symheap/internal/segment"
	"github.com/symheap/symheap/internal/unix"
	"github.com/symheap/symheap/launch"
)

// mark records, in the parent's directory dir, that PE rank ran what.
func mark(t *testing.T, dir, what string) {
	t.Helper()
	name := filepath.Join(dir, fmt.Sprintf("%s.%d", what, petest.Rank()))
	if err := os.WriteFile(name, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

func marks(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir() // in a child this is a directory of its own, unused
	res := petest.Run(t, 3, func(t *testing.T) {
		if !petest.IsChild() || petest.Size() != 3 || petest.Rank() < 0 || petest.Rank() >= 3 {
			t.Fatalf("IsChild %v, rank %d, size %d", petest.IsChild(), petest.Rank(), petest.Size())
		}
		if os.Getenv("SYMHEAP_JOB") == "" || os.Getenv("SHMEM_SYMMETRIC_SIZE") != "16m" || os.Getenv("SYMHEAP_OFFSET_MODE") != "1" {
			t.Fatalf("job environment: %q", os.Environ())
		}
		mark(t, os.Getenv("PETEST_DIR"), "ran")
	}, petest.Env("PETEST_DIR="+dir), petest.Heap("16m"), petest.OffsetMode(), petest.Timeout(30*time.Second))
	// From here on only the parent runs.
	if petest.IsChild() {
		t.Fatal("code after petest.Run ran in a child")
	}
	if got := strings.Join(marks(t, dir), " "); got != "ran.0 ran.1 ran.2" {
		t.Errorf("PEs that ran: %s", got)
	}
	if res.Status != 0 || len(res.PEs) != 3 || res.Job == "" {
		t.Errorf("result %+v", res)
	}
}

// TestSubtests: a subtest's PEs run that subtest only, whatever its name
// holds, and not its siblings.
func TestSubtests(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opt := petest.Env("PETEST_DIR=" + dir)
	for _, name := range []string{"plain", "with space/and.regexp*[meta]+(chars)?", "dup", "dup"} {
		t.Run(name, func(t *testing.T) {
			if petest.IsChild() && os.Getenv(petest.EnvTest) != t.Name() {
				mark(t, os.Getenv("PETEST_DIR"), "wrong")
			}
			petest.Run(t, 2, func(t *testing.T) {
				mark(t, os.Getenv("PETEST_DIR"), strings.NewReplacer("/", "_", "*", "", "?", "").Replace(t.Name()))
			}, opt)
		})
	}
	t.Run("nested", func(t *testing.T) {
		t.Run("inner", func(t *testing.T) {
			petest.Run(t, 1, func(t *testing.T) { mark(t, os.Getenv("PETEST_DIR"), "nested") }, opt)
		})
	})
	// The enclosing test goes on in the child of each subtest, after the
	// subtest ended there: guard what only the parent may do.
	if petest.IsChild() {
		return
	}
	want := "TestSubtests_dup#01.0 TestSubtests_dup#01.1 TestSubtests_dup.0 TestSubtests_dup.1 TestSubtests_plain.0 TestSubtests_plain.1 " +
		"TestSubtests_with_space_and.regexp[meta]+(chars).0 TestSubtests_with_space_and.regexp[meta]+(chars).1 nested.0"
	if got := strings.Join(marks(t, dir), " "); got != want {
		t.Errorf("marks:\n got %s\nwant %s", got, want)
	}
}

// TestExpectFailure: a PE that fails is reported in the Result, and the
// test goes on.
func TestExpectFailure(t *testing.T) {
	t.Parallel()
	res := petest.Run(t, 3, func(t *testing.T) {
		if petest.Rank() == 1 {
			t.Fatal("PE 1 fails on purpose")
		}
		time.Sleep(10 * time.Second) // stopped by the launcher
	}, petest.ExpectFailure())
	if res.FirstFailed != 1 || res.Status != 1 {
		t.Fatalf("first failed %d, status %d; want PE 1 with status 1", res.FirstFailed, res.Status)
	}
	for _, r := range []int{0, 2} {
		if !res.PEs[r].Stopped {
			t.Errorf("PE %d was not stopped: %v", r, res.PEs[r])
		}
	}
}

// TestKill: a PE killed with SIGKILL ends the job (the launcher stops the
// others; a hang meets the job timeout) with status 137, and neither a
// process nor the job's segment is left.
func TestKill(t *testing.T) {
	t.Parallel()
	j := petest.Start(t, 3, func(t *testing.T) {
		if petest.Rank() == 0 {
			// Stand in for the runtime: create the job's segment, and
			// hold a shared flock on it as an attached PE does, so that
			// a `symheap clean` beside this test (another package's) does
			// not take it for stale and remove it.
			seg := segment.Path(unix.Getuid(), os.Getenv("SYMHEAP_JOB"))
			if err := os.WriteFile(seg, []byte("segment"), 0o600); err != nil {
				t.Fatal(err)
			}
			holdShared(t, seg) // until this PE ends
		}
		fmt.Println("ready")
		time.Sleep(time.Hour)
	}, petest.ExpectFailure())
	j.WaitOutput("] ready", 3)
	files, _ := launch.SegmentFiles(j.ID())
	if len(files) != 1 {
		t.Fatalf("segment files %v, want the one PE 0 made", files)
	}
	// This process holds a shared flock on it too, so that once the PEs
	// are gone it is still not stale to a `symheap clean` beside this test
	// before the launcher removes it.
	defer unix.Close(holdShared(t, files[0]))
	pids := j.Pids()
	killed := time.Now()
	if err := j.Kill(2, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	res := j.Wait()
	took := time.Since(killed)
	t.Logf("job ended %v after the kill", took)
	if res.Status != 137 || res.FirstFailed != 2 {
		t.Errorf("status %d, first failed %d; want 137, PE 2", res.Status, res.FirstFailed)
	}
	// Ended because of the kill: the launcher stopped the other PEs
	// (they sleep for an hour), not the job's timeout. No bound on the
	// time: a job never ended meets that timeout.
	for _, p := range res.PEs {
		if p.Rank != 2 && !p.Stopped {
			t.Errorf("PE %d was not stopped by the launcher: %v", p.Rank, p)
		}
	}
	if res.TimedOut {
		t.Error("the job ended by its timeout, not by the kill")
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("PE pid %d: kill(0) = %v, want ESRCH", pid, err)
		}
	}
	if files, _ := launch.SegmentFiles(j.ID()); len(files) != 0 {
		t.Errorf("left behind: %v", files)
	}
	if len(res.Removed) != 1 {
		t.Errorf("removed %v, want the segment", res.Removed)
	}
}

// holdShared opens path and takes a shared flock on it, as an attached PE
// holds on its segment; the lock lasts until the returned descriptor is
// closed, or the process ends.
func holdShared(t *testing.T, path string) int {
	t.Helper()
	fd, err := unix.Open(path, unix.ORdonly, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(fd, unix.LockShared, true); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	return fd
}

// The inner tests fail, skip or time out on purpose. TestReporting runs
// them in a test binary of their own and reads the report; in a normal run
// they skip.
const innerEnv = "PETEST_INNER"

func TestInnerFail(t *testing.T) {
	if os.Getenv(innerEnv) == "" {
		t.Skip("run by TestReporting")
	}
	// PE 1 exits once PE 0 is in the body (a file named after their
	// parent, the inner test process, says so), so that the stacks of the
	// stopped PE 0 show the body, which TestReporting looks for.
	inBody := filepath.Join(os.TempDir(), fmt.Sprintf("petest-innerfail-%d", os.Getppid()))
	petest.Run(t, 2, func(t *testing.T) {
		fmt.Println("about to exit")
		if petest.Rank() == 1 {
			for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
				if os.Remove(inBody) == nil {
					break
				}
			}
			os.Exit(3)
		}
		if err := os.WriteFile(inBody, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour)
	})
	t.Log("petest.Run returned in a failing test")
}

func TestInnerSkip(t *testing.T) {
	if os.Getenv(innerEnv) == "" {
		t.Skip("run by TestReporting")
	}
	petest.Run(t, 2, func(t *testing.T) {
		t.Skip("feature X is missing")
	})
	t.Log("petest.Run returned in a skipped test")
}

func TestInnerTimeout(t *testing.T) {
	if os.Getenv(innerEnv) == "" {
		t.Skip("run by TestReporting")
	}
	petest.Run(t, 2, func(t *testing.T) {
		time.Sleep(time.Hour) // only the SIGQUIT sent at the timeout ends it
	}, petest.Timeout(time.Second))
}

// TestInnerRanNothing: PE 1 leaves with status 0 before the end of the
// test body, as a PE whose -test.run selected no test would.
func TestInnerRanNothing(t *testing.T) {
	if os.Getenv(innerEnv) == "" {
		t.Skip("run by TestReporting")
	}
	petest.Run(t, 2, func(t *testing.T) {
		if petest.Rank() == 1 {
			os.Exit(0)
		}
	})
	t.Log("petest.Run returned in a failing test")
}

func TestReporting(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestInner", "-test.v")
	cmd.Env = append(os.Environ(), innerEnv+"=1")
	out, err := cmd.CombinedOutput()
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("inner tests: %v, want exit status 1; output:\n%s", err, out)
	}
	report := string(out)
	for _, want := range []string{
		"--- FAIL: TestInnerFail",
		"PE 1 (pid ",
		") exit status 3",
		"[pe 1] about to exit",
		"--- SKIP: TestInnerSkip",
		"PE [0 1] skipped the test",
		"--- FAIL: TestInnerFail",
		"feature X is missing",
		"--- FAIL: TestInnerTimeout",
		"timed out after 1s",
		"--- FAIL: TestInnerRanNothing",
		"PE [1] exited with status 0 but did not run the test body to its end",
		"] goroutine ", // some PE's stacks (whose dump is captured before the kill depends on timing)
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, bad := range []string{"petest.Run returned"} {
		if strings.Contains(report, bad) {
			t.Errorf("report has %q", bad)
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s", report)
	}
	// The other PE of TestInnerFail: stopped by the launcher with SIGQUIT,
	// to which the Go runtime answers with its stacks and status 2; the
	// stacks show where it was (in the test body's sleep).
	if !regexp.MustCompile(`PE 0 \(pid \d+\) exit status 2 \(stopped by the launcher\)`).MatchString(report) {
		t.Errorf("report does not show PE 0 stopped")
	}
	if !regexp.MustCompile(`\[pe 0\] github.com/symheap/symheap/internal/petest_test.TestInnerFail.func1\(`).MatchString(report) {
		t.Errorf("report does not show where the stopped PE 0 was")
	}
}

var allocSink []byte

// TestAllocsPerRun: an allocation of f counts in every try, and f that
// allocates nothing counts none.
func TestAllocsPerRun(t *testing.T) {
	a := petest.AllocsPerRun(3, 50, func() { allocSink = make([]byte, 64) })
	if a.PerRun != 1 {
		t.Errorf("f allocating once a call: %v, want 1", a)
	}
	if len(a.Where) != 1 || !strings.Contains(a.Where[0], "TestAllocsPerRun") {
		t.Errorf("f allocating once a call: %v, want the one place, in TestAllocsPerRun", a)
	}
	if a := petest.AllocsPerRun(3, 50, func() { allocSink = allocSink[:0] }); a.PerRun != 0 || a.Where != nil {
		t.Errorf("f allocating nothing: %v, want 0 and nowhere", a)
	}
}
