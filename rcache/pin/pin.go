// Package pin is a registrar for package rcache that pins memory the way an
// RDMA driver does, but with the system calls any process may use: mlock
// keeps the pages resident (and their physical addresses fixed), and
// MADV_DONTFORK keeps a fork from making them copy-on-write in the parent.
//
// Registrations may overlap, and the kernel does not count locks (one
// munlock undoes any number of mlock calls), so the registrar counts, for
// every page, the registrations covering it, and unlocks a page only when
// its count falls to zero. Every Register calls mlock on its whole range
// even where the pages are counted already: if the memory was unmapped and
// mapped again since (the kernel dropped the old locks with the old
// mapping), the new pages are locked too.
//
// The converse cannot be helped: when the last registration of a range
// that was unmapped is dropped, the munlock reaches whatever is mapped there
// now, and would unlock pages that someone else locked with mlock (the
// kernel keeps one bit per page, not a count). Unmapped ranges themselves
// are no error.
//
// When RLIMIT_MEMLOCK refuses, the error says so, with the limit, what is
// locked already and how to raise it; it wraps errs.ErrOutOfMemory.
package pin

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/unix"
	"github.com/symheap/symheap/memhook"
)

// Registrar pins ranges. It is safe for concurrent use; its system calls are
// serialised (a lock and a count update must not interleave with another's).
type Registrar struct {
	mu   sync.Mutex
	c    counts // pages covered by live registrations (guarded by mu)
	page uintptr
}

// New returns a pin registrar.
func New() *Registrar { return &Registrar{page: uintptr(os.Getpagesize())} }

// Name returns "pin".
func (p *Registrar) Name() string { return "pin" }

func (p *Registrar) pages(r memhook.Range) memhook.Range {
	return memhook.Range{Start: r.Start &^ (p.page - 1), End: (r.End + p.page - 1) &^ (p.page - 1)}
}

// Register locks the pages of r and marks them not to be inherited by a
// child process. The handle is the page-aligned range, a memhook.Range.
func (p *Registrar) Register(r memhook.Range) (any, error) {
	if r.End <= r.Start {
		return nil, fmt.Errorf("pin: empty range %v: %w", r, errs.ErrBadArg)
	}
	pr := p.pages(r)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := unix.MlockRange(pr.Start, pr.Len()); err != nil {
		// mlock may have locked a prefix before failing: undo what no
		// other registration counts.
		p.c.uncounted(pr, func(z memhook.Range) { unix.MunlockRange(z.Start, z.Len()) })
		return nil, mlockError(pr, err)
	}
	if err := unix.MadviseRange(pr.Start, pr.Len(), unix.MadvDontfork); err != nil {
		p.c.uncounted(pr, func(z memhook.Range) {
			unix.MunlockRange(z.Start, z.Len())
			unix.MadviseRange(z.Start, z.Len(), unix.MadvDofork)
		})
		return nil, fmt.Errorf("pin: madvise(MADV_DONTFORK) of %v: %w", pr, err)
	}
	p.c.add(pr, +1, nil)
	return pr, nil
}

// Deregister drops a registration made by Register: pages no other
// registration covers are unlocked and inherited by children again. Memory
// that has been unmapped meanwhile is not an error.
func (p *Registrar) Deregister(r memhook.Range, _ any) error {
	pr := p.pages(r)
	p.mu.Lock()
	defer p.mu.Unlock()
	var first error
	underflow := p.c.add(pr, -1, func(z memhook.Range) {
		for _, err := range []error{
			unix.MunlockRange(z.Start, z.Len()),
			unix.MadviseRange(z.Start, z.Len(), unix.MadvDofork),
		} {
			// ENOMEM: the range is (partly) unmapped, its locks are gone.
			if err != nil && !errors.Is(err, unix.ENOMEM) && first == nil {
				first = fmt.Errorf("pin: release %v: %w", z, err)
			}
		}
	})
	if underflow && first == nil {
		first = fmt.Errorf("pin: deregister of %v, which is not (entirely) registered: %w", pr, errs.ErrBadArg)
	}
	return first
}

// Pinned returns the bytes this registrar holds locked.
func (p *Registrar) Pinned() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.c.bytes()
}

// Check verifies the page counts' invariants.
func (p *Registrar) Check() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.c.check()
}

// mlockError explains an mlock failure: the locked-memory limit (with what
// to raise), memory that is not mapped, or the errno as is.
func mlockError(r memhook.Range, err error) error {
	if !errors.Is(err, unix.ENOMEM) && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("pin: mlock %v: %w", r, err)
	}
	d := unix.MemlockDiagnosis()
	limited := !d.CapIPCLock && d.Soft != unix.RlimInfinity
	if limited && (errors.Is(err, unix.EPERM) || d.Locked+uint64(r.Len()) > d.Soft) {
		return fmt.Errorf("pin: mlock of %d bytes at %v refused by RLIMIT_MEMLOCK: the limit is %s (hard limit %s) and %s is locked already; "+
			"raise it (ulimit -l; the memlock item of /etc/security/limits.conf; LimitMEMLOCK= for a systemd unit; --ulimit memlock=-1 for a container) "+
			"or grant CAP_IPC_LOCK: %w",
			r.Len(), r, size(d.Soft), size(d.Hard), size(d.Locked), errs.ErrOutOfMemory)
	}
	if errors.Is(err, unix.ENOMEM) {
		return fmt.Errorf("pin: mlock %v: part of the range is not mapped (ENOMEM): %w", r, errs.ErrBadArg)
	}
	return fmt.Errorf("pin: mlock %v: %w", r, err)
}

func size(n uint64) string {
	switch {
	case n == unix.RlimInfinity:
		return "unlimited"
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
