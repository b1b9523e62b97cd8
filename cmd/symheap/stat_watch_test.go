package main

// symheap stat --watch: refreshes a live job's figures at the interval
// (README: `symheap stat [--json] [--watch 1s] ... [JOB]`; its usage:
// "refresh every interval (e.g. 1s) until interrupted"), shows them change
// while the job runs and the PEs closed once it has ended, and stops when
// interrupted. The PEs are statPE in its "watch" mode (stat_rcache_test.go).

import (
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/inspect"
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
	// A frame comes after a sleep of the interval: k-1 gaps take at least
	// (k-1) intervals (less a wide margin: the first frame may be read
	// late), and on a loaded machine, not more than that plus a few
	// seconds.
	if span < (k-1)*watchInterval/2 || span > (k-1)*watchInterval+5*time.Second {
		t.Errorf("%d frames over %v with --watch %v", k, span, watchInterval)
	}
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

	// The text watcher: a cleared screen and a table per frame, with the
	// ALLOCS column of PE 0 moving between frames of the live job, and a
	// last line saying the job has ended.
	endsByItself(t, textCmd, textErr)
	text := textOut.String()
	if want := "job " + job + " has ended"; !strings.Contains(text, want) {
		t.Errorf("text watcher's output lacks %q", want)
	}
	const clear = "\033[H\033[2J"
	chunks := strings.Split(text, clear)
	if len(chunks) < k+1 {
		t.Fatalf("text watcher printed %d frames (each after %q); want at least %d:\n%s", len(chunks)-1, clear, k, text)
	}
	allocs := map[string]bool{}
	for _, c := range chunks[1:] {
		for _, l := range strings.Split(c, "\n") {
			// PE  PID  STATE  HEAP  IN USE  LARGEST FREE  FRAG  ALLOCS ...
			if f := strings.Fields(l); len(f) > 8 && f[0] == "0" && f[2] == "attached" {
				allocs[f[7]] = true
			}
		}
	}
	if len(allocs) < 2 {
		t.Errorf("text watcher: PE 0's ALLOCS column never changed (%v):\n%s", allocs, text)
	}
}
