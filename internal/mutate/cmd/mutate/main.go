// Command mutate runs symheap's mutation tests (see package mutate): each
// mutant of internal/mutate/mutants.txt is applied in a scratch copy of
// the working tree, and the tests it names must fail. It prints a table
// and exits with status 1 unless every mutant is caught.
//
//	go run ./internal/mutate/cmd/mutate [-only a,b] [-list] [-keep] [-v] [-timeout 10m]
//
// Ctrl-C once: finish the run under way, then stop and report. Twice: stop
// it too (SIGINT to go test, SIGKILL after -grace). The scratch copy is
// removed either way, unless -keep.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/symheap/symheap/internal/mutate"
)

func main() { os.Exit(run()) }

func run() int {
	file := flag.String("file", "", "the mutants file (default: internal/mutate/mutants.txt of the checkout)")
	only := flag.String("only", "", "run only these mutants (comma-separated names)")
	list := flag.Bool("list", false, "list the mutants and check that each still applies, without running tests")
	keep := flag.Bool("keep", false, "keep the scratch directory (the copy and the logs of go test)")
	verbose := flag.Bool("v", false, "stream go test's output")
	limit := flag.Duration("timeout", 10*time.Minute, "limit of one go test run, building included (go test -timeout is set a tenth below)")
	grace := flag.Duration("grace", 30*time.Second, "time a stopped go test gets between SIGINT and SIGKILL")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./internal/mutate/cmd/mutate [flags]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		return 2
	}

	root, err := gitRoot()
	if err != nil {
		return fail(err)
	}
	if *file == "" {
		*file = filepath.Join(root, "internal", "mutate", "mutants.txt")
	}
	all, err := mutate.ParseFile(*file)
	if err != nil {
		return fail(err)
	}
	var names []string
	if *only != "" {
		names = strings.Split(*only, ",")
	}
	ms, err := mutate.Select(all, names)
	if err != nil {
		return fail(err)
	}
	if *list {
		return listMutants(root, ms)
	}

	scratch, err := os.MkdirTemp("", "symheap-mutate-")
	if err != nil {
		return fail(err)
	}
	if *keep {
		defer fmt.Fprintf(os.Stderr, "mutate: kept %s\n", scratch)
	} else {
		defer os.RemoveAll(scratch)
	}

	// First SIGINT or SIGTERM: drain (finish the run under way); second:
	// cancel it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	drain := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		for n := 0; ; n++ {
			select {
			case <-sigs:
			case <-ctx.Done():
				return
			}
			if n == 0 {
				fmt.Fprintln(os.Stderr, "mutate: interrupted: finishing the run under way (interrupt again to stop it now)")
				close(drain)
				continue
			}
			fmt.Fprintln(os.Stderr, "mutate: interrupted again: stopping go test")
			cancel()
			return
		}
	}()

	cfg := mutate.Config{
		Root: root, Scratch: scratch, Mutants: ms, Keep: *keep,
		Runner:   mutate.Runner{Limit: *limit, Grace: *grace},
		Progress: os.Stderr,
		Drain:    drain,
	}
	if *verbose {
		cfg.Runner.Stream = os.Stdout
	}
	rep, err := mutate.Campaign(ctx, cfg)
	if rep != nil {
		fmt.Println()
		if werr := rep.Write(os.Stdout); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		return fail(err)
	}
	if !rep.OK() {
		return 1
	}
	return 0
}

// gitRoot returns the top of the git work tree holding the current
// directory.
func gitRoot() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("finding the checkout (git rev-parse --show-toplevel): %v", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// listMutants prints the mutants and whether each still applies to the
// checkout, then what each breaks.
func listMutants(root string, ms []mutate.Mutant) int {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MUTANT\tWHERE\tTESTS")
	var errs []string
	for _, m := range ms {
		where := m.File
		if line, err := mutate.Locate(root, m); err != nil {
			where += ": STALE"
			errs = append(errs, err.Error())
		} else {
			where = fmt.Sprintf("%s:%d", m.File, line)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", m.Name, where, m.Selection())
	}
	tw.Flush()
	fmt.Println()
	for _, m := range ms {
		fmt.Printf("%s: %s\n", m.Name, m.Why)
	}
	for _, e := range errs {
		fmt.Fprintln(os.Stderr, "mutate:", e)
	}
	if len(errs) > 0 {
		return 1
	}
	return 0
}
