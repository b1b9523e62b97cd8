package main

// symheap stat and info and the registration cache: a live job whose PEs
// register, hit and miss shows those figures per PE in `symheap stat JOB`
// (README: stat shows "registration-cache figures"), and `symheap info`
// reports the caching decision SYMHEAP_LEAVE_PINNED and
// SYMHEAP_MEMHOOK_DISABLE make.
//
// The PEs of these tests (and of stat_watch_test.go) are this test binary
// itself: started with statPEEnv set and SYMHEAP_PE set by the launcher, it
// runs statPE from init, before TestMain builds anything, and exits.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/internal/inspect"
	"github.com/symheap/symheap/launch"
	"github.com/symheap/symheap/memhook"
	"github.com/symheap/symheap/rcache"
)

const (
	// statPEEnv selects the PE program: "rcache" or "watch".
	statPEEnv = "SYMHEAP_STATTEST_PE"
	// statStopEnv names a file: once it exists, the PEs close and exit 0.
	statStopEnv = "SYMHEAP_STATTEST_STOP"
)

func init() {
	if mode := os.Getenv(statPEEnv); mode != "" && os.Getenv("SYMHEAP_PE") != "" {
		if err := statPE(mode); err != nil {
			fmt.Fprintf(os.Stderr, "stat test PE %s: %v\n", os.Getenv("SYMHEAP_PE"), err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// statPE is the PE program.
//
//	rcache  PE r registers two symmetric blocks (2 misses) and hits
//	        3+r times, makes the figures public (Barrier), says
//	        "ready", and waits for the stop file.
//	watch   every 20 ms, collectively, each PE allocates and frees a
//	        block and hits its cache once, then synchronises (which
//	        makes its figures public); it says "ready" after the first
//	        round and goes on until PE 0 sees the stop file.
func statPE(mode string) error {
	pe, err := symheap.Init(symheap.Config{})
	if err != nil {
		return err
	}
	defer pe.Close()
	rc, err := pe.RegistrationCache()
	if err != nil {
		return err
	}
	touch := func(b []byte) error {
		e, err := rc.Get(memhook.RangeOf(b), rcache.Transports(0))
		if err != nil {
			return err
		}
		return rc.Put(e)
	}
	stop := os.Getenv(statStopEnv)
	stopped := func() bool { _, err := os.Stat(stop); return err == nil }
	switch mode {
	case "rcache":
		a, err := symheap.Malloc[byte](pe, 64<<10)
		if err != nil {
			return err
		}
		b, err := symheap.Malloc[byte](pe, 64<<10)
		if err != nil {
			return err
		}
		for _, blk := range [][]byte{a, b} {
			if err := touch(blk); err != nil { // a miss
				return err
			}
		}
		for i := 0; i < 3+pe.Rank(); i++ {
			if err := touch(a); err != nil { // a hit
				return err
			}
		}
		if err := pe.Barrier(); err != nil {
			return err
		}
		fmt.Printf("ready %d %s\n", pe.Rank(), pe.Job())
		for !stopped() {
			time.Sleep(10 * time.Millisecond)
		}
		return pe.Barrier()
	case "watch":
		flag, err := symheap.Calloc[int64](pe, 1)
		if err != nil {
			return err
		}
		// Whole pages of its own: the frees below must not invalidate
		// its registration (the cache works in pages).
		keep, err := symheap.Align[byte](pe, 4096, 8192)
		if err != nil {
			return err
		}
		for round := 0; ; round++ {
			x, err := symheap.Malloc[byte](pe, 1024)
			if err != nil {
				return err
			}
			if err := symheap.Free(pe, x); err != nil {
				return err
			}
			if err := touch(keep); err != nil {
				return err
			}
			if pe.Rank() == 0 && stopped() {
				for p := 0; p < pe.Size(); p++ {
					symheap.Ptr(pe, flag, p)[0] = 1
				}
			}
			if err := pe.Barrier(); err != nil {
				return err
			}
			if round == 0 {
				fmt.Printf("ready %d %s\n", pe.Rank(), pe.Job())
			}
			if flag[0] != 0 {
				return nil
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return fmt.Errorf("unknown mode %q", mode)
}

// statJob is a job of statPE PEs started by statStartJob.
type statJob struct {
	g    *launch.Group
	out  *statBuffer
	stop string // the stop file
}

// statStartJob starts n PEs of this test binary running statPE(mode) with
// extra environment env, and waits until each says ready. The job is
// stopped, and checked for /dev/shm leftovers, in t.Cleanup.
func statStartJob(t *testing.T, n int, mode string, env ...string) *statJob {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	j := &statJob{out: new(statBuffer), stop: filepath.Join(t.TempDir(), "stop")}
	env = append([]string{statPEEnv + "=" + mode, statStopEnv + "=" + j.stop,
		"SYMHEAP_SHARED_SIZE=1m", "GORACE=atexit_sleep_ms=0"}, env...)
	j.g, err = launch.Start(context.Background(), launch.Options{
		N: n, Heap: "4m", Tag: true, Stdout: j.out, Stderr: j.out, Env: env, Timeout: 60 * time.Second,
	}, exe)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		j.g.Stop()
		<-j.g.Done()
		if left, _ := launch.RemoveSegmentFiles(j.g.Job()); len(left) > 0 {
			t.Errorf("job %s left %v in /dev/shm", j.g.Job(), left)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(j.out.String(), "ready ") < n {
		select {
		case <-j.g.Done():
			res, err := j.g.Wait()
			t.Fatalf("job %s ended before its PEs were ready: %v, status %d; output:\n%s", j.g.Job(), err, res.Status, j.out)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: PEs not ready after 30 s; output:\n%s", j.g.Job(), j.out)
		}
	}
	return j
}

// end tells the PEs to close and waits for them: every PE must exit 0
// and the job must leave nothing in /dev/shm.
func (j *statJob) end(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(j.stop, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := j.g.Wait()
	if err != nil || res.Status != 0 {
		t.Errorf("job %s: %v, status %d; output:\n%s", j.g.Job(), err, res.Status, j.out)
	}
	if len(res.Removed) > 0 {
		t.Errorf("job %s: its PEs left %v in /dev/shm (removed by the launcher)", j.g.Job(), res.Removed)
	}
	if left, _ := launch.SegmentFiles(j.g.Job()); len(left) > 0 {
		t.Errorf("job %s left %v in /dev/shm", j.g.Job(), left)
	}
}

// statBuffer collects the PEs' output.
type statBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *statBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *statBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestStatShowsRCacheFigures: `symheap stat JOB` and `symheap stat --json
// JOB` show each PE's registration-cache hits and misses of a live job.
func TestStatShowsRCacheFigures(t *testing.T) {
	const n = 2
	j := statStartJob(t, n, "rcache", "SYMHEAP_LEAVE_PINNED=yes")
	job := j.g.Job()
	wantHits := func(rank int) uint64 { return uint64(3 + rank) }
	const wantMisses = 2

	var ji inspect.JobInfo
	if err := json.Unmarshal([]byte(symheapCmd(t, "stat", "--json", job)), &ji); err != nil {
		t.Fatal(err)
	}
	if len(ji.PEs) != n {
		t.Fatalf("stat --json %s: %d PEs, want %d", job, len(ji.PEs), n)
	}
	for _, p := range ji.PEs {
		rc := p.RCache
		if rc.Hits != wantHits(p.Rank) || rc.Misses != wantMisses || rc.Registrations != wantMisses || rc.BytesRegistered < wantMisses*64<<10 {
			t.Errorf("stat --json: PE %d registration cache %+v; want %d hits, %d misses and registrations of 64 KiB",
				p.Rank, rc, wantHits(p.Rank), wantMisses)
		}
	}

	// The wide table: the last three columns are RC HIT, RC MISS, RC INVAL.
	out := symheapCmd(t, "stat", "--wide", job)
	t.Logf("symheap stat %s:\n%s", job, out)
	lines := strings.Split(out, "\n")
	header := -1
	for i, l := range lines {
		if strings.Contains(l, "RC HIT") {
			header = i
			break
		}
	}
	if header < 0 || !strings.HasSuffix(strings.TrimSpace(lines[header]), "RC HIT  RC MISS  RC INVAL") {
		t.Fatalf("stat %s has no RC HIT, RC MISS, RC INVAL columns at the end of its table:\n%s", job, out)
	}
	seen := 0
	for _, l := range lines[header+1:] {
		if strings.TrimSpace(l) == "" {
			break // the table ends; the registration cache's own table follows
		}
		f := strings.Fields(l)
		if len(f) < 4 {
			continue
		}
		rank, err := strconv.Atoi(f[0])
		if err != nil || rank < 0 || rank >= n {
			continue
		}
		seen++
		hits, misses := f[len(f)-3], f[len(f)-2]
		if hits != strconv.FormatUint(wantHits(rank), 10) || misses != strconv.Itoa(wantMisses) {
			t.Errorf("stat %s: PE %d shows RC HIT %s, RC MISS %s; want %d and %d:\n%s", job, rank, hits, misses, wantHits(rank), wantMisses, out)
		}
	}
	if seen != n {
		t.Errorf("stat %s: %d PE rows, want %d:\n%s", job, seen, n, out)
	}
	j.end(t)
}

// TestInfoReportsCachingDecision: `symheap info` says whether registration
// caching is on and why, as SYMHEAP_LEAVE_PINNED and SYMHEAP_MEMHOOK_DISABLE
// make it.
func TestInfoReportsCachingDecision(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want []string
	}{
		{[]string{"SYMHEAP_LEAVE_PINNED=yes"}, []string{"registration caching: on", "leave pinned yes"}},
		{[]string{"SYMHEAP_LEAVE_PINNED=no"}, []string{"registration caching: off", "leave pinned no"}},
		{[]string{"SYMHEAP_MEMHOOK_DISABLE=yes", "SYMHEAP_LEAVE_PINNED=yes"}, []string{"registration caching: off", "SYMHEAP_MEMHOOK_DISABLE"}},
	} {
		cmd := exec.Command(filepath.Join(bin, "symheap"), "info")
		cmd.Env = append(os.Environ(), memhook.EnvLeavePinned+"=", memhook.EnvLeavePinnedPipeline+"=", memhook.EnvDisable+"=")
		cmd.Env = append(cmd.Env, c.env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("symheap info with %v: %v\n%s", c.env, err, out)
		}
		line := ""
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "registration caching:") {
				line = strings.TrimSpace(l)
			}
		}
		for _, w := range c.want {
			if !strings.Contains(line, w) {
				t.Errorf("symheap info with %v: caching line %q lacks %q; output:\n%s", c.env, line, w, out)
			}
		}
	}
}

// TestInfoListsCachingParameters: README says `symheap info` shows "every
// parameter with its value and source"; the caching switches are
// parameters (docs/environment.md).
func TestInfoListsCachingParameters(t *testing.T) {
	cmd := exec.Command(filepath.Join(bin, "symheap"), "info")
	cmd.Env = append(os.Environ(), "SYMHEAP_LEAVE_PINNED=yes", "SYMHEAP_MEMHOOK_DISABLE=no")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("symheap info: %v\n%s", err, out)
	}
	for _, name := range []string{"SYMHEAP_LEAVE_PINNED", "SYMHEAP_MEMHOOK_DISABLE"} {
		found := false
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) >= 3 && f[0] == name && f[len(f)-1] == "environment" {
				found = true
			}
		}
		if !found {
			t.Errorf("symheap info: no parameter row for %s with its value and source \"environment\":\n%s", name, out)
		}
	}
}
