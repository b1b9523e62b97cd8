package shmsync

import (
	"errors"
	"fmt"
	"time"

	"github.com/symheap/symheap/internal/unix"
)

// # The runtime's monitor thread
//
// The Go runtime's monitor thread (sysmon) sleeps 20 µs between looks at
// the scheduler for the first 50 looks after it last found something to
// do (a P to take back from a system call) or woke from a sleep of the
// whole process, then doubles its sleep up to 10 ms: for some tens of
// milliseconds after Init, or after a wait in which every goroutine of
// the PE slept, it wakes every few tens of microseconds (20 µs, the
// kernel's default timer slack of 50 µs, and the wait for a core). On a
// node with no core to spare (as many PEs as cores, or more) each wake-up
// takes a core from a PE, and stalls the PEs that wait for that one; a
// plain loop of barriers right after Init runs inside that window.
//
// QuietMonitor gives the monitor a longer timer slack: the kernel may end
// its sleeps of 20 µs up to slack later, at a wake-up it has anyway, so
// it wakes a few times per slack at most. What waits longer for the
// monitor: taking a P back from a goroutine stuck in a system call while
// another goroutine waits to run (a PE's goroutines rarely do that), and
// the preemption of a goroutine that has run for 10 ms; both by the slack
// at most. The kernel lets a process set another thread's slack only with
// CAP_SYS_NICE: without it, nothing changes. What it gave, and how it was
// measured: docs/bench/design-measurements.md and docs/bench/README.md's plain
// loops.

// ErrNoMonitor: the runtime's monitor thread was not found (see
// unix.MonitorThread).
var ErrNoMonitor = errors.New("the Go runtime's monitor thread was not found")

// QuietMonitor sets the timer slack of the Go runtime's monitor thread to
// slack, and returns the function that puts the old slack back. The
// error wraps ErrNoMonitor, or syscall.EPERM without CAP_SYS_NICE.
func QuietMonitor(slack time.Duration) (restore func() error, err error) {
	tid, ok := unix.MonitorThread()
	if !ok {
		return nil, ErrNoMonitor
	}
	old, err := unix.ThreadTimerSlack(tid)
	if err != nil {
		return nil, fmt.Errorf("quieting the runtime's monitor thread: %w", err)
	}
	if err := unix.SetThreadTimerSlack(tid, slack); err != nil {
		return nil, fmt.Errorf("quieting the runtime's monitor thread: %w", err)
	}
	return func() error { return unix.SetThreadTimerSlack(tid, old) }, nil
}
