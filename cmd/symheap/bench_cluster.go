package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/bench/cluster/suite"
	"github.com/symheap/symheap/internal/config"
)

// underPMIx reports whether a PMIx launcher (Open MPI's mpirun, Slurm's
// srun --mpi=pmix) started this process as one PE of a job: then `symheap
// bench` is that PE, and runs the suite across nodes (runClusterBench).
func underPMIx() bool {
	return os.Getenv("PMIX_NAMESPACE") != "" && os.Getenv("SYMHEAP_PMIX") != "0"
}

// runClusterBench is `symheap bench` as a PE of a job on several nodes:
// the suite of bench/cluster/suite, PE 0 against PE 1 (start it with one
// PE per node), printed by PE 0 a line per figure.
func runClusterBench(args []string) error {
	fs := flag.NewFlagSet("symheap bench (under a PMIx launcher)", flag.ContinueOnError)
	var o suite.Options
	fs.IntVar(&o.Reps, "rounds", 3, "repetitions of each loop, the best is reported (`n`)")
	fs.DurationVar(&o.Budget, "time", 300*time.Millisecond, "time per repetition")
	maxSize := fs.String("max-size", "8m", "the put bandwidth's message `size`")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("bench: %w: %v", symheap.ErrBadArg, err)
	}
	n, err := config.ParseSize(*maxSize)
	if err != nil || n < 1 || n > 1<<30 {
		return fmt.Errorf("bench: --max-size %q: %w (a size from 1 to 1g, as 8m)", *maxSize, symheap.ErrBadArg)
	}
	o.BWSize = int(n)
	start := time.Now()
	pe, err := symheap.Init(symheap.Config{})
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if pe.Rank() == 0 {
		fmt.Println("# symheap bench across nodes: <harness> <metric> <size in bytes> <value>; latencies in us (put_lat: Put + Quiet;")
		fmt.Println("# barrier_lat and malloc_lat: the slowest PE's mean; pingpong_lat: half a round trip), bandwidths in MB/s, init_time in ms")
	}
	if err := suite.Run(pe, time.Since(start), o, os.Stdout); err != nil {
		pe.Close()
		return fmt.Errorf("bench: %w", err)
	}
	return pe.Close()
}
