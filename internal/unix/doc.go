// Package unix is symheap's only door to the operating system: it is the one
// package of the module that imports golang.org/x/sys/unix. Everything else
// asks it for mappings, futexes, locks, file space, cross-process copies and
// the other Linux facilities symheap is built on.
//
// Functions here are thin: they translate arguments, retry EINTR where a
// caller could not sensibly do so, and return errors that wrap the errno so
// that callers can test them with errors.Is (for example ErrNotSupported or
// syscall.EPERM).
package unix
