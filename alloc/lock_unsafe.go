package alloc

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/symheap/symheap/internal/errs"
)

// LockAt returns a Lock over the 4-byte word at off in mem (a shared
// mapping). off must be 4-byte aligned and the word inside mem.
func LockAt(mem []byte, off Off) (*Lock, error) {
	if off%4 != 0 || uint64(off)+4 > uint64(len(mem)) {
		return nil, fmt.Errorf("alloc: lock word at %#x does not fit a %d-byte mapping 4-byte aligned: %w", uint64(off), len(mem), errs.ErrBadArg)
	}
	return NewLock((*uint32)(unsafe.Pointer(&mem[off]))), nil
}

// word is the lock word as the atomic type shmsync's Sleep names it by.
func (l *Lock) word() *atomic.Uint32 { return (*atomic.Uint32)(unsafe.Pointer(l.w)) }
