// Command fakehosts runs a program as a job on fake hosts of this machine
// (package internal/cluster): each host has its own IPC namespace and
// /dev/shm, and mpirun starts the PEs through them.
//
//	go run ./internal/cluster/cmd/fakehosts -hosts 2 -per-host 2 [-x NAME=value]... PROGRAM [ARGS...]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/symheap/symheap/internal/cluster"
)

type vars []string

func (v *vars) String() string     { return strings.Join(*v, ",") }
func (v *vars) Set(s string) error { *v = append(*v, s); return nil }

func main() {
	hosts := flag.Int("hosts", 2, "fake hosts")
	per := flag.Int("per-host", 1, "PEs per host")
	timeout := flag.Duration("timeout", 5*time.Minute, "bound on the job")
	quiet := flag.Bool("q", false, "print only the elapsed time")
	var env, mpiArgs vars
	flag.Var(&env, "x", "NAME=value for every PE (repeatable)")
	flag.Var(&mpiArgs, "mpi", "extra mpirun argument (repeatable)")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: fakehosts [-hosts N] [-per-host M] [-x NAME=value]... PROGRAM [ARGS...]")
		os.Exit(2)
	}
	if err := cluster.Available(); err != nil {
		fmt.Fprintln(os.Stderr, "fakehosts:", err)
		os.Exit(1)
	}
	r := cluster.Run(context.Background(), cluster.Job{Hosts: *hosts, PerHost: *per, Argv: flag.Args(),
		Env: env, MPIArgs: mpiArgs, Timeout: *timeout})
	if !*quiet {
		os.Stdout.Write(r.Output)
	}
	fmt.Fprintf(os.Stderr, "fakehosts: %d hosts × %d PEs: %v\n", *hosts, *per, r.Elapsed.Round(time.Millisecond))
	if len(r.Leftovers) > 0 {
		fmt.Fprintln(os.Stderr, "fakehosts: segments left behind:", r.Leftovers)
		os.Exit(1)
	}
	if r.Err != nil {
		fmt.Fprintln(os.Stderr, "fakehosts:", r.Err)
		os.Exit(1)
	}
}
