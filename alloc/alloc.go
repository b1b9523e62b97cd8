// Package alloc is symheap's memheap framework: allocator components that
// manage a region of shared memory by offsets, and the registry that chooses
// one by name or by priority.
//
// # The contract every component keeps
//
//   - It works on offsets (Off) from the first byte of its region, never on
//     addresses, and keeps all of its metadata inside the region. The region
//     can therefore be mapped at different addresses in different processes,
//     any process that maps it can Attach and free into it (under the
//     region's lock), and an inspector can Walk a live heap.
//   - The region's first byte is aligned to MaxAlign in every process that
//     maps it (the segment layer guarantees this), so an offset aligned to a
//     power of two up to MaxAlign is an address aligned to it too.
//   - It is deterministic: the same sequence of calls on a freshly formatted
//     region returns the same offsets. The symmetric heap depends on this.
//   - A bad free (double free, an interior offset, an offset outside the
//     region) returns ErrBadFree and changes nothing; a request that cannot
//     be met returns ErrOutOfMemory and changes nothing.
//   - It is not safe for concurrent use: callers serialise, in-process with
//     a mutex and across processes with a Lock in shared memory.
//
// Components register themselves from init, as database/sql drivers do; the
// package alloc/all imports every built-in one. Their priorities come from
// the benchmarks in bench_test.go: tlsf (30, the default: fastest on small
// blocks, level with buddy on large ones, as frugal as dlmalloc), dlmalloc
// (20), buddy (10: faster than dlmalloc, but power-of-two rounding wastes
// about a fifth of the memory it hands out).
//
// # Frees from other processes: a robust lock, not a remote-free list
//
// Blocks of the local shared heap may be freed by any PE. Each region
// reserves a lock word (offset 64 of its header), and Locked takes that
// Lock around every call, whichever process makes it. The alternative,
// a lock-free list on which other PEs push blocks for the owner to free
// later (as mimalloc and snmalloc do between threads), was rejected:
//
//   - A remote free must be validated like a local one (double free,
//     interior or foreign offset → ErrBadFree, and nothing changed). A
//     deferred free cannot report an error to its caller, and pushing an
//     unvalidated offset onto a list inside the heap lets one bad free
//     corrupt the owner's metadata later, far from its cause.
//   - Under the lock a free is O(1) (tlsf, dlmalloc) or O(log n) (buddy)
//     with an uncontended CAS and an uncontended Swap: no syscall. The
//     owner never has to poll a list, and the memory is reusable at once,
//     which matters for a fixed-size heap that has no other memory source.
//   - The lock is owner-tagged: a waiter sleeps in 50 ms futex waits and
//     asks whether the holder is still alive between them, so a PE that
//     dies holding it produces ErrPeerLost instead of a hang. The heap may
//     then be inconsistent; the job is going down anyway.
//
// That holds for the components. The local shared heap's small blocks
// have a front end over them, alloc/small, which does use a remote-free
// list, but validates each remote free before it defers it: the freer
// claims the block in the span's bitmap with one atomic OR, so a double
// free, an interior or a foreign offset is refused at the call, and only
// validated blocks reach the list. There the owner's allocations and frees
// take no lock at all, which is worth the list.
//
// # Checking
//
// Every component has a full invariant checker (Check). Setting the
// environment variable SYMHEAP_ALLOC_VERIFY to any non-empty value makes
// every call that changes a region run it, and panic on a violation; the
// conformance suite alloc/alloctest runs it after every operation.
package alloc

import (
	"fmt"
	"math/bits"
	"sort"
	"sync"

	"github.com/symheap/symheap/internal/errs"
)

// Off is an offset in bytes from the first byte of a region.
type Off uint64

// Sentinel errors, shared with package symheap.
var (
	ErrOutOfMemory = errs.ErrOutOfMemory
	ErrBadFree     = errs.ErrBadFree
	ErrBadAlign    = errs.ErrBadAlign
)

const (
	// MinAlign is the alignment of every block when none is asked for.
	MinAlign = 16
	// MaxAlign is the largest alignment a caller may ask for, and the
	// alignment of every region's first byte.
	MaxAlign = 8 << 20
)

// Allocator manages one region. See the package comment for its contract.
type Allocator interface {
	// Name is the component's registered name.
	Name() string
	// Alloc returns a block of at least size bytes aligned to align
	// (0 means MinAlign; otherwise a power of two up to MaxAlign, else
	// ErrBadAlign). size 0 is a valid request for a minimal block.
	Alloc(size, align uint64) (Off, error)
	// Free releases a block returned by Alloc or Realloc.
	Free(off Off) error
	// Realloc resizes a block, in place when it can. The returned block
	// holds the old contents up to the smaller size. On failure the old
	// block is untouched and still allocated.
	Realloc(off Off, size uint64) (Off, error)
	// UsableSize returns the bytes the caller may use at off.
	UsableSize(off Off) (uint64, error)
	// Stats returns figures read from the region.
	Stats() Stats
	// Check verifies every invariant of the metadata and returns the first
	// violation found.
	Check() error
	// Walk calls fn for every block, used and free, in offset order, until
	// fn returns false. off and size cover the block as the allocator sees
	// it (including its own header).
	Walk(fn func(off Off, size uint64, used bool) bool) error
}

// Stats are an allocator's figures.
type Stats struct {
	Size        uint64 // region bytes
	Overhead    uint64 // bytes of metadata that can never be handed out
	InUse       uint64 // bytes in live blocks (as UsableSize counts them)
	Free        uint64 // bytes available to Alloc
	LargestFree uint64 // the largest request that would succeed now with MinAlign
	Live        uint64 // live blocks
	Allocs      uint64 // successful Alloc calls, and Realloc calls that moved
	Frees       uint64 // successful Free calls, and Realloc calls that moved (so Live == Allocs-Frees)
	Reallocs    uint64 // successful Realloc calls
	Failed      uint64 // calls that returned an error
}

// Fragmentation is 1 - LargestFree/Free: 0 when all free space is one block.
func (s Stats) Fragmentation() float64 {
	if s.Free == 0 {
		return 0
	}
	return 1 - float64(s.LargestFree)/float64(s.Free)
}

// Component describes one allocator implementation.
type Component struct {
	Name     string
	Priority int // higher wins when no name is given
	// Probe tells whether the component can manage a region of this size;
	// nil accepts every size.
	Probe func(size uint64) error
	// Format writes fresh metadata into mem and returns an allocator over it.
	Format func(mem []byte) (Allocator, error)
	// Attach opens a region that Format prepared, in any process.
	Attach func(mem []byte) (Allocator, error)
}

var (
	mu         sync.RWMutex
	components = map[string]Component{}
)

// Register makes a component available. It panics on a duplicate name or a
// component without Format or Attach: both are programming errors.
func Register(c Component) {
	mu.Lock()
	defer mu.Unlock()
	if c.Name == "" || c.Format == nil || c.Attach == nil {
		panic("alloc: Register of an incomplete component")
	}
	if _, dup := components[c.Name]; dup {
		panic("alloc: Register called twice for component " + c.Name)
	}
	components[c.Name] = c
}

// Components returns the registered components, highest priority first
// (ties by name).
func Components() []Component {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]Component, 0, len(components))
	for _, c := range components {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Priority != out[j].Priority {
			return out[i].Priority > out[j].Priority
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Lookup returns the component registered under name.
func Lookup(name string) (Component, bool) {
	mu.RLock()
	defer mu.RUnlock()
	c, ok := components[name]
	return c, ok
}

// Select chooses a component for a region of size bytes: the one named, if
// name is not empty, else the highest-priority one whose probe accepts.
// The reason says which rule chose it.
func Select(name string, size uint64) (c Component, reason string, err error) {
	if name != "" {
		c, ok := Lookup(name)
		if !ok {
			return Component{}, "", fmt.Errorf("alloc: no allocator component %q (have %v): %w", name, Names(), errs.ErrBadConfig)
		}
		if c.Probe != nil {
			if err := c.Probe(size); err != nil {
				return Component{}, "", fmt.Errorf("alloc: component %q refuses a %d-byte region: %v: %w", name, size, err, errs.ErrBadConfig)
			}
		}
		return c, "named explicitly", nil
	}
	var refused []string
	for _, c := range Components() {
		if c.Probe != nil {
			if err := c.Probe(size); err != nil {
				refused = append(refused, fmt.Sprintf("%s: %v", c.Name, err))
				continue
			}
		}
		return c, fmt.Sprintf("highest priority (%d) whose probe accepts", c.Priority), nil
	}
	return Component{}, "", fmt.Errorf("alloc: no component accepts a %d-byte region %v: %w", size, refused, errs.ErrBadConfig)
}

// Names lists the registered component names, highest priority first.
func Names() []string {
	var n []string
	for _, c := range Components() {
		n = append(n, c.Name)
	}
	return n
}

// CheckAlign validates an alignment request and returns the effective one.
func CheckAlign(align uint64) (uint64, error) {
	if align == 0 {
		return MinAlign, nil
	}
	if bits.OnesCount64(align) != 1 {
		return 0, fmt.Errorf("alignment %d is not a power of two: %w", align, ErrBadAlign)
	}
	if align > MaxAlign {
		return 0, fmt.Errorf("alignment %d is above the largest supported, %d: %w", align, MaxAlign, ErrBadAlign)
	}
	if align < MinAlign {
		align = MinAlign
	}
	return align, nil
}
