// Command heat solves the 2-D heat equation on a square plate with an
// explicit (Jacobi) stencil, the plate's rows split into strips, one strip
// per PE, and checks its answer against the same computation run serially.
//
//	shrun -n 4 ./examples/heat
//	go run ./cmd/shrun -n 4 ./examples/heat -n 512 -steps 1000
//
// Each PE keeps its strip with one halo row above and one below in two
// symmetric arrays, cur and next. A step:
//
//  1. puts the strip's first row into the upper neighbour's lower halo of
//     cur, and its last row into the lower neighbour's upper halo (Put);
//  2. meets the others at a barrier, which completes the puts;
//  3. computes next from cur, then swaps the two.
//
// One barrier per step is enough: step k+1 writes the neighbours' halos of
// next, which nobody reads during step k, and the barrier of step k+1
// keeps step k+2 from writing the halos of cur before every neighbour has
// finished reading them in step k.
//
// The plate's top edge is held at 100 degrees and the other edges at 0.
// Every PE then runs the whole computation serially and compares its strip
// cell by cell; since both evaluate the same expression in the same order,
// the results must be identical. The PEs add their mismatches into a
// counter on PE 0 with AtomicAdd, and PE 0 prints the verdict.
package main

import (
	"flag"
	"fmt"
	"math"
	"os"

	"github.com/symheap/symheap"
)

const (
	alpha = 0.24  // diffusion number; stable below 0.25
	hot   = 100.0 // temperature of the top edge
)

func main() {
	n := flag.Int("n", 256, "grid size (n x n cells, edges included)")
	steps := flag.Int("steps", 500, "time steps")
	flag.Parse()
	if err := run(*n, *steps); err != nil {
		fmt.Fprintln(os.Stderr, "heat:", err)
		os.Exit(1)
	}
}

func run(n, steps int) error {
	pe, err := symheap.Init(symheap.Config{})
	if err != nil {
		return err
	}
	defer pe.Close()
	me, npes := pe.Rank(), pe.Size()
	inner := n - 2 // rows that change
	if n < 3 || inner < npes {
		return fmt.Errorf("a %dx%d grid has %d inner rows, fewer than the %d PEs", n, n, inner, npes)
	}
	// This PE's strip: inner rows [first, first+rows) of the grid (grid
	// row r+1), block-distributed; the largest strip sizes the arrays,
	// which must be the same size on every PE.
	rows := inner / npes
	first := me*rows + min(me, inner%npes)
	if me < inner%npes {
		rows++
	}
	maxRows := (inner + npes - 1) / npes
	size := (maxRows + 2) * n
	cur, err := symheap.Calloc[float64](pe, size)
	if err != nil {
		return err
	}
	next, err := symheap.Calloc[float64](pe, size)
	if err != nil {
		return err
	}
	mismatch, err := symheap.Calloc[int64](pe, 1)
	if err != nil {
		return err
	}
	// Local row i (0: upper halo, 1..rows: the strip, rows+1: lower halo)
	// is grid row first+i. Fixed edges: the grid's top row is hot, its
	// left and right columns cold.
	if me == 0 {
		for j := 0; j < n; j++ {
			cur[j], next[j] = hot, hot
		}
	}
	up, down := me-1, me+1
	for step := 0; step < steps; step++ {
		// 1. Halo rows to the neighbours' copies of cur: our first row
		// is the upper neighbour's lower halo (its local row upRows+1).
		if up >= 0 {
			upRows := inner / npes
			if up < inner%npes {
				upRows++
			}
			at := (upRows + 1) * n
			if err := symheap.Put(pe, cur[at:at+n], cur[n:2*n], up); err != nil {
				return err
			}
		}
		if down < npes {
			if err := symheap.Put(pe, cur[0:n], cur[rows*n:(rows+1)*n], down); err != nil {
				return err
			}
		}
		// 2. Completes the puts and waits for the neighbours' halos.
		if err := pe.Barrier(); err != nil {
			return err
		}
		// 3. The stencil.
		for i := 1; i <= rows; i++ {
			for j := 1; j < n-1; j++ {
				next[i*n+j] = stencil(cur, n, i, j)
			}
		}
		cur, next = next, cur
	}
	if err := pe.Barrier(); err != nil {
		return err
	}

	// Check every cell of the strip against the serial computation.
	want := serial(n, steps)
	bad, worst := int64(0), 0.0
	for i := 1; i <= rows; i++ {
		g := first + i // grid row
		for j := 0; j < n; j++ {
			if d := math.Abs(cur[i*n+j] - want[g*n+j]); cur[i*n+j] != want[g*n+j] {
				bad++
				worst = max(worst, d)
			}
		}
	}
	if bad > 0 {
		fmt.Fprintf(os.Stderr, "PE %d: %d cells differ from the serial result (worst by %g)\n", me, bad, worst)
	}
	if err := symheap.AtomicAdd(pe, &mismatch[0], bad, 0); err != nil {
		return err
	}
	if err := pe.Barrier(); err != nil {
		return err
	}
	if me == 0 {
		if mismatch[0] != 0 {
			return fmt.Errorf("%d cells differ from the serial computation", mismatch[0])
		}
		sum := 0.0
		for _, v := range want {
			sum += v
		}
		fmt.Printf("heat: %dx%d plate, %d steps on %d PEs: verified against the serial computation, every cell identical; mean %.6f degrees, %.6f at (%d, %d)\n",
			n, n, steps, npes, sum/float64(n*n), want[(n/8)*n+n/2], n/8, n/2)
	}
	for _, s := range [][]float64{cur, next} {
		if err := symheap.Free(pe, s); err != nil {
			return err
		}
	}
	return symheap.Free(pe, mismatch)
}

// stencil is the new temperature of cell (i, j) of a grid of rows of n
// cells: the one expression both the PEs and the serial check evaluate.
func stencil(u []float64, n, i, j int) float64 {
	c := u[i*n+j]
	return c + alpha*(u[(i-1)*n+j]+u[(i+1)*n+j]+u[i*n+j-1]+u[i*n+j+1]-4*c)
}

// serial runs the whole computation in one process.
func serial(n, steps int) []float64 {
	cur, next := make([]float64, n*n), make([]float64, n*n)
	for j := 0; j < n; j++ {
		cur[j], next[j] = hot, hot
	}
	for step := 0; step < steps; step++ {
		for i := 1; i < n-1; i++ {
			for j := 1; j < n-1; j++ {
				next[i*n+j] = stencil(cur, n, i, j)
			}
		}
		cur, next = next, cur
	}
	return cur
}
