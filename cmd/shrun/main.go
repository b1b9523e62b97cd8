// Command shrun starts the PEs of a symheap job on this node and
// supervises them as one group.
//
//	shrun -n N [--heap SIZE] [--allocator NAME] [--timeout D] [--tag] [--offset-mode] PROGRAM|PACKAGE [ARGS...]
//
// PROGRAM is an executable file (or a name found in PATH); PACKAGE is a Go
// main package, named by directory ("./examples/ring") or import path,
// which is built first. Flags end at the first argument that is not one, so
// everything from PROGRAM on is passed to the PEs untouched. Flags may be
// written with one dash or two (-n 4, --n=4, --heap 512m).
//
// Each PE gets SYMHEAP_JOB, SYMHEAP_PE and SYMHEAP_NPES (see package
// launch); --heap sets SHMEM_SYMMETRIC_SIZE, --allocator SYMHEAP_ALLOCATOR
// and --offset-mode SYMHEAP_OFFSET_MODE=1.
//
// shrun exits with the status of the first PE that failed (its exit code,
// or 128 plus the number of the signal that killed it), after stopping the
// others within a second; with 0 when every PE exited 0; with 124 when
// --timeout passed; with 2 for bad usage and 1 when the job could not be
// started; with 147 when the PEs left after the others had exited all
// stayed stopped (SIGSTOP) for the peer timeout (SYMHEAP_PEER_TIMEOUT,
// 10s by default), which shrun then kills, naming them. SIGINT, SIGTERM,
// SIGHUP and SIGQUIT sent to shrun are passed on to every PE; a second
// SIGINT or SIGTERM stops every PE (SIGTERM, then SIGKILL) and shrun exits
// with 143 unless a PE failed before. If shrun itself is killed, its PEs
// die with it: symheap PEs first leave the job, the last of them removing
// its segment from /dev/shm, and exit with status 129; other programs are
// killed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/symheap/symheap/internal/config"
	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/launch"
)

func main() {
	os.Exit(shrun(os.Args[1:], os.Stdout, os.Stderr))
}

const usageHead = `usage: shrun -n N [--heap SIZE] [--allocator NAME] [--timeout D] [--tag] [--offset-mode] PROGRAM|PACKAGE [ARGS...]

Starts N PEs of PROGRAM (an executable) or PACKAGE (a Go main package, built
first) as one symheap job, and exits with the status of the first PE that fails.

`

// shrun is the whole command; it returns the exit status.
func shrun(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("shrun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 0, fmt.Sprintf("start `N` PEs (required, 1 to %d)", launch.MaxPEs))
	heap := fs.String("heap", "", "symmetric heap `SIZE` per PE (SHMEM_SYMMETRIC_SIZE): bytes or with a k, m, g, t suffix")
	allocator := fs.String("allocator", "", "memheap allocator component `NAME` (SYMHEAP_ALLOCATOR)")
	timeout := fs.Duration("timeout", 0, "stop every PE and exit 124 after this `duration` (e.g. 30s, 5m); 0: no limit")
	tag := fs.Bool("tag", false, `prefix every output line with "[pe N] "`)
	offsetMode := fs.Bool("offset-mode", false, "do not map the segment at the same address in every PE (SYMHEAP_OFFSET_MODE=1)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageHead)
		fs.PrintDefaults()
	}
	usageError := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "shrun: "+format+"\n\n", a...)
		fs.Usage()
		return 2
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2 // the flag package has printed the error and the usage
	}
	switch {
	case fs.NArg() == 0:
		return usageError("no program given")
	case *n < 1:
		return usageError("-n %d: give the number of PEs, at least 1", *n)
	case *n > launch.MaxPEs:
		// Before anything starts: each PE would fail in Init otherwise.
		return usageError("-n %d: a job has at most %d PEs (the most its segment holds)", *n, launch.MaxPEs)
	case *timeout < 0:
		return usageError("--timeout %v: must not be negative", *timeout)
	}
	if *heap != "" {
		size, err := config.ParseSize(*heap)
		if err != nil {
			return usageError("--heap: %v", err)
		}
		if size == 0 {
			return usageError("--heap %s: the heap must not be empty", *heap)
		}
		if size > config.MaxHeapSize {
			return usageError("--heap %s: at most %s per PE", *heap, config.FormatSize(config.MaxHeapSize))
		}
	}
	opts := launch.Options{
		N: *n, Heap: *heap, Allocator: *allocator, Timeout: *timeout, Tag: *tag,
		Stdout: stdout, Stderr: stderr,
	}
	if *offsetMode {
		opts.Env = append(opts.Env, config.EnvOffsetMode+"=1")
	}

	// Signals are caught from before the start: during a build they
	// cancel it; once the PEs run they are forwarded (first SIGINT or
	// SIGTERM) or stop the job (second).
	sigc := make(chan os.Signal, 8)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var group atomic.Pointer[launch.Group]
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		interrupts := 0
		for {
			select {
			case s := <-sigc:
				g := group.Load()
				if g == nil {
					cancel()
					continue
				}
				if s == syscall.SIGINT || s == syscall.SIGTERM {
					interrupts++
				}
				if interrupts >= 2 {
					fmt.Fprintf(stderr, "shrun: %v again: stopping every PE of job %s\n", s, g.Job())
					g.Stop()
					continue
				}
				g.Signal(s)
			case <-quit:
				return
			}
		}
	}()

	g, err := launch.Start(ctx, opts, fs.Arg(0), fs.Args()[1:]...)
	if err != nil {
		fmt.Fprintf(stderr, "shrun: %v\n", err)
		if errors.Is(err, errs.ErrBadConfig) {
			return 2
		}
		return 1
	}
	group.Store(g)
	res, err := g.Wait()
	if err != nil {
		fmt.Fprintf(stderr, "shrun: %v\n", err)
	}
	return res.Status
}
