package unix

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FutexWait sleeps while *addr == val, for at most timeout (negative: no
// limit). addr must lie in shared memory: the futex is not private, so a
// FutexWake from another process that maps the same page wakes it. It
// returns nil when woken, EAGAIN when *addr != val at the call, ETIMEDOUT on
// timeout; EINTR is reported as a wake-up. Callers re-check their condition
// in a loop: wake-ups can be spurious.
func FutexWait(addr *uint32, val uint32, timeout time.Duration) error {
	ts := durationTimespec(timeout)
	_, _, errno := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWait,
		uintptr(val), uintptr(unsafe.Pointer(ts)), 0, 0)
	switch errno {
	case 0, unix.EINTR:
		return nil
	case unix.EAGAIN:
		return EAGAIN
	case unix.ETIMEDOUT:
		return ETIMEDOUT
	}
	return errno
}

// FutexWake wakes up to n waiters sleeping on addr, in any process.
func FutexWake(addr *uint32, n int) (int, error) {
	r, _, errno := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWake,
		uintptr(n), 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

// Futex operations (linux/futex.h). The shared (non-private) forms are used
// on purpose: waiter and waker are different processes.
const (
	futexWait = 0
	futexWake = 1
)
