package mutate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// Status is the verdict on a mutant or a baseline.
type Status string

const (
	Caught   Status = "caught"   // a selected test failed with the mutant in place
	Survived Status = "survived" // the selected tests passed with the mutant in place
	Broken   Status = "broken"   // the mutated code did not build: the mutant is wrong
	Stale    Status = "stale"    // the original text is not in the file exactly once
	Timeout  Status = "timeout"  // go test was stopped at the runner's limit
	NoBase   Status = "no baseline"
	NotRun   Status = "not run" // interrupted before or during its run

	BasePassed  Status = "passed"
	BaseFailed  Status = "FAILED"   // the tests fail without any mutant
	BaseNoTests Status = "no tests" // -run selects no test in any package
)

// MutantResult is the verdict on one mutant.
type MutantResult struct {
	Mutant Mutant
	Where  string // file:line
	Status Status
	Failed []string // the failing tests, for Caught
	Took   time.Duration
	Detail string // for the statuses other than Caught and Survived: what went wrong
	Log    string // go test's output, in the scratch directory
}

// BaselineResult is the run of one selection on the unmutated copy.
type BaselineResult struct {
	Selection Selection
	Status    Status
	Failed    []string
	Took      time.Duration
	Detail    string
	Log       string
}

// Report is a campaign's outcome.
type Report struct {
	Scratch   string // the scratch directory
	Kept      bool   // it outlives the campaign (Config.Keep): logs are named
	Files     int    // files copied into it
	Baselines []BaselineResult
	Mutants   []MutantResult
	Took      time.Duration
}

// OK reports whether every mutant was caught.
func (r *Report) OK() bool {
	for _, m := range r.Mutants {
		if m.Status != Caught {
			return false
		}
	}
	return len(r.Mutants) > 0
}

// Config is a campaign's configuration.
type Config struct {
	Root    string   // the checkout (module root and git work tree)
	Scratch string   // an empty directory for the copy and the logs
	Mutants []Mutant // the mutants to run, in order
	Runner  Runner   // Dir is set by Campaign
	// Keep: the caller keeps Scratch, so the report names the logs.
	Keep bool
	// Progress, if set, gets a line as each run starts and ends.
	Progress io.Writer
	// Drain, when closed, stops the campaign before its next run (the
	// run under way finishes); cancelling ctx stops that run too.
	Drain <-chan struct{}
}

// Campaign runs the mutants (steps 2-4 of the package comment). It
// returns a Report also when interrupted, with the mutants left NotRun;
// an error means the copy could not be made.
func Campaign(ctx context.Context, cfg Config) (*Report, error) {
	start := time.Now()
	rep := &Report{Scratch: cfg.Scratch, Kept: cfg.Keep}
	defer func() { rep.Took = time.Since(start) }()
	progress := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, format+"\n", args...)
		}
	}

	// Step 2: the copy.
	files, err := GitFiles(cfg.Root)
	if err != nil {
		return nil, err
	}
	treeDir := filepath.Join(cfg.Scratch, "tree")
	logDir := filepath.Join(cfg.Scratch, "logs")
	for _, d := range []string{treeDir, logDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
	}
	tree, n, err := CopyTree(cfg.Root, treeDir, files)
	if err != nil {
		return nil, fmt.Errorf("copying the working tree to %s: %w", treeDir, err)
	}
	rep.Files = n
	if _, err := os.Stat(filepath.Join(treeDir, "go.mod")); err != nil {
		return nil, fmt.Errorf("no go.mod at the root of the copy (is %s the module root?): %w", cfg.Root, err)
	}
	progress("copied %d files to %s", n, treeDir)
	r := cfg.Runner
	r.Dir = treeDir

	results := make([]MutantResult, len(cfg.Mutants))
	var order []Selection // selections in order of first use
	for i, m := range cfg.Mutants {
		res := &results[i]
		res.Mutant, res.Where, res.Status = m, m.File, NotRun
		line, err := Locate(treeDir, m)
		if err != nil {
			res.Status, res.Detail = Stale, err.Error()
			continue
		}
		res.Where = fmt.Sprintf("%s:%d", m.File, line)
		if !containsSel(order, m.Selection()) {
			order = append(order, m.Selection())
		}
	}
	rep.Mutants = results

	stopping := func() bool {
		if ctx.Err() != nil {
			return true
		}
		select {
		case <-cfg.Drain:
			return true
		default:
			return false
		}
	}

	// Step 3: the baselines.
	base := make(map[Selection]*BaselineResult)
	for i, sel := range order {
		rep.Baselines = append(rep.Baselines, BaselineResult{Selection: sel, Status: NotRun})
		b := &rep.Baselines[len(rep.Baselines)-1]
		if stopping() {
			continue
		}
		progress("baseline %d/%d: %s", i+1, len(order), sel)
		run := r.Test(ctx, sel)
		b.Took, b.Failed = run.Took, run.Failed
		b.Log = writeLog(logDir, fmt.Sprintf("baseline-%d.log", i+1), sel.String(), run.Output)
		switch {
		case run.Outcome == Passed && len(run.Ran) == 0:
			b.Status, b.Detail = BaseNoTests, "-run selects no test in any of the packages"
		case run.Outcome == Passed:
			b.Status = BasePassed
		case run.Outcome == Failed:
			b.Status, b.Detail = BaseFailed, "the tests fail without any mutant"
		case run.Outcome == BuildFailed:
			b.Status, b.Detail = Broken, "the unmutated copy does not build:\n"+excerpt(run.Output, run.Err)
		case ctx.Err() != nil:
			b.Status, b.Detail = NotRun, run.Err.Error()
		default:
			b.Status, b.Detail = Timeout, run.Err.Error()
		}
		progress("baseline %d/%d: %s (%v)", i+1, len(order), b.Status, round(b.Took))
	}
	for i := range rep.Baselines {
		base[rep.Baselines[i].Selection] = &rep.Baselines[i]
	}

	// Step 4: the mutants.
	for i := range results {
		res := &results[i]
		m := res.Mutant
		if res.Status == Stale {
			progress("[%d/%d] %s: stale", i+1, len(results), m.Name)
			continue
		}
		if b := base[m.Selection()]; b.Status != BasePassed {
			if b.Status != NotRun {
				res.Status, res.Detail = NoBase, fmt.Sprintf("not run: the baseline %s: %s", b.Selection, b.Status)
			}
			continue
		}
		if stopping() {
			continue
		}
		if _, err := tree.Apply(m); err != nil {
			res.Status, res.Detail = Stale, err.Error()
			continue
		}
		progress("[%d/%d] %s: %s, %s", i+1, len(results), m.Name, res.Where, m.Selection())
		run := r.Test(ctx, m.Selection())
		if err := tree.Restore(); err != nil {
			return rep, err // the copy cannot be trusted for the next mutant
		}
		res.Took, res.Failed = run.Took, run.Failed
		res.Log = writeLog(logDir, m.Name+".log", m.Selection().String(), run.Output)
		switch {
		case run.Outcome == Failed:
			res.Status = Caught
		case run.Outcome == Passed:
			res.Status = Survived
		case run.Outcome == BuildFailed:
			res.Status, res.Detail = Broken, "the mutated code does not build:\n"+excerpt(run.Output, run.Err)
		case ctx.Err() != nil:
			res.Status, res.Detail = NotRun, run.Err.Error()
		default:
			res.Status, res.Detail = Timeout, run.Err.Error()
		}
		by := ""
		if len(res.Failed) > 0 {
			by = " by " + strings.Join(res.Failed, ", ")
		}
		progress("[%d/%d] %s: %s%s (%v)", i+1, len(results), m.Name, res.Status, by, round(res.Took))
	}
	return rep, nil
}

func containsSel(s []Selection, x Selection) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// writeLog saves a run's output and returns its path ("" if it could not).
func writeLog(dir, name, cmd string, out []byte) string {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, append([]byte("$ "+cmd+"\n"), out...), 0o644); err != nil {
		return ""
	}
	return path
}

// excerpt returns what a failed build printed: its lines but go test's
// own FAIL and ok summaries, at most 20 of them.
func excerpt(out []byte, err error) string {
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(l, "FAIL") || strings.HasPrefix(l, "ok ") || strings.TrimSpace(l) == "" {
			continue
		}
		keep = append(keep, "    "+l)
	}
	if len(keep) > 20 {
		keep = append(keep[:20], fmt.Sprintf("    ... (%d more lines)", len(keep)-20))
	}
	if err != nil {
		keep = append(keep, "    "+err.Error())
	}
	return strings.Join(keep, "\n")
}

func round(d time.Duration) time.Duration {
	if d >= time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}

// Write prints the report: the baselines, then a table of the mutants,
// then the details of every mutant that was not caught or survived.
func (r *Report) Write(w io.Writer) error {
	ew := &errWriter{w: w}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BASELINE (no mutant)\tRESULT\tTIME")
	for _, b := range r.Baselines {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", b.Selection, b.Status, dur(b.Took))
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "MUTANT\tWHERE\tRESULT\tFAILING TESTS\tTIME")
	count := make(map[Status]int)
	for _, m := range r.Mutants {
		count[m.Status]++
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.Mutant.Name, m.Where, m.Status, testList(m.Failed, 3), dur(m.Took))
	}
	tw.Flush()

	for _, b := range r.Baselines {
		if b.Status != BasePassed && b.Status != NotRun {
			fmt.Fprintf(ew, "\nbaseline %s: %s: %s\n", b.Selection, b.Status, b.Detail)
			if len(b.Failed) > 0 {
				fmt.Fprintf(ew, "    failing: %s\n", strings.Join(b.Failed, ", "))
			}
			r.logLine(ew, b.Log)
		}
	}
	for _, m := range r.Mutants {
		switch m.Status {
		case Caught, NoBase:
		case Survived:
			fmt.Fprintf(ew, "\n%s survived: %s passes with %s changed", m.Mutant.Name, m.Mutant.Selection(), m.Where)
			if m.Mutant.Why != "" {
				fmt.Fprintf(ew, "\n    (%s)", m.Mutant.Why)
			}
			fmt.Fprintln(ew)
		default:
			if m.Detail != "" {
				fmt.Fprintf(ew, "\n%s: %s: %s\n", m.Mutant.Name, m.Status, m.Detail)
			}
			r.logLine(ew, m.Log)
		}
	}
	var parts []string
	for _, s := range []Status{Caught, Survived, Broken, Stale, Timeout, NoBase, NotRun} {
		if count[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", count[s], s))
		}
	}
	fmt.Fprintf(ew, "\n%d mutants: %s; %v in all\n", len(r.Mutants), strings.Join(parts, ", "), r.Took.Round(time.Second))
	return ew.err
}

// testList returns the first max of names, and how many more there are.
func testList(names []string, max int) string {
	switch {
	case len(names) == 0:
		return "-"
	case len(names) <= max:
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s (+%d more)", strings.Join(names[:max], ", "), len(names)-max)
}

// logLine names a run's log, if it is kept.
func (r *Report) logLine(w io.Writer, log string) {
	switch {
	case log == "":
	case r.Kept:
		fmt.Fprintf(w, "    log: %s\n", log)
	default:
		fmt.Fprintf(w, "    (run with -keep to keep go test's output)\n")
	}
}

func dur(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return round(d).String()
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	if err == nil && n < len(p) {
		e.err = errors.New("short write")
	}
	return n, e.err
}
