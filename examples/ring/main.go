// Command ring is symheap's demonstration job: every PE writes a greeting
// into its right-hand neighbour's partition through an ordinary Go slice
// (symheap.Ptr), then every PE prints what it received and where.
//
//	shrun -n 4 ./examples/ring
//
// It needs every PE on one node: Ptr reaches only the PEs of this PE's
// node, and ring says so and exits with status 1 in a job on several
// nodes. examples/cluster is the same greeting across nodes, with Put.
package main

import (
	"fmt"
	"os"
	"unsafe"

	"github.com/symheap/symheap"
)

// greeting is plain data: it may live in shared memory.
type greeting struct {
	From    int64
	Square  int64
	Message [48]byte
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ring:", err)
		os.Exit(1)
	}
}

func run() error {
	pe, err := symheap.Init(symheap.Config{})
	if err != nil {
		return err
	}
	defer pe.Close()
	me, n := pe.Rank(), pe.Size()
	if pe.Nodes() > 1 {
		return fmt.Errorf("the job runs on %d nodes, and ring needs every PE on one: it writes into its neighbour's memory through Ptr, which reaches only the PEs of this node (run examples/cluster across nodes)", pe.Nodes())
	}

	// One symmetric inbox per PE: the same offset in every partition.
	inbox, err := symheap.Calloc[greeting](pe, 1)
	if err != nil {
		return err
	}
	right := (me + 1) % n
	left := (me + n - 1) % n

	// A plain slice onto the right neighbour's inbox (Ptr, with the reason
	// when there is none): stores go straight into its partition, no call
	// into symheap.
	theirs, err := symheap.Reach(pe, inbox, right)
	if err != nil {
		return err // says why: ring needs every PE on one node
	}
	theirs[0].From = int64(me)
	theirs[0].Square = int64(me * me)
	copy(theirs[0].Message[:], fmt.Sprintf("hello from PE %d", me))

	if err := pe.Barrier(); err != nil {
		return err
	}
	got := inbox[0]
	// Each PE's inbox lies in its own partition of the segment, so each
	// prints a different address. Where the segment is mapped at the same
	// address in every PE, that address is also where every other PE
	// reaches this inbox; elsewhere symheap translates offsets.
	seen := "the same address in every PE"
	if !pe.SameAddress() {
		seen = "other addresses in other PEs"
	}
	fmt.Printf("PE %d of %d: my inbox, at %p here and %s, holds %q from PE %d (square %d)\n",
		me, n, unsafe.Pointer(&inbox[0]), seen, cstring(got.Message[:]), got.From, got.Square)
	if got.From != int64(left) || got.Square != int64(left*left) {
		return fmt.Errorf("PE %d expected PE %d's greeting, got one from PE %d", me, left, got.From)
	}
	if err := pe.Barrier(); err != nil {
		return err
	}
	return symheap.Free(pe, inbox)
}

func cstring(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
