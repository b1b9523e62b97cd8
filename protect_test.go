package symheap_test

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/internal/petest"
)

// TestProtectedMode: with SYMHEAP_PROTECT=1 the API still writes every
// PE's heap, a Ptr view of another PE's heap reads but faults on a store,
// and the neighbour's memory is unchanged by the stray store.
func TestProtectedMode(t *testing.T) {
	petest.Run(t, 3, func(t *testing.T) {
		pe, err := symheap.Init(symheap.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer pe.Close()
		if !pe.Protected() {
			t.Fatal("SYMHEAP_PROTECT=1 but the PE is not protected")
		}
		me, n := pe.Rank(), pe.Size()
		right := (me + 1) % n
		x, err := symheap.Calloc[int64](pe, 8)
		if err != nil {
			t.Fatal(err)
		}
		// Through the API: Put, atomics, a collective.
		if err := symheap.Put(pe, x[:1], []int64{int64(100 + me)}, right); err != nil {
			t.Fatal(err)
		}
		if err := symheap.AtomicAdd(pe, &x[1], 1, 0); err != nil {
			t.Fatal(err)
		}
		if err := pe.Barrier(); err != nil {
			t.Fatal(err)
		}
		left := (me + n - 1) % n
		if x[0] != int64(100+left) {
			t.Errorf("Put in protected mode: got %d", x[0])
		}
		if me == 0 && x[1] != int64(n) {
			t.Errorf("AtomicAdd in protected mode: got %d", x[1])
		}
		x[2] = int64(me)
		if err := pe.Barrier(); err != nil {
			t.Fatal(err)
		}
		if err := symheap.Reduce(pe.World(), x[3:4], x[2:3], symheap.OpSum); err != nil {
			t.Fatal(err)
		}
		if x[3] != int64(n*(n-1)/2) {
			t.Errorf("Reduce in protected mode: got %d", x[3])
		}
		// A view of the neighbour's copy reads...
		view := symheap.Ptr(pe, x, right)
		if view == nil || view[2] != int64(right) {
			t.Fatalf("Ptr view reads %v", view)
		}
		// ...but a store through it faults, in this PE.
		faulted := func() (f bool) {
			old := debug.SetPanicOnFault(true)
			defer debug.SetPanicOnFault(old)
			defer func() {
				r := recover()
				_, isRuntime := r.(runtime.Error)
				f = isRuntime && strings.Contains(r.(runtime.Error).Error(), "invalid memory address")
			}()
			view[5] = 999
			return false
		}()
		if !faulted {
			t.Error("a stray store into another PE's heap did not fault in protected mode")
		}
		if err := pe.Barrier(); err != nil {
			t.Fatal(err)
		}
		if x[5] != 0 {
			t.Errorf("the neighbour's store reached this PE's heap: %d", x[5])
		}
		// This PE's own heap stays writable through ordinary slices.
		x[6] = 7
		if err := symheap.Free(pe, x); err != nil {
			t.Fatal(err)
		}
	}, append(small, petest.Env("SYMHEAP_PROTECT=1"))...)
}
