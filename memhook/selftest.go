package memhook

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/unix"
)

// Flags are the release events a monitor has proven it sees.
type Flags uint32

// Support flags, set by SelfTest only when the event really arrived.
const (
	FlagFree   Flags = 1 << iota // a freed heap block is reported (Free)
	FlagChunk                    // a realloc releasing memory is reported (Chunk)
	FlagMunmap                   // munmap of watched memory is reported (Unmap, through userfaultfd)
	FlagRemove                   // madvise(MADV_DONTNEED) of watched memory is reported (Remove)
)

var flagNames = []struct {
	f    Flags
	name string
}{{FlagFree, "FREE"}, {FlagChunk, "CHUNK"}, {FlagMunmap, "MUNMAP"}, {FlagRemove, "REMOVE"}}

// String lists the flags set, as "FREE|CHUNK|MUNMAP", or "none".
func (f Flags) String() string {
	var s []string
	for _, n := range flagNames {
		if f&n.f != 0 {
			s = append(s, n.name)
		}
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, "|")
}

// SelfTestResult is what SelfTest found.
type SelfTestResult struct {
	Flags Flags
	// Why holds, for each flag not set, the precise reason.
	Why map[Flags]string
	// Heap names the heap used for FREE and CHUNK ("private heap (tlsf)",
	// "caller's heap").
	Heap string
	// Userfault describes the userfaultfd backend.
	Userfault string
}

// String renders the result for `symheap info`, one line per flag.
func (r SelfTestResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "memory monitor: %s\n", r.Flags)
	for _, n := range flagNames {
		if r.Flags&n.f != 0 {
			fmt.Fprintf(&b, "  %-6s yes\n", n.name)
		} else {
			fmt.Fprintf(&b, "  %-6s no: %s\n", n.name, r.Why[n.f])
		}
	}
	fmt.Fprintf(&b, "  heap: %s\n  %s\n", r.Heap, r.Userfault)
	return b.String()
}

// Support returns the flags proven by the last SelfTest (none before one).
func (m *Monitor) Support() Flags { return Flags(m.support.Load()) }

// selfTestHeapSize leaves room for the 4 MiB block whatever the allocator's
// overhead and rounding (a buddy allocator rounds 4 MiB plus its header up
// to 8 MiB).
const selfTestHeapSize = 16 << 20

// SelfTest proves which release events this monitor sees, and records the
// flags (Support). Each flag is set only when its event really arrived:
//
//   - FREE: allocate 4 MiB from h, free it, expect a Free event covering it;
//   - CHUNK: reallocate a block (grow past a neighbour, which moves it; else
//     shrink it), expect a Chunk event over the released part;
//   - MUNMAP: map 64 KiB, Watch it, unmap it, expect an Unmap event;
//   - REMOVE: map 64 KiB, Watch it, touch it, madvise(MADV_DONTNEED), expect
//     a Remove event.
//
// h must publish on m. With h nil, a PrivateHeap of 16 MiB is made with the
// highest-priority allocator component. MUNMAP and REMOVE start the
// userfaultfd backend if it is not running. SelfTest may run at any time;
// events of other threads during it do no harm.
func (m *Monitor) SelfTest(h Heap) SelfTestResult {
	res := SelfTestResult{Why: map[Flags]string{}}
	p := &probe{}
	cancel := m.Subscribe(p.record)
	defer cancel()

	heapName := "caller's heap"
	if h == nil {
		ph, err := NewPrivateHeap(m, selfTestHeapSize, "")
		if err != nil {
			why := fmt.Sprintf("no heap to test with: %v", err)
			if errors.Is(err, errs.ErrBadConfig) && len(componentNames()) == 0 {
				why = "no allocator component is registered (import github.com/symheap/symheap/alloc/all)"
			}
			res.Why[FlagFree], res.Why[FlagChunk] = why, why
			heapName = "none"
		} else {
			defer ph.Close()
			h = ph
			heapName = "private heap (" + ph.Component() + ")"
		}
	}
	res.Heap = heapName
	if h != nil {
		m.testFree(h, p, &res)
		m.testChunk(h, p, &res)
	}
	m.testUnmap(p, &res)
	m.testRemove(p, &res)
	res.Userfault = m.UserfaultInfo()
	m.support.Store(uint32(res.Flags))
	m.tested.Store(true)
	return res
}

// probe records the events that arrive during a self-test.
type probe struct {
	mu     sync.Mutex
	events []Event
}

// Event is one release, as a probe or a test records it.
type Event struct {
	Kind  Kind
	Range Range
}

func (p *probe) record(k Kind, r Range) {
	p.mu.Lock()
	if len(p.events) < 1024 {
		p.events = append(p.events, Event{k, r})
	}
	p.mu.Unlock()
}

// saw reports whether an event of kind k overlapping r arrived.
func (p *probe) saw(k Kind, r Range) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.events {
		if e.Kind == k && e.Range.Overlaps(r) {
			return true
		}
	}
	return false
}

func (m *Monitor) testFree(h Heap, p *probe, res *SelfTestResult) {
	const n = 4 << 20
	a, err := h.Alloc(n)
	if err != nil {
		res.Why[FlagFree] = fmt.Sprintf("allocating 4 MiB failed: %v", err)
		return
	}
	if err := h.Free(a); err != nil {
		res.Why[FlagFree] = fmt.Sprintf("freeing the 4 MiB block failed: %v", err)
		return
	}
	m.Sync() // events of a Source (the C library's hooks) arrive here
	if p.saw(Free, Range{a, a + n}) {
		res.Flags |= FlagFree
		return
	}
	res.Why[FlagFree] = fmt.Sprintf("no Free event arrived for the 4 MiB block at %#x: the heap does not publish its frees", a)
}

func (m *Monitor) testChunk(h Heap, p *probe, res *SelfTestResult) {
	const small, big = 64 << 10, 1 << 20
	a, err := h.Alloc(small)
	if err != nil {
		res.Why[FlagChunk] = fmt.Sprintf("allocating 64 KiB failed: %v", err)
		return
	}
	// A neighbour keeps the block from growing in place, so that the
	// grow moves it and releases the old block.
	fence, err := h.Alloc(small)
	if err == nil {
		defer h.Free(fence)
	}
	a2, err := h.Realloc(a, big)
	if err != nil {
		h.Free(a)
		res.Why[FlagChunk] = fmt.Sprintf("growing a 64 KiB block to 1 MiB failed: %v", err)
		return
	}
	m.Sync()
	seen := a2 != a && p.saw(Chunk, Range{a, a + small})
	a3 := a2
	if !seen {
		// It grew in place; shrinking must give the tail back.
		a3, err = h.Realloc(a2, 4<<10)
		if err != nil {
			h.Free(a2)
			res.Why[FlagChunk] = fmt.Sprintf("shrinking a 1 MiB block to 4 KiB failed: %v", err)
			return
		}
		m.Sync()
		seen = p.saw(Chunk, Range{a2, a2 + big})
	}
	h.Free(a3)
	if seen {
		res.Flags |= FlagChunk
		return
	}
	res.Why[FlagChunk] = "no Chunk event arrived for a block grown from 64 KiB to 1 MiB and shrunk to 4 KiB: the heap does not publish what realloc releases (or its allocator released nothing)"
}

const selfTestMapSize = 64 << 10

func (m *Monitor) testUnmap(p *probe, res *SelfTestResult) {
	mp, err := unix.MapAnon(selfTestMapSize)
	if err != nil {
		res.Why[FlagMunmap] = fmt.Sprintf("mapping 64 KiB failed: %v", err)
		return
	}
	r := RangeOf(mp.Mem)
	if err := m.Watch(r); err != nil {
		unix.Unmap(mp)
		res.Why[FlagMunmap] = err.Error()
		return
	}
	unix.Unmap(mp)
	m.Sync()
	if p.saw(Unmap, r) {
		res.Flags |= FlagMunmap
		return
	}
	res.Why[FlagMunmap] = fmt.Sprintf("watched %v with userfaultfd, unmapped it, and no Unmap event arrived", r)
}

func (m *Monitor) testRemove(p *probe, res *SelfTestResult) {
	mp, err := unix.MapAnon(selfTestMapSize)
	if err != nil {
		res.Why[FlagRemove] = fmt.Sprintf("mapping 64 KiB failed: %v", err)
		return
	}
	defer unix.Unmap(mp)
	r := RangeOf(mp.Mem)
	if err := m.Watch(r); err != nil {
		res.Why[FlagRemove] = err.Error()
		return
	}
	for i := 0; i < len(mp.Mem); i += os.Getpagesize() {
		mp.Mem[i] = 1
	}
	if err := unix.Madvise(mp.Mem, unix.MadvDontneed); err != nil {
		res.Why[FlagRemove] = fmt.Sprintf("madvise(MADV_DONTNEED) failed: %v", err)
		return
	}
	m.Sync()
	if p.saw(Remove, r) {
		res.Flags |= FlagRemove
		return
	}
	res.Why[FlagRemove] = fmt.Sprintf("watched %v with userfaultfd, dropped its pages, and no Remove event arrived", r)
}

// Mapper makes and releases mappings whose releases reach the monitor by
// some means other than userfaultfd: the C library's hooks of munmap and
// madvise. Addresses are integers.
type Mapper interface {
	Map(n uintptr) (uintptr, error)
	Unmap(addr, n uintptr) error
	// DropPages is madvise(MADV_DONTNEED) of the range.
	DropPages(addr, n uintptr) error
}

// SelfTestWith is SelfTest with the releases made through h (FREE, CHUNK)
// and mp (MUNMAP, REMOVE), whose events the monitor hears of from a
// Source, not from userfaultfd: the C library's self-test at shmem_init,
// with h its malloc and mp its mmap. heap names h in the result.
func (m *Monitor) SelfTestWith(h Heap, mp Mapper, heap string) SelfTestResult {
	res := SelfTestResult{Why: map[Flags]string{}, Heap: heap, Userfault: "userfaultfd: not used (" + heap + ")"}
	p := &probe{}
	cancel := m.Subscribe(p.record)
	defer cancel()
	m.testFree(h, p, &res)
	m.testChunk(h, p, &res)
	release := func(f Flags, k Kind, name string, drop bool) {
		a, err := mp.Map(selfTestMapSize)
		if err != nil {
			res.Why[f] = fmt.Sprintf("mapping 64 KiB failed: %v", err)
			return
		}
		r := Range{a, a + selfTestMapSize}
		if drop {
			err = mp.DropPages(a, selfTestMapSize)
			mp.Unmap(a, selfTestMapSize)
		} else {
			err = mp.Unmap(a, selfTestMapSize)
		}
		if err != nil {
			res.Why[f] = fmt.Sprintf("%s failed: %v", name, err)
			return
		}
		m.Sync()
		if p.saw(k, r) {
			res.Flags |= f
			return
		}
		res.Why[f] = fmt.Sprintf("no %s event arrived for %s of %v", k, name, r)
	}
	release(FlagMunmap, Unmap, "munmap", false)
	release(FlagRemove, Remove, "madvise(MADV_DONTNEED)", true)
	m.support.Store(uint32(res.Flags))
	m.tested.Store(true)
	return res
}
