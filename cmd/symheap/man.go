package main

import (
	"github.com/symheap/symheap/internal/manpage"
)

// manPage is symheap's manual page, made from each command's flag set.
func manPage() *manpage.Page {
	info, _ := infoFlags()
	stat, _, _, _, _ := statFlags()
	clean, _ := cleanFlags()
	bench, _ := newBenchFlags(&benchOutput{})
	// The default is this machine's cache directory: say where it is instead.
	bench.Lookup("peers-dir").DefValue = "$SYMHEAP_PEERS_DIR, else ~/.cache/symheap/peers"
	return &manpage.Page{
		Name:    "symheap",
		Section: 1,
		Summary: "inspect, clean up and benchmark symheap jobs",
		Synopsis: []string{
			"symheap info [--json]",
			"symheap stat [--json] [--watch D] [--map FILE] [--wide] [JOB]",
			"symheap clean [-n]",
			"symheap bench [flags]",
			"symheap --version",
		},
		Description: []string{
			"symheap is the tool set around symheap jobs: the PEs started by shrun(1) (Go programs, and C OpenSHMEM programs built with symcc(1)) " +
				"that share a symmetric heap in one POSIX shared-memory segment per node.",
		},
		Sections: []manpage.Section{
			{Title: "info", Paragraphs: []string{"What this build and machine offer: allocator components with priorities and the one chosen, " +
				"every parameter with its value and source, memory-monitor support, same-address mapping, /dev/shm space, the memlock limit."},
				Options: manpage.Flags(info)},
			{Title: "stat", Paragraphs: []string{"A live job's per-PE heap use, largest free block, fragmentation, allocation counts, " +
				"puts, gets and atomics, messages, registration-cache figures and liveness. Without JOB, the list of this user's jobs."},
				Options: manpage.Flags(stat)},
			{Title: "clean", Paragraphs: []string{"Removes this user's /dev/shm segments whose PEs are all gone (proved by their locks). " +
				"Live jobs, starting jobs and other users' segments are never touched."},
				Options: manpage.Flags(clean)},
			{Title: "bench", Paragraphs: []string{"The benchmark suite (OSU-style columns): every latency next to the machine's floor and every bandwidth " +
				"next to memcpy, measured in the same run; with --peers, Open MPI's OpenSHMEM and MPI and C allocators alternately with symheap."},
				Options: manpage.Flags(bench)},
			{Title: "Exit status", Paragraphs: []string{"0 on success, 1 when a command fails (its message on stderr), 2 for bad usage."}},
		},
		SeeAlso: []string{"shrun(1)", "symcc(1)", "shmem_init(3)"},
	}
}
