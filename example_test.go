package symheap_test

import (
	"fmt"

	"github.com/symheap/symheap"
)

// The main path: join the job, allocate a symmetric array collectively,
// write into the right neighbour's copy, synchronise, read, leave. Under
// shrun (shrun -n 4 ./prog) every PE runs this; run alone, as here, the
// program is a job of one PE, which is its own neighbour.
func Example() {
	pe, err := symheap.Init(symheap.Config{HeapSize: 1 << 20, SharedSize: 1 << 20})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pe.Close()
	inbox, err := symheap.Malloc[int64](pe, 1) // the same offset in every PE
	if err != nil {
		fmt.Println(err)
		return
	}
	right := (pe.Rank() + 1) % pe.Size()
	if err := symheap.Put(pe, inbox, []int64{100 + int64(pe.Rank())}, right); err != nil {
		fmt.Println(err)
		return
	}
	if err := pe.Barrier(); err != nil { // completes the puts, then waits for every PE
		fmt.Println(err)
		return
	}
	left := (pe.Rank() + pe.Size() - 1) % pe.Size()
	fmt.Printf("PE %d got %d from PE %d\n", pe.Rank(), inbox[0], left)
	if err := symheap.Free(pe, inbox); err != nil {
		fmt.Println(err)
	}
	// Output: PE 0 got 100 from PE 0
}

// A block of the local shared heap is not collective: one PE allocates
// it, every PE of the node can use it in place, and any PE may free it.
// A SharedPtr names it the same way in every PE, so it can travel as data.
func ExampleSharedAlloc() {
	pe, err := symheap.Init(symheap.Config{HeapSize: 1 << 20, SharedSize: 1 << 20})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pe.Close()
	rec, err := symheap.SharedAlloc[float64](pe, 4)
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := range rec {
		rec[i] = float64(i) / 2
	}
	ptr, err := symheap.SharedPtrOf(pe, rec) // send this to another PE...
	if err != nil {
		fmt.Println(err)
		return
	}
	same, err := symheap.SharedAt[float64](pe, ptr, 4) // ...which finds the block with it
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(same)
	if err := symheap.SharedFree(pe, same); err != nil { // any PE may free it
		fmt.Println(err)
	}
	// Output: [0 0.5 1 1.5]
}

// Messages between PEs: Send and Recv, with tags and AnySource. A PE may
// send to itself, as the lone PE here does.
func ExamplePE_Send() {
	pe, err := symheap.Init(symheap.Config{HeapSize: 1 << 20, SharedSize: 1 << 20})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pe.Close()
	req, err := pe.Irecv(make([]byte, 64), symheap.AnySource, 7)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := pe.Send([]byte("hello"), pe.Rank(), 7); err != nil {
		fmt.Println(err)
		return
	}
	st, err := req.Wait()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d bytes from PE %d with tag %d\n", st.Count, st.Source, st.Tag)
	// Output: 5 bytes from PE 0 with tag 7
}
