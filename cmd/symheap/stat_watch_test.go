package main

// symheap stat --watch: refreshes a live job's figures at the interval
// (README: `symheap stat [--json] [--watch 1s] ... [JOB]`; its usage:
// "refresh every interval (e.g. 1s) until interrupted"), shows them change
// while the job runs and the PEs closed once it has ended, and stops when
// interrupted. The PEs are statPE in its "watch" mode (stat_rcache_test.go).

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/inspect"
	"golang.org/x/sys/unix"
)

// watchInterval is the --watch interval of the tests: long next to a
// frame's work, short for the suite.
const watchInterval = 200 * time.Millisecond

// watchFrame is one refresh of `symheap stat --watch --json`.
type watchFrame struct {
	at time.Time
	ji inspect.JobInfo
}

// startWatch starts `symheap stat --watch watchInterval args...` with its
// standard output going to stdout, or, when stdout is nil, to the returned
// pipe. It is killed in t.Cleanup if the test has not stopped it.
func startWatch(t *testing.T, stdout io.Writer, args ...string) (*exec.Cmd, io.Reader, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "symheap"), append([]string{"stat", "--watch", watchInterval.String()}, args...)...)
	var pipe io.Reader
	if stdout == nil {
		var err error
		if pipe, err = cmd.StdoutPipe(); err != nil {
			t.Fatal(err)
		}
	} else {
		cmd.Stdout = stdout
	}
	stderr := new(strings.Builder)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, pipe, stderr
}

// interrupt sends SIGINT to a watching stat, which must then end within a
// few seconds, by the signal (its documented way out), having printed
// nothing on stderr.
func interrupt(t *testing.T, cmd *exec.Cmd, stderr *strings.Builder) {
	t.Helper()
	sent := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("symheap stat --watch still ran 5 s after SIGINT")
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !(ws.Signaled() && ws.Signal() == syscall.SIGINT) && ws.ExitStatus() != 0 {
		t.Errorf("symheap stat --watch after SIGINT: %v, want an end by SIGINT or status 0; stderr:\n%s", cmd.ProcessState, stderr)
	}
	if stderr.Len() > 0 {
		t.Errorf("symheap stat --watch wrote to stderr:\n%s", stderr)
	}
	t.Logf("symheap stat --watch %v ended %v after SIGINT: %v", watchInterval, time.Since(sent).Round(time.Millisecond), cmd.ProcessState)
}

// endsByItself waits for a watching stat to end on its own after its
// job has ended (within a few intervals), with status 0 and nothing on
// stderr.
func endsByItself(t *testing.T, cmd *exec.Cmd, stderr *strings.Builder) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("symheap stat --watch after its job ended: %v; stderr:\n%s", err, stderr)
		}
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("symheap stat --watch still ran 5 s after its job ended")
	}
	if stderr.Len() > 0 {
		t.Errorf("symheap stat --watch wrote to stderr:\n%s", stderr)
	}
}

// TestStatWatch: --watch --json prints a frame per interval (not faster,
// and not much slower), the live job's figures grow from frame to frame,
// after the job's end the last frame shows every PE closed and the
// command ends by itself, letting go of the segment. A text-mode watcher of the same job clears the screen
// before each frame and shows the allocation counts moving.
func TestStatWatch(t *testing.T) {
	const n = 2
	j := statStartJob(t, n, "watch", "SYMHEAP_LEAVE_PINNED=yes")
	job := j.g.Job()

	jsonCmd, jsonOut, jsonErr := startWatch(t, nil, "--json", job)
	textOut := new(statBuffer)
	textCmd, _, textErr := startWatch(t, textOut, job)
	intCmd, _, intErr := startWatch(t, io.Discard, job) // stopped by SIGINT while the job runs

	frames := make(chan watchFrame, 1000)
	go func() {
		defer close(frames)
		dec := json.NewDecoder(jsonOut)
		for {
			var ji inspect.JobInfo
			if err := dec.Decode(&ji); err != nil {
				return
			}
			frames <- watchFrame{time.Now(), ji}
		}
	}()
	next := func(within time.Duration) watchFrame {
		t.Helper()
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatalf("symheap stat --watch --json ended its output; stderr:\n%s", jsonErr)
			}
			return f
		case <-time.After(within):
			t.Fatalf("no frame from symheap stat --watch %v within %v", watchInterval, within)
		}
		panic("unreachable")
	}

	// While the job runs: 5 frames.
	const k = 5
	var live []watchFrame
	for i := 0; i < k; i++ {
		f := next(10 * time.Second)
		if f.ji.Job != job || len(f.ji.PEs) != n {
			t.Fatalf("frame %d: job %q with %d PEs, want %s with %d", i, f.ji.Job, len(f.ji.PEs), job, n)
		}
		live = append(live, f)
	}
	span := live[k-1].at.Sub(live[0].at)
	t.Logf("%d frames of the live job over %v; PE 0 allocations %d -> %d", k, span.Round(time.Millisecond),
		live[0].ji.PEs[0].SymAllocs, live[k-1].ji.PEs[0].SymAllocs)
	for p := 0; p < n; p++ {
		first, last := live[0].ji.PEs[p], live[k-1].ji.PEs[p]
		for i := 1; i < k; i++ {
			if live[i].ji.PEs[p].SymAllocs < live[i-1].ji.PEs[p].SymAllocs {
				t.Errorf("PE %d: allocations went down from frame %d to %d", p, i-1, i)
			}
		}
		if last.SymAllocs <= first.SymAllocs || last.RCache.Hits <= first.RCache.Hits {
			t.Errorf("PE %d: figures did not move over %v of a live job: allocations %d -> %d, cache hits %d -> %d",
				p, span, first.SymAllocs, last.SymAllocs, first.RCache.Hits, last.RCache.Hits)
		}
		if last.State != "attached" || !last.Alive {
			t.Errorf("PE %d of the live job: state %q alive %v", p, last.State, last.Alive)
		}
	}

	interrupt(t, intCmd, intErr)

	// The job ends: the watcher shows its PEs closed, then ends by itself
	// with status 0, letting go of the segment.
	j.end(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		f := next(10 * time.Second)
		closed := 0
		for _, p := range f.ji.PEs {
			if p.State == "closed" {
				closed++
			}
		}
		if closed == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the job's end, the frames still show %+v", f.ji.PEs)
		}
	}
	endsByItself(t, jsonCmd, jsonErr)

	// The text watcher, whose output is no terminal: plain snapshots, each
	// under a line with its time, no escape sequence; PE 0's ALLOCS
	// column moving between frames of the live job, with a rate per
	// second from the second frame on; a last line saying the job has
	// ended.
	endsByItself(t, textCmd, textErr)
	text := textOut.String()
	if want := "job " + job + " has ended"; !strings.Contains(text, want) {
		t.Errorf("text watcher's output lacks %q", want)
	}
	if strings.Contains(text, "\033") {
		t.Errorf("text watcher wrote escape sequences into a pipe:\n%q", text)
	}
	frameLine := regexp.MustCompile(`(?m)^--- \d\d:\d\d:\d\d, every ` + regexp.QuoteMeta(watchInterval.String()) + ` ---$`)
	chunks := frameLine.Split(text, -1)
	if len(chunks) < k+1 {
		t.Fatalf("text watcher printed %d frames (each under a line matching %v); want at least %d:\n%s", len(chunks)-1, frameLine, k, text)
	}
	allocs := map[string]bool{}
	rated := false
	for _, c := range chunks[1:] {
		for _, l := range strings.Split(c, "\n") {
			// PE  STATE  HEAP USE (x of y)  FRAG  ALLOCS  /s  RMA OPS ...
			if f := strings.Fields(l); len(f) > 7 && f[0] == "0" && f[1] == "attached" {
				allocs[f[6]] = true
				rated = rated || strings.HasSuffix(f[7], "/s") && f[7] != "0/s"
			}
		}
	}
	if len(allocs) < 2 {
		t.Errorf("text watcher: PE 0's ALLOCS column never changed (%v):\n%s", allocs, text)
	}
	if !rated {
		t.Errorf("text watcher: PE 0's allocations never showed a rate per second:\n%s", text)
	}
	if w := widest(text); w > 100 {
		t.Errorf("text watcher: a line of %d columns, want at most 100:\n%s", w, text)
	}
}

// widest returns the length of text's longest line but the job's header
// (which names the job and its program).
func widest(text string) int {
	w := 0
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "job ") {
			w = max(w, len(l))
		}
	}
	return w
}

// TestStatWatchTerminal: on a terminal (a pseudo-terminal here) --watch
// clears the screen before each frame instead of printing time lines,
// and the job list names the job's program.
func TestStatWatchTerminal(t *testing.T) {
	j := statStartJob(t, 2, "watch")
	job := j.g.Job()
	if list := symheapCmd(t, "stat"); !strings.Contains(list, "PROGRAM") || !listsProgram(list, job) {
		t.Errorf("stat does not name the program of job %s:\n%s", job, list)
	}

	master, slave, err := openPTY()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer master.Close()
	cmd, _, stderr := startWatch(t, slave, job)
	slave.Close() // the child holds it
	var out strings.Builder
	read := make(chan struct{})
	framed := make(chan struct{}) // closed at the first frame
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		seen := false
		for {
			n, err := master.Read(buf)
			out.Write(buf[:n])
			if !seen && strings.Contains(out.String(), "\033[H\033[2J") {
				close(framed)
				seen = true
			}
			if err != nil {
				return
			}
		}
	}()
	// The job ends once the watcher has drawn a frame of it: ended
	// before the watcher opened it, there is nothing to watch (an error,
	// rightly). A watcher slow to start (a loaded machine, -race) is
	// waited for.
	select {
	case <-framed:
	case <-read:
	case <-time.After(2 * time.Minute):
		t.Fatal("symheap stat --watch drew no frame in 2 minutes")
	}
	j.end(t)
	endsByItself(t, cmd, stderr)
	master.Close()
	<-read
	text := out.String()
	if strings.Count(text, "\033[H\033[2J") < 1 || strings.Contains(text, "--- ") {
		t.Errorf("stat --watch on a terminal: want the screen cleared before each frame, no time lines:\n%q", text)
	}
}

// listsProgram reports whether the job list shows job with a program name.
func listsProgram(list, job string) bool {
	for _, l := range strings.Split(list, "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[0] == job {
			return f[1] != "-"
		}
	}
	return false
}

// openPTY opens a pseudo-terminal pair.
func openPTY() (master, slave *os.File, err error) {
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	master = os.NewFile(uintptr(fd), "/dev/ptmx")
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, err
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	sfd, err := unix.Open(fmt.Sprintf("/dev/pts/%d", n), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, os.NewFile(uintptr(sfd), "/dev/pts"), nil
}
