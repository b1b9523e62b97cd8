package unix

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// WaitExitedNoReap blocks until child pid has ended and returns without
// reaping it (waitid with WNOWAIT): the process stays a zombie, so its pid
// and its process group id cannot be reused until the caller reaps it
// (os.Process.Wait). Between the two calls a signal sent to pid or to
// process group -pid can reach only that process and its group. killed
// reports whether a signal ended it. It retries EINTR.
func WaitExitedNoReap(pid int) (killed bool, err error) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err == nil && (info.Code == cldKilled || info.Code == cldDumped), err
		}
	}
}

// KillGroup sends sig to every process of process group pgid. ESRCH (the
// group is empty) is returned as is.
func KillGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 1 {
		// kill(0) and kill(-1) mean "my group" and "everyone": never what
		// a caller of KillGroup wants.
		return EINVAL
	}
	return unix.Kill(-pgid, sig)
}

// ClearParentDeathSignal clears the calling thread's parent-death signal
// (prctl PR_SET_PDEATHSIG, 0).
func ClearParentDeathSignal() error {
	return unix.Prctl(unix.PR_SET_PDEATHSIG, 0, 0, 0, 0)
}

// si_code values of SIGCHLD (asm-generic/siginfo.h): the child was killed
// by a signal, or killed and dumped core.
const (
	cldKilled = 2
	cldDumped = 3
)

// EndedBySignal reports whether child pid has already ended by a signal,
// without waiting and without reaping it (waitid with WNOHANG|WNOWAIT):
// false while it runs, when it exited with a status, and when it is not a
// child of this process that is left to wait for.
func EndedBySignal(pid int) bool {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || info.Signo != int32(unix.SIGCHLD) {
			return false
		}
		return info.Code == cldKilled || info.Code == cldDumped
	}
}
