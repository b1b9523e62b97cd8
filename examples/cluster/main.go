// Command cluster is symheap's multi-node demonstration: every PE greets
// its right-hand neighbour, through a plain slice (Ptr) when the
// neighbour runs on the same node and with Put when it runs on another,
// counts itself on PE 0 with an atomic, and the world team sums the
// ranks. Built as it is, it joins the nodes over TCP through a rendezvous
// its first PE listens on; built with -tags ucx, over UCX under a PMIx
// launcher:
//
//	go build -o cluster ./examples/cluster
//	mpirun -np 4 --host a:2,b:2 -x SYMHEAP_BOOT=a:7311 ./cluster
//
//	go build -tags ucx -o cluster ./examples/cluster
//	mpirun -np 4 --host a:2,b:2 ./cluster
//
// (make demo-cluster runs it on two fake hosts of this machine, both ways.)
package main

import (
	"fmt"
	"os"

	"github.com/symheap/symheap"
)

type greeting struct {
	From, Node int64
	Message    [48]byte
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
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
	inbox, err := symheap.Calloc[greeting](pe, 1)
	if err != nil {
		return err
	}
	count, err := symheap.Calloc[int64](pe, 1)
	if err != nil {
		return err
	}
	right := (me + 1) % n
	g := greeting{From: int64(me), Node: int64(pe.Node(me))}
	how := "Put"
	if theirs := symheap.Ptr(pe, inbox, right); theirs != nil {
		how = "a plain store (same node)"
		copy(g.Message[:], "hello by "+how)
		theirs[0] = g
	} else {
		copy(g.Message[:], "hello by "+how)
		if err := symheap.Put(pe, inbox, []greeting{g}, right); err != nil {
			return err
		}
	}
	if err := symheap.AtomicAdd(pe, &count[0], 1, 0); err != nil {
		return err
	}
	if err := pe.Barrier(); err != nil {
		return err
	}
	sum, err := symheap.Malloc[int64](pe, 1)
	if err != nil {
		return err
	}
	sum[0] = int64(me)
	if err := symheap.Reduce(pe.World(), sum, sum, symheap.OpSum); err != nil {
		return err
	}
	msg := inbox[0].Message[:]
	for i, c := range msg {
		if c == 0 {
			msg = msg[:i]
			break
		}
	}
	fmt.Printf("PE %d of %d on node %d of %d (node's PEs %v): PE %d on node %d said %q; sum of ranks %d",
		me, n, pe.Node(me), pe.Nodes(), pe.NodePEs(), inbox[0].From, inbox[0].Node, msg, sum[0])
	if me == 0 {
		fmt.Printf("; %d PEs counted themselves", count[0])
	}
	fmt.Println()
	return pe.Barrier()
}
