// Command chaos runs symheap's fault campaign (see package chaos) and prints
// its figures: runs, kills, survivors, segments left, longest time to exit.
//
//	go run ./internal/chaos/cmd/chaos -runs 300 [-fault kill|stop|both] [-seed N] [-v]
//
// Every campaign starts by printing its seed, and every failure line names
// it. -seed N replays the campaigns of that seed: the same jobs, the same
// victims, delays and signals (package chaos, Plan). Without -seed (or with
// 0) the seed comes from the clock. One seed serves both fault kinds, so
// -fault picks which of the two to replay.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/symheap/symheap/internal/chaos"
)

func main() {
	runs := flag.Int("runs", 300, "jobs per fault kind")
	only := flag.String("fault", "both", "kill (SIGKILL), stop (SIGSTOP) or both")
	timeout := flag.Duration("peer-timeout", time.Second, "SYMHEAP_PEER_TIMEOUT for SIGSTOP runs")
	verbose := flag.Bool("v", false, "print a line per run")
	seed := flag.Uint64("seed", 0, "replay the campaign of this seed (0: a new one from the clock)")
	flag.Parse()
	if *seed == 0 {
		*seed = chaos.NewSeed()
	}
	dir, err := os.MkdirTemp("", "symheap-chaos")
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	if err := chaos.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ok := true
	for _, st := range []bool{false, true} {
		if (*only == "kill" && st) || (*only == "stop" && !st) {
			continue
		}
		var log io.Writer
		if *verbose {
			log = os.Stdout
		}
		name, replay := "kill -9", fmt.Sprintf("go run ./internal/chaos/cmd/chaos -fault kill -seed %d", *seed)
		if st {
			name = "kill -STOP (peer timeout " + timeout.String() + ")"
			replay = fmt.Sprintf("go run ./internal/chaos/cmd/chaos -fault stop -peer-timeout %v -seed %d", *timeout, *seed)
		}
		// The seed goes out before the first job, so that a campaign that
		// hangs or is interrupted can still be replayed.
		fmt.Printf("== %s: seed %d (replay: %s -runs %d)\n", name, *seed, replay, *runs)
		start := time.Now()
		r, err := chaos.Run(ctx, chaos.Config{Runs: *runs, Stop: st, PeerTimeout: *timeout, Bin: dir,
			Seed: *seed, Log: log, Progress: progress(name, *runs, start, *verbose)})
		if err != nil {
			fmt.Fprintln(os.Stderr, err) // names the seed and the run
			os.Exit(1)
		}
		fmt.Printf("== %s: %d runs in %v\n%s", name, r.Runs, time.Since(start).Round(time.Second), r)
		if !r.OK() {
			fmt.Printf("== %s FAILED, seed %d: replay with %s -runs %d -v\n", name, *seed, replay, r.Runs)
		}
		ok = ok && r.OK()
	}
	if !ok {
		os.Exit(1)
	}
}

// progress prints a line per batch of about a tenth of the runs (none with
// -v, which prints a line per run): runs done, failures so far, time
// spent and the time left at this pace.
func progress(name string, runs int, start time.Time, verbose bool) func(int, chaos.Report) {
	batch := max(1, runs/10)
	return func(done int, r chaos.Report) {
		if verbose || done%batch != 0 && done != runs {
			return
		}
		spent := time.Since(start)
		left := time.Duration(float64(spent) / float64(done) * float64(runs-done))
		fmt.Printf("   %s: %d of %d runs, %d failed so far, %v spent, about %v left\n",
			name, done, runs, r.Failures(), spent.Round(time.Second), left.Round(time.Second))
	}
}
