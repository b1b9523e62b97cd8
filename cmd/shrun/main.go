// Command shrun starts the PEs of a symheap job on this node and
// supervises them as one group.
//
//	shrun -n N [--nodes K] [--heap SIZE] [--allocator NAME] [--timeout D] [--tag] [--offset-mode] [-x VAR[=value]]... PROGRAM|PACKAGE [ARGS...] [: -n N PROGRAM [ARGS...]]...
//
// PROGRAM is an executable file (or a name found in PATH); PACKAGE is a Go
// main package, named by directory ("./examples/ring") or import path,
// which is built first. Flags end at the first argument that is not one, so
// everything from PROGRAM on is passed to the PEs untouched. Flags may be
// written with one dash or two (-n 4, --n=4, --heap 512m). The names Open
// MPI's mpirun and oshrun use work too: -np N is -n N, --tag-output is
// --tag, -x VAR=value exports a variable to every PE (-x VAR exports
// shrun's own value of VAR; repeatable). --version prints symheap's
// version, --man shrun's manual page.
//
// A ":" argument starts another program of the same job, as in mpirun's
// MPMD form: "shrun -n 2 ./goprog : -n 2 ./cprog" runs ranks 0 and 1 of
// ./goprog and ranks 2 and 3 of ./cprog as one job of 4 PEs (Go and C
// programs may be mixed: docs/c.md). Each program after a ":" takes its
// own -n; shrun's other flags hold for every program. A PE's own ":"
// argument cannot be passed.
//
// --nodes K (K > 1) runs the job across K fake hosts of this machine
// instead (internal/cluster: each host an IPC namespace and a /dev/shm
// of its own, started by Open MPI's mpirun, which must be installed),
// N/K PEs on each, joined over TCP by a rendezvous at a free port of
// 127.0.0.1 (SYMHEAP_BOOT), or by PMIx in a ucx build: a Go program or
// a C one (libsymheap) sees a job on K nodes (docs/multinode.md). N must
// be a multiple of K, PROGRAM an executable, and the PEs' output comes
// when the job has ended.
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
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/symheap/symheap/internal/cluster"
	"github.com/symheap/symheap/internal/config"
	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/manpage"
	"github.com/symheap/symheap/launch"
)

func main() {
	os.Exit(shrun(os.Args[1:], os.Stdout, os.Stderr))
}

const usageHead = `usage: shrun -n N [--nodes K] [--heap SIZE] [--allocator NAME] [--timeout D] [--tag] [--offset-mode] [-x VAR[=value]]... PROGRAM|PACKAGE [ARGS...] [: -n N PROGRAM [ARGS...]]...

Starts N PEs of PROGRAM (an executable) or PACKAGE (a Go main package, built
first) as one symheap job, and exits with the status of the first PE that fails.
Each ": -n N PROGRAM" adds N PEs of another program to the job (ranks in order).

`

// flags are shrun's parsed flags.
type flags struct {
	n                        int
	heap, allocator          string
	timeout                  time.Duration
	tag, offsetMode, version bool
	env                      []string // -x, as KEY=value
	nodes                    int      // fake hosts (--nodes); 1: this node alone
}

// newFlags defines shrun's flags (the same set makes --help and the
// manual page).
func newFlags(stderr io.Writer) (*flag.FlagSet, *flags) {
	var f flags
	fs := flag.NewFlagSet("shrun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&f.n, "n", 0, fmt.Sprintf("start `N` PEs (required, 1 to %d)", launch.MaxPEs))
	fs.IntVar(&f.n, "np", 0, "start `N` PEs: the same as -n (the name mpirun and oshrun use)")
	fs.StringVar(&f.heap, "heap", "", "symmetric heap `SIZE` per PE (SHMEM_SYMMETRIC_SIZE): bytes or with a k, m, g, t suffix")
	fs.StringVar(&f.allocator, "allocator", "", "memheap allocator component `NAME` (SYMHEAP_ALLOCATOR)")
	fs.DurationVar(&f.timeout, "timeout", 0, "stop every PE and exit 124, saying so, after this `duration` (e.g. 30s, 5m); 0: no limit")
	fs.BoolVar(&f.tag, "tag", false, `prefix every output line with "[pe N] "`)
	fs.BoolVar(&f.tag, "tag-output", false, "the same as --tag (the name mpirun uses)")
	fs.BoolVar(&f.offsetMode, "offset-mode", false, "do not map the segment at the same address in every PE (SYMHEAP_OFFSET_MODE=1)")
	fs.Func("x", "export `VAR[=value]` to every PE; VAR alone exports shrun's own value (repeatable)", func(s string) error {
		k, _, hasValue := strings.Cut(s, "=")
		switch {
		case k == "" || strings.ContainsAny(k, " \t\n"):
			return fmt.Errorf("%q is not VAR or VAR=value", s)
		case hasValue:
			f.env = append(f.env, s)
		default:
			v, ok := os.LookupEnv(k)
			if !ok {
				return fmt.Errorf("%s is not set in shrun's environment (give -x %s=value)", k, k)
			}
			f.env = append(f.env, k+"="+v)
		}
		return nil
	})
	fs.IntVar(&f.nodes, "nodes", 1, "run the job across `K` fake hosts of this machine (an IPC namespace and /dev/shm each; needs mpirun), N/K PEs on each")
	fs.BoolVar(&f.version, "version", false, "print symheap's version and exit")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageHead)
		fs.PrintDefaults()
	}
	return fs, &f
}

// shrun is the whole command; it returns the exit status.
func shrun(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && args[0] == "--man" {
		if err := manPage().Write(stdout); err != nil {
			fmt.Fprintf(stderr, "shrun: %v\n", err)
			return 1
		}
		return 0
	}
	fs, f := newFlags(stderr)
	n, heap, allocator, timeout, tag, offsetMode := &f.n, &f.heap, &f.allocator, &f.timeout, &f.tag, &f.offsetMode
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
	if f.version {
		fmt.Fprintf(stdout, "shrun (symheap) %s\n", config.Version)
		return 0
	}
	apps, err := parseApps(*n, fs.Args())
	if err != nil {
		return usageError("%v", err)
	}
	total := 0
	for _, a := range apps {
		total += a.N
	}
	switch {
	case fs.NArg() == 0:
		return usageError("no program given")
	case *n < 1:
		return usageError("-n %d: give the number of PEs, at least 1", *n)
	case total > launch.MaxPEs:
		// Before anything starts: each PE would fail in Init otherwise.
		return usageError("-n %d: a job has at most %d PEs (the most its segment holds)", total, launch.MaxPEs)
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
		Heap: *heap, Allocator: *allocator, Timeout: *timeout, Tag: *tag,
		Stdout: stdout, Stderr: stderr,
	}
	if *offsetMode {
		opts.Env = append(opts.Env, config.EnvOffsetMode+"=1")
	}
	opts.Env = append(opts.Env, f.env...)
	if f.nodes != 1 {
		return fakeHosts(f, apps, opts, stdout, stderr)
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

	g, err := launch.StartApps(ctx, opts, apps)
	if err != nil {
		fmt.Fprintf(stderr, "shrun: %v\n", err)
		if errors.Is(err, errs.ErrBadConfig) {
			return 2
		}
		return 1
	}
	group.Store(g)
	res, err := g.Wait()
	switch {
	case errors.Is(err, launch.ErrTimeout):
		fmt.Fprintf(stderr, "shrun: the job ran past --timeout %v and was stopped (exit status %d): %v\n", *timeout, res.Status, err)
	case err != nil:
		fmt.Fprintf(stderr, "shrun: %v\n", err)
	}
	return res.Status
}

// parseApps splits the command line after shrun's flags into the job's
// programs at each ":" argument, as mpirun does (MPMD): the first is
// PROGRAM [ARGS...] with n PEs, each later one -n N PROGRAM [ARGS...].
func parseApps(n int, args []string) ([]launch.App, error) {
	var apps []launch.App
	for i := 0; ; i++ {
		end := slices.Index(args, ":")
		if end < 0 {
			end = len(args)
		}
		group := args[:end]
		if i == 0 {
			if len(group) == 0 && end < len(args) {
				return nil, errors.New("no program before the first ':'")
			}
			if len(group) > 0 {
				apps = append(apps, launch.App{N: n, Prog: group[0], Args: group[1:]})
			}
		} else if len(group) == 0 {
			return nil, fmt.Errorf("program %d (after ':' number %d): no program given", i+1, i)
		} else {
			fs := flag.NewFlagSet("shrun", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var k int
			fs.IntVar(&k, "n", 0, "")
			fs.IntVar(&k, "np", 0, "")
			if err := fs.Parse(group); err != nil {
				return nil, fmt.Errorf("program %d (after ':' number %d): %v (each program after a ':' takes -n N, then the program)", i+1, i, err)
			}
			switch {
			case k < 1:
				return nil, fmt.Errorf("program %d (after ':' number %d): -n %d: give its number of PEs, at least 1", i+1, i, k)
			case fs.NArg() == 0:
				return nil, fmt.Errorf("program %d (after ':' number %d): no program given", i+1, i)
			}
			apps = append(apps, launch.App{N: k, Prog: fs.Arg(0), Args: fs.Args()[1:]})
		}
		if end == len(args) {
			return apps, nil
		}
		args = args[end+1:]
	}
}

// manPage is shrun's manual page, from its flags.
func manPage() *manpage.Page {
	fs, _ := newFlags(io.Discard)
	return &manpage.Page{
		Name:    "shrun",
		Section: 1,
		Summary: "start the PEs of a symheap job on this node and supervise them as one group",
		Synopsis: []string{
			"shrun -n N [--heap SIZE] [--allocator NAME] [--timeout D] [--tag] [--offset-mode] [-x VAR[=value]]... PROGRAM|PACKAGE [ARGS...]",
			"shrun -np N [options] PROGRAM [ARGS...]",
			"shrun -n N [options] PROGRAM [ARGS...] : -n N PROGRAM [ARGS...] ...",
			"shrun --version",
		},
		Description: []string{
			"shrun starts N PEs of PROGRAM (an executable, or a name found in PATH) or PACKAGE (a Go main package, " +
				"named by directory or import path, built first) as one symheap job, and exits with the status of the first PE that fails. " +
				"C OpenSHMEM programs built with symcc(1) run under it like Go PEs.",
			"\tsymcc -O2 -o prog prog.c\n\tshrun -np 4 --tag-output ./prog",
			"Flags end at the first argument that is not one: everything from PROGRAM on goes to the PEs untouched. " +
				"Flags may be written with one dash or two.",
			"Each PE gets SYMHEAP_JOB, SYMHEAP_PE and SYMHEAP_NPES, and shrun's environment with what -x, --heap, --allocator and --offset-mode add.",
			"A \":\" argument starts another program of the same job, as mpirun's MPMD form does: " +
				"\"shrun -n 2 ./goprog : -n 2 ./cprog\" runs ranks 0 and 1 of ./goprog and ranks 2 and 3 of ./cprog as one job of 4 PEs. " +
				"Each program after a \":\" takes its own -n N; the other flags hold for every program.",
		},
		Sections: []manpage.Section{
			{Title: "Options", Options: manpage.Flags(fs)},
			{Title: "Exit status", Paragraphs: []string{
				"The status of the first PE that failed (its exit code, or 128 plus the number of the signal that killed it), " +
					"after the others have been stopped; 0 when every PE exited 0; 124 when --timeout passed (shrun says so and names the PEs it stopped); " +
					"2 for bad usage; 1 when the job could not be started; 147 when the PEs left all stayed stopped (SIGSTOP) for the peer timeout; " +
					"143 after a second SIGINT or SIGTERM.",
			}},
			{Title: "Signals", Paragraphs: []string{
				"SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to shrun are passed on to every PE; a second SIGINT or SIGTERM stops every PE " +
					"(SIGTERM, then SIGKILL). If shrun is killed its PEs die with it, and the last symheap PE removes the job's segment from /dev/shm.",
			}},
		},
		SeeAlso: []string{"symcc(1)", "symheap(1)", "shmem_init(3)"},
	}
}

// fakeHosts runs the job across f.nodes fake hosts (--nodes): the one
// program, N/K PEs a host, under internal/cluster. It returns the exit
// status as shrun's other paths do.
func fakeHosts(f *flags, apps []launch.App, opts launch.Options, stdout, stderr io.Writer) int {
	fail := func(status int, format string, a ...any) int {
		fmt.Fprintf(stderr, "shrun: "+format+"\n", a...)
		return status
	}
	switch {
	case f.nodes < 1:
		return fail(2, "--nodes %d: give the number of fake hosts, at least 1", f.nodes)
	case len(apps) != 1:
		return fail(2, "--nodes %d: one program only (no \":\")", f.nodes)
	case f.n%f.nodes != 0:
		return fail(2, "--nodes %d: -n %d is not a multiple of it (each fake host runs as many PEs)", f.nodes, f.n)
	}
	prog, err := exec.LookPath(apps[0].Prog)
	if err == nil {
		prog, err = filepath.Abs(prog)
	}
	if err != nil {
		return fail(2, "--nodes %d: %s: %v (with --nodes PROGRAM is an executable: go build a package first)", f.nodes, apps[0].Prog, err)
	}
	if err := cluster.Available(); err != nil {
		return fail(1, "--nodes %d: %v", f.nodes, err)
	}
	// The rendezvous of the TCP bootstrap: a port free now on the
	// loopback, which the job's first PE listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(1, "--nodes %d: finding a port for the rendezvous: %v", f.nodes, err)
	}
	boot := ln.Addr().String()
	ln.Close()
	env := []string{"SYMHEAP_BOOT=" + boot}
	if opts.Heap != "" {
		env = append(env, "SHMEM_SYMMETRIC_SIZE="+opts.Heap)
	}
	if opts.Allocator != "" {
		env = append(env, "SYMHEAP_ALLOCATOR="+opts.Allocator)
	}
	env = append(env, opts.Env...)
	var mpiArgs []string
	if f.tag {
		mpiArgs = append(mpiArgs, "--tag-output")
	}
	r := cluster.Run(context.Background(), cluster.Job{Hosts: f.nodes, PerHost: f.n / f.nodes,
		Argv: append([]string{prog}, apps[0].Args...), Env: env, MPIArgs: mpiArgs, Timeout: f.timeout})
	stdout.Write(r.Output)
	var exit *exec.ExitError
	switch {
	case len(r.Leftovers) > 0:
		return fail(1, "segments left behind on the fake hosts: %v", r.Leftovers)
	case r.Err == nil:
		return 0
	case errors.Is(r.Err, context.DeadlineExceeded):
		return fail(124, "the job ran past --timeout %v and was stopped: %v", f.timeout, r.Err)
	case errors.As(r.Err, &exit) && exit.ExitCode() > 0:
		return exit.ExitCode()
	}
	return fail(1, "%v", r.Err)
}
