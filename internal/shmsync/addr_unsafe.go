package shmsync

import (
	"sync/atomic"
	"unsafe"
)

// addrOf returns the address of an atomic word for the futex syscall.
func addrOf(w *atomic.Uint32) unsafe.Pointer { return unsafe.Pointer(w) }
