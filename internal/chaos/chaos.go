// Package chaos is symheap's fault campaign: it runs jobs of 2 to 8 PEs
// under the real shrun, each PE allocating, putting, sending and freeing in
// a loop (chaospe), and at a random moment kills one PE with SIGKILL, or
// stops it with SIGSTOP (a hung PE). Every run must end within a bound of
// the fault with a non-zero status from shrun, leave no PE process and no
// /dev/shm segment behind, and the next job must start cleanly (it is the
// next run).
//
//	go run ./internal/chaos/cmd/chaos -runs 300   (make chaos)
//
// make test runs a short form (TestChaosShort).
package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/symheap/symheap/internal/segment"
	"github.com/symheap/symheap/internal/unix"
)

// Config sets up a campaign.
type Config struct {
	Runs        int           // jobs to run
	Stop        bool          // SIGSTOP instead of SIGKILL
	PeerTimeout time.Duration // SYMHEAP_PEER_TIMEOUT for the PEs (SIGSTOP runs)
	Bin         string        // directory with shrun and chaospe (Build makes it)
	Seed        uint64
	Log         io.Writer // one line per run, or nil
}

// Report sums a campaign up.
type Report struct {
	Runs, Faults  int
	Survivors     int           // PE processes alive after their job ended
	SegmentsLeft  int           // symheap segments of this user left in /dev/shm
	BadStatus     int           // jobs that ended with status 0 after a fault
	TooSlow       int           // jobs that outlived the bound after the fault
	NoStart       int           // jobs whose PEs never got going
	LongestExit   time.Duration // from the fault to shrun's exit
	Bound         time.Duration
	StatusCounts  map[int]int
	FirstFailures []string
}

// Build compiles shrun and chaospe into dir.
func Build(dir string) error {
	for pkg, name := range map[string]string{
		"github.com/symheap/symheap/cmd/shrun":              "shrun",
		"github.com/symheap/symheap/internal/chaos/chaospe": "chaospe",
	} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg).CombinedOutput()
		if err != nil {
			return fmt.Errorf("chaos: build %s: %v\n%s", pkg, err, out)
		}
	}
	return nil
}

// Run runs the campaign.
func Run(ctx context.Context, c Config) (Report, error) {
	r := Report{StatusCounts: map[int]int{}}
	r.Bound = 2 * time.Second
	if c.Stop {
		if c.PeerTimeout <= 0 {
			c.PeerTimeout = time.Second
		}
		r.Bound = c.PeerTimeout + 2*time.Second
	}
	rng := rand.New(rand.NewPCG(c.Seed, 0x5eed))
	for i := 0; i < c.Runs && ctx.Err() == nil; i++ {
		n := 2 + rng.IntN(7)
		delay := time.Duration(20+rng.IntN(400)) * time.Millisecond
		line, err := runOne(ctx, c, &r, n, rng.IntN(n), delay)
		if err != nil {
			return r, err
		}
		if c.Log != nil {
			fmt.Fprintf(c.Log, "run %3d: %s\n", i+1, line)
		}
	}
	return r, nil
}

// jobSegments lists this user's files in /dev/shm that belong to jobs
// started by the shrun process with this pid (shrun names its jobs
// "j<pid>-<random>"). Other symheap jobs running at the same time (tests
// of other packages) are not counted, and never touched.
func jobSegments(shrunPid int) []string {
	prefix := segment.Name(unix.Getuid(), fmt.Sprintf("j%d-", shrunPid))
	var out []string
	ents, _ := os.ReadDir(unix.ShmDir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

func runOne(ctx context.Context, c Config, r *Report, n, victim int, delay time.Duration) (string, error) {
	r.Runs++
	cmd := exec.CommandContext(ctx, filepath.Join(c.Bin, "shrun"), "-n", strconv.Itoa(n), "--heap", "4m", "--timeout", "60s",
		filepath.Join(c.Bin, "chaospe"))
	cmd.Env = append(os.Environ(), "SYMHEAP_SHARED_SIZE=1m")
	if c.PeerTimeout > 0 {
		cmd.Env = append(cmd.Env, "SYMHEAP_PEER_TIMEOUT="+c.PeerTimeout.String())
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return "", err
	}
	var mu sync.Mutex
	pids := map[int]int{}
	running := 0
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		closed := false
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			mu.Lock()
			if len(f) == 3 && f[0] == "pid" {
				rank, _ := strconv.Atoi(f[1])
				pid, _ := strconv.Atoi(f[2])
				pids[rank] = pid
			}
			if len(f) == 2 && f[0] == "running" {
				running++
				if running == n && !closed {
					close(ready)
					closed = true
				}
			}
			mu.Unlock()
		}
		if !closed {
			close(ready)
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
	}
	time.Sleep(delay)
	mu.Lock()
	pid, started := pids[victim], running == n
	all := make([]int, 0, len(pids))
	for _, p := range pids {
		all = append(all, p)
	}
	mu.Unlock()
	if !started || pid == 0 {
		r.NoStart++
		cmd.Process.Kill()
		<-exited
		return fmt.Sprintf("%d PEs: job did not get going", n), nil
	}
	sig, name := syscall.SIGKILL, "kill -9"
	if c.Stop {
		sig, name = syscall.SIGSTOP, "kill -STOP"
	}
	fault := time.Now()
	syscall.Kill(pid, sig)
	r.Faults++
	var werr error
	select {
	case werr = <-exited:
	case <-time.After(r.Bound + 10*time.Second):
		cmd.Process.Kill()
		werr = <-exited
	}
	took := time.Since(fault)
	if took > r.LongestExit {
		r.LongestExit = took
	}
	status := 0
	if ee, ok := werr.(*exec.ExitError); ok {
		status = ee.ExitCode()
	}
	r.StatusCounts[status]++
	problem := ""
	if status == 0 {
		r.BadStatus++
		problem += " STATUS-0"
	}
	if took > r.Bound {
		r.TooSlow++
		problem += " TOO-SLOW"
	}
	for _, name := range jobSegments(cmd.Process.Pid) {
		r.SegmentsLeft++
		problem += " SEGMENT-LEFT(" + name + ")"
		os.Remove(filepath.Join(unix.ShmDir, name))
	}
	for _, p := range all {
		if st, err := unix.ProcessState(p); err == nil && st != 'Z' {
			r.Survivors++
			problem += fmt.Sprintf(" SURVIVOR(pid %d, state %c)", p, st)
			syscall.Kill(p, syscall.SIGKILL)
		}
	}
	line := fmt.Sprintf("%d PEs, %s PE %d after %v: shrun exited %d after %v%s", n, name, victim, delay, status,
		took.Round(time.Millisecond), problem)
	if problem != "" && len(r.FirstFailures) < 10 {
		r.FirstFailures = append(r.FirstFailures, line)
	}
	return line, nil
}

// String prints the campaign's summary.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "runs %d, faults %d, survivors %d, segments left %d, zero statuses %d, slower than %v: %d, did not start: %d, longest time to exit %v\n",
		r.Runs, r.Faults, r.Survivors, r.SegmentsLeft, r.BadStatus, r.Bound, r.TooSlow, r.NoStart, r.LongestExit.Round(time.Millisecond))
	fmt.Fprintf(&b, "exit statuses: %v\n", r.StatusCounts)
	for _, f := range r.FirstFailures {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	return b.String()
}

// OK reports whether the campaign met every bound.
func (r Report) OK() bool {
	return r.Survivors == 0 && r.SegmentsLeft == 0 && r.BadStatus == 0 && r.TooSlow == 0 && r.NoStart == 0
}
