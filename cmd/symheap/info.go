package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/symheap/symheap/internal/config"
	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/inspect"
)

// infoFlags defines info's flags (the same set makes -h and the manual page).
func infoFlags() (fs *flag.FlagSet, asJSON *bool) {
	fs = flag.NewFlagSet("info", flag.ExitOnError)
	asJSON = fs.Bool("json", false, "print JSON")
	return fs, asJSON
}

func runInfo(args []string) error {
	fs, asJSON := infoFlags()
	fs.Parse(args)
	rep := inspect.Describe()
	refused := refusedParams(rep)
	if rep.ParamError != "" {
		// What Init would refuse comes first, then the report, then a
		// non-zero exit.
		fmt.Fprintf(os.Stderr, "%s\n\n", rep.ParamError) // each line starts "symheap: VARIABLE"
		// The probe's PEs would inherit the setting and fail with it.
		rep.SameAddress = "not probed: a setting is refused (see the error)"
	} else {
		rep.SameAddress = probeSameAddress()
		rep.CHooks = probeCHooks()
	}
	badParams := func() error {
		if rep.ParamError == "" {
			return nil
		}
		return fmt.Errorf("info: %s refused (see the first lines): Init would fail with %s: %w",
			strings.Join(refused, ", "), them(len(refused)), errs.ErrBadConfig)
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
		return badParams()
	}
	fmt.Printf("symheap %s (%s)\n\n", rep.Version, rep.GoVersion)
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ALLOCATOR\tPRIORITY\tPROBE\tCHOSEN")
	for _, c := range rep.Components {
		chosen := ""
		if c.Chosen {
			chosen = "yes: " + rep.ChosenReason
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", c.Name, c.Priority, c.Probe, chosen)
	}
	w.Flush()
	fmt.Println()
	w = tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "PARAMETER\tVALUE\tSOURCE")
	for _, p := range rep.Params {
		fmt.Fprintf(w, "%s\t%s\t%s\n", p.Name, p.Value, p.Source)
	}
	w.Flush()
	fmt.Println()
	fmt.Printf("same-address mapping: %s\n", rep.SameAddress)
	fmt.Printf("memory monitor:       %s\n", rep.MemoryMonitor)
	fmt.Printf("C library hooks:      %s\n", rep.CHooks)
	fmt.Printf("/dev/shm:             %s total, %s free\n", human(rep.ShmTotal), human(rep.ShmFree))
	fmt.Printf("memlock limit:        %s\n", rep.Memlock)
	fmt.Printf("process_vm_readv:     %s\n", rep.KernelCopy)
	fmt.Printf("multi-node:           %s\n", multiNode())
	return badParams()
}

// refusedParams names the settings of the report that Init would refuse
// (config.Resolve lists them with config.SourceMalformed); when the error
// comes from a Config field, which info never sets, or names none, it
// says "a setting".
func refusedParams(rep inspect.Report) []string {
	var names []string
	for _, p := range rep.Params {
		if p.Source == config.SourceMalformed {
			names = append(names, fmt.Sprintf("%s=%q", p.Name, p.Value))
		}
	}
	if len(names) == 0 {
		names = []string{"a setting"}
	}
	return names
}

func them(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}
