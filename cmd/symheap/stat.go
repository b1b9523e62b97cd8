package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/symheap/symheap/internal/inspect"
	"github.com/symheap/symheap/internal/segment"
	"golang.org/x/sys/unix"
)

// statFlags defines stat's flags (the same set makes -h and the manual page).
func statFlags() (fs *flag.FlagSet, asJSON *bool, watch *time.Duration, mapFile *string, wide *bool) {
	fs = flag.NewFlagSet("stat", flag.ExitOnError)
	asJSON = fs.Bool("json", false, "print JSON")
	watch = fs.Duration("watch", 0, "refresh every `interval` (e.g. 1s) until the job ends or you interrupt")
	mapFile = fs.String("map", "", "write a heap map of every PE's heaps to `file` (.png or .svg)")
	wide = fs.Bool("wide", false, "show every column (the default table fits 100 columns)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: symheap stat [flags] [JOB]\n\nWithout JOB, lists this user's jobs. With JOB (a job id or segment name),\nattaches read-only and shows each PE's figures.")
		fs.PrintDefaults()
	}
	return fs, asJSON, watch, mapFile, wide
}

func runStat(args []string) error {
	fs, asJSON, watch, mapFile, wide := statFlags()
	fs.Parse(reorder(args))
	if fs.NArg() == 0 {
		return listJobs(*asJSON)
	}
	if fs.NArg() > 1 {
		fs.Usage()
		os.Exit(2)
	}
	v, err := inspect.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer v.Close()
	// A terminal's screen is cleared before each frame; a pipe or a file
	// gets plain snapshots, each under a line with its time.
	tty := isTerminal(os.Stdout)
	var prev *inspect.JobInfo
	var prevAt time.Time
	for {
		ji := v.Info()
		now := time.Now()
		if *asJSON {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(ji); err != nil {
				return err
			}
		} else {
			if *watch > 0 && tty {
				fmt.Print("\033[H\033[2J")
			} else if *watch > 0 {
				fmt.Printf("--- %s, every %v ---\n", now.Format(time.TimeOnly), *watch)
			}
			var rates *rateBase
			if prev != nil {
				rates = &rateBase{prev, now.Sub(prevAt)}
			}
			printJob(os.Stdout, ji, rates, *wide)
		}
		prev, prevAt = &ji, now
		if *mapFile != "" {
			if err := writeHeapMap(v, ji, *mapFile); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "heap map written to %s\n", *mapFile)
		}
		if *watch <= 0 {
			return nil
		}
		if ended(ji) {
			// Nothing will move any more: stop, and let go of the
			// segment (the last PE out has removed its name).
			if !*asJSON {
				fmt.Printf("job %s has ended: every PE has left\n", ji.Job)
			}
			return nil
		}
		time.Sleep(*watch)
	}
}

// ended reports whether no PE of the job is attached or starting: each
// has closed or died.
func ended(ji inspect.JobInfo) bool {
	for _, p := range ji.PEs {
		if p.State == "attached" || p.State == "not started" {
			return false
		}
	}
	return len(ji.PEs) > 0
}

// reorder moves flags before positional arguments, so that
// "stat JOB --json" works as well as "stat --json JOB".
func reorder(args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") {
			flags = append(flags, a)
			if !strings.Contains(a, "=") && (a == "--watch" || a == "-watch" || a == "--map" || a == "-map") && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		pos = append(pos, a)
	}
	return append(flags, pos...)
}

func listJobs(asJSON bool) error {
	list, err := inspect.ListJobs()
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	if len(list) == 0 {
		fmt.Println("no symheap jobs of this user")
		return nil
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "JOB\tPROGRAM\tPEs\tALIVE\tSIZE\tCREATED\tSTATE")
	for _, e := range list {
		state := "live"
		if e.Stale {
			state = "stale (symheap clean removes it)"
		} else if len(e.Alive) == 0 {
			state = e.Reason
		}
		prog := "-"
		for _, pid := range e.Pids {
			if c := commOf(pid); c != "" {
				prog = c
				break
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", e.Job, prog, e.NPEs, len(e.Alive), human(uint64(e.Size)),
			e.Created.Format(time.DateTime), state)
	}
	return w.Flush()
}

// rateBase is the frame before, for the rates per second of --watch.
type rateBase struct {
	ji      *inspect.JobInfo
	elapsed time.Duration
}

// rate returns the change of a count since the frame before, per second
// ("-" without one, or for a PE it did not show).
func (r *rateBase) rate(rank int, count func(inspect.PEInfo) uint64, now inspect.PEInfo) string {
	if r == nil || rank >= len(r.ji.PEs) || r.elapsed <= 0 {
		return "-"
	}
	before := count(r.ji.PEs[rank])
	if count(now) < before {
		return "-"
	}
	return compact(float64(count(now)-before)/r.elapsed.Seconds()) + "/s"
}

// The count columns of the default table, whose rates --watch shows.
var (
	rmaOps = func(p inspect.PEInfo) uint64 { return p.Puts + p.Gets + p.Atomics }
	msgs   = func(p inspect.PEInfo) uint64 { return p.MsgEager + p.MsgSingleCopy + p.MsgKernel + p.MsgBounce }
	allocs = func(p inspect.PEInfo) uint64 { return p.SymAllocs + p.SymFrees }
)

// printJob prints a job's figures: a table that fits 100 columns (its
// counts with their rates per second when rates has the frame before),
// or every column with wide.
func printJob(out io.Writer, ji inspect.JobInfo, rates *rateBase, wide bool) {
	mode := "offset translation"
	if ji.SameAddress {
		mode = "same address"
	}
	where := ""
	if ji.Nodes > 1 {
		where = fmt.Sprintf(" on %d nodes (this is node %d's segment; the other nodes' PEs are shown there)", ji.Nodes, ji.Node)
	}
	fmt.Fprintf(out, "job %s (%s): %d PEs%s, allocator %s, %s, created %s\n", ji.Job, programOf(ji), ji.NPEs, where, ji.Allocator, mode, ji.Created.Format(time.DateTime))
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	if wide {
		fmt.Fprintln(w, "PE\tPID\tSTATE\tHEAP\tIN USE\tLARGEST FREE\tFRAG\tALLOCS\tFREES\tPUTS\tGETS\tATOMICS\tSHARED USE\tMSG EAGER\tSINGLE\tKERNEL\tBOUNCE\tRC HIT\tRC MISS\tRC INVAL\t")
		for _, p := range ji.PEs {
			if p.Node != ji.Node {
				fmt.Fprintf(w, "%d\t-\t%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t\n", p.Rank, p.State)
				continue
			}
			fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%s\t%s\t%.1f%%\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n",
				p.Rank, p.Pid, p.State, human(p.Heap.Size), human(p.Heap.InUse), human(p.Heap.LargestFree),
				100*p.Heap.Fragmentation(), p.SymAllocs, p.SymFrees, p.Puts, p.Gets, p.Atomics, human(p.Shared.InUse),
				p.MsgEager, p.MsgSingleCopy, p.MsgKernel, p.MsgBounce,
				p.RCache.Hits, p.RCache.Misses, p.RCache.Invalidations)
		}
		w.Flush()
		printCaches(out, ji)
		return
	}
	// PE 3, STATE 8, HEAP 15, FRAG 6, ALLOCS and RMA OPS and MSGS 6 each
	// with a rate of 8, RC HIT% 7, and two spaces between: under 100.
	fmt.Fprintln(w, "PE\tSTATE\tHEAP USE\tFRAG\tALLOCS\t/s\tRMA OPS\t/s\tMSGS\t/s\tRC HIT\t")
	for _, p := range ji.PEs {
		if p.Node != ji.Node {
			fmt.Fprintf(w, "%d\t%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\t\n", p.Rank, p.State)
			continue
		}
		hit := "-"
		if n := p.RCache.Hits + p.RCache.Misses; n > 0 {
			hit = fmt.Sprintf("%.0f%%", 100*float64(p.RCache.Hits)/float64(n))
		}
		fmt.Fprintf(w, "%d\t%s\t%s of %s\t%.1f%%\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			p.Rank, p.State, human(p.Heap.InUse), human(p.Heap.Size), 100*p.Heap.Fragmentation(),
			compact(float64(allocs(p))), rates.rate(p.Rank, allocs, p),
			compact(float64(rmaOps(p))), rates.rate(p.Rank, rmaOps, p),
			compact(float64(msgs(p))), rates.rate(p.Rank, msgs, p), hit)
	}
	w.Flush()
	printCaches(out, ji)
}

// printCaches prints, under a job's table, each PE's shared malloc
// figures when any PE has one (its arena, its fallbacks to the system
// allocator), its registration-cache figures (the PE's cache and its
// transport's to other nodes, summed) when any PE has some, and what each PE's memory monitor proved it sees
// when any PE ran its self-test.
func printCaches(out io.Writer, ji inspect.JobInfo) {
	var rc, mon, cm bool
	for _, p := range ji.PEs {
		rc = rc || p.RCache != (inspect.RCacheFigures{})
		mon = mon || p.Monitor != ""
		cm = cm || p.CMallocArena != 0
	}
	if cm {
		fmt.Fprintln(out, "\nshared malloc (C programs' malloc in the local shared heap):")
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(w, "PE\tARENA\tSYSTEM ALLOCATOR (ARENA FULL)\t")
		for _, p := range ji.PEs {
			if p.Node == ji.Node && p.CMallocArena != 0 {
				fmt.Fprintf(w, "%d\t%s\t%d\t\n", p.Rank, human(p.CMallocArena), p.CMallocFallbacks)
			}
		}
		w.Flush()
	}
	if rc {
		fmt.Fprintln(out, "\nregistration cache:")
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(w, "PE\tHITS\tMISSES\tREGISTERED\tDEREGISTERED\tEVICTED\tINVALIDATED\tSTALE (GC)\tBYTES REGISTERED\t")
		for _, p := range ji.PEs {
			if p.Node != ji.Node {
				continue
			}
			c := p.RCache
			fmt.Fprintf(w, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", p.Rank, c.Hits, c.Misses, c.Registrations,
				c.Deregistrations, c.Evictions, c.Invalidations, c.Stale, human(c.BytesRegistered))
		}
		w.Flush()
	}
	if mon {
		fmt.Fprintln(out, "\nmemory monitor (self-test at Init):")
		for _, p := range ji.PEs {
			if p.Node == ji.Node && p.Monitor != "" {
				fmt.Fprintf(out, "  PE %d: %s\n", p.Rank, p.Monitor)
			}
		}
	}
}

// compact prints a count in at most 5 characters: 999, 12.3k, 4.5M, 1.2G.
func compact(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.1fG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// programOf names the job's program: the command name of its first PE
// whose process this node still has, else "program gone".
func programOf(ji inspect.JobInfo) string {
	for _, p := range ji.PEs {
		if p.Node == ji.Node {
			if c := commOf(p.Pid); c != "" {
				return c
			}
		}
	}
	return "program gone"
}

// commOf returns the command name of process pid, or "" if there is none.
func commOf(pid int) string {
	if pid <= 0 {
		return ""
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// human prints a byte count as segment.FormatSize does: its largest
// binary unit, whole when exact ("256M"), else to a tenth ("1.5K").
func human(n uint64) string { return segment.FormatSize(n) }
