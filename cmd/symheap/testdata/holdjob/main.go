// Command holdjob is a PE program for the symheap command's tests: it
// joins the job, allocates a little, says "ready", and sleeps until killed
// or until its standard input closes (with HOLDJOB_FOREVER set, only
// until killed).
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/symheap/symheap"
)

func main() {
	pe, err := symheap.Init(symheap.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "holdjob:", err)
		os.Exit(1)
	}
	var keep [][]int64
	for i := 1; i <= 8; i++ {
		s, err := symheap.Malloc[int64](pe, i*512)
		if err != nil {
			fmt.Fprintln(os.Stderr, "holdjob:", err)
			os.Exit(1)
		}
		keep = append(keep, s)
	}
	symheap.Free(pe, keep[2]) // leave a hole, for the heap map
	fmt.Printf("ready %d %s\n", pe.Rank(), pe.Job())
	if os.Getenv("HOLDJOB_FOREVER") != "" {
		select {} // until killed (shrun gives PEs /dev/null for input)
	}
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0) // no Close: the others may be gone
}
