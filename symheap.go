// Package symheap gives the processes ("PEs") of a parallel job on one node
// a shared, symmetric heap: one POSIX shared-memory segment mapped at the
// same address in every PE, carved into one partition per PE, with
// OpenSHMEM-style one-sided access, atomics and collectives, a local shared
// heap whose blocks any PE may use and free, and single-copy message
// passing on top of it.
//
// The job may also span nodes: the PEs of each node share that node's
// segment and reach the other nodes' PEs through a transport (TCP in every
// build, joined by a rendezvous at SYMHEAP_BOOT; UCX under a PMIx launcher
// when built with the tag ucx; far.go, far_job.go, internal/far, transport.go); Ptr then
// returns nil for a PE on another node, and Node, Nodes and NodePEs tell
// where each PE runs.
//
// A program calls Init, which joins the job its launcher describes (shrun,
// Open MPI, PMI or Slurm; a lone PE when none), allocates symmetric objects
// collectively with Malloc, reads and writes other PEs' copies with Put, Get
// and the atomics, and leaves with Close:
//
//	pe, err := symheap.Init(symheap.Config{})
//	if err != nil { ... }
//	defer pe.Close()
//	x, _ := symheap.Malloc[int64](pe, 1)
//	symheap.AtomicAdd(pe, &x[0], 1, 0) // add 1 to PE 0's x
//	pe.Barrier()
//
// Shared memory holds no Go pointers, only offsets and plain data, so the
// element types of symmetric and shared allocations must hold no pointers
// (ErrPointerType). Correctness never depends on the same-address mapping:
// every remote address is computed as the target's partition base plus an
// offset; the same address only makes it possible to hand a pointer to
// another PE as it is (SameAddress tells whether the job has it).
//
// # Lifetimes
//
// The slices this package hands out into the segment — from Malloc,
// Calloc, Align, MallocWithHints, Realloc, Ptr, Reach, SharedAlloc and
// SharedAt — are not Go memory: the garbage collector neither keeps their
// blocks alive nor knows when they go. Such a slice, and every slice taken
// from it, is valid until its block is freed (Free, or Realloc of the
// slice passed to it, for a symmetric block; SharedFree, by any PE, for a
// block of a local shared heap) or this PE closes (Close), and dangles
// after: using it then is a use-after-free. After a free its bytes may
// already belong to another allocation or hold the allocator's own links;
// after Close the segment is unmapped, and an access faults or reaches
// whatever has been mapped there since.
//
// # Bounded waits
//
// Every blocking call has a twin that a context.Context bounds: InitCtx,
// BarrierCtx, Team.SyncCtx, WaitUntilCtx, RecvCtx, Request.WaitCtx and
// SetLockCtx. The context's end is seen within one sleep slice (50 ms),
// through the liveness check every wait runs between its sleeps, and the
// error wraps ctx.Err(). What a call leaves when it ends that way:
// WaitUntilCtx changes nothing; RecvCtx takes no message (unless a large
// one was already being copied in, which it then receives to the end);
// Request.WaitCtx leaves the request pending; SetLockCtx leaves the lock
// not held by this PE and usable by the others; InitCtx leaves nothing
// behind. BarrierCtx and SyncCtx cannot take an arrival back: this PE's
// collective calls are broken for good (its later ones, Free included,
// fail at once, wrapping ctx.Err() and ErrDiverged), the other PEs'
// collectives that need it fail with ErrDiverged naming the cancelled
// call instead of hanging, and Close still releases the job. ctx.go has
// the details; across nodes only WaitUntilCtx and InitCtx are bounded
// (the others return ErrNotSupported there).
//
// # Layers
//
// This package is the API: thin functions over one receiver per layer.
// The layers of this package are the symmetric heap and its allocation
// records (symHeap, symalloc.go), one-sided access, atomics and waits
// (rmaLayer, rma.go and wait.go), and the local shared heap (sharedHeap,
// shared.go); PE holds them and the core they share. The layers below
// it are packages of their own, each importing only packages listed
// after it:
//
//	symheap             the API
//	internal/far        the multi-node layer: barrier, allocation records,
//	                    teams, collectives and messages across nodes, over
//	                    a transport (far_job.go is its API here)
//	internal/msg        message passing: rings, fast boxes, single copy,
//	                    bounce buffers (msg.go is its API here)
//	internal/team       teams and collectives: Split, Sync, PE.Barrier's
//	                    full barrier, Broadcast, Reduce, FCollect, AllToAll
//	                    (team.go and collective.go are its API here)
//	internal/tcp        the pure-Go transport and rendezvous bootstrap
//	internal/ucx,       UCX's UCP and PMIx as a transport and a bootstrap
//	internal/pmix       (cgo), in the ucx build only
//	internal/transport  the seam where a transport to other nodes plugs in:
//	                    Remote, Net (one-sided and tagged), Bootstrap, and
//	                    their registries
//	internal/cabi       what the C library (capi, libsymheap) reads of a PE
//	                    once at shmem_init, and the runtime steps it asks for
//	internal/core       the segment as the runtime sees it: layout, typed
//	                    offsets, the one address translator, control-block areas
//	internal/segment    the shared segment: create or attach, same-address
//	                    placement, liveness, stale-segment removal
//	rcache, rcache/pin  the registration cache
//	internal/release    the job's release log: every release reaches every PE
//	memhook             the memory-release monitor
//	alloc, alloc/...    allocators over offsets in a region, chosen by priority
//	internal/shmsync    futex waits and wake-ups on words in shared memory
//	internal/memcopy    large copies at memcpy speed: REP MOVSB where the
//	                    runtime's memmove would stream (Put, Get, messages)
//	internal/config     settings and their sources, sizes, the job's variables
//	internal/errs       the sentinel errors
//	internal/unix       the only importer of golang.org/x/sys/unix
//
// The tools sit beside it. cmd/symheap reads live jobs through
// internal/inspect, which uses core, segment, alloc, memhook and config,
// never this package; cmd/shrun starts jobs through package launch;
// internal/cluster runs jobs on fake hosts of one machine under mpirun,
// for the ucx build's tests.
package symheap

import (
	"errors"
	"fmt"
	"os"
	ossignal "os/signal"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/symheap/symheap/internal/cabi"
	"github.com/symheap/symheap/internal/calls"
	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/far"
	"github.com/symheap/symheap/internal/team"
	"github.com/symheap/symheap/internal/transport"

	"github.com/symheap/symheap/alloc"
	_ "github.com/symheap/symheap/alloc/all" // the built-in allocator components
	"github.com/symheap/symheap/internal/segment"
	"github.com/symheap/symheap/internal/shmsync"
	"github.com/symheap/symheap/internal/unix"
)

// Config configures Init. Its zero value takes every setting from the
// environment, or the defaults.
type Config struct {
	HeapSize   int64  // symmetric heap bytes per PE; 0: env SHMEM_SYMMETRIC_SIZE, else 256 MiB
	SharedSize int64  // local shared heap bytes per PE; 0: env SYMHEAP_SHARED_SIZE, else 64 MiB
	Allocator  string // memheap component for the symmetric heap; "": env SYMHEAP_ALLOCATOR, else highest priority
	OffsetMode bool   // do not try the same-address mapping (also env SYMHEAP_OFFSET_MODE=1)
	// Protect maps other PEs' symmetric heaps read-only, so that only the
	// API (Put, atomics, collectives) writes to them and a stray store
	// faults (also env SYMHEAP_PROTECT=1). Ptr then gives read-only views.
	Protect bool
}

// PE is this process's membership of a job.
type PE struct {
	seg        *segment.Segment
	rank, npes int
	set        settings
	job        job
	component  alloc.Component
	reason     string // why the component was chosen

	mu      callLock // serialises this PE's collective calls and its heap
	closed  atomic.Bool
	exiting atomic.Bool // this PE called GlobalExit: its watcher leaves the exit to it
	rma     rmaLayer    // one-sided access and waits (rma.go)
	ctl     []*control  // every PE's control block

	// The job's Go and C PEs, and this PE's copy of the C library's
	// block where there is a C PE (cabi_unsafe.go, "Go and C PEs in one
	// job"): set by Init, read-only after.
	goPEs, cPEs int
	cBlock      core.Ptr
	sp          core.Space  // the segment as this PE sees it: layout, addresses (a value: the fast paths' first load)
	stats       *core.Stats // this PE's counters, which symheap stat shows

	watchDone chan struct{}
	ext       peExt // state of the API layers built on the core

	// calls publishes this PE's collective calls and checks, in every
	// wait, that the other PEs make the same ones (internal/calls).
	calls *calls.Tracker

	topo topology   // where every PE runs (far.go)
	far  *far.Layer // PEs on other nodes (internal/far, far_job.go); nil when the job is one node's

	// monitorRestore puts back the runtime monitor thread's timer slack
	// (quietMonitor); nil when Init left it alone.
	monitorRestore func() error
}

var (
	liveMu sync.Mutex
	live   *PE // the process's PE, between Init and Close
)

// Init joins the job the environment describes, or starts a job of one PE.
// It returns once every PE of the job has joined.
func Init(cfg Config) (*PE, error) { return initPE(cfg, nil) }

// initPE is Init; stop, if not nil, can end its waits for the other PEs of
// this node (InitCtx, ctx.go).
func initPE(cfg Config, stop func() error) (*PE, error) {
	liveMu.Lock()
	defer liveMu.Unlock()
	if live != nil {
		return nil, fmt.Errorf("symheap: Init called twice: this process is already PE %d of job %q: %w (Close it first)", live.rank, live.job.id, ErrBadArg)
	}
	set, err := resolve(cfg, getenv)
	if err != nil {
		return nil, err
	}
	j, err := jobFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	topo, farL, err := discover(&j, set)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*PE, error) { // before the segment is open
		if farL != nil {
			farL.Close(false, nil)
		}
		return nil, err
	}
	if stop != nil {
		if err := stop(); err != nil {
			return fail(fmt.Errorf("symheap: Init: %w (nothing was made)", err))
		}
	}
	shmsync.SetPEs(len(topo.local)) // the PEs that run on this node
	if probing(len(topo.local)) {
		shmsync.DeferLine() // measured between the PEs after the barrier (probe.go)
	}
	home := j.rank // this PE's index among the node's PEs
	for i, r := range topo.local {
		if r == j.rank {
			home = i
			shmsync.SetHome(i) // the core this PE moves to if it finds its peer on its own ("Placement")
		}
	}
	comp, reason, err := alloc.Select(set.allocator, set.heap)
	if err != nil {
		return fail(fmt.Errorf("symheap: choosing the allocator: %w", err))
	}
	var local, nodeOf []int // nil: every PE attaches, on this node
	if farL != nil {
		local, nodeOf = topo.local, topo.nodeOf
	}
	seg, err := segment.Open(segment.Params{
		Job: j.id, Rank: j.rank, NPEs: j.npes,
		HeapSize: set.heap, SharedSize: set.shared, CBSize: core.CBSize(j.npes), CBSum: core.CBSum(j.npes), FormatsSum: formatsSum(),
		Allocator: comp.Name, ForceOffset: set.offsetMode, InitTimeout: set.initTimeout,
		PeerTimeout: set.peerTimeout, Protect: set.protect, Local: local, NodeOf: nodeOf, Stop: stop,
	})
	if err != nil {
		return fail(fmt.Errorf("symheap: Init: %w", err))
	}
	if a := seg.Allocator(); a != comp.Name {
		seg.Close()
		return fail(fmt.Errorf("symheap: the job uses allocator %q, this PE would choose %q: %w (set SYMHEAP_ALLOCATOR alike on every PE)", a, comp.Name, ErrBadConfig))
	}
	pe := &PE{seg: seg, rank: j.rank, npes: j.npes, set: set, job: j, component: comp, reason: reason,
		sp: *core.NewSpace(seg, j.rank, j.npes), watchDone: make(chan struct{}), topo: topo, far: farL}
	pe.stats = pe.sp.Stats(j.rank)
	pe.ctl = make([]*control, j.npes)
	for i := range pe.ctl {
		pe.ctl[i] = core.View[control](seg.CB(i))
	}
	seg.BeforeLoss(pe.awaitNodeExit)
	pe.rma.ctl, pe.rma.stats, pe.rma.rank, pe.rma.npes = pe.ctl, pe.stats, pe.rank, pe.npes
	pe.calls = calls.NewTracker(calls.Areas(&pe.sp, nil), pe.rank, pe.callDetail)
	pe.ext.sym = symHeap{sp: &pe.sp, ctl: pe.ctl, stats: pe.stats, rma: &pe.rma, teams: &pe.ext.teams, calls: pe.calls, lost: pe.collectiveLost}
	pe.ext.sym.nums = &pe.ext.sym.own
	pe.ext.sym.Retune()
	pe.ext.sym.farRecords, pe.ext.sym.farLost = pe.far.Records, pe.far.LeaderLost
	// The monitor and the release log first: the heaps report their
	// releases to the log from the first call on.
	if err := pe.initHooks(); err != nil {
		seg.Close()
		return fail(err)
	}
	if err := pe.formatHeaps(); err != nil {
		pe.closeHooks()
		seg.Close()
		return fail(err)
	}
	if err := pe.initExt(); err != nil {
		pe.closeHooks()
		seg.Close()
		return fail(err)
	}
	go pe.watchExit()
	pe.ext.teams.Init((*teamRuntime)(pe), team.Config{Space: &pe.sp, Closed: &pe.closed, Calls: pe.calls, Home: home, NodePEs: len(topo.local)})
	// PEs on other nodes: UCX, and the bootstrap's fence, which is the
	// cross-node part of the barrier below.
	if err := startFar(pe); err != nil {
		closeFar(pe, false, nil)
		pe.stopWatch()
		seg.Close()
		return nil, err
	}
	pe.publishLang()
	// Nobody touches another PE's heap before that PE formatted it.
	barrier := seg.Barrier
	if stop != nil {
		barrier = func() error { return seg.BarrierCheck(stop) }
	}
	if err := barrier(); err != nil {
		closeFar(pe, false, nil)
		pe.stopWatch()
		seg.Close()
		return nil, fmt.Errorf("symheap: Init: %w", err)
	}
	if err := pe.initLangs(); err != nil {
		// Every PE of the job fails alike (the same counts, heap and
		// allocation): Close is collective.
		pe.Close()
		return nil, err
	}
	pe.probeLine()
	pe.quietMonitor()
	pe.watchLauncher() // leave the job if the launcher dies (launcher.go)
	live = pe
	return pe, nil
}

// quietMonitor gives the Go runtime's monitor thread its timer slack
// (SYMHEAP_MONITOR_SLACK) when this node's PEs leave no core to spare,
// where its wake-ups take a core from a PE (shmsync.QuietMonitor). It is
// best effort: without CAP_SYS_NICE, or if the thread is not found,
// nothing changes.
func (pe *PE) quietMonitor() {
	if pe.set.monitorSlack <= 0 || len(pe.topo.local) < runtime.NumCPU() || cabi.Hosted {
		return
	}
	if restore, err := shmsync.QuietMonitor(pe.set.monitorSlack); err == nil {
		pe.monitorRestore = restore
	}
}

// formatHeaps writes fresh allocator metadata into this PE's heaps.
func (pe *PE) formatHeaps() error {
	if pe.sp.Lay.HeapSize > 0 {
		a, err := pe.component.Format(pe.seg.Heap(pe.rank))
		if err != nil {
			return fmt.Errorf("symheap: format symmetric heap with %s: %w", pe.component.Name, err)
		}
		pe.ext.sym.heap = alloc.Report(a, pe.ext.hooks.log.Sink(pe.seg.HeapOff(pe.rank)))
	}
	pe.ext.shared = sharedHeap{sp: &pe.sp, rank: pe.rank, component: pe.component, log: pe.ext.hooks.log,
		alive: pe.seg.Alive, stats: pe.stats, small: pe.set.sharedSmall}
	return pe.ext.shared.format()
}

// Close leaves the job. It is collective: it waits for every PE to reach
// Close, then releases this PE's share of the segment; the last PE out
// removes it. A second call does nothing and returns nil.
func (pe *PE) Close() error {
	if pe == nil || !pe.closed.CompareAndSwap(false, true) {
		return nil
	}
	pe.mu.Lock()
	defer pe.mu.Unlock()
	// The other PEs' waits see that this one is in Close (internal/calls).
	pe.calls.SetClose(calls.Close)
	var err error
	if broken := pe.calls.Broken(); broken != nil {
		// The PEs no longer make the same calls: none would come to a
		// barrier; leave at once.
		err = broken
		pe.rma.quietLocal()
		if pe.far != nil {
			err = closeFar(pe, false, broken)
		}
	} else if pe.far != nil {
		// A job that lost a PE completes nothing more across nodes
		// (closeFar); otherwise every PE of every node has stopped
		// reaching into this one's memory before it goes.
		lost := pe.peerLost()
		if lost == nil {
			pe.rma.quietAll()
		} else {
			pe.rma.quietLocal()
		}
		err = closeFar(pe, true, lost)
	} else {
		pe.rma.quietAll()
		err = pe.seg.BarrierCheck(func() error { return pe.calls.Check(nil) })
	}
	if err != nil {
		err = fmt.Errorf("symheap: Close: %w", err)
	}
	pe.calls.SetClose(calls.Left)
	pe.ext.tickets.end(&pe.rma) // no PE waits for a lock any more (lock.go, Abandoned tickets)
	pe.closeExt()
	pe.stopWatch()
	pe.unwatchLauncher() // before the segment goes (launcher.go)
	if pe.monitorRestore != nil {
		pe.monitorRestore() // best effort, as quietMonitor is: the process may go on without symheap
		pe.monitorRestore = nil
	}
	if pe.far != nil && errors.Is(err, ErrPeerLost) {
		// A job across nodes that lost a PE: the launcher keeps going
		// (or ends us by a signal); leave no segment behind a stopped PE.
		pe.seg.RemoveBroken()
	}
	if cerr := pe.seg.Close(); err == nil {
		err = cerr
	}
	liveMu.Lock()
	if live == pe {
		live = nil
	}
	liveMu.Unlock()
	return err
}

// Rank returns this PE's number, 0 to Size()-1.
func (pe *PE) Rank() int { return pe.rank }

// Size returns the number of PEs in the job.
func (pe *PE) Size() int { return pe.npes }

// Barrier completes this PE's outstanding puts, then waits until every PE
// has called Barrier. If a PE of the job dies it returns ErrPeerLost within
// a second.
func (pe *PE) Barrier() error {
	if err := pe.check(); err != nil {
		return err
	}
	pe.syncCacheStats()
	if pe.rma.far && pe.rma.farErr.Load() != nil { // a Swap (a locked instruction) only then
		if e := pe.rma.farErr.Swap(nil); e != nil {
			return fmt.Errorf("symheap: Barrier: completing puts to far PEs: %w", *e)
		}
	}
	if pe.npes == 1 {
		pe.rma.quietAll()
		return nil
	}
	if pe.far != nil {
		pe.rma.quietAll()
		if err := pe.calls.Enter(calls.Barrier, 0, 0); err != nil {
			return err
		}
		defer pe.calls.Leave()
		if err := pe.far.Barrier(); err != nil {
			return fmt.Errorf("symheap: Barrier: %w", err)
		}
		return nil
	}
	// The world team's barrier (internal/team), which turns a lost PE
	// into ErrPeerLost as the segment's barrier does. Its arrival is a
	// full fence, which completes this PE's puts as Quiet would; right
	// after it, the barrier wakes whoever sleeps waiting for them.
	return pe.ext.teams.Barrier()
}

// Accessible reports whether PE target exists and is alive, so that Put,
// Get and the atomics can reach it.
func (pe *PE) Accessible(target int) bool {
	if pe.closed.Load() || target < 0 || target >= pe.npes {
		return false
	}
	if pe.far != nil && pe.rma.route(target) == transport.Far {
		return pe.far.Alive(target)
	}
	return pe.seg.Alive(target)
}

// Protected reports whether the job runs in protected mode (Config.Protect).
func (pe *PE) Protected() bool { return pe.seg.Protected() }

// SameAddress reports whether the segment is mapped at the same address in
// every PE (pointers into shared memory can then be passed between PEs as
// they are). When false the job runs by offset translation.
func (pe *PE) SameAddress() bool { return pe.seg.SameAddress() }

// Job returns the job id.
func (pe *PE) Job() string { return pe.job.id }

// AllocatorName returns the memheap component managing the heaps.
func (pe *PE) AllocatorName() string { return pe.component.Name }

// Params lists every setting with its value and source.
func (pe *PE) Params() []Param { return append([]Param(nil), pe.set.params...) }

// GlobalExit ends every PE of the job with status code: every other PE
// exits with it as soon as it learns of the request (at once, from a
// watcher that sleeps on a futex), and so does this one.
func (pe *PE) GlobalExit(code int) {
	// From here the process ends with code whatever happens: a launcher
	// that sees another PE exit first must not turn our status into a
	// signal's.
	ossignal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if !pe.closed.Load() {
		pe.far.Exit(code) // the PEs of other nodes (internal/far; nil-safe)
	}
	pe.nodeExit(code)
}

// nodeExit is GlobalExit on this node: it ends every PE of the node with
// code, this one last. A PE that learns of another node's GlobalExit
// calls it too (internal/far), so that its node's PEs exit with the code
// rather than find it gone.
func (pe *PE) nodeExit(code int) {
	ossignal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if !pe.closed.Load() {
		g := pe.ctl[0]
		// This PE's own watcher leaves the exit to us. Our before-exit
		// step ran before the call (the C library flushes first).
		pe.exiting.Store(true)
		g.exitReady.Add(1) // seq-cst RMW; pairs with awaitExitReady's loads
		// First request wins; pairs with every PE's watcher load.
		g.exitCode.CompareAndSwap(0, uint32(code)&0xff|exitSet)
		for i := range pe.ctl {
			shmsync.Wake(&pe.ctl[i].exitWord, &pe.ctl[i].exitSleepers)
		}
		// Give the others a moment to exit with the code themselves, so
		// that a launcher sees the same status from every PE rather than
		// stopping them with a signal when this one exits first: first
		// until every live PE has run its before-exit step (flushed C's
		// stdio; a loaded machine may take a while to run them, a PE
		// that is stopped takes the whole bound), then until they left.
		pe.awaitExitReady(exitReadyWait)
		deadline := time.Now().Add(time.Second)
		for p := 0; p < pe.npes && time.Now().Before(deadline); {
			if p == pe.rank || !pe.seg.Alive(p) {
				p++
				continue
			}
			time.Sleep(time.Millisecond)
		}
	}
	beforeExit()
	exitNow(pe, code)
}

// exitMu is held by the goroutine that leaves the job and exits the
// process, so that no other goroutine (the exit watcher, another
// nodeExit) exits it while the segment is half released: that would
// leave the segment behind.
var exitMu sync.Mutex

// exitNow releases this PE's share of the segment and exits with code.
func exitNow(pe *PE, code int) {
	exitMu.Lock() // never unlocked: the process ends
	pe.leaveNow()
	os.Exit(code)
}

// leaveNow releases this PE's share of the segment without a barrier, as a
// process about to exit must.
func (pe *PE) leaveNow() {
	pe.closed.Store(true)
	pe.calls.SetClose(calls.Left)
	pe.seg.Leave()
}

const exitSet = 1 << 31

// exitReadyWait bounds a GlobalExit's wait for the PEs' before-exit steps.
const exitReadyWait = 5 * time.Second

// awaitExitReady waits, at most d, until every live PE has run its
// before-exit step (control.exitReady, counted once by every PE: by the
// PE that called GlobalExit there, by the others' watchers).
func (pe *PE) awaitExitReady(d time.Duration) {
	g := pe.ctl[0]
	deadline := time.Now().Add(d)
	// Seq-cst load; pairs with the increments.
	for int(g.exitReady.Load()) < 1+pe.liveOthers() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
}

// awaitNodeExit runs before a check reports a PE of this node that died
// or closed (segment.BeforeLoss). While a GlobalExit of the node is under
// way (its code is set), the node's PEs leave one by one and this process
// is about to exit with the code too: its exit watcher ends it, or the
// nodeExit that another goroutine of this PE runs when a PE of another
// node asked (internal/far). A PE that left first must not be reported
// lost meanwhile: the caller could end the process with a status of its
// own before that exit (a PE waiting in a barrier did, now and then, in
// the cluster tests' GlobalExit case under load). It waits for the exit a
// bounded while (nodeExit's own waits, and a margin), then lets the
// report go.
func (pe *PE) awaitNodeExit() {
	if pe.closed.Load() || pe.ctl[0].exitCode.Load()&exitSet == 0 {
		return
	}
	time.Sleep(exitReadyWait + 3*time.Second)
}

// liveOthers counts the other PEs that are alive.
func (pe *PE) liveOthers() int {
	n := 0
	for p := 0; p < pe.npes; p++ {
		if p != pe.rank && pe.seg.Alive(p) {
			n++
		}
	}
	return n
}

// beforeExit runs what the C library asked to run before the runtime ends
// the process (cabi.BeforeExit: flushing C's stdio).
func beforeExit() {
	if f := cabi.BeforeExit; f != nil {
		f()
	}
}

// watchExit sleeps until some PE calls GlobalExit, then exits with its code.
func (pe *PE) watchExit() {
	defer close(pe.watchDone)
	c := pe.ctl[pe.rank]
	g := pe.ctl[0]
	// The watcher is always asleep, as far as wakers are concerned: they
	// must make the syscall. Pairs with the load in shmsync.Wake.
	c.exitSleepers.Store(1)
	for {
		v := c.exitWord.Load()
		if code := g.exitCode.Load(); code&exitSet != 0 && !pe.exiting.Load() {
			// As in GlobalExit: a launcher that sees another PE exit
			// first and stops the rest must not cut the flush short.
			ossignal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
			beforeExit() // before leaving: the PE that asked waits for us to leave
			// Nor may this PE's exit, seen first, cut another's flush
			// short: wait (a second at most) until every live PE but the
			// one that asked has run its step. Seq-cst RMW; pairs with
			// the other watchers' loads.
			g.exitReady.Add(1)
			pe.awaitExitReady(exitReadyWait)
			exitNow(pe, int(code&^exitSet))
		}
		if c.watchStop.Load() != 0 {
			return
		}
		unix.FutexWait((*uint32)(core.WordAddr(&c.exitWord)), v, -1)
	}
}

func (pe *PE) stopWatch() {
	c := pe.ctl[pe.rank]
	c.watchStop.Store(1)
	c.exitWord.Add(1)
	unix.FutexWake((*uint32)(core.WordAddr(&c.exitWord)), 1<<30)
	<-pe.watchDone
}

// check returns ErrClosed after Close.
func (pe *PE) check() error {
	if pe != nil && !pe.closed.Load() {
		return nil // inlined: the API's first step
	}
	return pe.checkFailed()
}

func (pe *PE) checkFailed() error {
	if pe == nil {
		return fmt.Errorf("symheap: nil PE: %w (call Init)", ErrClosed)
	}
	if pe.closed.Load() {
		return fmt.Errorf("symheap: PE %d: %w", pe.rank, ErrClosed)
	}
	return nil
}

// checkPE validates a PE number.
func (pe *PE) checkPE(target int) error {
	if target < 0 || target >= pe.npes {
		return fmt.Errorf("PE %d does not exist (job has %d PEs, 0 to %d): %w", target, pe.npes, pe.npes-1, ErrBadPE)
	}
	return nil
}

// collectiveLost is the check of a collective call's waits on every PE:
// the deaths of this node's PEs, whether they all make the same call
// (internal/calls), then the liveness of every PE (peerLost).
func (pe *PE) collectiveLost() error {
	// A death first, then the calls: a PE that left because it found a
	// divergence is gone for the liveness check too, which would not say
	// why; a PE that left because another died has made fewer calls, and
	// the death is what to report.
	if err := pe.seg.CheckDead(nil); err != nil {
		return err
	}
	if err := pe.calls.Check(nil); err != nil {
		return err
	}
	return pe.peerLost()
}

// peerLost checks the liveness of every PE: those of this node through
// the segment, the others through the transport and the launcher.
func (pe *PE) peerLost() error {
	if pe.far == nil {
		return pe.seg.CheckPeers(nil)
	}
	if p, err := pe.seg.LostPeer(nil); err != nil {
		// A PE of this node that found a PE of another node lost (or a
		// divergence) left it for the node before it left: the cause.
		if e := pe.far.NodeLost(); e != nil {
			return e
		}
		pe.far.Announce(p) // the other nodes learn it from us
		return err
	}
	return pe.far.Check()
}
