package memhook_test

import (
	"fmt"

	"github.com/symheap/symheap/memhook"
)

// A subscriber hears of every block a symheap heap gives back.
func ExampleMonitor_Subscribe() {
	mon := memhook.New()
	defer mon.Close()
	heap, err := memhook.NewPrivateHeap(mon, 1<<20, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer heap.Close()
	a, _ := heap.Alloc(4096)
	block := memhook.Range{Start: a, End: a + 4096}

	cancel := mon.Subscribe(func(k memhook.Kind, r memhook.Range) {
		fmt.Println(k, "covers the block:", r.Contains(block))
	})
	heap.Free(a)
	cancel()
	// Output:
	// free covers the block: true
}
