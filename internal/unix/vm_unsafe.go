package unix

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// ProcessVMRead copies len(local) bytes from address remote in process pid
// into local, with one copy through the kernel. remote is an address in the
// other process, as that process reported it; it is passed to the kernel and
// never dereferenced here.
func ProcessVMRead(pid int, local []byte, remote uintptr) (int, error) {
	if len(local) == 0 {
		return 0, nil
	}
	l := []unix.Iovec{{Base: unsafe.SliceData(local)}}
	l[0].SetLen(len(local))
	r := []unix.RemoteIovec{{Base: remote, Len: len(local)}}
	return unix.ProcessVMReadv(pid, l, r, 0)
}

// ProcessVMWrite copies local to address remote in process pid.
func ProcessVMWrite(pid int, local []byte, remote uintptr) (int, error) {
	if len(local) == 0 {
		return 0, nil
	}
	l := []unix.Iovec{{Base: unsafe.SliceData(local)}}
	l[0].SetLen(len(local))
	r := []unix.RemoteIovec{{Base: remote, Len: len(local)}}
	return unix.ProcessVMWritev(pid, l, r, 0)
}

// AddrOf returns the address of the first byte of b as an integer, to hand
// to another process (which passes it back to ProcessVMRead/Write).
func AddrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
