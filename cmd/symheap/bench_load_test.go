package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// busyOf returns the pids of the live busy processes (__busy) whose
// parent was the bench with pid parent, from /proc/*/cmdline (a dead one,
// a zombie, has none).
func busyOf(parent int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if i := slices.Index(args, hiddenBusy); i >= 0 && slices.Equal(args[i+1:], []string{"-parent", strconv.Itoa(parent)}) {
			out = append(out, pid)
		}
	}
	return out
}

// TestBenchLoad runs the load report end to end (quick, one busy process
// per CPU, batches of 2 calls, no peers) and checks its shape, and that the bench reaped every
// busy process before it exited.
func TestBenchLoad(t *testing.T) {
	cmd := exec.Command(filepath.Join(bin, "symheap"), "bench", "--load", "1", "--quick", "--batch", "2", "--tests", "barrier,bcast,fcollect,malloc")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench --load 1: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if left := busyOf(cmd.Process.Pid); len(left) > 0 {
		t.Errorf("busy processes %v outlived the bench", left)
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	out := stdout.String()
	want := fmt.Sprintf("# symheap bench, under load: 1 busy processes per CPU (%d in all)", runtime.NumCPU())
	if !strings.Contains(out, want) {
		t.Errorf("no %q line", want)
	}
	if !strings.Contains(stderr.String(), fmt.Sprintf("starting %d busy processes", runtime.NumCPU())) {
		t.Errorf("the progress does not say the load started:\n%s", stderr.String())
	}
	// A table per test and job size, a row per size with both figures,
	// p50 at most p99.
	for _, tc := range []struct {
		title string
		sizes []string
	}{
		{"# Barrier, 2 PEs:", []string{"0"}}, {"# Barrier, 4 PEs:", []string{"0"}},
		{"# Broadcast from PE 0, 4 PEs:", []string{"8", "512", "8192"}},
		{"# FCollect (every PE's block to every PE), 2 PEs:", []string{"8"}},
		{"# FCollect (every PE's block to every PE), 4 PEs:", []string{"8"}},
		{"# Collective Malloc+Free, 2 PEs:", []string{"64", "1048576"}},
		{"# Collective Malloc+Free, 4 PEs:", []string{"64", "1048576"}},
	} {
		if h := tableHeader(out, tc.title); strings.Join(strings.Fields(h), " ") != "# Size Go p50 Go p99" {
			t.Errorf("%s: header %q", tc.title, h)
		}
		rows := tableRows(out, tc.title)
		var sizes []string
		for _, r := range rows {
			f := strings.Fields(r)
			sizes = append(sizes, f[0])
			if len(f) != 3 {
				t.Errorf("%s: row %q: want size, p50, p99", tc.title, r)
				continue
			}
			p50, err1 := strconv.ParseFloat(f[1], 64)
			p99, err2 := strconv.ParseFloat(f[2], 64)
			if err1 != nil || err2 != nil || p50 <= 0 || p50 > p99 {
				t.Errorf("%s: row %q: want 0 < p50 <= p99", tc.title, r)
			}
		}
		if !slices.Equal(sizes, tc.sizes) {
			t.Errorf("%s: rows for sizes %v, want %v", tc.title, sizes, tc.sizes)
		}
	}
	if strings.Contains(out, "ERROR") || t.Failed() {
		t.Errorf("output:\n%s", out)
	}
}

// TestBenchLoadKilled kills a bench running under load with SIGKILL: its
// busy processes must die with it (Pdeathsig), and its job of PEs must
// leave no segment.
func TestBenchLoadKilled(t *testing.T) {
	cmd := exec.Command(filepath.Join(bin, "symheap"), "bench", "--load", "1", "--tests", "barrier", "--time", "1m")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		for _, p := range busyOf(pid) { // only after a failure
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}()
	// Liveness bounds only: nothing here depends on how long a step takes.
	deadline := time.Now().Add(time.Minute)
	for len(busyOf(pid)) < runtime.NumCPU() {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d busy processes after a minute\nstderr:\n%s", len(busyOf(pid)), runtime.NumCPU(), stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	mark := fmt.Sprintf("-j%d-", pid)
	deadline = time.Now().Add(time.Minute)
	for {
		left := busyOf(pid)
		var segs []string
		ents, _ := os.ReadDir("/dev/shm")
		for _, e := range ents {
			if strings.Contains(e.Name(), mark) {
				segs = append(segs, e.Name())
			}
		}
		if len(left) == 0 && len(segs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the bench was killed: busy processes %v, segments %v", left, segs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
