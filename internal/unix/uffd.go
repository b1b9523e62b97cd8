package unix

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// userfaultfd(2) and its ioctls (linux/userfaultfd.h). golang.org/x/sys does
// not define them, so they are written out here from the kernel's UAPI
// header; the values are part of the kernel ABI and never change.

// UffdAPI is the only API version the kernel accepts in UFFDIO_API.
const UffdAPI = 0xAA

// Flags of the userfaultfd system call.
const (
	// UffdUserModeOnly (Linux 5.11) asks for a descriptor that handles only
	// faults raised in user mode. Such a descriptor needs no privilege even
	// when vm.unprivileged_userfaultfd is 0.
	UffdUserModeOnly = 1
)

// Features negotiated with UFFDIO_API.
const (
	UffdFeaturePagefaultFlagWP = 1 << 0
	UffdFeatureEventFork       = 1 << 1
	UffdFeatureEventRemap      = 1 << 2
	UffdFeatureEventRemove     = 1 << 3
	UffdFeatureEventUnmap      = 1 << 6
	UffdFeatureWPHugetlbShmem  = 1 << 12
	UffdFeatureWPUnpopulated   = 1 << 13
	UffdFeatureWPAsync         = 1 << 15
)

// Registration modes of UFFDIO_REGISTER.
const (
	UffdRegisterModeMissing = 1 << 0
	UffdRegisterModeWP      = 1 << 1
	UffdRegisterModeMinor   = 1 << 2
)

// Event codes of struct uffd_msg.
const (
	UffdEventPagefault = 0x12
	UffdEventFork      = 0x13
	UffdEventRemap     = 0x14
	UffdEventRemove    = 0x15
	UffdEventUnmap     = 0x16
)

// UffdPagefaultFlagWP marks a PAGEFAULT message raised by write protection.
const UffdPagefaultFlagWP = 1 << 1

// ioctl request numbers: _IOWR(0xAA, nr, size) and _IOR(0xAA, nr, size).
const (
	uffdioAPI        = 0xC018AA3F // _IOWR(0xAA, 0x3F, struct uffdio_api)      (24 bytes)
	uffdioRegister   = 0xC020AA00 // _IOWR(0xAA, 0x00, struct uffdio_register) (32 bytes)
	uffdioUnregister = 0x8010AA01 // _IOR(0xAA, 0x01, struct uffdio_range)     (16 bytes)
)

// UffdMsg is struct uffd_msg (32 bytes, packed). Arg holds the union: for
// UNMAP and REMOVE, Arg[0] is the start and Arg[1] the end of the range; for
// REMAP, Arg[0] is the old address, Arg[1] the new one and Arg[2] the old
// length; for PAGEFAULT, Arg[0] is the flags and Arg[1] the address.
type UffdMsg struct {
	Event uint8
	_     [7]byte
	Arg   [3]uint64
}

// UffdMsgSize is the size of one message in the descriptor's read stream.
const UffdMsgSize = 32

// UserfaultfdOpen creates a userfaultfd descriptor, non-blocking and
// close-on-exec, handling user-mode faults only when userModeOnly is set.
// The kernel answers EPERM when the caller may not have one (an unprivileged
// caller asking for kernel faults while vm.unprivileged_userfaultfd is 0),
// EINVAL when it does not know a flag (UFFD_USER_MODE_ONLY before 5.11) and
// ENOSYS when it was built without userfaultfd.
func UserfaultfdOpen(userModeOnly bool) (int, error) {
	flags := uintptr(unix.O_CLOEXEC | unix.O_NONBLOCK)
	if userModeOnly {
		flags |= UffdUserModeOnly
	}
	fd, _, errno := unix.Syscall(unix.SYS_USERFAULTFD, flags, 0, 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// PollIn blocks until fd or wake is readable and reports which are. It
// retries EINTR. The calling goroutine sits in a system call for as long as
// it waits: run it on a goroutine of its own.
func PollIn(fd, wake int) (fdReady, wakeReady bool, err error) {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(wake), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(pfd, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, false, err
		}
		bad := int16(unix.POLLERR | unix.POLLHUP | unix.POLLNVAL)
		return pfd[0].Revents&(unix.POLLIN|bad) != 0, pfd[1].Revents&(unix.POLLIN|bad) != 0, nil
	}
}

// EventfdOpen returns a non-blocking, close-on-exec eventfd, used to wake a
// goroutine blocked in PollIn.
func EventfdOpen() (int, error) {
	return unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
}

// EventfdSignal adds one to an eventfd's counter, making it readable.
func EventfdSignal(fd int) error {
	var one = [8]byte{1}
	_, err := unix.Write(fd, one[:])
	if err == unix.EAGAIN { // the counter is saturated: it is readable already
		return nil
	}
	return err
}

// MremapMove moves or resizes the mapping b (MREMAP_MAYMOVE) to newLen bytes
// and returns the new mapping. The old slice must not be used afterwards.
func MremapMove(b []byte, newLen int) ([]byte, error) {
	nb, err := unix.Mremap(b, newLen, unix.MREMAP_MAYMOVE)
	runtime.KeepAlive(b)
	return nb, err
}
