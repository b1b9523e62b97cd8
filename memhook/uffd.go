package memhook

// The userfaultfd backend: unmap, remove and remap events for memory symheap
// does not own.
//
// # What the kernel is asked for
//
//  1. A descriptor made with UFFD_USER_MODE_ONLY (Linux 5.11), which needs no
//     privilege even when vm.unprivileged_userfaultfd is 0; on a kernel that
//     does not know the flag, a plain one (which needs the sysctl or
//     CAP_SYS_PTRACE). Non-blocking, close-on-exec.
//  2. UFFDIO_API with UFFD_FEATURE_EVENT_UNMAP | EVENT_REMOVE | EVENT_REMAP,
//     plus PAGEFAULT_FLAG_WP, and WP_ASYNC and WP_HUGETLBFS_SHMEM where the
//     kernel has them. The supported set is first read on a throw-away
//     descriptor, because asking for an unknown feature fails the handshake
//     and a descriptor allows only one.
//  3. UFFDIO_REGISTER of each watched range in write-protect mode (WP) only.
//
// # Why write-protect mode
//
// A range must be registered in some mode to produce events at all, and the
// events are delivered for a registered range whatever its mode. MISSING
// mode, the usual choice (libfabric's monitor uses it), makes every first
// touch of a page in the range wait for this process to supply the page, and
// with a user-mode-only descriptor a first touch from inside the kernel
// (read(2) into the buffer, mlock populating it) fails with EFAULT instead.
// WP mode intercepts only writes to pages that were write-protected with
// UFFDIO_WRITEPROTECT, which this package never does: faults in a watched
// range are handled by the kernel as if it were not watched. WP_ASYNC, when
// the kernel has it (6.7), makes even a write-protected page resolve itself
// without a message, and lets write-protect mode register any memory,
// file-backed mappings included; without it a stray write-protect fault is
// resolved by the reader (UFFDIO_WRITEPROTECT clearing the bit), so no thread
// can wait for ever, and file-backed mappings are refused with EINVAL.
//
// # The reader
//
// UNMAP, REMOVE and REMAP are non-cooperative events: the thread that calls
// munmap, madvise or mremap waits in the kernel until a reader has read the
// event. A dedicated goroutine, locked to its own OS thread, therefore does
// nothing but:
//
//  1. poll(2) the descriptor and an eventfd (the stop signal);
//  2. take dispatchMu and set dispatchBusy, so that Sync callers wait;
//  3. read up to 64 messages at once (this releases the waiting threads);
//  4. deliver each as an event, clear dispatchBusy, release dispatchMu.
//
// A releasing thread thus waits for one poll wake-up and one read, not for
// the callbacks. Steps 2 to 4 close the window between "munmap returned" and
// "the cache heard of it": a cache calls Sync before each lookup.
//
// # What the caller must know
//
//   - Watch memory that the Go runtime does not release behind your back: C
//     memory, and mappings the program made. The Go runtime returns heap
//     pages with madvise while it holds a P; with GOMAXPROCS=1 the reader
//     could not run to read that event, and the process would hang.
//   - A callback must not unmap or madvise watched memory: it runs on the
//     reader, which is then not reading.
//   - Registration is per mapping: memory mapped later at the same address
//     is not watched until Watch is called again. mremap moves the watch
//     with the pages.

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/unix"
)

// eventsNeeded are the userfaultfd features the backend cannot work without.
const eventsNeeded = unix.UffdFeatureEventUnmap | unix.UffdFeatureEventRemove | unix.UffdFeatureEventRemap

// testNoWPAsync makes the backend do without WP_ASYNC, as on kernels older
// than 6.7. Tests set it before starting a monitor.
var testNoWPAsync bool

type uffdBackend struct {
	m        *Monitor
	fd       int    // the userfaultfd; closed by close, after the reader stopped
	wake     int    // eventfd that stops the reader
	features uint64 // features granted by UFFDIO_API
	userMode bool   // the descriptor handles user-mode faults only
	done     chan struct{}
}

// Userfault reports whether the userfaultfd backend runs, starting it if it
// was never tried; the error says precisely why it cannot (it wraps
// errs.ErrNotSupported).
func (m *Monitor) Userfault() error {
	m.uf.mu.Lock()
	defer m.uf.mu.Unlock()
	_, err := m.userfaultLocked()
	return err
}

// UserfaultInfo describes the running backend for `symheap info`.
func (m *Monitor) UserfaultInfo() string {
	m.uf.mu.Lock()
	defer m.uf.mu.Unlock()
	switch {
	case m.uf.b != nil:
		b := m.uf.b
		mode := "user-mode-only descriptor"
		if !b.userMode {
			mode = "full descriptor (kernel lacks UFFD_USER_MODE_ONLY)"
		}
		async := ""
		if b.features&unix.UffdFeatureWPAsync != 0 {
			async = ", WP_ASYNC"
		}
		return fmt.Sprintf("userfaultfd: %s, write-protect registration%s, features %#x", mode, async, b.features)
	case m.uf.err != nil:
		return "userfaultfd: " + m.uf.err.Error()
	}
	return "userfaultfd: not started"
}

// userfaultLocked starts the backend once. Requires m.uf.mu.
func (m *Monitor) userfaultLocked() (*uffdBackend, error) {
	if m.uf.closed {
		return nil, fmt.Errorf("memhook: monitor closed: %w", errs.ErrClosed)
	}
	if !m.uf.started {
		m.uf.started = true
		m.uf.b, m.uf.err = startUffd(m)
	}
	return m.uf.b, m.uf.err
}

func startUffd(m *Monitor) (*uffdBackend, error) {
	probe, userMode, err := openUffd()
	if err != nil {
		return nil, err
	}
	supported, _, err := unix.UffdAPIHandshake(probe, 0)
	unix.Close(probe)
	if err != nil {
		return nil, fmt.Errorf("memhook: userfaultfd handshake (UFFDIO_API) failed: %v: %w", err, errs.ErrNotSupported)
	}
	if supported&eventsNeeded != eventsNeeded {
		var miss []string
		for _, f := range []struct {
			bit  uint64
			name string
		}{{unix.UffdFeatureEventUnmap, "EVENT_UNMAP"}, {unix.UffdFeatureEventRemove, "EVENT_REMOVE"}, {unix.UffdFeatureEventRemap, "EVENT_REMAP"}} {
			if supported&f.bit == 0 {
				miss = append(miss, f.name)
			}
		}
		return nil, fmt.Errorf("memhook: userfaultfd lacks %s (kernel features %#x): %w", strings.Join(miss, ", "), supported, errs.ErrNotSupported)
	}
	if supported&unix.UffdFeaturePagefaultFlagWP == 0 {
		return nil, fmt.Errorf("memhook: userfaultfd has no write-protect mode on this kernel or architecture, and watching in missing-page mode would stall first touches: %w", errs.ErrNotSupported)
	}
	want := uint64(eventsNeeded | unix.UffdFeaturePagefaultFlagWP)
	want |= supported & (unix.UffdFeatureWPAsync | unix.UffdFeatureWPHugetlbShmem)
	if testNoWPAsync {
		want &^= unix.UffdFeatureWPAsync
	}

	fd, userMode, err := openUffdMode(userMode)
	if err != nil {
		return nil, err
	}
	if _, _, err := unix.UffdAPIHandshake(fd, want); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("memhook: userfaultfd handshake with features %#x failed: %v: %w", want, err, errs.ErrNotSupported)
	}
	wake, err := unix.EventfdOpen()
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("memhook: eventfd for the userfaultfd reader: %v: %w", err, errs.ErrNotSupported)
	}
	b := &uffdBackend{m: m, fd: fd, wake: wake, features: want, userMode: userMode, done: make(chan struct{})}
	go b.read()
	return b, nil
}

// openUffd opens a user-mode-only descriptor, or a full one on a kernel
// older than 5.11.
func openUffd() (fd int, userMode bool, err error) {
	fd, err = unix.UserfaultfdOpen(true)
	if err == nil {
		return fd, true, nil
	}
	if errors.Is(err, unix.EINVAL) {
		// Before Linux 5.11 the flag is unknown; a full descriptor may
		// still be allowed (privilege, or the sysctl).
		if fd, err2 := unix.UserfaultfdOpen(false); err2 == nil {
			return fd, false, nil
		} else if errors.Is(err2, unix.EPERM) {
			return -1, false, fmt.Errorf("memhook: userfaultfd: the kernel does not know UFFD_USER_MODE_ONLY (older than 5.11) and refuses a full descriptor (EPERM: vm.unprivileged_userfaultfd is %s and the process lacks CAP_SYS_PTRACE): %w",
				sysctlUnprivileged(), errs.ErrNotSupported)
		}
	}
	return -1, false, openError(err)
}

func openUffdMode(userMode bool) (int, bool, error) {
	fd, err := unix.UserfaultfdOpen(userMode)
	if err != nil {
		return -1, userMode, openError(err)
	}
	return fd, userMode, nil
}

func openError(err error) error {
	switch {
	case errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("memhook: userfaultfd: ENOSYS (kernel built without CONFIG_USERFAULTFD, or a seccomp filter hides the system call): %w", errs.ErrNotSupported)
	case errors.Is(err, unix.EPERM):
		return fmt.Errorf("memhook: userfaultfd: EPERM even for a user-mode-only descriptor (a seccomp filter or LSM policy forbids it; vm.unprivileged_userfaultfd is %s): %w",
			sysctlUnprivileged(), errs.ErrNotSupported)
	}
	return fmt.Errorf("memhook: userfaultfd: %v: %w", err, errs.ErrNotSupported)
}

func sysctlUnprivileged() string {
	b, err := os.ReadFile("/proc/sys/vm/unprivileged_userfaultfd")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// read is the reader goroutine; see the file comment.
func (b *uffdBackend) read() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(b.done)
	var msgs [64]unix.UffdMsg
	for {
		ready, stop, err := unix.PollIn(b.fd, b.wake)
		if stop {
			return
		}
		if err != nil {
			b.fail(err)
			return
		}
		if !ready {
			continue
		}
		m := b.m
		m.dispatchMu.Lock()
		// Set before the read releases any munmap caller; pairs with the
		// load in Sync on the thread whose munmap returned.
		m.dispatchBusy.Store(1)
		n, err := unix.UffdRead(b.fd, msgs[:])
		for i := 0; i < n; i++ {
			b.deliver(&msgs[i])
		}
		m.dispatchBusy.Store(0)
		m.dispatchMu.Unlock()
		if err != nil && !errors.Is(err, unix.EAGAIN) {
			b.fail(err)
			return
		}
	}
}

// fail stops the backend after the reader met an error it cannot go on
// from. The descriptor is closed at once: the kernel then releases every
// thread waiting for an event to be read, instead of leaving them blocked.
func (b *uffdBackend) fail(err error) {
	m := b.m
	m.uf.mu.Lock()
	defer m.uf.mu.Unlock()
	if m.uf.b != b {
		return // Close has taken the backend and closes the descriptors
	}
	m.uf.b = nil
	m.uf.err = fmt.Errorf("memhook: the userfaultfd reader stopped: %v: %w", err, errs.ErrNotSupported)
	unix.Close(b.fd)
	unix.Close(b.wake)
}

func (b *uffdBackend) deliver(msg *unix.UffdMsg) {
	switch msg.Event {
	case unix.UffdEventUnmap:
		b.m.dispatch(Unmap, Range{uintptr(msg.Arg[0]), uintptr(msg.Arg[1])})
	case unix.UffdEventRemove:
		b.m.dispatch(Remove, Range{uintptr(msg.Arg[0]), uintptr(msg.Arg[1])})
	case unix.UffdEventRemap:
		// The pages moved from Arg[0] to Arg[1]: the old addresses no
		// longer reach them.
		b.m.dispatch(Unmap, Range{uintptr(msg.Arg[0]), uintptr(msg.Arg[0] + msg.Arg[2])})
	case unix.UffdEventPagefault:
		// Only a write-protect fault can reach us (see the file comment);
		// clear the protection so that the writer goes on.
		page := uintptr(os.Getpagesize())
		if msg.Arg[0]&unix.UffdPagefaultFlagWP != 0 {
			unix.UffdWriteUnprotect(b.fd, uintptr(msg.Arg[1])&^(page-1), page)
		}
	}
}

func (b *uffdBackend) close() error {
	unix.EventfdSignal(b.wake)
	<-b.done
	err := unix.Close(b.fd)
	unix.Close(b.wake)
	return err
}

// Watch asks the userfaultfd backend to report Unmap and Remove events for
// r, rounded out to whole pages. The first call starts the backend. Errors
// wrap errs.ErrNotSupported when the kernel refuses (no userfaultfd, a
// file-backed mapping, a range another userfaultfd owns) and errs.ErrBadArg
// when part of the range is not mapped.
//
// Watch memory that the Go runtime does not release by itself: C memory and
// mappings the program made. The Go runtime returns heap pages with madvise
// while holding a P, and the thread that releases watched memory waits until
// the reader goroutine has read the event; with GOMAXPROCS=1 the reader
// could never run and the process would hang. Memory mapped later at the same
// address is not watched until Watch is called again; mremap carries the
// watch with the pages.
func (m *Monitor) Watch(r Range) error {
	r = pageRange(r)
	if r.Empty() {
		return fmt.Errorf("memhook: watch of empty range %v: %w", r, errs.ErrBadArg)
	}
	m.uf.mu.Lock()
	defer m.uf.mu.Unlock()
	b, err := m.userfaultLocked()
	if err != nil {
		return err
	}
	if _, err := unix.UffdRegister(b.fd, r.Start, r.Len(), unix.UffdRegisterModeWP); err != nil {
		return registerError(r, err)
	}
	return nil
}

// Unwatch stops watching r (rounded out to whole pages). Ranges that are no
// longer mapped are not an error: the kernel forgot them with the mapping.
func (m *Monitor) Unwatch(r Range) error {
	r = pageRange(r)
	if r.Empty() {
		return nil
	}
	m.uf.mu.Lock()
	defer m.uf.mu.Unlock()
	if m.uf.b == nil {
		return nil
	}
	err := unix.UffdUnregister(m.uf.b.fd, r.Start, r.Len())
	if err != nil && !errors.Is(err, unix.ENOMEM) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("memhook: unwatch %v: %w", r, err)
	}
	return nil
}

// registerError turns an UFFDIO_REGISTER failure into the reason a user can
// act on, looking at /proc/self/maps to tell the EINVAL cases apart.
func registerError(r Range, err error) error {
	switch {
	case errors.Is(err, unix.EBUSY):
		return fmt.Errorf("memhook: watch %v: EBUSY: part of the range is already registered with another userfaultfd (another library, or another monitor, owns it): %w", r, errs.ErrNotSupported)
	case errors.Is(err, unix.ENOMEM):
		return fmt.Errorf("memhook: watch %v: part of the range is not mapped: %w", r, errs.ErrBadArg)
	case errors.Is(err, unix.EINVAL):
		maps, merr := unix.SelfMaps()
		if merr != nil {
			break
		}
		at := r.Start
		for _, v := range maps {
			if v.End <= r.Start || v.Start >= r.End {
				continue
			}
			if v.Start > at {
				return fmt.Errorf("memhook: watch %v: [%#x, %#x) is not mapped: %w", r, at, v.Start, errs.ErrBadArg)
			}
			if v.Path != "" && !strings.HasPrefix(v.Path, "[") && !strings.HasPrefix(v.Path, "/dev/shm/") && !strings.HasPrefix(v.Path, "/memfd:") {
				return fmt.Errorf("memhook: watch %v: EINVAL: [%#x, %#x) is a file-backed mapping of %s, which userfaultfd cannot watch on this kernel (anonymous, shared-memory and hugetlbfs memory only; kernels with WP_ASYNC, 6.7 and later, accept any): %w",
					r, v.Start, v.End, v.Path, errs.ErrNotSupported)
			}
			at = v.End
		}
		if at < r.End {
			return fmt.Errorf("memhook: watch %v: [%#x, %#x) is not mapped: %w", r, at, r.End, errs.ErrBadArg)
		}
	}
	return fmt.Errorf("memhook: watch %v: the kernel refused to register it with userfaultfd: %v: %w", r, err, errs.ErrNotSupported)
}

func pageRange(r Range) Range {
	p := uintptr(os.Getpagesize())
	if r.End <= r.Start {
		return Range{}
	}
	return Range{r.Start &^ (p - 1), (r.End + p - 1) &^ (p - 1)}
}
