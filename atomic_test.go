package symheap

import (
	"math"
	"sync"
	"testing"

	"github.com/symheap/symheap/internal/core"
)

// counter is a defined type on an Integer: the atomics take it too.
type counter int64

// checkAtomics runs atomicRound for every Integer type.
func checkAtomics(t *testing.T, pe *PE) {
	atomicRound[int32](t, pe)
	atomicRound[int64](t, pe)
	atomicRound[uint32](t, pe)
	atomicRound[uint64](t, pe)
	atomicRound[counter](t, pe)
	atomicWrap(t, pe)
}

// atomicRound exercises every atomic on T across the PEs, including each
// PE on itself, with two goroutines per PE for the adds.
func atomicRound[T Integer](t *testing.T, pe *PE) {
	me, n, r, l := pe.Rank(), pe.Size(), right(pe), left(pe)
	x := must(Calloc[T](pe, 8))
	const k = 200

	// FetchAdd: every PE adds 1 k times to every PE's x[0] from two
	// goroutines; the values fetched from PE 0 are all different.
	var wg sync.WaitGroup
	seen := make([][]T, 2)
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < k/2; i++ {
				for target := 0; target < n; target++ {
					v, err := AtomicFetchAdd(pe, &x[0], 1, target)
					if err != nil {
						t.Error(err)
						return
					}
					if target == 0 {
						seen[g] = append(seen[g], v)
					}
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// Add of the values fetched: they total 0+1+...+(n*k-1) over all PEs.
	var sum T
	for _, s := range seen {
		for _, v := range s {
			sum += v
		}
	}
	ok(t, AtomicAdd(pe, &x[1], sum, 0))
	barrier(t, pe)
	if x[0] != T(n*k) {
		t.Fatalf("%T: counter %d after %d adds", x[0], x[0], n*k)
	}
	if me == 0 {
		if want := T(n * k * (n*k - 1) / 2); x[1] != want {
			t.Fatalf("%T: fetched values add up to %d, want %d: some were fetched twice", x[0], x[1], want)
		}
	}
	barrier(t, pe)

	// Or, And, Xor on PE 0's x[2]: each PE sets, clears and toggles its bit.
	bit := T(1) << (me % 31)
	all := T(0)
	for p := 0; p < n; p++ {
		all |= T(1) << (p % 31)
	}
	old := must(AtomicFetchOr(pe, &x[2], bit, 0))
	if old&^all != 0 {
		t.Fatalf("%T: FetchOr saw stray bits %#x", x[0], old)
	}
	barrier(t, pe)
	if v := must(AtomicFetch(pe, &x[2], 0)); v != all {
		t.Fatalf("%T: after every PE's Or: %#x, want %#x", x[0], v, all)
	}
	barrier(t, pe)
	ok(t, AtomicXor(pe, &x[2], bit, 0))
	must(AtomicFetchXor(pe, &x[2], bit, 0))
	ok(t, AtomicOr(pe, &x[2], bit, 0))
	must(AtomicFetchAnd(pe, &x[2], ^bit, 0))
	barrier(t, pe)
	if v := must(AtomicFetch(pe, &x[2], 0)); v != 0 {
		t.Fatalf("%T: after every PE cleared its bit: %#x", x[0], v)
	}
	barrier(t, pe)
	ok(t, AtomicAnd(pe, &x[2], 0, 0))

	// Swap: every PE swaps rank+1 into PE 0's x[3]; the values swapped out
	// plus the last one are 0, 1, ..., n.
	prev := must(AtomicSwap(pe, &x[3], T(me+1), 0))
	ok(t, AtomicAdd(pe, &x[4], prev, 0))
	barrier(t, pe)
	if me == 0 {
		if total := x[3] + x[4]; total != T(n*(n+1)/2) {
			t.Fatalf("%T: swapped-out values and the final one add up to %d, want %d", x[0], total, n*(n+1)/2)
		}
	}
	barrier(t, pe)

	// CompareSwap: exactly one PE changes PE 0's x[5] from 0.
	if got := must(AtomicCompareSwap(pe, &x[5], 0, T(me+1), 0)); got == 0 {
		ok(t, AtomicAdd(pe, &x[6], 1, 0))
	}
	barrier(t, pe)
	winner := must(AtomicFetch(pe, &x[5], 0))
	if wins := must(AtomicFetch(pe, &x[6], 0)); wins != 1 || winner < 1 || winner > T(n) {
		t.Fatalf("%T: CompareSwap: %d winners, value %d", x[0], wins, winner)
	}
	// A failing CompareSwap returns the value and changes nothing.
	if got := must(AtomicCompareSwap(pe, &x[5], T(n+7), 99, 0)); got != winner {
		t.Fatalf("%T: failing CompareSwap returned %d, want %d", x[0], got, winner)
	}
	barrier(t, pe)

	// Set and Fetch: each PE sets its right neighbour's x[7]; each PE
	// then fetches its own and its left neighbour's.
	ok(t, AtomicSet(pe, &x[7], T(100+me), r))
	barrier(t, pe)
	if v := must(AtomicFetch(pe, &x[7], me)); v != T(100+l) {
		t.Fatalf("%T: own x[7] = %d, want %d", x[0], v, 100+l)
	}
	if ll := (me + 2*n - 2) % n; must(AtomicFetch(pe, &x[7], l)) != T(100+ll) {
		t.Fatalf("%T: PE %d's x[7] is not %d", x[0], l, 100+ll)
	}
	barrier(t, pe)
	ok(t, Free(pe, x))
}

// atomicWrap: additions wrap as Go's do, signed and unsigned.
func atomicWrap(t *testing.T, pe *PE) {
	a := must(Calloc[int32](pe, 2))
	b := must(Calloc[uint64](pe, 2))
	me := pe.Rank()
	ok(t, AtomicSet(pe, &a[0], math.MaxInt32, me))
	if v := must(AtomicFetchAdd(pe, &a[0], 1, me)); v != math.MaxInt32 || a[0] != math.MinInt32 {
		t.Fatalf("int32 wrap: fetched %d, now %d", v, a[0])
	}
	ok(t, AtomicAdd(pe, &a[0], -1, me))
	if a[0] != math.MaxInt32 {
		t.Fatalf("int32 add -1: %d", a[0])
	}
	ok(t, AtomicAdd(pe, &b[0], ^uint64(0), me)) // -1
	if b[0] != math.MaxUint64 {
		t.Fatalf("uint64 wrap: %d", b[0])
	}
	if v := must(AtomicSwap(pe, &b[1], 1<<63, me)); v != 0 || b[1] != 1<<63 {
		t.Fatalf("uint64 swap of the top bit: %d, %d", v, b[1])
	}
	if v := must(AtomicCompareSwap(pe, &a[1], 0, -5, me)); v != 0 || a[1] != -5 {
		t.Fatalf("int32 CompareSwap to a negative value: %d, %d", v, a[1])
	}
	barrier(t, pe)
	ok(t, Free(pe, b))
	ok(t, Free(pe, a))
}

// checkAtomicErrors: non-symmetric, misaligned, bad PE.
func checkAtomicErrors(t *testing.T, pe *PE) {
	r, n := right(pe), pe.Size()
	x := must(Calloc[int64](pe, 4))
	var goVar int64
	_, err := AtomicFetchAdd(pe, &goVar, 1, r)
	wantErr(t, "FetchAdd on a Go variable", err, ErrNotSymmetric, "AtomicFetchAdd")
	wantErr(t, "Set on a Go variable", AtomicSet(pe, &goVar, 1, r), ErrNotSymmetric)
	_, err = AtomicFetch[int64](pe, nil, r)
	wantErr(t, "Fetch on nil", err, ErrNotSymmetric)
	_, err = AtomicSwap(pe, &x[0], 1, -1)
	wantErr(t, "Swap on PE -1", err, ErrBadPE)
	_, err = AtomicCompareSwap(pe, &x[0], 0, 1, n)
	wantErr(t, "CompareSwap on PE npes", err, ErrBadPE)
	// Misaligned: an int64 four bytes into the block, an int32 two.
	p, _ := core.SliceData(x)
	off, _ := pe.symOff(p, 8)
	mis64 := &core.SliceAt[int64](pe.sp.HeapAddr(pe.Rank(), core.HeapOff(off+4)), 1)[0]
	mis32 := &core.SliceAt[uint32](pe.sp.HeapAddr(pe.Rank(), core.HeapOff(off+2)), 1)[0]
	_, err = AtomicFetchAdd(pe, mis64, 1, r)
	wantErr(t, "FetchAdd on a misaligned int64", err, ErrBadAlign, "8-byte")
	wantErr(t, "Or on a misaligned uint32", AtomicOr(pe, mis32, 1, r), ErrBadAlign, "4-byte")
	_, err = AtomicFetchXor(pe, mis32, 1, r)
	wantErr(t, "FetchXor on a misaligned uint32", err, ErrBadAlign)
	// None of them changed anything.
	barrier(t, pe)
	for i, v := range x {
		if v != 0 {
			t.Fatalf("x[%d] = %d after refused atomics", i, v)
		}
	}
	barrier(t, pe)
	ok(t, Free(pe, x))
}
