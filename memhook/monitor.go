package memhook

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/symheap/symheap/internal/unix"
)

// Kind is the kind of a release event.
type Kind uint8

// The release events.
const (
	Free   Kind = iota + 1 // a heap block was freed
	Chunk                  // realloc or shrink released part or all of a block
	Unmap                  // pages were unmapped or moved away
	Remove                 // pages were dropped with madvise but stay mapped
)

const numKinds = 4

func (k Kind) String() string {
	switch k {
	case Free:
		return "free"
	case Chunk:
		return "chunk"
	case Unmap:
		return "unmap"
	case Remove:
		return "remove"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Range is the half-open address range [Start, End). The addresses are
// integers: they are compared and reported, never turned back into pointers.
type Range struct {
	Start, End uintptr
}

// Len returns End - Start, or 0 for an empty or inverted range.
func (r Range) Len() uintptr {
	if r.End <= r.Start {
		return 0
	}
	return r.End - r.Start
}

// Empty reports whether the range holds no byte.
func (r Range) Empty() bool { return r.End <= r.Start }

// Overlaps reports whether r and o share at least one byte.
func (r Range) Overlaps(o Range) bool { return r.Start < o.End && o.Start < r.End }

// Contains reports whether every byte of o lies in r.
func (r Range) Contains(o Range) bool { return r.Start <= o.Start && o.End <= r.End }

func (r Range) String() string { return fmt.Sprintf("[%#x, %#x)", r.Start, r.End) }

// RangeOf returns the range of addresses b occupies. The memory must not move
// while the range is in use: take it from heap-allocated or mapped memory,
// not from a small slice that may live on a goroutine stack.
func RangeOf(b []byte) Range {
	if len(b) == 0 {
		return Range{}
	}
	a := unix.AddrOf(b)
	return Range{a, a + uintptr(len(b))}
}

// Callback is told of one release. See the package comment for what it must
// not do.
type Callback func(k Kind, r Range)

// Counts are the events a monitor has delivered, by kind.
type Counts struct {
	Free, Chunk, Unmap, Remove uint64
}

// Monitor delivers release events to its subscribers. One per process is
// the intended use: two monitors cannot watch the same range through
// userfaultfd (the second gets EBUSY). The zero value is not usable; call
// New. All methods are safe for concurrent use.
type Monitor struct {
	// nsubs is len(subs), read without a lock on every Publish so that a
	// monitor nobody listens to costs one atomic load.
	nsubs atomic.Int32

	// subMu guards subs. Publishers hold it shared while the callbacks
	// run, so that cancelling a subscription waits for the calls in flight.
	subMu sync.RWMutex
	subs  []subscriber
	next  uint64 // identity of the next subscription (guarded by subMu)

	counts [numKinds]atomic.Uint64 // events delivered, indexed by Kind-1

	// sources feed events published by other processes; Sync drains
	// them. Copy on write under subMu, read without a lock by Sync.
	sources atomic.Pointer[[]Source]

	// The userfaultfd backend, started by the first Watch or SelfTest.
	uf struct {
		mu      sync.Mutex
		b       *uffdBackend // nil until started
		err     error        // why it could not start (sticky)
		started bool
		closed  bool
	}
	// dispatchBusy is 1 while the userfaultfd reader holds dispatchMu:
	// from just before it reads a batch (which releases the threads
	// blocked in munmap) until it has delivered that batch. Sync checks it.
	dispatchBusy atomic.Int32
	dispatchMu   sync.Mutex

	support  atomic.Uint32 // Flags proven by the last SelfTest
	tested   atomic.Bool
	warnOnce sync.Once
}

type subscriber struct {
	id uint64
	fn Callback
}

// New returns a monitor with no subscriber and no watched range.
func New() *Monitor { return &Monitor{} }

// A Source feeds a monitor with release events that other processes
// published, through shared memory (symheap's job release log: a block
// of the local shared heap freed by another PE, another PE's copy of a
// symmetric block). Sync drains every source before it returns, so a cache
// that calls Sync before a lookup has heard of every release published
// before the call.
type Source interface {
	// Listen is told when the monitor gains its first subscriber (true)
	// and loses its last (false), and once when the source is added, so
	// that publishers can skip the work while nobody listens. It runs
	// with the monitor's subscriber lock held: it must not call back
	// into the monitor.
	Listen(on bool)
	// Drain delivers to m (Publish) the events published since it last
	// returned, and returns when they are delivered. Concurrent calls
	// must each return only after that. It should cost one load when
	// nothing is new: Sync calls it before every lookup.
	Drain(m *Monitor)
}

// AddSource adds s to the sources Sync drains.
func (m *Monitor) AddSource(s Source) {
	m.subMu.Lock()
	defer m.subMu.Unlock()
	var srcs []Source
	if old := m.sources.Load(); old != nil {
		srcs = append(srcs, *old...)
	}
	srcs = append(srcs, s)
	m.sources.Store(&srcs)
	s.Listen(len(m.subs) > 0)
}

// listen tells the sources that the subscriber count went from was to
// len(m.subs), if that turns listening on or off. Called with subMu held.
func (m *Monitor) listen(was int) {
	now := len(m.subs)
	if (was == 0) == (now == 0) {
		return
	}
	if srcs := m.sources.Load(); srcs != nil {
		for _, s := range *srcs {
			s.Listen(now > 0)
		}
	}
}

// Subscribe adds fn to the subscribers and returns the function that removes
// it. When cancel returns, fn is not running and will not be called again.
// cancel is idempotent.
func (m *Monitor) Subscribe(fn Callback) (cancel func()) {
	m.subMu.Lock()
	id := m.next
	m.next++
	// Copy on write: a publisher iterating the old slice is unaffected
	// (it holds subMu shared, so it cannot be doing so now anyway).
	subs := make([]subscriber, len(m.subs), len(m.subs)+1)
	copy(subs, m.subs)
	m.subs = append(subs, subscriber{id, fn})
	m.nsubs.Store(int32(len(m.subs)))
	m.listen(len(m.subs) - 1)
	m.subMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			m.subMu.Lock()
			defer m.subMu.Unlock()
			subs := make([]subscriber, 0, len(m.subs))
			for _, s := range m.subs {
				if s.id != id {
					subs = append(subs, s)
				}
			}
			was := len(m.subs)
			m.subs = subs
			m.nsubs.Store(int32(len(subs)))
			m.listen(was)
		})
	}
}

// Publish tells every subscriber that r was released. An empty range is
// ignored. It costs one atomic load when nobody subscribes.
func (m *Monitor) Publish(k Kind, r Range) {
	if m.nsubs.Load() == 0 || r.End <= r.Start {
		return
	}
	m.dispatch(k, r)
}

func (m *Monitor) dispatch(k Kind, r Range) {
	if k < Free || k > Remove {
		return
	}
	m.counts[k-1].Add(1)
	m.subMu.RLock()
	for _, s := range m.subs {
		s.fn(k, r)
	}
	m.subMu.RUnlock()
}

// PublishFree reports that the block of size bytes at addr was freed. size
// is the block's usable size (what the allocator could have handed out), so
// that a registration of any part of it is caught.
func (m *Monitor) PublishFree(addr, size uintptr) {
	m.Publish(Free, Range{addr, addr + size})
}

// PublishRealloc reports what a realloc released: the whole old block when
// the block moved, its tail when it shrank in place, nothing when it grew in
// place. Sizes are usable sizes before and after.
func (m *Monitor) PublishRealloc(oldAddr, oldSize, newAddr, newSize uintptr) {
	if r, ok := ReallocReleased(oldAddr, oldSize, newAddr, newSize); ok {
		m.Publish(Chunk, r)
	}
}

// ReallocReleased returns the range a realloc released (see PublishRealloc).
func ReallocReleased(oldAddr, oldSize, newAddr, newSize uintptr) (Range, bool) {
	switch {
	case newAddr != oldAddr:
		return Range{oldAddr, oldAddr + oldSize}, oldSize > 0
	case newSize < oldSize:
		return Range{oldAddr + newSize, oldAddr + oldSize}, true
	}
	return Range{}, false
}

// Sync delivers every event of the sources (AddSource) published before
// the call, and waits until every event the userfaultfd reader has taken
// from the kernel has been delivered. A thread blocked in munmap of a
// watched range is released when the reader reads the event, just before
// the reader runs the callbacks; a cache that calls Sync before a lookup
// therefore never misses the invalidation of memory the caller has already
// unmapped, nor of a block another process freed. It costs one atomic
// load per source, and one more, when nothing is new.
func (m *Monitor) Sync() {
	if srcs := m.sources.Load(); srcs != nil {
		for _, s := range *srcs {
			s.Drain(m)
		}
	}
	// Pairs with the reader's store before it reads a batch: a thread
	// whose munmap has returned sees 1 here until that batch is delivered.
	if m.dispatchBusy.Load() == 0 {
		return
	}
	// Waiting for the reader to release the mutex is the whole point.
	m.dispatchMu.Lock()
	//lint:ignore SA2001 the empty critical section is the wait for the batch
	m.dispatchMu.Unlock()
}

// Counts returns the events delivered so far, by kind. Events published
// while nobody subscribed are not counted.
func (m *Monitor) Counts() Counts {
	return Counts{
		Free:   m.counts[Free-1].Load(),
		Chunk:  m.counts[Chunk-1].Load(),
		Unmap:  m.counts[Unmap-1].Load(),
		Remove: m.counts[Remove-1].Load(),
	}
}

// Close stops the userfaultfd reader, if it runs, and releases its
// descriptors; the kernel forgets the watched ranges. Subscriptions stay, so
// heap events are still delivered. Close is idempotent.
func (m *Monitor) Close() error {
	m.uf.mu.Lock()
	b := m.uf.b
	m.uf.b = nil
	m.uf.closed = true
	m.uf.mu.Unlock()
	if b == nil {
		return nil
	}
	return b.close()
}
