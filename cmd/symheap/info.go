package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/symheap/symheap/internal/inspect"
)

func runInfo(args []string) error {
	fs := flag.NewFlagSet("info", flag.ExitOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	fs.Parse(args)
	rep := inspect.Describe()
	rep.SameAddress = probeSameAddress()
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
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
	if rep.ParamError != "" {
		fmt.Printf("\nparameter error: %s\n", rep.ParamError)
	}
	fmt.Println()
	fmt.Printf("same-address mapping: %s\n", rep.SameAddress)
	fmt.Printf("memory monitor:       %s\n", rep.MemoryMonitor)
	fmt.Printf("/dev/shm:             %s total, %s free\n", human(rep.ShmTotal), human(rep.ShmFree))
	fmt.Printf("memlock limit:        %s\n", rep.Memlock)
	fmt.Printf("process_vm_readv:     %s\n", rep.KernelCopy)
	fmt.Printf("multi-node:           %s\n", multiNode())
	return nil
}
