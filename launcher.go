package symheap

// The launcher watch: a PE does not outlive its launcher.
//
// A PE's parent is its launcher, or the launcher's agent on the node:
// shrun, mpirun's daemon (orted, prted), srun's slurmstepd, Hydra's proxy.
// When that process dies without ending its PEs, they must not run on as
// orphans that hold the node's segment. A PE that finds its launcher gone
// leaves the job — the last PE out removes the segment, as in Close — and
// exits with launcherGoneStatus.
//
//  1. The launcher is the PE's parent as getppid() says when the watch
//     starts. When the parent dies the kernel reparents the PE (to init or
//     to a subreaper) and getppid() changes; the watch polls it every
//     launcherPoll: one system call, and no pidfd, which internal/unix
//     does not offer, is needed.
//  2. Package launch (shrun) starts every PE with a parent-death signal,
//     SIGKILL, so that programs that are not symheap PEs die with it; a PE
//     killed so cannot leave the segment. The launcher names itself in
//     SYMHEAP_LAUNCHER; a PE whose parent it is clears the signal and
//     starts the watch at once, from this package's init, and keeps it
//     for the life of the process (sticky): the process then ends with
//     its launcher as the signal would have made it, after leaving the
//     job if it is in one. The signal is an attribute of the thread that
//     ran execve, the main thread, and PR_SET_PDEATHSIG acts on the
//     calling thread only: package init runs on the main thread (the Go
//     runtime locks the main goroutine to it during initialisation). Where
//     initialisation runs elsewhere (a C program hosting the runtime, the
//     C library), Init clears the signal if it is called on the main
//     thread (shmem_init from main); otherwise the signal stays, the PE
//     dies with its launcher as before, and the next job's Init on the
//     node removes the segment it left (internal/segment.Sweep).
//     The order is free of races: the parent is found to be the launcher,
//     the signal is cleared, and the watch looks at the parent before it
//     first sleeps. A launcher that died before the clear has sent the
//     signal; one that dies after it is seen by the watch.
//  3. Under other launchers (and in a PE that a wrapper started under
//     shrun) the watch starts in Init, for a job that a launcher describes
//     (job.launched: not a lone PE, whose parent is a shell that may go
//     away under nohup, nor PEs whose job variables a script set by hand),
//     and stops in Close.
//  4. When the launcher is gone, the watch takes liveMu, so that an Init
//     in progress ends first (bounded by SYMHEAP_INIT_TIMEOUT: its peers
//     die too, or never come); then, if the PE is between Init and Close
//     (watch.pe), it leaves the job as GlobalExit's exit does (exitMu,
//     leaveNow), and the process exits. Close detaches the PE before it
//     unmaps the segment, so the watch never touches a closed PE.
//  5. shrun's PEs write their output into pipes to shrun. Once shrun is
//     gone, the first write to standard output or error raises SIGPIPE,
//     which ends a Go program at once, before its watch can leave the job.
//     While shrun lives the pipes never break (it reads or discards what
//     comes), so a sticky watch asks for SIGPIPE (signal.Notify): such a
//     write then fails with EPIPE instead, and the signal makes the watch
//     look at its parent at once.
//
//  6. Launchers other than shrun end a job with SIGTERM (mpirun, when a
//     PE failed or --timeout ran out; srun), then SIGKILL a few seconds
//     later, and nobody removes the node's segment after them. While the
//     watch of step 3 runs, a SIGTERM is taken as step 4 takes the
//     launcher's death: the PE leaves the job, the last one out removing
//     the segment, and exits with 128+SIGTERM, the status the signal
//     would have given. (A program that handles SIGTERM itself is ended
//     too; under shrun, which removes the segment itself, the signal
//     keeps its default action or the program's handler.)
//
// Lock order: liveMu, then watch.mu, then exitMu.

import (
	"fmt"
	"os"
	ossignal "os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/symheap/symheap/internal/config"
	"github.com/symheap/symheap/internal/segment"
	"github.com/symheap/symheap/internal/unix"
)

// launcherPoll is how often the watch looks at its parent: as often as a
// PE's heartbeat beats.
const launcherPoll = segment.HeartbeatPeriod

// launcherGoneStatus is the exit status of a PE whose launcher died: what
// a shell reports for a process that SIGHUP ended, as a terminal's hang-up
// ends the jobs it ran.
const launcherGoneStatus = 128 + int(syscall.SIGHUP)

// launcherWatch is the process's watch of its launcher.
type launcherWatch struct {
	mu     sync.Mutex // guards the fields below
	parent int        // the launcher's pid; 0 while no watch runs
	sticky bool       // started in place of the parent-death signal: lasts as long as the process
	pe     *PE        // the PE to take out of the job: set by Init, cleared by Close
	stop   chan struct{}
	done   chan struct{}
}

var watch launcherWatch

func init() {
	// Step 2, for PEs that package launch started.
	watch.mu.Lock()
	watch.adoptLaunched()
	watch.mu.Unlock()
}

// adoptLaunched starts the sticky watch in place of the parent-death
// signal if this process was started by package launch, whose pid
// SYMHEAP_LAUNCHER holds, and the calling thread is the main thread that
// carries the signal. It reports whether it did. w.mu is held, and no
// watch runs.
func (w *launcherWatch) adoptLaunched() bool {
	launcher, err := strconv.Atoi(os.Getenv(config.EnvLauncher))
	if err != nil || launcher <= 1 || os.Getppid() != launcher || unix.Gettid() != os.Getpid() {
		return false
	}
	// prctl(PR_SET_PDEATHSIG, 0): only the signal of this, the main,
	// thread was set (a thread's is cleared when it is created).
	if unix.ClearParentDeathSignal() != nil {
		return false
	}
	w.start(launcher, true)
	return true
}

// start runs the watch of parent. w.mu is held.
func (w *launcherWatch) start(parent int, sticky bool) {
	w.parent, w.sticky = parent, sticky
	w.stop, w.done = make(chan struct{}), make(chan struct{})
	sig := make(chan os.Signal, 1)
	if sticky {
		// Step 5. Never stopped: the watch lasts as long as the process.
		ossignal.Notify(sig, syscall.SIGPIPE)
	} else {
		// Step 6: the launcher's SIGTERM, until Close stops the watch.
		ossignal.Notify(sig, syscall.SIGTERM)
	}
	go w.run(parent, sig, w.stop, w.done)
}

// run polls the parent until it changes, then ends the process (gone);
// a SIGTERM ends it too (step 6). It returns when stopped, or when the
// watch ended before the parent.
func (w *launcherWatch) run(parent int, sig chan os.Signal, stop, done chan struct{}) {
	defer close(done)
	defer ossignal.Stop(sig)
	t := time.NewTicker(launcherPoll)
	defer t.Stop()
	for {
		if os.Getppid() != parent {
			w.gone(parent, "its launcher (pid %d) is gone", launcherGoneStatus)
			return
		}
		select {
		case <-stop:
			return
		case <-t.C:
		case s := <-sig:
			if s == syscall.SIGTERM {
				w.gone(parent, "its launcher (pid %d) ended the job (SIGTERM)", 128+int(syscall.SIGTERM))
				return
			}
		}
	}
}

// gone is step 4 (and 6): the launcher parent has died, or ended the job
// with SIGTERM (why says which, status is the exit status). It returns
// only if the watch was stopped meanwhile.
func (w *launcherWatch) gone(parent int, why string, status int) {
	liveMu.Lock()
	defer liveMu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.parent != parent {
		return // Close stopped the watch
	}
	what := fmt.Sprintf("process %d: "+why, os.Getpid(), parent)
	if pe := w.pe; pe != nil {
		what = fmt.Sprintf("PE %d of job %q: "+why+": left the job", pe.rank, pe.job.id, parent)
		exitMu.Lock() // never unlocked: the process ends
		pe.leaveNow()
		beforeExit()
	}
	// After leaving: a write to a pipe to the dead launcher may end us.
	fmt.Fprintf(os.Stderr, "symheap: %s, exiting with status %d\n", what, status)
	os.Exit(status)
}

// watchLauncher attaches the PE to the launcher watch (Init, step 3),
// starting the watch if none runs and a launcher started the job.
func (pe *PE) watchLauncher() {
	w := &watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.parent == 0 && !w.adoptLaunched() && pe.job.launched {
		if ppid := os.Getppid(); ppid > 1 {
			w.start(ppid, false)
		}
	}
	if w.parent != 0 {
		w.pe = pe
	}
}

// unwatchLauncher detaches the PE from the watch, and stops a watch that
// Init started (Close, before the segment is unmapped).
func (pe *PE) unwatchLauncher() {
	w := &watch
	w.mu.Lock()
	if w.pe == pe {
		w.pe = nil
	}
	var stop, done chan struct{}
	if w.parent != 0 && !w.sticky {
		stop, done = w.stop, w.done
		w.parent = 0
	}
	w.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}
