package alloc_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/internal/unix"

	_ "github.com/symheap/symheap/alloc/all" // registers buddy, dlmalloc, tlsf
)

// Choose a component for a region, format the region, and share the heap
// between processes (here: goroutines) through its lock.
func Example() {
	const size = 16 << 20
	m, err := unix.MapAnonAligned(size, alloc.MaxAlign, true) // the segment layer's job in symheap
	if err != nil {
		log.Fatal(err)
	}
	defer unix.Unmap(m)

	c, why, err := alloc.Select("", size)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s (%s)\n", c.Name, why)

	a, err := c.Format(m.Mem)
	if err != nil {
		log.Fatal(err)
	}
	// PE 0's view; every process that maps the region wraps its own
	// Attach'ed allocator the same way, with its own id.
	heap, err := alloc.NewLocked(a, 0, nil)
	if err != nil {
		log.Fatal(err)
	}
	off, err := heap.Alloc(1000, 64)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("aligned:", off%64 == 0)
	err = heap.Free(off + 16)
	fmt.Println("interior free refused:", errors.Is(err, alloc.ErrBadFree))
	if err := heap.Free(off); err != nil {
		log.Fatal(err)
	}
	st := heap.Stats()
	fmt.Println("live:", st.Live, "failed calls:", st.Failed)
	// Output:
	// tlsf (highest priority (30) whose probe accepts)
	// aligned: true
	// interior free refused: true
	// live: 0 failed calls: 1
}
