//go:build !linux

package peers

import "syscall"

// sessionMembers is only known on Linux (from /proc).
func sessionMembers(sid int) []int { return nil }

// processAlive cannot tell a zombie without /proc: the caller waits out
// its grace period.
func processAlive(pid int) bool { return true }

// killSession kills the session leader's process group; on systems without
// /proc the ranks in other process groups cannot be found.
func killSession(sid int) {
	if sid > 1 {
		_ = syscall.Kill(-sid, syscall.SIGKILL)
	}
}
