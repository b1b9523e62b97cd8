package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/segment"
	"github.com/symheap/symheap/internal/unix"
)

// ringLine is what each PE prints (see run).
var ringLine = regexp.MustCompile(`^PE (\d+) of (\d+): my inbox, at (0x[0-9a-f]+) here and (the same address in every PE|other addresses in other PEs), holds "hello from PE (\d+)" from PE (\d+) \(square (\d+)\)$`)

// TestRingDemo runs what `make demo` runs, `shrun -n 4 --heap 32m --timeout
// 60s ./examples/ring`, with shrun and the example built into a temporary
// directory: it must exit 0, every PE must print the greeting of its
// left-hand neighbour, and the job must leave nothing in /dev/shm.
func TestRingDemo(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build shrun and the example: %v", err)
	}
	dir := t.TempDir()
	build := exec.Command(goTool, "build", "-o", dir, "../../cmd/shrun", ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ringJob(t, dir, 4, "32m", "60s")
}

// TestRingBig is TestRingDemo on 64 PEs, with heaps of 4m and 1m: a job
// of many PEs oversubscribed on a machine of a few cores must start, run
// and end as a small one does (its figures: docs/bench/scale.md, "256
// PEs on one node").
func TestRingBig(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build shrun and the example: %v", err)
	}
	if testing.Short() {
		t.Skip("a job of 64 PEs: not in -short")
	}
	dir := t.TempDir()
	build := exec.Command(goTool, "build", "-o", dir, "../../cmd/shrun", ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Setenv("SYMHEAP_SHARED_SIZE", "1m")
	ringJob(t, dir, 64, "4m", "600s")
}

// ringJob runs the ring example built in dir on n PEs under shrun and
// checks every PE's line and that nothing is left in /dev/shm.
func ringJob(t *testing.T, dir string, n int, heap, timeout string) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(dir, "shrun"), "-n", strconv.Itoa(n), "--heap", heap, "--timeout", timeout, filepath.Join(dir, "ring"))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// shrun names its jobs "j<its pid>-<random>" (launch.NewJobID).
	jobPrefix := segment.Name(unix.Getuid(), fmt.Sprintf("j%d-", cmd.Process.Pid))
	t.Cleanup(func() {
		for _, f := range ringLeftovers(t, jobPrefix) {
			os.Remove(f)
		}
	})
	err := cmd.Wait()
	t.Logf("shrun -n %d ring: %v in %v\nstdout:\n%s\nstderr:\n%s", n, err, time.Since(start).Round(time.Millisecond), stdout.String(), stderr.String())
	if err != nil {
		t.Errorf("shrun -n %d ring: %v, want exit status 0", n, err)
	}

	seen := make(map[int]bool)
	addrs := make([]uint64, n)
	mode := ""
	for _, l := range strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n") {
		m := ringLine.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("unexpected output line %q", l)
			continue
		}
		me, _ := strconv.Atoi(m[1])
		size, _ := strconv.Atoi(m[2])
		addr, _ := strconv.ParseUint(m[3], 0, 64)
		hello, _ := strconv.Atoi(m[5])
		from, _ := strconv.Atoi(m[6])
		square, _ := strconv.Atoi(m[7])
		if me < 0 || me >= n || seen[me] {
			t.Errorf("line %q: PE %d out of range or printed twice", l, me)
			continue
		}
		seen[me] = true
		addrs[me] = addr
		left := (me + n - 1) % n
		if size != n || hello != left || from != left || square != left*left {
			t.Errorf("PE %d: %q; want PE %d's greeting (square %d) in a job of %d", me, l, left, left*left, n)
		}
		if mode != "" && m[4] != mode {
			t.Errorf("PE %d says %q, another PE %q", me, m[4], mode)
		}
		mode = m[4]
	}
	if len(seen) != n {
		t.Errorf("%d of %d PEs printed their line", len(seen), n)
	}
	// Same address: one mapping for all, so PE p's inbox lies at the
	// same offset in partition p: the addresses are evenly spaced.
	if len(seen) == n && mode == "the same address in every PE" {
		stride := addrs[1] - addrs[0]
		for p := 1; p < n; p++ {
			if addrs[p]-addrs[p-1] != stride || stride == 0 {
				t.Errorf("inboxes at %#x: not evenly spaced partitions of one mapping", addrs)
				break
			}
		}
	}
	if left := ringLeftovers(t, jobPrefix); len(left) > 0 {
		t.Errorf("the job left %v in /dev/shm", left)
	}
}

// ringLeftovers lists the /dev/shm files whose names start with prefix.
func ringLeftovers(t *testing.T, prefix string) []string {
	t.Helper()
	ents, err := os.ReadDir(unix.ShmDir)
	if err != nil {
		t.Errorf("read %s: %v", unix.ShmDir, err)
		return nil
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, filepath.Join(unix.ShmDir, e.Name()))
		}
	}
	return out
}
