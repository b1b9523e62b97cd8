package unix

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The ioctl arguments below are Go values whose address is passed to the
// kernel for the duration of the call; they hold no Go pointers.

type uffdioAPIArg struct {
	api      uint64
	features uint64
	ioctls   uint64
}

type uffdioRange struct {
	start uint64
	len   uint64
}

type uffdioRegisterArg struct {
	rng    uffdioRange
	mode   uint64
	ioctls uint64
}

func uffdIoctl(fd int, req uintptr, arg unsafe.Pointer) error {
	for {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg))
		switch errno {
		case 0:
			return nil
		case unix.EINTR:
			continue
		}
		return errno
	}
}

// UffdAPIHandshake performs UFFDIO_API on a fresh descriptor, asking for
// features. It returns the features the kernel supports (all of them, not
// only those asked for) and the ioctls it allows on registered ranges. The
// handshake can be done once per descriptor; asking for a feature the
// kernel lacks fails with EINVAL, so callers first probe with features 0 on
// a throw-away descriptor.
func UffdAPIHandshake(fd int, features uint64) (supported, ioctls uint64, err error) {
	a := uffdioAPIArg{api: UffdAPI, features: features}
	if err := uffdIoctl(fd, uffdioAPI, unsafe.Pointer(&a)); err != nil {
		return 0, 0, err
	}
	return a.features, a.ioctls, nil
}

// UffdRegister registers [start, start+length) with the descriptor in mode.
// start and length must be page aligned. The kernel answers EINVAL for a
// range it cannot watch in that mode (a file-backed mapping, a range that is
// not mapped, a misaligned range) and EBUSY when part of the range is already
// registered with another userfaultfd descriptor.
func UffdRegister(fd int, start, length uintptr, mode uint64) (ioctls uint64, err error) {
	r := uffdioRegisterArg{rng: uffdioRange{start: uint64(start), len: uint64(length)}, mode: mode}
	if err := uffdIoctl(fd, uffdioRegister, unsafe.Pointer(&r)); err != nil {
		return 0, err
	}
	return r.ioctls, nil
}

// UffdUnregister removes [start, start+length) from the descriptor.
func UffdUnregister(fd int, start, length uintptr) error {
	r := uffdioRange{start: uint64(start), len: uint64(length)}
	return uffdIoctl(fd, uffdioUnregister, unsafe.Pointer(&r))
}

// UffdRead reads as many pending messages as fit in msgs without blocking
// (the descriptor is non-blocking). It returns EAGAIN when none is pending.
// Reading a non-cooperative event (UNMAP, REMOVE, REMAP) is what lets the
// thread that caused it continue.
func UffdRead(fd int, msgs []UffdMsg) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(msgs))), len(msgs)*UffdMsgSize)
	for {
		n, err := unix.Read(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		return n / UffdMsgSize, nil
	}
}

var _ [UffdMsgSize - unsafe.Sizeof(UffdMsg{})]byte
var _ [unsafe.Sizeof(UffdMsg{}) - UffdMsgSize]byte

type uffdioWriteprotectArg struct {
	rng  uffdioRange
	mode uint64
}

const uffdioWriteprotect = 0xC018AA06 // _IOWR(0xAA, 0x06, struct uffdio_writeprotect) (24 bytes)

// UffdWriteUnprotect clears userfaultfd write protection on
// [start, start+length) and wakes the threads that faulted on it.
func UffdWriteUnprotect(fd int, start, length uintptr) error {
	a := uffdioWriteprotectArg{rng: uffdioRange{start: uint64(start), len: uint64(length)}}
	return uffdIoctl(fd, uffdioWriteprotect, unsafe.Pointer(&a))
}

// MapAnonAt maps length bytes of private anonymous memory exactly at addr
// (MAP_FIXED_NOREPLACE: EEXIST when something is mapped there). Tests use it
// to map new memory where old memory was unmapped, which is how a stale
// registration arises.
func MapAnonAt(addr uintptr, length int) (Mapping, error) {
	// addr is an address, not a Go object: it is formed from nil so that it
	// never passes for a Go pointer.
	p, err := unix.MmapPtr(-1, 0, unsafe.Add(nil, addr), uintptr(length),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED_NOREPLACE)
	if err != nil {
		return Mapping{}, err
	}
	m := Mapping{Mem: unsafe.Slice((*byte)(p), length)}
	if m.Addr() != addr {
		unix.MunmapPtr(p, uintptr(length))
		return Mapping{}, EEXIST
	}
	return m, nil
}
