// Package launch starts the N processes ("PEs") of one symheap job on this
// node and supervises them as one group, in the manner of oklog/run: when
// the first PE fails, the others are interrupted, then killed on a timer,
// and every one of them is waited for. cmd/shrun is a thin command line
// around it and internal/petest uses it to run a test function on real PEs.
//
// # The job contract
//
// Every PE of a job gets, on top of the launcher's own environment:
//
//	SYMHEAP_JOB=<job id>    the same in every PE, unique per job ("j<launcher pid>-<12 hex>")
//	SYMHEAP_PE=<rank>       0 ≤ rank < N
//	SYMHEAP_NPES=<N>
//	SYMHEAP_LAUNCHER=<pid>  the launcher's pid (see Starting, step 2)
//	SHMEM_SYMMETRIC_SIZE    when Options.Heap is set
//	SYMHEAP_ALLOCATOR       when Options.Allocator is set
//	Options.Env             anything else the caller asks for
//
// Before these are added, the variables by which other launchers describe a
// job are removed from the inherited environment (OMPI_COMM_WORLD_*,
// PMI_*, PMIX_*, SLURM_PROCID, SLURM_NTASKS and a stale SYMHEAP_JOB,
// SYMHEAP_PE, SYMHEAP_NPES), so that a job launched from inside another
// job's PE never takes itself for the outer job. Precedence, lowest first:
// inherited environment, Options.Env, Options.Heap and Options.Allocator,
// the job identity.
//
// A job may run several programs (StartApps, mpirun's MPMD form "-n 2 ./a
// : -n 2 ./b"): each App's PEs take the next ranks, and every PE gets the
// same job id and N; Go and C programs may be mixed (docs/c.md).
//
// # Starting: the fork thread, Pdeathsig and process groups
//
//  1. Each program is resolved, once: an existing executable file is run as is; a
//     directory of Go files, a .go file or anything `go list` knows as a
//     main package is built with `go build` into a temporary directory that
//     is removed when the job ends; a bare name is looked up in PATH.
//  2. Each PE is started with SysProcAttr.Pdeathsig = SIGKILL, so that PEs
//     die with the launcher even when it is killed with SIGKILL. Linux
//     delivers the parent-death signal when the *thread* that forked the
//     child exits, not the process, and the Go runtime does end threads
//     (a goroutine that exits while locked to its thread takes the thread
//     with it). So all PEs of a group are forked by one goroutine that
//     locks itself to its OS thread and stays alive, parked on a channel,
//     until every PE of the group has been reaped (forker, below).
//     A PE killed that way cannot leave the job's segment, and neither
//     can the launcher remove it: so a symheap PE, seeing at start-up
//     that its parent is SYMHEAP_LAUNCHER, clears its parent-death signal
//     and watches its parent itself; when the launcher dies, the PE
//     leaves the job (the last one out removes the segment) and exits
//     (launcher.go in package symheap). Programs that are not symheap
//     PEs keep the signal and die at once.
//  3. Each PE is the leader of a process group of its own (Setpgid). The
//     terminal sends Ctrl-C's SIGINT to its foreground process group: if PEs
//     shared the launcher's group, each would get SIGINT twice, once from
//     the terminal and once forwarded by the launcher, and a PE that counts
//     interrupts (first: clean up; second: abort) would misbehave. With a
//     group per PE the launcher is the single source of signals for its
//     PEs: cmd/shrun catches SIGINT, SIGTERM, SIGHUP and SIGQUIT and
//     forwards each exactly once (Group.Forward). A signal for a PE is sent
//     to its whole process group, so a PE that is a shell script or wrapper
//     is interrupted together with what it started. PEs read their standard
//     input from /dev/null, so being outside the terminal's foreground group
//     does not stop them (unless the terminal has "stty tostop" set and they
//     write to it).
//
// # Supervision
//
//  1. For each PE a goroutine waits until it has ended without reaping it
//     (waitid WNOWAIT). While the PE is an unreaped zombie neither its pid nor
//     its process group id can be reused, so the goroutine marks it ended
//     under Group.mu, kills whatever is left of its process group (nothing
//     a PE starts outlives it), and only then reaps it. Every signal the
//     group sends is sent under Group.mu to PEs not yet marked ended: a
//     signal can never reach a process that merely inherited a PE's pid.
//  2. The supervisor collects the exits. The first PE that ends with a
//     non-zero status or by a signal is the job's failure (but a PE
//     already killed by a signal, or exiting from one, when a status exit
//     is the first collected comes first: its peers may report it gone and
//     exit before it is a zombie; Group.firstFailure); the supervisor
//     then sends the stop signal (SIGTERM, or Options.StopSignal) to every
//     PE still running and SIGKILL to those that remain after
//     Options.Grace (500 ms by default). A timeout
//     (Options.Timeout), the cancellation of the context given to Start and
//     Group.Stop stop the job in the same way.
//  3. Once a PE has exited, the supervisor also polls the state of the
//     others (/proc/PID/stat): when every PE left has been stopped (state
//     T: SIGSTOP) for the peer timeout (Options.PeerTimeout, the PEs'
//     SYMHEAP_PEER_TIMEOUT by default), no PE will ever resume them, and
//     a job would wait for ever. The supervisor kills them (SIGKILL: a
//     stopped process acts on no other signal) and ends the job with
//     ErrStalled naming them, status StatusStalled.
//  4. When the last PE has been reaped, the job's files in /dev/shm
//     (internal/segment.Name(uid, job) and names that extend it with "-" or
//     ".") are removed, the build directory is removed, and the fork thread
//     is released. Then Wait returns.
//
// # Output
//
// Each PE's standard output and standard error pass through a line buffer
// of their own, and whole lines are written to Options.Stdout and
// Options.Stderr under one mutex shared by the group, so lines of different
// PEs never interleave within a line. With Options.Tag every line is
// prefixed with "[pe N] ". A line that grows past 64 KiB before its newline
// comes is written in pieces, so a PE cannot make the launcher hold
// unbounded output.
package launch
