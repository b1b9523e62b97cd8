package memhook

import (
	"fmt"
	"sync"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/unix"
)

// Heap is a source of symheap memory whose releases the monitor hears of:
// every Free and every Realloc that gives memory back publishes a Free or
// Chunk event (PublishFree, PublishRealloc) on the monitor the heap was made
// with. The runtime's heaps satisfy it; SelfTest uses one to prove that FREE
// and CHUNK events arrive. Addresses are integers, never pointers.
type Heap interface {
	Alloc(size uint64) (uintptr, error)
	Realloc(addr uintptr, size uint64) (uintptr, error)
	Free(addr uintptr) error
}

// PrivateHeap is a Heap in private anonymous memory of this process,
// managed by a registered allocator component. It publishes events exactly
// as the runtime does for its shared heaps. It serves the self-test and the
// tests of a registration cache; it is safe for concurrent use.
type PrivateHeap struct {
	m *Monitor

	mu      sync.Mutex
	mapping unix.Mapping    // the whole mapping, kept for unmapping (guarded by mu)
	base    uintptr         // address of the region's first byte, aligned to alloc.MaxAlign
	size    uint64          // region bytes
	a       alloc.Allocator // nil once closed (guarded by mu)
	comp    string
}

// NewPrivateHeap maps size bytes (plus alignment slack that is never
// touched) and formats them with the allocator component named, or the one
// alloc.Select picks when component is "".
func NewPrivateHeap(m *Monitor, size uint64, component string) (*PrivateHeap, error) {
	c, _, err := alloc.Select(component, size)
	if err != nil {
		return nil, fmt.Errorf("memhook: private heap of %d bytes: %w", size, err)
	}
	mp, err := unix.MapAnon(int(size + alloc.MaxAlign))
	if err != nil {
		return nil, fmt.Errorf("memhook: map a private heap of %d bytes: %v: %w", size, err, errs.ErrOutOfMemory)
	}
	skip := (alloc.MaxAlign - mp.Addr()%alloc.MaxAlign) % alloc.MaxAlign
	region := mp.Mem[skip : skip+uintptr(size) : skip+uintptr(size)]
	a, err := c.Format(region)
	if err != nil {
		unix.Unmap(mp)
		return nil, fmt.Errorf("memhook: format a private heap with %s: %w", c.Name, err)
	}
	return &PrivateHeap{m: m, mapping: mp, base: mp.Addr() + skip, size: size, a: a, comp: c.Name}, nil
}

// Component is the name of the allocator component managing the heap.
func (h *PrivateHeap) Component() string { return h.comp }

// Range is the heap's region.
func (h *PrivateHeap) Range() Range { return Range{h.base, h.base + uintptr(h.size)} }

// Alloc returns the address of a new block of at least size bytes.
func (h *PrivateHeap) Alloc(size uint64) (uintptr, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.a == nil {
		return 0, fmt.Errorf("memhook: private heap closed: %w", errs.ErrClosed)
	}
	off, err := h.a.Alloc(size, 0)
	if err != nil {
		return 0, err
	}
	return h.base + uintptr(off), nil
}

func (h *PrivateHeap) offset(addr uintptr) (alloc.Off, error) {
	if h.a == nil {
		return 0, fmt.Errorf("memhook: private heap closed: %w", errs.ErrClosed)
	}
	if addr < h.base || addr >= h.base+uintptr(h.size) {
		return 0, fmt.Errorf("memhook: %#x is not in the private heap %v: %w", addr, h.Range(), errs.ErrBadFree)
	}
	return alloc.Off(addr - h.base), nil
}

// Free releases the block at addr and publishes a Free event for its usable
// bytes. The event is published after the allocator has taken the block
// back and before Free returns, so that by the time another Alloc can hand
// the same address out, every subscriber has heard of the release.
func (h *PrivateHeap) Free(addr uintptr) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	off, err := h.offset(addr)
	if err != nil {
		return err
	}
	n, err := h.a.UsableSize(off)
	if err != nil {
		return err
	}
	if err := h.a.Free(off); err != nil {
		return err
	}
	// Published under h.mu: no Alloc can reuse the block before the
	// subscribers know. Callbacks must not re-enter the heap (doc.go).
	h.m.PublishFree(addr, uintptr(n))
	return nil
}

// Realloc resizes the block at addr and publishes a Chunk event for what the
// resize released (see PublishRealloc).
func (h *PrivateHeap) Realloc(addr uintptr, size uint64) (uintptr, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	off, err := h.offset(addr)
	if err != nil {
		return 0, err
	}
	oldN, err := h.a.UsableSize(off)
	if err != nil {
		return 0, err
	}
	noff, err := h.a.Realloc(off, size)
	if err != nil {
		return 0, err
	}
	newN, err := h.a.UsableSize(noff)
	if err != nil {
		return 0, err
	}
	naddr := h.base + uintptr(noff)
	h.m.PublishRealloc(addr, uintptr(oldN), naddr, uintptr(newN))
	return naddr, nil
}

// UsableSize returns the bytes the block at addr may hold.
func (h *PrivateHeap) UsableSize(addr uintptr) (uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	off, err := h.offset(addr)
	if err != nil {
		return 0, err
	}
	return h.a.UsableSize(off)
}

// Check runs the allocator's consistency check.
func (h *PrivateHeap) Check() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.a == nil {
		return nil
	}
	return h.a.Check()
}

// Close unmaps the heap and publishes an Unmap event for its region. Blocks
// still allocated are gone with it. Close is idempotent.
func (h *PrivateHeap) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.a == nil {
		return nil
	}
	h.a = nil
	err := unix.Unmap(h.mapping)
	h.mapping = unix.Mapping{}
	h.m.Publish(Unmap, h.Range())
	return err
}
