package rcache_test

import (
	"fmt"

	"github.com/symheap/symheap/memhook"
	"github.com/symheap/symheap/rcache"
	"github.com/symheap/symheap/rcache/pin"
)

// A registration cache in front of the pin registrar, invalidated by the
// release events of a heap: the second Get of a buffer is a hit, and once
// the buffer is freed its registration is never returned again.
func Example() {
	mon := memhook.New()
	defer mon.Close()
	heap, err := memhook.NewPrivateHeap(mon, 16<<20, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer heap.Close()
	c, err := rcache.New(rcache.Config{
		Registrars: []rcache.Registrar{pin.New()},
		Monitor:    mon,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	a, _ := heap.Alloc(1 << 20)
	buf := memhook.Range{Start: a, End: a + 1<<20}
	e, err := c.Get(buf, rcache.Transports(0)) // registers: a miss
	if err != nil {
		fmt.Println(err)
		return
	}
	// ... hand e.Handle(0) to the transport, transfer, then:
	c.Put(e)

	e2, _ := c.Get(buf, rcache.Transports(0)) // the same registration: a hit
	fmt.Println("hit:", e2 == e)
	c.Put(e2)

	heap.Free(a) // publishes a Free event; the cache invalidates
	b, _ := heap.Alloc(1 << 20)
	e3, _ := c.Get(memhook.Range{Start: b, End: b + 1<<20}, rcache.Transports(0))
	fmt.Println("same address:", b == a, "old registration returned:", e3 == e)
	c.Put(e3)

	s := c.Stats()
	fmt.Printf("hits %d, misses %d, invalidations %d\n", s.Hits, s.Misses, s.Invalidations)
	// Output:
	// hit: true
	// same address: true old registration returned: false
	// hits 1, misses 2, invalidations 1
}
