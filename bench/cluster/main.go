// Command cluster runs symheap's benchmark across nodes (package
// bench/cluster/suite) as a PE of a job started by a PMIx launcher, one PE
// per node; bench/cluster/run.sh starts it beside Open MPI's harnesses.
// Build it with -tags ucx.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/bench/cluster/suite"
)

func main() {
	var o suite.Options
	flag.IntVar(&o.Reps, "r", 3, "repetitions (best is reported)")
	flag.DurationVar(&o.Budget, "t", 300*time.Millisecond, "time per repetition")
	flag.IntVar(&o.BWSize, "bw", 8<<20, "put_bw message size")
	flag.BoolVar(&o.OnlyInit, "init", false, "report init_time only")
	flag.Parse()
	start := time.Now()
	pe, err := symheap.Init(symheap.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster bench:", err)
		os.Exit(1)
	}
	if err := suite.Run(pe, time.Since(start), o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "cluster bench:", err)
		pe.Close()
		os.Exit(1)
	}
	if err := pe.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "cluster bench:", err)
		os.Exit(1)
	}
}
