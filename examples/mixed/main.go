// Command mixed is the Go half of the conformance pair of a job of Go and
// C PEs; capi/tests/m_mixed.c is the C half, which makes the same calls
// in the same order. Together they check, across the language boundary:
// the world barrier, broadcast, reduce, fcollect and alltoall on the world
// team (at the sizes of each of the runtime's paths), a split team,
// collective allocation, put, get and atomics on symmetric heap objects,
// a distributed lock, wait-until with a signal, and a block of the local
// shared heap read and written in place by a C PE.
//
//	symcc -o m_mixed capi/tests/m_mixed.c
//	shrun -n 2 ./examples/mixed : -n 2 ./m_mixed
//	mpirun -n 2 ./mixed : -n 2 ./m_mixed
//
// Any split of the ranks works (C first, one of each, more of one). Each
// PE prints one line when every check passed, and exits with status 1
// naming the first that failed otherwise.
//
// With the argument "static" or "collect" it takes part in the job that
// checks two refusals of the C library (the C half makes the bad call):
// it waits in a barrier that the job never completes.
package main

import (
	"fmt"
	"os"
	"unsafe"

	"github.com/symheap/symheap"
)

// The language codes the PEs exchange (the C half uses the same).
const (
	langGo = 1
	langC  = 2
)

func main() {
	pe, err := symheap.Init(symheap.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "mixed:", err)
		os.Exit(1)
	}
	if len(os.Args) > 1 {
		// A refusal job: this PE's language for the C PEs to read, then
		// a barrier the C PEs never reach (they fail, and end every PE).
		mine := must(symheap.Malloc[int64](pe, 1))
		mine[0] = langGo
		pe.Barrier()
		pe.Barrier()
		fmt.Fprintln(os.Stderr, "mixed: the job went on past the C PEs' bad call")
		os.Exit(1)
	}
	c := &check{pe: pe, me: pe.Rank(), n: pe.Size()}
	if err := c.run(); err != nil {
		fmt.Fprintf(os.Stderr, "mixed: PE %d (go): %v\n", c.me, err)
		pe.GlobalExit(1)
	}
	fmt.Printf("PE %d (go): mixed conformance passed (%d PEs: %d Go, %d C)\n", c.me, c.n, c.goPEs, c.n-c.goPEs)
	if err := pe.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "mixed:", err)
		os.Exit(1)
	}
}

type check struct {
	pe    *symheap.PE
	me, n int
	lang  []int64 // every PE's language, by rank
	goPEs int
}

// want returns an error naming what differs.
func want[T comparable](what string, got, exp T) error {
	if got != exp {
		return fmt.Errorf("%s: got %v, want %v", what, got, exp)
	}
	return nil
}

func (c *check) run() error {
	pe, me, n := c.pe, c.me, c.n
	world := pe.World()
	if n < 2 {
		return fmt.Errorf("run it on 2 PEs or more")
	}

	// 1. Every PE's language, by fcollect.
	c.lang = must(symheap.Malloc[int64](pe, n))
	mine := must(symheap.Malloc[int64](pe, 1))
	mine[0] = langGo
	if err := symheap.FCollect(world, c.lang, mine); err != nil {
		return err
	}
	for _, l := range c.lang {
		if l == langGo {
			c.goPEs++
		}
	}

	// 2. Symmetric offsets: each PE puts into its slot of every PE's copy.
	slots := must(symheap.Calloc[int64](pe, n))
	for q := range n {
		if err := symheap.Put(pe, slots[me:me+1], []int64{int64(1000 + me)}, q); err != nil {
			return err
		}
	}
	if err := pe.Barrier(); err != nil {
		return err
	}
	for q := range n {
		if err := want(fmt.Sprintf("slot %d after the puts", q), slots[q], int64(1000+q)); err != nil {
			return err
		}
	}

	// 3-6. The world's collectives at each path's size: post lines (3
	// longs), scratch (40), in place (20000).
	const big = 20000
	src := must(symheap.Malloc[int64](pe, big*n))
	dst := must(symheap.Malloc[int64](pe, big*n))
	for _, k := range []int{3, 40, big} {
		for _, root := range []int{0, n - 1} {
			for i := range k {
				src[i] = int64(root*1000000 + k*10 + i)
			}
			if err := symheap.Broadcast(world, dst[:k], src[:k], root); err != nil {
				return err
			}
			for i := range k {
				if err := want(fmt.Sprintf("broadcast of %d from %d, [%d]", k, root, i), dst[i], int64(root*1000000+k*10+i)); err != nil {
					return err
				}
			}
		}
		for i := range k {
			src[i] = int64(me*7 + i)
		}
		if err := symheap.Reduce(world, dst[:k], src[:k], symheap.OpSum); err != nil {
			return err
		}
		for i := range k {
			if err := want(fmt.Sprintf("sum of %d, [%d]", k, i), dst[i], int64(7*n*(n-1)/2+n*i)); err != nil {
				return err
			}
		}
	}
	fsrc := must(symheap.Malloc[float64](pe, 40))
	fdst := must(symheap.Malloc[float64](pe, 40))
	for i := range fsrc {
		fsrc[i] = float64(me) + float64(i)/2
	}
	if err := symheap.Reduce(world, fdst, fsrc, symheap.OpMax); err != nil {
		return err
	}
	for i := range fdst {
		if err := want(fmt.Sprintf("max of doubles, [%d]", i), fdst[i], float64(n-1)+float64(i)/2); err != nil {
			return err
		}
	}
	for _, k := range []int{2, 3000} {
		for i := range k {
			src[i] = int64(me*100000 + i)
		}
		if err := symheap.FCollect(world, dst[:k*n], src[:k]); err != nil {
			return err
		}
		for q := range n {
			for i := range k {
				if err := want(fmt.Sprintf("fcollect of %d, PE %d's [%d]", k, q, i), dst[q*k+i], int64(q*100000+i)); err != nil {
					return err
				}
			}
		}
	}
	for _, k := range []int{1, 2000} {
		for j := range n {
			for i := range k {
				src[j*k+i] = int64(me*1000000 + j*1000 + i)
			}
		}
		if err := symheap.AllToAll(world, dst[:k*n], src[:k*n]); err != nil {
			return err
		}
		for j := range n {
			for i := range k {
				if err := want(fmt.Sprintf("alltoall of %d, from PE %d [%d]", k, j, i), dst[j*k+i], int64(j*1000000+me*1000+i)); err != nil {
					return err
				}
			}
		}
	}

	// 7. A split team: the even ranks.
	size := (n + 1) / 2
	t, err := world.Split(0, 2, size)
	if err != nil {
		return err
	}
	if t != nil {
		for _, k := range []int{1, 100} {
			for i := range k {
				src[i] = int64(me + i)
			}
			if err := symheap.Reduce(t, dst[:k], src[:k], symheap.OpSum); err != nil {
				return err
			}
			evens := int64(size * (size - 1)) // the sum of 0, 2, ..., 2(size-1)
			for i := range k {
				if err := want(fmt.Sprintf("split team's sum of %d, [%d]", k, i), dst[i], evens+int64(size*i)); err != nil {
					return err
				}
			}
		}
		root := t.Size() - 1
		for i := range 40 {
			src[i] = int64(me*10 + i)
		}
		if err := symheap.Broadcast(t, dst[:40], src[:40], root); err != nil {
			return err
		}
		if err := want("split team's broadcast", dst[39], int64(2*root*10+39)); err != nil {
			return err
		}
		if err := t.Sync(); err != nil {
			return err
		}
		if err := t.Destroy(); err != nil {
			return err
		}
	}

	// 8. Atomics on every PE's counter, and one compare-and-swap winner.
	ctr := must(symheap.Calloc[int64](pe, 3))
	if err := pe.Barrier(); err != nil {
		return err
	}
	const rounds = 50
	for range rounds {
		for q := range n {
			if _, err := symheap.AtomicFetchAdd(pe, &ctr[0], 1, q); err != nil {
				return err
			}
		}
	}
	if old, err := symheap.AtomicCompareSwap(pe, &ctr[1], 0, int64(me+1), 0); err != nil {
		return err
	} else if old == 0 {
		if err := symheap.AtomicAdd(pe, &ctr[2], 1, 0); err != nil {
			return err
		}
	}
	if err := pe.Barrier(); err != nil {
		return err
	}
	if err := want("counter after every PE's adds", ctr[0], int64(n*rounds)); err != nil {
		return err
	}
	won, err := symheap.AtomicFetch(pe, &ctr[2], 0)
	if err != nil {
		return err
	}
	if err := want("compare-and-swap winners", won, int64(1)); err != nil {
		return err
	}

	// 9. A distributed lock around a read-modify-write of PE 0's word.
	lock := must(symheap.Calloc[int64](pe, 1))
	shared := must(symheap.Calloc[int64](pe, 1))
	const turns = 30
	v := []int64{0}
	for range turns {
		if err := pe.SetLock(&lock[0]); err != nil {
			return err
		}
		if err := symheap.Get(pe, v, shared, 0); err != nil {
			return err
		}
		v[0]++
		if err := symheap.Put(pe, shared, v, 0); err != nil {
			return err
		}
		pe.Quiet()
		if err := pe.ClearLock(&lock[0]); err != nil {
			return err
		}
	}
	if err := pe.Barrier(); err != nil {
		return err
	}
	if err := symheap.Get(pe, v, shared, 0); err != nil {
		return err
	}
	if err := want("the locked counter", v[0], int64(n*turns)); err != nil {
		return err
	}

	// 10. Wait-until and signal around the ring: data, fence, flag.
	flag := must(symheap.Calloc[int64](pe, 1))
	data := must(symheap.Calloc[int64](pe, 2))
	right, left := (me+1)%n, (me+n-1)%n
	for r := range int64(20) {
		if err := symheap.Put(pe, data, []int64{r, int64(me)}, right); err != nil {
			return err
		}
		pe.Fence()
		if err := symheap.AtomicSet(pe, &flag[0], r+1, right); err != nil {
			return err
		}
		if err := symheap.WaitUntil(pe, &flag[0], symheap.CmpGE, r+1); err != nil {
			return err
		}
		if data[0] != r || data[1] != int64(left) {
			return fmt.Errorf("round %d: the flag came with data %v, want [%d %d]", r, data, r, left)
		}
		if err := pe.Barrier(); err != nil { // nobody overwrites data before it is read
			return err
		}
	}

	// 11. A block of the local shared heap: the first Go PE fills it and
	// hands its address to the first C PE, which reads it and writes its
	// last word in place (the same address in every PE: same-address
	// mapping only).
	addr := must(symheap.Calloc[int64](pe, 1))
	g, cpe := c.first(langGo), c.first(langC)
	var blk []int64
	if me == g && cpe >= 0 && pe.SameAddress() {
		blk = must(symheap.SharedAlloc[int64](pe, 1024))
		for i := range blk {
			blk[i] = int64(3 * i)
		}
		if err := symheap.AtomicSet(pe, &addr[0], int64(uintptr(unsafe.Pointer(&blk[0]))), cpe); err != nil {
			return err
		}
	}
	if err := pe.Barrier(); err != nil { // the C PE reads and writes the block
		return err
	}
	if err := pe.Barrier(); err != nil {
		return err
	}
	if blk != nil {
		if err := want("the shared block's last word, written by a C PE", blk[1023], int64(-7)); err != nil {
			return err
		}
		if err := symheap.SharedFree(pe, blk); err != nil {
			return err
		}
	}

	// 12. Every block back, in the C half's order.
	for _, s := range [][]int64{addr, data, flag, shared, lock, ctr, dst, src, slots, mine, c.lang} {
		if err := symheap.Free(pe, s); err != nil {
			return err
		}
	}
	if err := symheap.Free(pe, fdst); err != nil {
		return err
	}
	if err := symheap.Free(pe, fsrc); err != nil {
		return err
	}
	return pe.Barrier()
}

// first is the lowest rank running lang, or -1.
func (c *check) first(lang int64) int {
	for q, l := range c.lang {
		if l == lang {
			return q
		}
	}
	return -1
}

// must ends the PE when a collective allocation fails (every PE fails
// alike: the heap is the same everywhere).
func must[T any](s []T, err error) []T {
	if err != nil {
		fmt.Fprintln(os.Stderr, "mixed:", err)
		os.Exit(1)
	}
	return s
}
