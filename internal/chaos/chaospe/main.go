// Command chaospe is the PE program of the fault campaign: it does a bit
// of everything (collective allocation, puts, atomics, messages, the local
// shared heap, barriers) in a loop until it is killed or a peer is lost.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/symheap/symheap"
)

func main() {
	pe, err := symheap.Init(symheap.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaospe: init:", err)
		os.Exit(1)
	}
	fmt.Printf("pid %d %d\n", pe.Rank(), os.Getpid())
	err = work(pe)
	if errors.Is(err, symheap.ErrPeerLost) {
		fmt.Fprintln(os.Stderr, "chaospe: peer lost:", err)
		os.Exit(3)
	}
	fmt.Fprintln(os.Stderr, "chaospe:", err)
	os.Exit(1)
}

func work(pe *symheap.PE) error {
	me, n := pe.Rank(), pe.Size()
	right, left := (me+1)%n, (me+n-1)%n
	counter, err := symheap.Calloc[int64](pe, 1)
	if err != nil {
		return err
	}
	msg := make([]byte, 256)
	for i := 0; ; i++ {
		size := 64 + (i%16)*512
		buf, err := symheap.Malloc[byte](pe, size)
		if err != nil {
			return err
		}
		src := make([]byte, size)
		for k := range src {
			src[k] = byte(me + i + k)
		}
		if err := symheap.Put(pe, buf, src, right); err != nil {
			return err
		}
		if err := symheap.AtomicAdd(pe, &counter[0], 1, 0); err != nil {
			return err
		}
		if err := pe.Barrier(); err != nil {
			return err
		}
		for k := range buf {
			if buf[k] != byte(left+i+k) {
				return fmt.Errorf("iteration %d: byte %d from PE %d is %d", i, k, left, buf[k])
			}
		}
		blk, err := symheap.SharedAlloc[byte](pe, 1024)
		if err != nil {
			return err
		}
		if err := pe.Send(msg, right, i%4); err != nil {
			return err
		}
		if _, err := pe.Recv(msg, left, i%4); err != nil {
			return err
		}
		if err := symheap.SharedFree(pe, blk); err != nil {
			return err
		}
		if err := symheap.Free(pe, buf); err != nil {
			return err
		}
		if i == 2 {
			fmt.Printf("running %d\n", me)
		}
	}
}
