package main

import (
	"flag"
	"fmt"

	"github.com/symheap/symheap/internal/inspect"
)

// cleanFlags defines clean's flags (the same set makes -h and the manual page).
func cleanFlags() (fs *flag.FlagSet, dry *bool) {
	fs = flag.NewFlagSet("clean", flag.ExitOnError)
	dry = fs.Bool("n", false, "only list what would be removed")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: symheap clean [-n]\n\nRemoves this user's /dev/shm segments whose PEs are all gone (proved by their locks).\nLive jobs, starting jobs and other users' segments are never touched.")
		fs.PrintDefaults()
	}
	return fs, dry
}

func runClean(args []string) error {
	fs, dry := cleanFlags()
	fs.Parse(args)
	if *dry {
		list, err := inspect.ListJobs()
		if err != nil {
			return err
		}
		n := 0
		for _, e := range list {
			if e.Stale {
				fmt.Printf("would remove %s (job %s, %s)\n", e.Path, e.Job, e.Reason)
				n++
			}
		}
		fmt.Printf("%d stale segment(s)\n", n)
		return nil
	}
	removed, err := inspect.CleanStale()
	if err != nil {
		return err
	}
	for _, e := range removed {
		fmt.Printf("removed %s (job %s, %d bytes, %s)\n", e.Path, e.Job, e.Size, e.Reason)
	}
	fmt.Printf("%d stale segment(s) removed\n", len(removed))
	return nil
}
