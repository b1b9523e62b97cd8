package shmsync

import (
	"errors"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/unix"
)

// TestQuietMonitor: the thread found is another thread of this process,
// asleep in nanosleep; QuietMonitor sets its timer slack and the returned
// function puts the old one back. Without CAP_SYS_NICE the kernel refuses
// and QuietMonitor says so (EPERM), changing nothing.
func TestQuietMonitor(t *testing.T) {
	// Keep the process busy for a moment, as a PE after Init is: the
	// monitor then runs its short sleeps.
	for t0 := time.Now(); time.Since(t0) < 20*time.Millisecond; {
	}
	tid, ok := unix.MonitorThread()
	if !ok {
		t.Fatal("the runtime's monitor thread was not found in a busy process")
	}
	if tid == os.Getpid() || tid == syscall.Gettid() {
		t.Fatalf("MonitorThread returned %d: the main thread (%d) or the caller's (%d)", tid, os.Getpid(), syscall.Gettid())
	}
	if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(tid)); err != nil {
		t.Fatalf("MonitorThread returned %d, not a thread of this process: %v", tid, err)
	}
	old, err := unix.ThreadTimerSlack(tid)
	if err != nil {
		t.Fatal(err)
	}
	want := 3*time.Millisecond + 7*time.Microsecond // unlike any default
	restore, err := QuietMonitor(want)
	if err != nil {
		if errors.Is(err, syscall.EPERM) {
			if got, _ := unix.ThreadTimerSlack(tid); got != old {
				t.Fatalf("a refused QuietMonitor changed the slack from %v to %v", old, got)
			}
			t.Skipf("no CAP_SYS_NICE: %v (the refusal is as documented)", err)
		}
		t.Fatal(err)
	}
	if got, err := unix.ThreadTimerSlack(tid); err != nil || got != want {
		t.Fatalf("monitor's slack after QuietMonitor(%v): %v, %v", want, got, err)
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	if got, err := unix.ThreadTimerSlack(tid); err != nil || got != old {
		t.Fatalf("monitor's slack after restore: %v, %v; want %v", got, err, old)
	}
}
