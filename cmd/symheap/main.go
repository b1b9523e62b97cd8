// Command symheap is the tool set around symheap jobs:
//
//	symheap info [--json]                 what this build and machine offer
//	symheap stat [--json] [--watch D] [--map FILE.png] [JOB]
//	                                      a live job's per-PE figures; no JOB lists jobs
//	symheap clean                         remove this user's segments whose PEs are all gone
//	symheap bench [flags]                 the benchmark suite (symheap bench -h)
//	symheap version                       symheap's version (also --version)
//
// symheap --man prints its manual page, made from the commands' flags.
package main

import (
	"fmt"
	"os"

	"github.com/symheap/symheap/internal/config"
)

const usage = `usage: symheap <command> [flags]

commands:
  info    allocator components, parameters and their sources, memory-monitor
          support, same-address mapping, /dev/shm and memlock limits
  stat    a live job's per-PE heap use, messages and cache figures;
          without a JOB, the list of this user's jobs
  clean   remove this user's segments whose PEs are all gone
  bench   the benchmark suite, optionally beside Open MPI and C allocators
  version symheap's version (also --version)

Run 'symheap <command> -h' for the command's flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "info":
		err = runInfo(args)
	case "stat":
		err = runStat(args)
	case "clean":
		err = runClean(args)
	case "bench":
		err = runBench(args)
	case "help", "-h", "--help":
		fmt.Print(usage)
		return
	case "version", "-version", "--version":
		fmt.Printf("symheap %s\n", config.Version)
		return
	case "--man":
		err = manPage().Write(os.Stdout)
	default:
		if handled, herr := runHidden(cmd, args); handled {
			err = herr
			break
		}
		fmt.Fprintf(os.Stderr, "symheap: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "symheap:", err)
		os.Exit(1)
	}
}
