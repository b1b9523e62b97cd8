package unix

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The calls below take an address range as integers, as the registration
// cache knows it. The addresses go to the kernel as system-call arguments
// and are never turned into Go pointers; the caller keeps the memory mapped
// (and, for Go memory, alive) for as long as the call runs.

// madvise advice values used by symheap.
const (
	MadvDontneed = unix.MADV_DONTNEED
	MadvDontfork = unix.MADV_DONTFORK
	MadvDofork   = unix.MADV_DOFORK
)

// MlockRange locks the pages of [addr, addr+length) in memory. The kernel
// answers ENOMEM both when part of the range is not mapped and when the
// process would exceed RLIMIT_MEMLOCK without CAP_IPC_LOCK, and EPERM when
// the limit is 0 and the caller lacks CAP_IPC_LOCK; MemlockDiagnosis tells
// the cases apart.
func MlockRange(addr, length uintptr) error {
	return rangeCall(unix.SYS_MLOCK, addr, length, 0)
}

// MunlockRange unlocks the pages of [addr, addr+length).
func MunlockRange(addr, length uintptr) error {
	return rangeCall(unix.SYS_MUNLOCK, addr, length, 0)
}

// MadviseRange gives advice about [addr, addr+length); addr must be page
// aligned.
func MadviseRange(addr, length uintptr, advice int) error {
	return rangeCall(unix.SYS_MADVISE, addr, length, uintptr(advice))
}

func rangeCall(nr, addr, length, arg uintptr) error {
	again := 0
	for {
		_, _, errno := unix.Syscall(nr, addr, length, arg)
		switch {
		case errno == 0:
			return nil
		case errno == unix.EINTR:
			continue
		case errno == unix.EAGAIN && again < 3:
			// mlock answers EAGAIN when some pages could not be locked
			// for a passing reason; try a few times, then report it.
			again++
			continue
		}
		return errno
	}
}

// Madvise gives advice about the mapping b (its first byte must be page
// aligned).
func Madvise(b []byte, advice int) error { return unix.Madvise(b, advice) }

// Memlock describes the locked-memory limit of this process and thread.
type Memlock struct {
	Soft, Hard uint64 // RLIMIT_MEMLOCK in bytes (RlimInfinity: none)
	Locked     uint64 // bytes locked now (VmLck of /proc/self/status)
	CapIPCLock bool   // the calling thread has CAP_IPC_LOCK, which lifts the limit
}

// MemlockDiagnosis reads the locked-memory limit, the process's locked bytes
// and whether the calling thread holds CAP_IPC_LOCK. Errors reading any of
// them leave the field at its zero value.
func MemlockDiagnosis() Memlock {
	var m Memlock
	var r unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &r) == nil {
		m.Soft, m.Hard = r.Cur, r.Max
	}
	if f, err := os.Open("/proc/thread-self/status"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				continue
			}
			v = strings.TrimSpace(v)
			switch k {
			case "VmLck":
				if n, err := strconv.ParseUint(strings.TrimSuffix(v, " kB"), 10, 64); err == nil {
					m.Locked = n << 10
				}
			case "CapEff":
				if c, err := strconv.ParseUint(v, 16, 64); err == nil {
					m.CapIPCLock = c&(1<<unix.CAP_IPC_LOCK) != 0
				}
			}
		}
		f.Close()
	}
	return m
}

// DropIPCLockCapability removes CAP_IPC_LOCK from the effective set of the
// calling OS thread only (capabilities are per thread on Linux). Tests use it
// on a locked thread that they then let die, to see RLIMIT_MEMLOCK apply
// while running as root.
func DropIPCLockCapability() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	data[unix.CAP_IPC_LOCK/32].Effective &^= 1 << (unix.CAP_IPC_LOCK % 32)
	return unix.Capset(&hdr, &data[0])
}
