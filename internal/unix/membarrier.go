package unix

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// membarrier(2) commands (linux/membarrier.h).
const (
	membarrierQuery                    = 0
	membarrierGlobalExpedited          = 1 << 1
	membarrierRegisterGlobalExpedited  = 1 << 2
	membarrierCmdMaskGlobalExpeditedOK = membarrierGlobalExpedited | membarrierRegisterGlobalExpedited
)

// MembarrierRegister registers the process for global expedited memory
// barriers (MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, Linux 4.16): from
// then on every MembarrierGlobal call, by any process, makes each thread
// of this one that runs at that moment execute a full memory barrier. It
// wraps ErrNotSupported when the kernel (or a seccomp filter) refuses.
func MembarrierRegister() error {
	r, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, membarrierQuery, 0, 0)
	if errno != 0 || r&membarrierCmdMaskGlobalExpeditedOK != membarrierCmdMaskGlobalExpeditedOK {
		return fmt.Errorf("membarrier global expedited (query %#x, %v): %w", r, errno, ErrNotSupported)
	}
	if _, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, membarrierRegisterGlobalExpedited, 0, 0); errno != 0 {
		return fmt.Errorf("membarrier register: %v: %w", errno, ErrNotSupported)
	}
	return nil
}

// MembarrierGlobal runs a full memory barrier on every CPU that currently
// runs a thread of a process registered with MembarrierRegister
// (MEMBARRIER_CMD_GLOBAL_EXPEDITED). Threads not running pass through a
// barrier when they are next scheduled, so on return every registered
// thread's memory accesses are split into those before a barrier (visible
// to the caller now) and those after it (which see everything the caller
// did before the call).
func MembarrierGlobal() error {
	if _, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, membarrierGlobalExpedited, 0, 0); errno != 0 {
		return fmt.Errorf("membarrier global expedited: %v", errno)
	}
	return nil
}
