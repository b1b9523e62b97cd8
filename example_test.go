package symheap_test

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// Joining the job and meeting at a barrier, each bounded by a context: a
// PE that never comes makes InitCtx or BarrierCtx return the context's
// error instead of hanging. (A cancelled barrier breaks this PE's
// collective calls for good: see the package documentation, "Bounded
// waits".)
func ExampleBarrierCtx() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pe, err := symheap.InitCtx(ctx, symheap.Config{HeapSize: 1 << 20, SharedSize: 1 << 20})
	if err != nil {
		fmt.Println(err) // errors.Is(err, context.DeadlineExceeded): a PE did not start in time
		return
	}
	defer pe.Close()
	if err := symheap.BarrierCtx(ctx, pe); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("every PE passed the barrier")
	// Output: every PE passed the barrier
}

// A wait for another PE's write that gives up after a while: the variable
// is left as it was, and the program may wait again or go on.
func ExampleWaitUntilCtx() {
	pe, err := symheap.Init(symheap.Config{HeapSize: 1 << 20, SharedSize: 1 << 20})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pe.Close()
	flag, err := symheap.Calloc[int64](pe, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Nobody sets the flag here.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err = symheap.WaitUntilCtx(ctx, pe, &flag[0], symheap.CmpNE, 0)
	fmt.Println("gave up:", errors.Is(err, context.DeadlineExceeded), "- flag:", flag[0])
	// Output: gave up: true - flag: 0
}

// A receive that gives up takes no message: the next receive gets it.
func ExampleRecvCtx() {
	pe, err := symheap.Init(symheap.Config{HeapSize: 1 << 20, SharedSize: 1 << 20})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pe.Close()
	buf := make([]byte, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = symheap.RecvCtx(ctx, pe, buf, symheap.AnySource, 1)
	fmt.Println("nothing yet:", errors.Is(err, context.DeadlineExceeded))
	if err := pe.Send([]byte("hello"), pe.Rank(), 1); err != nil { // to itself
		fmt.Println(err)
		return
	}
	st, err := symheap.RecvCtx(context.Background(), pe, buf, symheap.AnySource, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s from PE %d\n", buf[:st.Count], st.Source)
	// Output:
	// nothing yet: true
	// hello from PE 0
}
