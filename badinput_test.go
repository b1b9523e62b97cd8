package symheap_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/internal/petest"
)

// TestBadInput gives every public function nil and empty slices, slices
// outside the heap, PE numbers out of range, negative sizes, misaligned
// atomics and pointer element types, on a live job of 2 PEs; every case
// must return its documented error (or succeed as a no-op where the
// documentation says so), and the heaps must pass their checker after each.
func TestBadInput(t *testing.T) {
	petest.Run(t, 2, func(t *testing.T) {
		pe, err := symheap.Init(symheap.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer pe.Close()
		n := pe.Size()
		sym, err := symheap.Calloc[int64](pe, 16)
		if err != nil {
			t.Fatal(err)
		}
		sym32, err := symheap.Calloc[int32](pe, 16)
		if err != nil {
			t.Fatal(err)
		}
		bytes, err := symheap.Calloc[byte](pe, 64)
		if err != nil {
			t.Fatal(err)
		}
		goMem := make([]int64, 16)
		var goWord int64
		words, err := symheap.Reinterpret[int64](bytes[1:9])
		if err != nil {
			t.Fatal(err)
		}
		misaligned := &words[0]

		type withPtr struct{ P *int }
		cases := []struct {
			name string
			want error // nil: must succeed (a no-op)
			call func() error
		}{
			// Allocation.
			{"Malloc negative", symheap.ErrBadArg, func() error { _, err := symheap.Malloc[int64](pe, -1); return err }},
			{"Malloc pointer type", symheap.ErrPointerType, func() error { _, err := symheap.Malloc[withPtr](pe, 1); return err }},
			{"Malloc string", symheap.ErrPointerType, func() error { _, err := symheap.Malloc[string](pe, 1); return err }},
			{"Malloc huge", symheap.ErrOutOfMemory, func() error { _, err := symheap.Malloc[byte](pe, 8e12); return err }},
			{"Malloc zero", nil, func() error {
				s, err := symheap.Malloc[int64](pe, 0)
				if s != nil {
					return errors.New("Malloc(0) returned a slice")
				}
				return err
			}},
			{"Calloc negative", symheap.ErrBadArg, func() error { _, err := symheap.Calloc[int64](pe, -5); return err }},
			{"Align zero", symheap.ErrBadAlign, func() error { _, err := symheap.Align[int64](pe, 0, 4); return err }},
			{"Align three", symheap.ErrBadAlign, func() error { _, err := symheap.Align[int64](pe, 3, 4); return err }},
			{"Align huge", symheap.ErrBadAlign, func() error { _, err := symheap.Align[int64](pe, 1<<40, 4); return err }},
			{"MallocWithHints pointer", symheap.ErrPointerType, func() error {
				_, err := symheap.MallocWithHints[*int](pe, 1, symheap.HintAtomicsRemote)
				return err
			}},
			{"Realloc Go memory", symheap.ErrNotSymmetric, func() error { _, err := symheap.Realloc(pe, goMem, 32); return err }},
			{"Realloc negative", symheap.ErrBadArg, func() error { _, err := symheap.Realloc(pe, sym, -1); return err }},
			{"Free Go memory", symheap.ErrNotSymmetric, func() error { return symheap.Free(pe, goMem) }},
			{"Free interior", symheap.ErrBadFree, func() error { return symheap.Free(pe, sym[1:]) }},
			{"Free nil", nil, func() error { return symheap.Free[int64](pe, nil) }},
			// One-sided.
			{"Put bad PE", symheap.ErrBadPE, func() error { return symheap.Put(pe, sym[:1], goMem[:1], n) }},
			{"Put negative PE", symheap.ErrBadPE, func() error { return symheap.Put(pe, sym[:1], goMem[:1], -1) }},
			{"Put to Go memory", symheap.ErrNotSymmetric, func() error { return symheap.Put(pe, goMem[:1], sym[:1], 0) }},
			{"Put short dst", symheap.ErrBadArg, func() error { return symheap.Put(pe, sym[:1], goMem[:4], 0) }},
			{"Put empty", nil, func() error { return symheap.Put(pe, sym[:0], goMem[:0], 0) }},
			{"Put nil", nil, func() error { return symheap.Put[int64](pe, nil, nil, 0) }},
			{"Put pointer type", symheap.ErrPointerType, func() error { return symheap.Put[*int](pe, nil, make([]*int, 1), 0) }},
			{"Get from Go memory", symheap.ErrNotSymmetric, func() error { return symheap.Get(pe, goMem[:1], goMem[:1], 0) }},
			{"Get bad PE", symheap.ErrBadPE, func() error { return symheap.Get(pe, goMem[:1], sym[:1], 7) }},
			{"PutNBI bad PE", symheap.ErrBadPE, func() error { return symheap.PutNBI(pe, sym[:1], goMem[:1], n) }},
			{"GetNBI Go memory", symheap.ErrNotSymmetric, func() error { return symheap.GetNBI(pe, goMem[:1], goMem[:1], 0) }},
			{"IPut zero stride", symheap.ErrBadArg, func() error { return symheap.IPut(pe, sym, goMem, 0, 1, 4, 0) }},
			{"IPut past the end", symheap.ErrBadArg, func() error { return symheap.IPut(pe, sym[:4], goMem, 2, 1, 4, 0) }},
			{"IPut negative count", symheap.ErrBadArg, func() error { return symheap.IPut(pe, sym, goMem, 1, 1, -1, 0) }},
			{"IGet bad PE", symheap.ErrBadPE, func() error { return symheap.IGet(pe, goMem, sym, 1, 1, 4, -3) }},
			{"Ptr bad PE", nil, func() error {
				if symheap.Ptr(pe, sym, n) != nil || symheap.Ptr(pe, goMem, 0) != nil {
					return errors.New("Ptr gave a view it should not")
				}
				return nil
			}},
			// Reach: Ptr's reasons.
			{"Reach bad PE", symheap.ErrBadPE, func() error { _, err := symheap.Reach(pe, sym, n); return err }},
			{"Reach Go memory", symheap.ErrNotSymmetric, func() error { _, err := symheap.Reach(pe, goMem, 0); return err }},
			{"Reach nil", symheap.ErrNotSymmetric, func() error { _, err := symheap.Reach[int64](pe, nil, 0); return err }},
			{"Reach the same as Ptr", nil, func() error {
				v, err := symheap.Reach(pe, sym, n-1)
				if err != nil || &v[0] != &symheap.Ptr(pe, sym, n-1)[0] || len(v) != len(sym) {
					return fmt.Errorf("Reach of PE %d's copy: %v, not Ptr's view", n-1, err)
				}
				return nil
			}},
			// Atomics.
			{"AtomicFetchAdd Go memory", symheap.ErrNotSymmetric, func() error { _, err := symheap.AtomicFetchAdd(pe, &goWord, 1, 0); return err }},
			{"AtomicFetchAdd misaligned", symheap.ErrBadAlign, func() error { _, err := symheap.AtomicFetchAdd(pe, misaligned, 1, 0); return err }},
			{"AtomicAdd bad PE", symheap.ErrBadPE, func() error { return symheap.AtomicAdd(pe, &sym[0], 1, n) }},
			{"AtomicSet nil", symheap.ErrNotSymmetric, func() error { return symheap.AtomicSet[int64](pe, nil, 1, 0) }},
			{"AtomicCompareSwap bad PE", symheap.ErrBadPE, func() error { _, err := symheap.AtomicCompareSwap(pe, &sym32[0], 0, 1, -1); return err }},
			{"WaitUntil Go memory", symheap.ErrNotSymmetric, func() error { return symheap.WaitUntil(pe, &goWord, symheap.CmpEQ, 0) }},
			{"WaitUntil bad cmp", symheap.ErrBadArg, func() error { return symheap.WaitUntil(pe, &sym[0], symheap.Cmp(99), 0) }},
			{"Test nil", symheap.ErrNotSymmetric, func() error { _, err := symheap.Test[int64](pe, nil, symheap.CmpEQ, 0); return err }},
			// Locks.
			{"SetLock Go memory", symheap.ErrNotSymmetric, func() error { return pe.SetLock(&goWord) }},
			{"ClearLock nil", symheap.ErrNotSymmetric, func() error { return pe.ClearLock(nil) }},
			{"TestLock misaligned", symheap.ErrBadAlign, func() error { _, err := pe.TestLock(misaligned); return err }},
			{"Reinterpret pointer type", symheap.ErrPointerType, func() error { _, err := symheap.Reinterpret[*int](bytes); return err }},
			// Teams and collectives.
			{"Split bad triple", symheap.ErrBadArg, func() error { _, err := pe.World().Split(0, 1, n+1); return err }},
			{"Split negative", symheap.ErrBadArg, func() error { _, err := pe.World().Split(-1, 1, 1); return err }},
			{"Broadcast Go memory", symheap.ErrNotSymmetric, func() error { return symheap.Broadcast(pe.World(), goMem, sym, 0) }},
			{"Broadcast bad root", symheap.ErrBadPE, func() error { return symheap.Broadcast(pe.World(), sym[:4], sym[4:8], n) }},
			{"Reduce bitwise float", symheap.ErrBadOp, func() error {
				f, err := symheap.Reinterpret[float64](bytes[:16])
				if err != nil {
					return err
				}
				return symheap.Reduce(pe.World(), f[:1], f[1:2], symheap.OpXor)
			}},
			{"Reduce short dst", symheap.ErrBadArg, func() error { return symheap.Reduce(pe.World(), sym[:1], sym[4:8], symheap.OpSum) }},
			{"FCollect short dst", symheap.ErrBadArg, func() error { return symheap.FCollect(pe.World(), sym[:1], sym[4:6]) }},
			{"AllToAll Go memory", symheap.ErrNotSymmetric, func() error { return symheap.AllToAll(pe.World(), goMem[:n], sym[:n]) }},
			// Local shared heap.
			{"SharedAlloc negative", symheap.ErrBadArg, func() error { _, err := symheap.SharedAlloc[int64](pe, -1); return err }},
			{"SharedAlloc pointer", symheap.ErrPointerType, func() error { _, err := symheap.SharedAlloc[withPtr](pe, 1); return err }},
			{"SharedAlloc huge", symheap.ErrOutOfMemory, func() error { _, err := symheap.SharedAlloc[byte](pe, 1<<40); return err }},
			{"SharedFree Go memory", symheap.ErrBadFree, func() error { return symheap.SharedFree(pe, goMem) }},
			{"SharedFree symmetric", symheap.ErrBadFree, func() error { return symheap.SharedFree(pe, sym) }},
			// Messages.
			{"Send bad PE", symheap.ErrBadPE, func() error { return pe.Send([]byte("x"), n, 0) }},
			{"Send negative tag", symheap.ErrBadArg, func() error { return pe.Send([]byte("x"), 0, -2) }},
			{"Recv bad PE", symheap.ErrBadPE, func() error { _, err := pe.Recv(make([]byte, 1), n+3, 0); return err }},
			{"Isend bad PE", symheap.ErrBadPE, func() error { _, err := pe.Isend(nil, -7, 0); return err }},
			{"Irecv bad tag", symheap.ErrBadArg, func() error { _, err := pe.Irecv(nil, 0, -9); return err }},
		}
		for _, c := range cases {
			err := c.call()
			switch {
			case c.want == nil && err != nil:
				t.Errorf("%s: %v, want success", c.name, err)
			case c.want != nil && !errors.Is(err, c.want):
				t.Errorf("%s: %v, want %v", c.name, err, c.want)
			}
			if err != nil && strings.Count(err.Error(), "symheap:") != 1 {
				t.Errorf("%s: %q says \"symheap:\" %d times, want once", c.name, err, strings.Count(err.Error(), "symheap:"))
			}
			if err := pe.CheckHeaps(); err != nil {
				t.Fatalf("after %s: %v", c.name, err)
			}
		}
		// Every PE made the same collective calls; the job still works.
		if err := pe.Barrier(); err != nil {
			t.Fatal(err)
		}
		// Use after Close.
		if err := pe.Close(); err != nil {
			t.Fatal(err)
		}
		for name, call := range map[string]func() error{
			"Barrier":     pe.Barrier,
			"Malloc":      func() error { _, err := symheap.Malloc[int64](pe, 1); return err },
			"Put":         func() error { return symheap.Put(pe, sym[:1], goMem[:1], 0) },
			"AtomicAdd":   func() error { return symheap.AtomicAdd(pe, &sym[0], 1, 0) },
			"SharedAlloc": func() error { _, err := symheap.SharedAlloc[byte](pe, 1); return err },
			"Send":        func() error { return pe.Send(nil, 0, 0) },
			"Split":       func() error { _, err := pe.World().Split(0, 1, 1); return err },
		} {
			if err := call(); !errors.Is(err, symheap.ErrClosed) {
				t.Errorf("%s after Close: %v, want ErrClosed", name, err)
			}
		}
	}, small...)
}
