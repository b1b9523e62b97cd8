// Command chaos runs symheap's fault campaign (see package chaos) and prints
// its figures: runs, kills, survivors, segments left, longest time to exit.
//
//	go run ./internal/chaos/cmd/chaos -runs 300 [-stop] [-v]
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
	flag.Parse()
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
		name := "kill -9"
		if st {
			name = "kill -STOP (peer timeout " + timeout.String() + ")"
		}
		start := time.Now()
		r, err := chaos.Run(ctx, chaos.Config{Runs: *runs, Stop: st, PeerTimeout: *timeout, Bin: dir,
			Seed: uint64(time.Now().UnixNano()), Log: log})
		if err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			os.Exit(1)
		}
		fmt.Printf("== %s: %d runs in %v\n%s", name, r.Runs, time.Since(start).Round(time.Second), r)
		ok = ok && r.OK()
	}
	if !ok {
		os.Exit(1)
	}
}
