package alloc

import (
	"fmt"

	"github.com/symheap/symheap/internal/errs"
)

// LockWorder is implemented by allocators whose region reserves a word for
// the cross-process Lock (all built-in components do: offset 64 of the
// region header).
type LockWorder interface {
	LockWord() *uint32
}

// Locked makes an Allocator safe to share between processes (and between
// goroutines of one process): every call takes L for ID around the call.
// Alive is passed to Lock (see there); nil treats every holder as alive.
//
// Stats takes the lock too, so that the figures are a consistent snapshot;
// if the lock cannot be had (the holder died), it reads them unlocked.
type Locked struct {
	A     Allocator
	L     *Lock
	ID    uint32
	Alive func(holder uint32) bool
}

var _ Allocator = (*Locked)(nil)

// NewLocked wraps a, locking with the word its region reserves.
func NewLocked(a Allocator, id uint32, alive func(holder uint32) bool) (*Locked, error) {
	lw, ok := a.(LockWorder)
	if !ok {
		return nil, fmt.Errorf("alloc: component %q reserves no lock word: %w", a.Name(), errs.ErrNotSupported)
	}
	return &Locked{A: a, L: NewLock(lw.LockWord()), ID: id, Alive: alive}, nil
}

func (l *Locked) lock() error { return l.L.Lock(l.ID, l.Alive) }

// unlock releases the lock; an error here means the lock word was changed
// by someone else while we held it, which is worth more than the call's
// own result.
func (l *Locked) unlock(err *error) {
	if uerr := l.L.Unlock(l.ID); uerr != nil && *err == nil {
		*err = uerr
	}
}

// Name returns the wrapped component's name.
func (l *Locked) Name() string { return l.A.Name() }

// Alloc is A.Alloc under the lock.
func (l *Locked) Alloc(size, align uint64) (off Off, err error) {
	if err := l.lock(); err != nil {
		return 0, err
	}
	defer l.unlock(&err)
	return l.A.Alloc(size, align)
}

// Free is A.Free under the lock.
func (l *Locked) Free(off Off) (err error) {
	if err := l.lock(); err != nil {
		return err
	}
	defer l.unlock(&err)
	return l.A.Free(off)
}

// Realloc is A.Realloc under the lock.
func (l *Locked) Realloc(off Off, size uint64) (n Off, err error) {
	if err := l.lock(); err != nil {
		return 0, err
	}
	defer l.unlock(&err)
	return l.A.Realloc(off, size)
}

// UsableSize is A.UsableSize under the lock.
func (l *Locked) UsableSize(off Off) (n uint64, err error) {
	if err := l.lock(); err != nil {
		return 0, err
	}
	defer l.unlock(&err)
	return l.A.UsableSize(off)
}

// Stats is A.Stats under the lock (unlocked if the lock cannot be had).
func (l *Locked) Stats() Stats {
	if err := l.lock(); err != nil {
		return l.A.Stats()
	}
	var err error
	defer l.unlock(&err)
	return l.A.Stats()
}

// Check is A.Check under the lock.
func (l *Locked) Check() (err error) {
	if err := l.lock(); err != nil {
		return err
	}
	defer l.unlock(&err)
	return l.A.Check()
}

// Walk is A.Walk under the lock; fn runs with the lock held and must not
// call back into l.
func (l *Locked) Walk(fn func(off Off, size uint64, used bool) bool) (err error) {
	if err := l.lock(); err != nil {
		return err
	}
	defer l.unlock(&err)
	return l.A.Walk(fn)
}
