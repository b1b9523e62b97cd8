package unix

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// MonitorThread returns the thread id of the Go runtime's monitor thread
// (sysmon) in this process. The runtime starts it first thing in
// runtime.main, before any other thread of its own, so it is the
// earliest-started thread after the main one; and while any goroutine
// runs it spends its life in nanosleep between its looks at the
// scheduler (the runtime's other threads sleep on futexes), or waiting
// for a core after one, which a busy machine may take milliseconds to
// give it. ok is false when the earliest such thread is seen blocked in
// another system call, looked at up to ten times, and never in nanosleep
// (another thread came first, a C library's, say, or the whole process
// sleeps and the monitor with it): nothing is then known. A thread of a
// C library started before the runtime and running at every look would
// be taken for the monitor.
func MonitorThread() (tid int, ok bool) {
	pid := os.Getpid()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, false
	}
	best, bestStart := 0, uint64(1<<63)
	for _, e := range ents {
		t, err := strconv.Atoi(e.Name())
		if err != nil || t == pid {
			continue
		}
		// /proc/TID names a thread as /proc/PID a process.
		start, err := ProcessStartTime(t)
		if err == nil && (start < bestStart || (start == bestStart && t < best)) {
			best, bestStart = t, start
		}
	}
	if best == 0 {
		return 0, false
	}
	// The monitor runs for microseconds between sleeps of 20 µs at
	// least: looks 100 µs apart find it in nanosleep, or runnable
	// (reported as running) while it waits for a core.
	blocked := false // seen in another system call
	for range 10 {
		nr, inCall := threadSyscall(best)
		if inCall && (nr == unix.SYS_NANOSLEEP || nr == unix.SYS_CLOCK_NANOSLEEP) {
			return best, true
		}
		blocked = blocked || inCall
		// Busy, not asleep: a process whose goroutines all sleep sends
		// the monitor to sleep on a futex too.
		for t := time.Now(); time.Since(t) < 100*time.Microsecond; {
		}
	}
	return best, !blocked
}

// threadSyscall returns the system call thread tid is blocked in (the
// first field of /proc/self/task/tid/syscall); ok is false when it is
// running or runnable, or the file cannot be read.
func threadSyscall(tid int) (int, bool) {
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/syscall")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	nr, err := strconv.Atoi(f[0])
	return nr, err == nil
}

// ThreadTimerSlack returns thread tid's timer slack (how late the kernel
// may fire its timers, to batch their wake-ups).
func ThreadTimerSlack(tid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/timerslack_ns")
	if err != nil {
		return 0, fmt.Errorf("timer slack of thread %d: %w", tid, err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("timer slack of thread %d: %q: %w", tid, b, err)
	}
	return time.Duration(ns), nil
}

// SetThreadTimerSlack sets thread tid's timer slack. For a thread other
// than the caller's own the kernel asks for CAP_SYS_NICE: the error then
// wraps syscall.EPERM.
func SetThreadTimerSlack(tid int, d time.Duration) error {
	if err := os.WriteFile("/proc/"+strconv.Itoa(tid)+"/timerslack_ns", []byte(strconv.FormatInt(int64(d), 10)), 0); err != nil {
		return fmt.Errorf("timer slack of thread %d: %w", tid, err)
	}
	return nil
}
