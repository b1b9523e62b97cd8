package symheap_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/internal/petest"
)

// Sizes that cross the small (scratch buffer) and large (in place) paths
// of every collective, for 1- to 8-byte elements.
var collSizes = []int{1, 3, 64, 65, 129, 700, 3000}

func TestCollectives(t *testing.T) {
	forEachCollConfig(t, func(t *testing.T, pe *symheap.PE) {
		n := pe.Size()
		rev, err := pe.World().Split(n-1, -1, n)
		if err != nil {
			t.Fatal(err)
		}
		for _, team := range []*symheap.Team{pe.World(), rev} {
			testBroadcast[int64](t, pe, team, func(r, i int) int64 { return int64(r*100000 + i) })
			testBroadcast[byte](t, pe, team, func(r, i int) byte { return byte(r*31 + i) })
			testBroadcast[rec](t, pe, team, func(r, i int) rec { return rec{int32(r), [3]uint16{uint16(i), 1, 2}} })
			testFCollect[int32](t, pe, team, func(r, i int) int32 { return int32(r*1000 + i) })
			testFCollect[rec](t, pe, team, func(r, i int) rec { return rec{int32(r), [3]uint16{uint16(i)}} })
			testAllToAll[int64](t, pe, team)
			testAllToAll[uint16](t, pe, team)
		}
		if err := rev.Destroy(); err != nil {
			t.Fatal(err)
		}
		testBackToBack(t, pe)
		testBackToBackLarge(t, pe)
		testCollectiveErrors(t, pe)
		testCollectiveAllocs(t, pe)
	})
}

// testBackToBackLarge runs Broadcasts of 1 to 16 KiB in a row, with no
// other synchronisation, from a changing root, two arrays taking the
// roles of dst and src in turn, and each PE overwrites both arrays as
// soon as it has checked a call's result: a member that left a call
// while another still read its array (the copy tree's parent before its
// children copied, the root before its children read its src) would hand
// out the overwritten values, which the next checks find. A member is
// slow now and then.
func testBackToBackLarge(t *testing.T, pe *symheap.PE) {
	w, n, me := pe.World(), pe.Size(), pe.Rank()
	const m = 2048 // int64s: 16 KiB
	buf, err := symheap.Malloc[int64](pe, 2*m)
	if err != nil {
		t.Fatal(err)
	}
	defer symheap.Free(pe, buf)
	a, b := buf[:m], buf[m:]
	for it := range 200 {
		k := 128 << (it % 5) // 1, 2, 4, 8, 16 KiB
		dst, src := a[:k], b[:k]
		if it%2 == 1 {
			dst, src = b[:k], a[:k]
		}
		root := (it*3 + it/7) % n
		for i := range src {
			src[i] = int64(it<<32 | me<<20 | i)
		}
		if it%37 == me {
			time.Sleep(time.Millisecond)
		}
		if err := symheap.Broadcast(w, dst, src, root); err != nil {
			t.Fatal(err)
		}
		for i := range dst {
			if want := int64(it<<32 | root<<20 | i); dst[i] != want {
				t.Fatalf("call %d: Broadcast of %d B from %d: [%d] = %#x, want %#x", it, 8*k, root, i, dst[i], want)
			}
		}
		for i := range buf {
			buf[i] = -1
		}
	}
}

// testBackToBack runs many small collectives in a row, with no other
// synchronisation, changing src right after each call: a Broadcast root
// runs ahead of its readers, and the scratch buffers are reused by every
// kind of call in turn.
func testBackToBack(t *testing.T, pe *symheap.PE) {
	w, n, me := pe.World(), pe.Size(), pe.Rank()
	const m = 8
	buf, err := symheap.Malloc[int64](pe, m+m*n)
	if err != nil {
		t.Fatal(err)
	}
	defer symheap.Free(pe, buf)
	src, dst := buf[:m], buf[m:]
	val := func(it, r, i int) int64 { return int64(it*1000000 + r*1000 + i) }
	fill := func(it int) {
		for i := range src {
			src[i] = val(it, me, i)
		}
	}
	for it := range 300 {
		fill(it)
		switch it % 5 {
		case 0, 1, 2: // Broadcasts from one root, then from the next
			root := (it / 5) % n
			if err := symheap.Broadcast(w, dst[:m], src, root); err != nil {
				t.Fatal(err)
			}
			for i := range m {
				if want := val(it, root, i); dst[i] != want {
					t.Fatalf("call %d: Broadcast from %d: [%d] = %d, want %d", it, root, i, dst[i], want)
				}
			}
		case 3:
			if err := symheap.Reduce(w, dst[:m], src, symheap.OpSum); err != nil {
				t.Fatal(err)
			}
			for i := range m {
				var want int64
				for r := range n {
					want += val(it, r, i)
				}
				if dst[i] != want {
					t.Fatalf("call %d: Reduce: [%d] = %d, want %d", it, i, dst[i], want)
				}
			}
		case 4:
			if err := symheap.FCollect(w, dst, src); err != nil {
				t.Fatal(err)
			}
			for r := range n {
				for i := range m {
					if want := val(it, r, i); dst[r*m+i] != want {
						t.Fatalf("call %d: FCollect: block %d [%d] = %d, want %d", it, r, i, dst[r*m+i], want)
					}
				}
			}
		}
		fill(-1) // reuse src at once
	}
}

// testCollectiveAllocs checks that the collectives allocate no Go memory.
func testCollectiveAllocs(t *testing.T, pe *symheap.PE) {
	w, n := pe.World(), pe.Size()
	for _, m := range []int{1, 1024} {
		buf, err := symheap.Malloc[int64](pe, 2*m*n)
		if err != nil {
			t.Fatal(err)
		}
		src, dst := buf[:m*n], buf[m*n:]
		for _, c := range []struct {
			name string
			op   func() error
		}{
			{"Sync", w.Sync},
			{"Broadcast", func() error { return symheap.Broadcast(w, dst[:m], src[:m], n-1) }},
			{"Reduce", func() error { return symheap.Reduce(w, dst[:m], src[:m], symheap.OpMax) }},
			{"FCollect", func() error { return symheap.FCollect(w, dst, src[:m]) }},
			{"AllToAll", func() error { return symheap.AllToAll(w, dst, src) }},
		} {
			var err error
			allocs := petest.AllocsPerRun(3, 20, func() {
				if e := c.op(); e != nil {
					err = e
				}
			})
			if err != nil {
				t.Fatalf("%s of %d: %v", c.name, m, err)
			}
			if allocs.PerRun != 0 {
				t.Errorf("%s of %d int64: %v, want none", c.name, m, allocs)
			}
		}
		if err := symheap.Free(pe, buf); err != nil {
			t.Fatal(err)
		}
	}
}

// ExampleReduce sums a value over every PE of the job; run as a lone PE,
// as here, the sum is the PE's own value.
func ExampleReduce() {
	pe, err := symheap.Init(symheap.Config{HeapSize: 1 << 20, SharedSize: 1 << 20})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pe.Close()
	x, err := symheap.Malloc[int64](pe, 2) // symmetric: x[0] is the input, x[1] the result
	if err != nil {
		fmt.Println(err)
		return
	}
	x[0] = int64(pe.Rank()) + 41
	if err := symheap.Reduce(pe.World(), x[1:], x[:1], symheap.OpSum); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("sum:", x[1])
	// Output: sum: 41
}

// ExampleTeam_Split makes the team of the even PEs. Every PE of the parent
// calls Split; the odd ones get nil.
func ExampleTeam_Split() {
	pe, err := symheap.Init(symheap.Config{HeapSize: 1 << 20, SharedSize: 1 << 20})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pe.Close()
	evens, err := pe.World().Split(0, 2, (pe.Size()+1)/2)
	if err != nil {
		fmt.Println(err)
		return
	}
	if evens != nil {
		fmt.Printf("PE %d is rank %d of %d even PEs\n", pe.Rank(), evens.Rank(), evens.Size())
	}
	if err := evens.Destroy(); err != nil { // nil on the odd PEs: nothing to do
		fmt.Println(err)
	}
	// Output: PE 0 is rank 0 of 1 even PEs
}

func TestReduce(t *testing.T) {
	forEachCollConfig(t, func(t *testing.T, pe *symheap.PE) {
		n := pe.Size()
		// The world, and a team of every other PE from the last, backwards.
		sub, err := pe.World().Split(n-1, -2, (n+1)/2)
		if err != nil {
			t.Fatal(err)
		}
		for _, team := range []*symheap.Team{pe.World(), sub} {
			testReduceInts[int](t, pe, team)
			testReduceInts[int8](t, pe, team)
			testReduceInts[int16](t, pe, team)
			testReduceInts[int32](t, pe, team)
			testReduceInts[int64](t, pe, team)
			testReduceInts[uint](t, pe, team)
			testReduceInts[uint8](t, pe, team)
			testReduceInts[uint16](t, pe, team)
			testReduceInts[uint32](t, pe, team)
			testReduceInts[uint64](t, pe, team)
			testReduceInts[uintptr](t, pe, team)
			testReduceInts[level](t, pe, team)
			testReduceFloats[float32](t, pe, team)
			testReduceFloats[float64](t, pe, team)
			testReduceFloats[celsius](t, pe, team)
		}
		if err := sub.Destroy(); err != nil {
			t.Fatal(err)
		}
	})
}

type (
	rec struct {
		a int32
		b [3]uint16
	}
	level   int16   // a named integer type
	celsius float64 // a named float type
)

// collBuffers allocates dst and src of n elements each, collectively.
func collBuffers[T any](t *testing.T, pe *symheap.PE, ndst, nsrc int) (dst, src []T, free func()) {
	t.Helper()
	buf, err := symheap.Malloc[T](pe, ndst+nsrc)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:ndst:ndst], buf[ndst:], func() {
		if err := symheap.Free(pe, buf); err != nil {
			t.Error(err)
		}
	}
}

func testBroadcast[T comparable](t *testing.T, pe *symheap.PE, team *symheap.Team, val func(rank, i int) T) {
	t.Helper()
	if team == nil {
		return
	}
	me := team.Rank()
	for _, n := range collSizes {
		for _, root := range distinct(0, team.Size()-1, team.Size()/2) {
			dst, src, free := collBuffers[T](t, pe, n, n)
			var zero T
			for i := range src {
				src[i] = val(me, i)
				dst[i] = zero
			}
			if err := symheap.Broadcast(team, dst, src, root); err != nil {
				t.Fatalf("Broadcast of %d %T from %d: %v", n, zero, root, err)
			}
			for i := range dst {
				if want := val(root, i); dst[i] != want {
					t.Fatalf("Broadcast of %d %T from %d on a team of %d: dst[%d] = %v, want %v", n, zero, root, team.Size(), i, dst[i], want)
				}
				if src[i] != val(me, i) {
					t.Fatalf("Broadcast changed src[%d]", i)
				}
			}
			// In place: dst and src are one array.
			for i := range src {
				src[i] = val(me+1, i)
			}
			if err := symheap.Broadcast(team, src, src, root); err != nil {
				t.Fatalf("Broadcast in place: %v", err)
			}
			for i := range src {
				if want := val(root+1, i); src[i] != want {
					t.Fatalf("Broadcast in place of %d %T from %d: [%d] = %v, want %v", n, zero, root, i, src[i], want)
				}
			}
			free()
		}
	}
}

func testFCollect[T comparable](t *testing.T, pe *symheap.PE, team *symheap.Team, val func(rank, i int) T) {
	t.Helper()
	if team == nil {
		return
	}
	size, me := team.Size(), team.Rank()
	for _, m := range collSizes {
		dst, src, free := collBuffers[T](t, pe, m*size, m)
		for i := range src {
			src[i] = val(me, i)
		}
		// Twice in a row into the same dst, without a barrier between.
		for round := range 2 {
			if err := symheap.FCollect(team, dst, src); err != nil {
				t.Fatalf("FCollect of %d: %v", m, err)
			}
			for r := range size {
				for i := range m {
					if got, want := dst[r*m+i], val(r, i); got != want {
						t.Fatalf("FCollect of %d on a team of %d, round %d: block %d [%d] = %v, want %v", m, size, round, r, i, got, want)
					}
				}
			}
		}
		free()
	}
}

func testAllToAll[T ~int64 | ~uint16](t *testing.T, pe *symheap.PE, team *symheap.Team) {
	t.Helper()
	if team == nil {
		return
	}
	size, me := team.Size(), team.Rank()
	val := func(from, to, i int) T { return T(from*4096 + to*64 + i%64) }
	for _, m := range collSizes {
		dst, src, free := collBuffers[T](t, pe, m*size, m*size)
		for to := range size {
			for i := range m {
				src[to*m+i] = val(me, to, i)
			}
		}
		if err := symheap.AllToAll(team, dst, src); err != nil {
			t.Fatalf("AllToAll of %d per PE: %v", m, err)
		}
		for from := range size {
			for i := range m {
				if got, want := dst[from*m+i], val(from, me, i); got != want {
					t.Fatalf("AllToAll of %d %T per PE on a team of %d: block %d [%d] = %v, want %v", m, got, size, from, i, got, want)
				}
			}
		}
		free()
	}
}

// distinct returns its arguments without repeats, in order.
func distinct(v ...int) []int {
	var out []int
	for _, x := range v {
		dup := false
		for _, y := range out {
			dup = dup || x == y
		}
		if !dup {
			out = append(out, x)
		}
	}
	return out
}

type integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr
}

// reduceVal is member r's element i: small values, some negative (wrapped
// for unsigned types), so that sums and products are exact in float32.
func reduceVal[T symheap.Number](r, i int) T {
	v := (r*3+i*5)%7 - 3
	if v == 0 {
		v = 1 // keep products away from 0 most of the time
	}
	return T(v)
}

func testReduceInts[T integer](t *testing.T, pe *symheap.PE, team *symheap.Team) {
	t.Helper()
	testReduce[T](t, pe, team, []symheap.Op{symheap.OpSum, symheap.OpProd, symheap.OpMin, symheap.OpMax}, func(op symheap.Op, a, b T) T {
		return arith(op, a, b)
	})
	testReduce[T](t, pe, team, []symheap.Op{symheap.OpAnd, symheap.OpOr, symheap.OpXor}, func(op symheap.Op, a, b T) T {
		switch op {
		case symheap.OpAnd:
			return a & b
		case symheap.OpOr:
			return a | b
		}
		return a ^ b
	})
}

func testReduceFloats[T ~float32 | ~float64](t *testing.T, pe *symheap.PE, team *symheap.Team) {
	t.Helper()
	testReduce[T](t, pe, team, []symheap.Op{symheap.OpSum, symheap.OpProd, symheap.OpMin, symheap.OpMax}, arith[T])
	dst, src, free := collBuffers[T](t, pe, 4, 4) // on every PE: allocation is world-wide
	defer free()
	if team == nil {
		return
	}
	for _, op := range []symheap.Op{symheap.OpAnd, symheap.OpOr, symheap.OpXor} {
		if err := symheap.Reduce(team, dst, src, op); !errors.Is(err, symheap.ErrBadOp) {
			t.Errorf("Reduce %v on %T: %v, want ErrBadOp", op, dst[0], err)
		}
	}
}

func arith[T symheap.Number](op symheap.Op, a, b T) T {
	switch op {
	case symheap.OpSum:
		return a + b
	case symheap.OpProd:
		return a * b
	case symheap.OpMin:
		return min(a, b)
	}
	return max(a, b)
}

func testReduce[T symheap.Number](t *testing.T, pe *symheap.PE, team *symheap.Team, ops []symheap.Op, fold func(symheap.Op, T, T) T) {
	t.Helper()
	// Members and non-members allocate alike: allocation is world-wide.
	dst, src, free := collBuffers[T](t, pe, collSizes[len(collSizes)-1], collSizes[len(collSizes)-1])
	defer free()
	if team == nil {
		return
	}
	me, size := team.Rank(), team.Size()
	for _, op := range ops {
		for _, n := range collSizes {
			for _, inPlace := range []bool{false, true} {
				s, d := src[:n], dst[:n]
				if inPlace {
					d = s
				}
				for i := range s {
					s[i] = reduceVal[T](me, i)
				}
				if err := symheap.Reduce(team, d, s, op); err != nil {
					t.Fatalf("Reduce %v of %d %T: %v", op, n, d[0], err)
				}
				for i := range d {
					want := reduceVal[T](0, i)
					for r := 1; r < size; r++ {
						want = fold(op, want, reduceVal[T](r, i))
					}
					if d[i] != want {
						t.Fatalf("Reduce %v of %d %T (in place %v) on a team of %d: [%d] = %v, want %v", op, n, d[0], inPlace, size, i, d[i], want)
					}
				}
			}
		}
	}
}

func testCollectiveErrors(t *testing.T, pe *symheap.PE) {
	w := pe.World()
	n := pe.Size()
	buf, err := symheap.Malloc[int64](pe, 8*n+8)
	if err != nil {
		t.Fatal(err)
	}
	defer symheap.Free(pe, buf)
	heap := make([]int64, 8*n) // not symmetric
	is := func(what string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
	}
	a, b := buf[:4], buf[4:8]
	is("Broadcast to the Go heap", symheap.Broadcast(w, heap[:4], a, 0), symheap.ErrNotSymmetric)
	is("Broadcast from the Go heap", symheap.Broadcast(w, a, heap[:4], 0), symheap.ErrNotSymmetric)
	is("Broadcast to another PE's copy", symheap.Broadcast(w, symheap.Ptr(pe, a, (pe.Rank()+1)%n), b, 0), errIfMany(n, symheap.ErrNotSymmetric))
	is("Broadcast of unequal lengths", symheap.Broadcast(w, buf[:3], b, 0), symheap.ErrBadArg)
	is("Broadcast from root -1", symheap.Broadcast(w, a, b, -1), symheap.ErrBadPE)
	is("Broadcast from root n", symheap.Broadcast(w, a, b, n), symheap.ErrBadPE)
	is("Broadcast partly in place", symheap.Broadcast(w, buf[1:5], buf[0:4], 0), symheap.ErrBadArg)
	is("Broadcast of pointers", symheap.Broadcast(w, make([]*int, 1), make([]*int, 1), 0), symheap.ErrPointerType)
	is("Broadcast of strings", symheap.Broadcast(w, make([]string, 1), make([]string, 1), 0), symheap.ErrPointerType)

	is("Reduce of unequal lengths", symheap.Reduce(w, buf[:3], b, symheap.OpSum), symheap.ErrBadArg)
	is("Reduce partly in place", symheap.Reduce(w, buf[2:6], buf[0:4], symheap.OpSum), symheap.ErrBadArg)
	is("Reduce from the Go heap", symheap.Reduce(w, a, heap[:4], symheap.OpSum), symheap.ErrNotSymmetric)
	is("Reduce with op 0", symheap.Reduce(w, a, b, symheap.Op(0)), symheap.ErrBadOp)
	is("Reduce with op 99", symheap.Reduce(w, a, b, symheap.Op(99)), symheap.ErrBadOp)

	is("FCollect into a short dst", symheap.FCollect(w, buf[:n*2-1], buf[8*n:8*n+2]), symheap.ErrBadArg)
	is("FCollect in place", symheap.FCollect(w, buf[:n], buf[:1]), symheap.ErrBadArg)
	is("FCollect overlapping", symheap.FCollect(w, buf[1:1+n], buf[n:n+1]), errIfMany(n, symheap.ErrBadArg))
	is("FCollect of pointers", symheap.FCollect(w, make([]map[int]int, n), make([]map[int]int, 1)), symheap.ErrPointerType)

	is("AllToAll of unequal lengths", symheap.AllToAll(w, buf[:n], buf[4*n:6*n]), symheap.ErrBadArg)
	is("AllToAll of a length not a multiple of the team size", symheap.AllToAll(w, buf[:n+1], buf[4*n:5*n+1]), errIfMany(n, symheap.ErrBadArg))
	is("AllToAll in place", symheap.AllToAll(w, buf[:n], buf[:n]), symheap.ErrBadArg)
	is("AllToAll to the Go heap", symheap.AllToAll(w, heap[:n], buf[:n]), symheap.ErrNotSymmetric)

	var none *symheap.Team
	is("Broadcast on a nil team", symheap.Broadcast(none, a, b, 0), symheap.ErrBadArg)
	is("Reduce on a nil team", symheap.Reduce(none, a, b, symheap.OpSum), symheap.ErrBadArg)
	is("FCollect on a nil team", symheap.FCollect(none, a, b[:1]), symheap.ErrBadArg)
	is("AllToAll on a nil team", symheap.AllToAll(none, a, b), symheap.ErrBadArg)

	// Zero elements: nothing to do, and nothing checked beyond lengths.
	for _, err := range []error{
		symheap.Broadcast(w, buf[:0], buf[:0], 0), symheap.Reduce(w, buf[:0], buf[:0], symheap.OpSum),
		symheap.FCollect(w, buf[:0], buf[:0]), symheap.AllToAll(w, buf[:0], buf[:0]),
	} {
		if err != nil {
			t.Errorf("zero elements: %v", err)
		}
	}

	// After all the refusals the team is still in step.
	a[0] = int64(pe.Rank()) + 1
	if err := symheap.Reduce(w, b[:1], a[:1], symheap.OpSum); err != nil {
		t.Fatal(err)
	}
	if want := int64(n * (n + 1) / 2); b[0] != want {
		t.Errorf("Reduce after the refusals: %d, want %d", b[0], want)
	}
	if s := fmt.Sprint(symheap.OpXor, symheap.Op(42)); s != "xor Op(42)" {
		t.Errorf("Op names: %q", s)
	}
}

// errIfMany is want in a job of more than one PE (where the case is an
// error), nil in a lone PE.
func errIfMany(n int, want error) error {
	if n > 1 {
		return want
	}
	return nil
}
