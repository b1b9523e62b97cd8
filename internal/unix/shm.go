package unix

import (
	"golang.org/x/sys/unix"
)

// ShmDir is where POSIX shared-memory objects live on Linux.
const ShmDir = "/dev/shm"

// Open flags re-exported for segment creation.
const (
	OCreat    = unix.O_CREAT
	OExcl     = unix.O_EXCL
	ORdwr     = unix.O_RDWR
	ORdonly   = unix.O_RDONLY
	ONofollow = unix.O_NOFOLLOW
	OCloexec  = unix.O_CLOEXEC
)

// Open opens path with raw flags and mode; it retries EINTR.
func Open(path string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Open(path, flags|unix.O_CLOEXEC, mode)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// Close closes a descriptor.
func Close(fd int) error { return unix.Close(fd) }

// Unlink removes a path.
func Unlink(path string) error { return unix.Unlink(path) }

// SameFile reports whether path names the file open on fd.
func SameFile(fd int, path string) bool {
	var a, b unix.Stat_t
	if unix.Fstat(fd, &a) != nil || unix.Stat(path, &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}
