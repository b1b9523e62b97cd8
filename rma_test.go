package symheap

import (
	"fmt"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/transport"
)

// point is a plain-data element type for the RMA checks.
type point struct {
	X, Y int32
	Z    float64
}

// putGetRound: every PE puts n elements into its right neighbour's copy and
// gets n elements from it, with mk(rank, i) the element PE rank writes at
// index i.
func putGetRound[T comparable](t *testing.T, pe *PE, n int, mk func(rank, i int) T) {
	t.Helper()
	me, r, l := pe.Rank(), right(pe), left(pe)
	dst := must(Calloc[T](pe, n+3)) // room for an offset put
	src := must(Malloc[T](pe, n))
	mine := make([]T, n)
	for i := range mine {
		mine[i] = mk(me, i)
	}
	copy(src, mine)
	barrier(t, pe)

	// Put into the right neighbour, at offset 3.
	ok(t, Put(pe, dst[3:], mine, r))
	barrier(t, pe)
	for i := 0; i < n; i++ {
		if dst[3+i] != mk(l, i) {
			t.Fatalf("%T x %d: element %d put by PE %d is %v, want %v", dst[0], n, i, l, dst[3+i], mk(l, i))
		}
	}
	var zero T
	if dst[0] != zero || dst[2] != zero {
		t.Fatalf("%T x %d: Put at offset 3 wrote below it", dst[0], n)
	}
	// Get from the right neighbour.
	got := make([]T, n+1)
	ok(t, Get(pe, got, src, r))
	for i := 0; i < n; i++ {
		if got[i] != mk(r, i) {
			t.Fatalf("%T x %d: element %d got from PE %d is %v, want %v", dst[0], n, i, r, got[i], mk(r, i))
		}
	}
	if got[n] != zero {
		t.Fatalf("%T x %d: Get wrote past len(src)", dst[0], n)
	}
	barrier(t, pe)
	// Put to itself, through a dst slice that is the right neighbour's
	// copy (from Ptr): the offset, not the slice's partition, decides.
	// (No such slice of a far PE: TestSeamLoopback.)
	if pe.rma.route(r) != transport.Far {
		theirs := Ptr(pe, dst, r)
		ok(t, Put(pe, theirs[:n], mine, me))
		for i := 0; i < n; i++ {
			if dst[i] != mine[i] {
				t.Fatalf("%T x %d: self-put element %d is %v", dst[0], n, i, dst[i])
			}
		}
	}
	barrier(t, pe)
	ok(t, Free(pe, src))
	ok(t, Free(pe, dst))
}

// checkPutGet: Put and Get of several element types and sizes.
func checkPutGet(t *testing.T, pe *PE) {
	for _, n := range []int{1, 2, 3, 7, 12, 64, 4096, 5000, 1 << 18} {
		putGetRound(t, pe, n, func(rank, i int) byte { return pattern(rank, i) })
		putGetRound(t, pe, n, func(rank, i int) int32 { return int32(rank<<24 | i) })
		putGetRound(t, pe, n, func(rank, i int) float64 { return float64(rank) + float64(i)/1e6 })
		if n <= 4096 {
			putGetRound(t, pe, n, func(rank, i int) point { return point{int32(rank), int32(i), float64(i) / 3} })
		}
	}
	// Large enough for internal/memcopy's rule (the put lands at offset
	// 3, off a 16-byte boundary).
	putGetRound(t, pe, 1<<20+5, func(rank, i int) byte { return pattern(rank, i) })
}

// checkPutGetOverlap: a transfer between overlapping parts of one object
// on this PE behaves as copy (memmove), at the small sizes that take the
// word-move path, at a larger one, and at sizes where internal/memcopy
// chooses between REP MOVSB and memmove (a destination off a 16-byte
// boundary, before or after the source: overlap must take memmove).
func checkPutGetOverlap(t *testing.T, pe *PE) {
	me := pe.Rank()
	const big = 1<<20 + 5
	s := must(Malloc[byte](pe, big+8192))
	for _, c := range []struct{ from, to, n int }{{0, 4, 12}, {4, 0, 12}, {0, 3, 8}, {5, 1, 16}, {0, 100, 3000}, {100, 0, 3000},
		{0, 3, big}, {19, 3, big}, {3, 4099, big}} {
		for _, put := range []bool{true, false} {
			for i := range s {
				s[i] = byte(i)
			}
			if put {
				ok(t, Put(pe, s[c.to:c.to+c.n], s[c.from:c.from+c.n], me))
			} else {
				ok(t, Get(pe, s[c.to:c.to+c.n], s[c.from:c.from+c.n], me))
			}
			for i := 0; i < c.n; i++ {
				if s[c.to+i] != byte(c.from+i) {
					t.Fatalf("put %v %+v: byte %d is %d, want %d", put, c, c.to+i, s[c.to+i], byte(c.from+i))
				}
			}
		}
	}
	barrier(t, pe)
	ok(t, Free(pe, s))
}

// checkPutGetErrors: each argument error, on every PE.
func checkPutGetErrors(t *testing.T, pe *PE) {
	r, n := right(pe), pe.Size()
	s := must(Malloc[int64](pe, 16))
	goSlice := make([]int64, 16)
	wantErr(t, "Put into a Go slice", Put(pe, goSlice, s, r), ErrNotSymmetric, "dst", "Malloc")
	wantErr(t, "Get from a Go slice", Get(pe, s, goSlice, r), ErrNotSymmetric, "src")
	wantErr(t, "PutNBI into a Go slice", PutNBI(pe, goSlice, s, r), ErrNotSymmetric)
	wantErr(t, "GetNBI from a Go slice", GetNBI(pe, s, goSlice, r), ErrNotSymmetric)
	wantErr(t, "Put to PE -1", Put(pe, s, goSlice, -1), ErrBadPE, "PE -1")
	wantErr(t, "Put to PE npes", Put(pe, s, goSlice, n), ErrBadPE, fmt.Sprintf("PE %d", n))
	wantErr(t, "Get from PE npes", Get(pe, goSlice, s, n), ErrBadPE)
	wantErr(t, "Put of 16 into 8", Put(pe, s[:8], goSlice, r), ErrBadArg, "16", "8")
	wantErr(t, "Get of 16 into 8", Get(pe, goSlice[:8], s, r), ErrBadArg)
	// A slice that runs past the end of the symmetric heap.
	tail := core.SliceAt[int64](pe.sp.HeapAddr(pe.rank, core.HeapOff(pe.sp.Lay.HeapSize-16)), 4)
	wantErr(t, "Put past the heap's end", Put(pe, tail, goSlice[:4], r), ErrNotSymmetric, "past the end")
	wantErr(t, "Get past the heap's end", Get(pe, goSlice[:4], tail, r), ErrNotSymmetric)
	barrier(t, pe)
	ok(t, Free(pe, s))
}

// checkStrided: IPut and IGet with strides, and their argument checks.
func checkStrided(t *testing.T, pe *PE) {
	me, r, l := pe.Rank(), right(pe), left(pe)
	dst := must(Calloc[int64](pe, 40))
	src := must(Malloc[int64](pe, 40))
	local := make([]int64, 40)
	for i := range local {
		local[i] = int64(me*1000 + i)
		src[i] = local[i]
	}
	barrier(t, pe)
	// dst[0,3,...,12] on the right = local[0,2,...,8].
	ok(t, IPut(pe, dst, local, 3, 2, 5, r))
	barrier(t, pe)
	for i := range dst {
		want := int64(0)
		if i%3 == 0 && i/3 < 5 {
			want = int64(l*1000 + i/3*2)
		}
		if dst[i] != want {
			t.Fatalf("IPut: dst[%d] = %d, want %d", i, dst[i], want)
		}
	}
	// got[0,1,...,9] = right's src[0,4,...,36].
	got := make([]int64, 10)
	ok(t, IGet(pe, got, src, 1, 4, 10, r))
	for i, v := range got {
		if want := int64(r*1000 + 4*i); v != want {
			t.Fatalf("IGet: got[%d] = %d, want %d", i, v, want)
		}
	}
	// Exact fit: (n-1)*stride+1 == len.
	ok(t, IGet(pe, got, src[:37], 3, 12, 4, r))
	wantErr(t, "IPut stride 0", IPut(pe, dst, local, 0, 1, 2, r), ErrBadArg, "stride")
	wantErr(t, "IGet stride -1", IGet(pe, local, src, 1, -1, 2, r), ErrBadArg)
	wantErr(t, "IPut n -1", IPut(pe, dst, local, 1, 1, -1, r), ErrBadArg)
	wantErr(t, "IPut past dst", IPut(pe, dst, local, 10, 1, 5, r), ErrBadArg, "41")
	wantErr(t, "IGet past src", IGet(pe, got, src, 1, 13, 5, r), ErrBadArg)
	wantErr(t, "IGet past dst", IGet(pe, got, src, 2, 1, 6, r), ErrBadArg)
	wantErr(t, "IPut into a Go slice", IPut(pe, local, local, 1, 1, 2, r), ErrNotSymmetric)
	wantErr(t, "IGet from a Go slice", IGet(pe, local, local, 1, 1, 2, r), ErrNotSymmetric)
	wantErr(t, "IPut to PE -1", IPut(pe, dst, local, 1, 1, 2, -1), ErrBadPE)
	barrier(t, pe)
	ok(t, Free(pe, src))
	ok(t, Free(pe, dst))
}

// checkNBIQuiet: NBI puts complete at Quiet (and their data are there at
// the flag that follows the Quiet); a Quiet wakes a PE asleep on data an
// NBI put changed; GetNBI is complete on return.
func checkNBIQuiet(t *testing.T, pe *PE) {
	me, r, l := pe.Rank(), right(pe), left(pe)
	data := must(Calloc[int64](pe, 256))
	flag := must(Calloc[int64](pe, 1))
	for i := 0; i < 256; i++ {
		ok(t, PutNBI(pe, data[i:i+1], []int64{int64(me<<16 | i)}, r))
	}
	pe.Quiet()
	ok(t, AtomicSet(pe, &flag[0], 1, r))
	ok(t, WaitUntil(pe, &flag[0], CmpEQ, 1))
	for i, v := range data {
		if v != int64(l<<16|i) {
			t.Fatalf("NBI put %d from PE %d: %#x", i, l, v)
		}
	}
	got := make([]int64, 256)
	ok(t, GetNBI(pe, got, data, r))
	for i, v := range got {
		if v != int64(me<<16|i) {
			t.Fatalf("GetNBI element %d: %#x", i, v)
		}
	}
	// Fence orders the data before the flag, too.
	barrier(t, pe)
	ok(t, PutNBI(pe, data[:1], []int64{-1}, r))
	pe.Fence()
	ok(t, Put(pe, flag, []int64{2}, r))
	ok(t, WaitUntil(pe, &flag[0], CmpEQ, 2))
	if data[0] != -1 {
		t.Fatalf("after the flag, data[0] = %d", data[0])
	}
	barrier(t, pe)
	// Quiet wakes a sleeper: the right neighbour waits on data[255]; once
	// it sleeps, PutNBI + Quiet must wake it well within a sleep slice.
	done := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		WaitUntil(pe, &data[255], CmpEQ, -2)
		done <- time.Since(start)
	}()
	waitSleeping(t, pe, r)
	ok(t, PutNBI(pe, data[255:], []int64{-2}, r))
	sent := time.Now()
	pe.Quiet()
	<-done
	t.Logf("woken by Quiet %v after the put", time.Since(sent).Round(time.Microsecond))
	barrier(t, pe)
	ok(t, Free(pe, flag))
	ok(t, Free(pe, data))
}

// waitSleeping waits until some process sleeps on PE target's signal.
func waitSleeping(t *testing.T, pe *PE, target int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for pe.ctl[target].sig.sleepers.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("PE %d never went to sleep", target)
		}
		time.Sleep(time.Millisecond)
	}
}

// checkPtr: Ptr gives the target's copy, nil for anything else.
func checkPtr(t *testing.T, pe *PE) {
	me, r, l := pe.Rank(), right(pe), left(pe)
	s := must(Calloc[int32](pe, 8))
	theirs := Ptr(pe, s, r)
	if len(theirs) != 8 {
		t.Fatalf("Ptr: %d elements", len(theirs))
	}
	s[6] = int32(me + 100)
	barrier(t, pe)
	if theirs[6] != int32(r+100) {
		t.Fatalf("load through Ptr from PE %d: %d", r, theirs[6])
	}
	if !pe.Protected() { // there a store through theirs faults
		theirs[5] = int32(me + 1)
		pe.Quiet()
		barrier(t, pe)
		if s[5] != int32(l+1) {
			t.Fatalf("store through Ptr from PE %d: %d", l, s[5])
		}
	}
	if p := Ptr(pe, s, me); &p[0] != &s[0] {
		t.Fatal("Ptr to self is not the slice itself")
	}
	for _, bad := range []int{-1, pe.Size()} {
		if Ptr(pe, s, bad) != nil {
			t.Fatalf("Ptr to PE %d is not nil", bad)
		}
	}
	if Ptr(pe, make([]int32, 3), r) != nil || Ptr[int32](pe, nil, r) != nil {
		t.Fatal("Ptr of a non-symmetric slice is not nil")
	}
	barrier(t, pe)
	ok(t, Free(pe, s))
}

// checkRMAAllocs: the hot paths allocate nothing.
func checkRMAAllocs(t *testing.T, pe *PE) {
	me, r := pe.Rank(), right(pe)
	x := must(Calloc[int64](pe, 64))
	y := must(Calloc[uint32](pe, 4))
	locks := must(Calloc[int64](pe, pe.Size())) // one per PE: uncontended
	src := []int64{1, 2, 3, 4, 5, 6, 7, 8}
	buf := make([]int64, 8)
	var sink int64
	cases := []struct {
		name string
		fn   func()
	}{
		{"Put", func() { Put(pe, x[8:16], src, r) }},
		{"Get", func() { Get(pe, buf, x[8:16], r) }},
		{"PutNBI", func() { PutNBI(pe, x[16:24], src, r) }},
		{"GetNBI", func() { GetNBI(pe, buf, x[16:24], r) }},
		{"IPut", func() { IPut(pe, x[24:], src, 2, 1, 4, r) }},
		{"IGet", func() { IGet(pe, buf, x[24:], 1, 2, 4, r) }},
		{"Quiet", pe.Quiet},
		{"AtomicFetchAdd", func() { v, _ := AtomicFetchAdd(pe, &x[0], 1, r); sink += v }},
		{"AtomicAdd", func() { AtomicAdd(pe, &y[0], 1, r) }},
		{"AtomicFetch", func() { v, _ := AtomicFetch(pe, &x[1], r); sink += v }},
		{"AtomicSet", func() { AtomicSet(pe, &x[2], 5, me) }},
		{"AtomicCompareSwap", func() { v, _ := AtomicCompareSwap(pe, &x[3], 0, 1, r); sink += v }},
		{"AtomicFetchXor", func() { v, _ := AtomicFetchXor(pe, &y[1], 3, r); sink += int64(v) }},
		{"Test", func() { Test(pe, &x[4], CmpEQ, 0) }},
		{"WaitUntil", func() { WaitUntil(pe, &x[5], CmpGE, 0) }},
		{"SetLock+ClearLock", func() { pe.SetLock(&locks[me]); pe.ClearLock(&locks[me]) }},
		{"TestLock+ClearLock", func() {
			if got, _ := pe.TestLock(&locks[me]); got {
				pe.ClearLock(&locks[me])
			}
		}},
	}
	for _, c := range cases {
		if n := testing.AllocsPerRun(200, c.fn); n != 0 {
			t.Errorf("%s: %.1f allocations per call", c.name, n)
		}
	}
	_ = sink
	barrier(t, pe)
	ok(t, Free(pe, locks))
	ok(t, Free(pe, y))
	ok(t, Free(pe, x))
}
