package symheap_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/internal/unix"
)

// These tests exhaust a resource in a child process (so that the test
// binary itself is not harmed) and check that Init fails with a clear
// error, without SIGBUS, leaving nothing behind.

func runChild(t *testing.T, name string, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestSmallShm mounts a 16 MiB tmpfs over /dev/shm in a private mount
// namespace and asks for a 64 MiB heap.
func TestSmallShm(t *testing.T) {
	if os.Getenv("SYMHEAP_TEST_SMALLSHM") == "child" {
		runtime.LockOSThread()
		if err := unix.UnshareMounts(); err != nil {
			t.Skipf("cannot make a mount namespace: %v", err)
		}
		if err := unix.MountTmpfs("/dev/shm", "size=16m"); err != nil {
			t.Skipf("cannot mount a tmpfs: %v", err)
		}
		pe, err := symheap.Init(symheap.Config{HeapSize: 64 << 20, SharedSize: 1 << 20})
		if err == nil {
			pe.Close()
			t.Fatal("Init succeeded with a 64 MiB heap on a 16 MiB /dev/shm")
		}
		if !errors.Is(err, symheap.ErrOutOfMemory) || !strings.Contains(err.Error(), "free") {
			t.Fatalf("unclear error: %v", err)
		}
		// A heap that fits still works in the same small /dev/shm.
		pe, err = symheap.Init(symheap.Config{HeapSize: 8 << 20, SharedSize: 1 << 20})
		if err != nil {
			t.Fatalf("Init with a heap that fits: %v", err)
		}
		x, err := symheap.Calloc[byte](pe, 7<<20)
		if err != nil {
			t.Fatal(err)
		}
		for i := range x {
			x[i] = 1 // every byte backed: no SIGBUS
		}
		pe.Close()
		ents, _ := os.ReadDir("/dev/shm")
		if len(ents) != 0 {
			t.Fatalf("left in the private /dev/shm: %v", ents)
		}
		t.Logf("CHILD-OK: %v", err)
		return
	}
	if unix.Getuid() != 0 {
		t.Skip("needs root (CAP_SYS_ADMIN) to make a mount namespace with a small tmpfs")
	}
	out, err := runChild(t, "TestSmallShm", "SYMHEAP_TEST_SMALLSHM=child")
	if strings.Contains(out, "--- SKIP") {
		t.Skipf("child skipped:\n%s", out)
	}
	if err != nil || !strings.Contains(out, "CHILD-OK") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// TestAddressSpaceLimit lowers RLIMIT_AS so that the segment cannot be
// mapped: Init must say so (ErrOutOfMemory) instead of crashing. (The
// map-count limit, vm.max_map_count, is system-wide and the Go runtime
// itself needs new mappings at that limit, so it is not exercised here;
// the same error path reports it by name when mmap fails there.)
func TestAddressSpaceLimit(t *testing.T) {
	if os.Getenv("SYMHEAP_TEST_ASLIMIT") == "child" {
		b, _ := os.ReadFile("/proc/self/statm")
		var pages uint64
		fmt.Sscan(string(b), &pages)
		vsz := pages * uint64(os.Getpagesize())
		if err := unix.SetRlimit(unix.RlimitAS, vsz+512<<20, vsz+512<<20); err != nil {
			t.Skipf("cannot lower RLIMIT_AS: %v", err)
		}
		pe, err := symheap.Init(symheap.Config{HeapSize: 2 << 30, SharedSize: 1 << 20})
		if err == nil {
			pe.Close()
			t.Fatal("Init mapped 2 GiB with 512 MiB of address space to spare")
		}
		if !errors.Is(err, symheap.ErrOutOfMemory) {
			t.Fatalf("unclear error: %v", err)
		}
		ents, _ := os.ReadDir("/dev/shm")
		for _, e := range ents {
			if strings.Contains(e.Name(), fmt.Sprintf("solo-%d-", os.Getpid())) {
				t.Fatalf("failed Init left %s", e.Name())
			}
		}
		t.Logf("CHILD-OK: %v", err)
		return
	}
	out, err := runChild(t, "TestAddressSpaceLimit", "SYMHEAP_TEST_ASLIMIT=child")
	if strings.Contains(out, "--- SKIP") {
		t.Skipf("child skipped:\n%s", out)
	}
	if err != nil || !strings.Contains(out, "CHILD-OK") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "CHILD-OK") {
			t.Log(strings.TrimSpace(l))
		}
	}
}
