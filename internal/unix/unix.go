package unix

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Errno values callers test for, re-exported so that no other package needs
// golang.org/x/sys/unix.
const (
	EAGAIN    = syscall.EAGAIN
	EEXIST    = syscall.EEXIST
	ENOENT    = syscall.ENOENT
	EPERM     = syscall.EPERM
	EACCES    = syscall.EACCES
	ENOSPC    = syscall.ENOSPC
	EINVAL    = syscall.EINVAL
	EBUSY     = syscall.EBUSY
	ENOMEM    = syscall.ENOMEM
	ETIMEDOUT = syscall.ETIMEDOUT
	ESRCH     = syscall.ESRCH
	ENOSYS    = syscall.ENOSYS
)

// Protection and mapping flags used by symheap.
const (
	ProtNone  = unix.PROT_NONE
	ProtRead  = unix.PROT_READ
	ProtWrite = unix.PROT_WRITE
	PageSize  = 4096
)

// ErrNotSupported is wrapped by functions that find a kernel facility missing.
var ErrNotSupported = errors.New("not supported by this kernel")

// Getuid returns the real user id of the process.
func Getuid() int { return unix.Getuid() }

// Getpid returns the process id.
func Getpid() int { return unix.Getpid() }

// Gettid returns the thread id of the calling OS thread.
func Gettid() int { return unix.Gettid() }

// Fstat returns the owner uid, mode bits and size of an open file.
func Fstat(fd int) (uid uint32, mode uint32, size int64, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, 0, 0, err
	}
	return st.Uid, st.Mode & 0o7777, st.Size, nil
}

// Allocated returns the bytes of storage the file behind fd holds
// (st_blocks in 512-byte units): it grows while a fallocate runs.
func Allocated(fd int) (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	return st.Blocks * 512, nil
}

// Fallocate reserves the byte range [off, off+n) of the file so that later
// stores into a shared mapping of it cannot fault for want of space.
func Fallocate(fd int, off, n int64) error {
	for {
		err := unix.Fallocate(fd, 0, off, n)
		if err != unix.EINTR {
			return err
		}
	}
}

// Ftruncate sets the size of an open file.
func Ftruncate(fd int, size int64) error { return unix.Ftruncate(fd, size) }

// FreeSpace returns the total and free bytes of the file system holding path.
func FreeSpace(path string) (total, free uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, err
	}
	return st.Blocks * uint64(st.Bsize), st.Bavail * uint64(st.Bsize), nil
}

// Flock applies or removes a BSD lock on the whole file. how is one of
// LockShared, LockExclusive or LockUnlock; nonblocking adds LOCK_NB.
func Flock(fd int, how int, nonblocking bool) error {
	if nonblocking {
		how |= unix.LOCK_NB
	}
	for {
		err := unix.Flock(fd, how)
		if err != unix.EINTR {
			if err == unix.EWOULDBLOCK {
				return EAGAIN
			}
			return err
		}
	}
}

// Lock kinds for Flock.
const (
	LockShared    = unix.LOCK_SH
	LockExclusive = unix.LOCK_EX
	LockUnlock    = unix.LOCK_UN
)

// OFDLock takes (write=true) or releases an open-file-description write lock
// on the single byte at off, without blocking. The lock belongs to the open
// file description, so it lives as long as the descriptor does and vanishes
// when the process dies, whatever the way.
func OFDLock(fd int, off int64, lock bool) error {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: off, Len: 1}
	if !lock {
		lk.Type = unix.F_UNLCK
	}
	err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk)
	if err == unix.EACCES || err == unix.EAGAIN {
		return EAGAIN
	}
	return err
}

// OFDLocked reports whether some other open file description holds a lock
// on the byte at off.
func OFDLocked(fd int, off int64) (bool, error) {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: off, Len: 1}
	if err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &lk); err != nil {
		return false, err
	}
	return lk.Type != unix.F_UNLCK, nil
}

// Kill sends sig to pid.
func Kill(pid int, sig syscall.Signal) error { return unix.Kill(pid, sig) }

// ProcessExists reports whether a process with this pid exists (it may be a
// zombie, or another process that reused the pid).
func ProcessExists(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || err == unix.EPERM
}

// ProcessStartTime returns the start time of pid in clock ticks since boot
// (field 22 of /proc/PID/stat), which together with the pid names a process
// uniquely.
func ProcessStartTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("unix: malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("unix: malformed /proc/%d/stat", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// ProcessState returns the one-letter state of pid from /proc/PID/stat
// ('R', 'S', 'T' for stopped, 'Z' for zombie, ...).
func ProcessState(pid int) (byte, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return 0, fmt.Errorf("unix: malformed /proc/%d/stat", pid)
	}
	return b[i+2], nil
}

// ProcessExiting reports whether the main thread of pid has begun to exit
// (PF_EXITING in the flags of /proc/PID/stat): the process runs none of
// its own code any more, and becomes a zombie shortly. False when it
// cannot be read (the process is gone).
func ProcessExiting(pid int) bool {
	const pfExiting = 0x4 // include/linux/sched.h
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return false
	}
	// After the command: state ppid pgrp session tty_nr tpgid flags ...
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 7 {
		return false
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err == nil && flags&pfExiting != 0
}

// ProcessRunnable reports whether a thread of pid is running or waits
// for a CPU (state 'R' in /proc/PID/task/TID/stat): a process starved
// by the scheduler has one, a stopped or wedged one has none.
func ProcessRunnable(pid int) (bool, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/stat")
		if err != nil {
			continue // the thread ended
		}
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'R' {
			return true, nil
		}
	}
	return false, nil
}

// Rlimit returns the soft and hard limits of a resource.
func Rlimit(resource int) (cur, max uint64, err error) {
	var r unix.Rlimit
	if err := unix.Getrlimit(resource, &r); err != nil {
		return 0, 0, err
	}
	return r.Cur, r.Max, nil
}

// SetRlimit sets the soft and hard limits of a resource.
func SetRlimit(resource int, cur, max uint64) error {
	return unix.Setrlimit(resource, &unix.Rlimit{Cur: cur, Max: max})
}

// Resources for Rlimit.
const (
	RlimitMemlock = unix.RLIMIT_MEMLOCK
	RlimitNofile  = unix.RLIMIT_NOFILE
	RlimitAS      = unix.RLIMIT_AS
)

// RlimInfinity is the "no limit" value of Rlimit.
const RlimInfinity = unix.RLIM_INFINITY

// SchedYield gives up the CPU to another runnable thread. It is a raw
// system call, as the Go runtime's own osyield: the scheduler's
// bookkeeping of a blocking call (entersyscall, exitsyscall, and the
// processor that sysmon may hand to another thread meanwhile) cost more
// than the yield itself when PEs outnumber cores, where waits do nothing
// but yield: a Barrier of 4 or 8 PEs on 2 cores took much longer with
// it (measured: docs/bench/design-measurements.md, «internal/unix,
// SchedYield»). A yield returns
// within the other threads' time slices, so holding the processor
// through it delays nothing for long.
func SchedYield() { unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }

func durationTimespec(d time.Duration) *unix.Timespec {
	if d < 0 {
		return nil
	}
	ts := unix.NsecToTimespec(int64(d))
	return &ts
}

// OnlineCPUs returns the number of CPUs online on this machine, from
// /sys/devices/system/cpu/online ("0-3,6,8-9"), whatever this process's
// affinity: every process of a node reads the same figure. It returns 0
// when the file cannot be read or parsed.
func OnlineCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return 0
	}
	return cpuListLen(strings.TrimSpace(string(b)))
}

// cpuListLen counts the CPUs of a kernel CPU list ("0-3,6"); 0 if it is
// malformed.
func cpuListLen(s string) int {
	n := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return 0
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0
			}
		}
		n += b - a + 1
	}
	return n
}
