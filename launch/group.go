package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/symheap/symheap/internal/config"
	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/unix"
)

// Run starts the job and waits for it: Start followed by Wait. The Result
// is valid whenever the PEs were started, also when err is not nil.
func Run(ctx context.Context, opts Options, prog string, args ...string) (Result, error) {
	g, err := Start(ctx, opts, prog, args...)
	if err != nil {
		return Result{Job: opts.Job, FirstFailed: -1, Status: 1}, err
	}
	return g.Wait()
}

// Group is a running job: its PEs, supervised as one.
type Group struct {
	job   string
	opts  Options
	start time.Time
	procs []*proc
	fork  *forker

	// mu guards proc.ended and proc.stopped, and is held while signals
	// are sent, so that no signal goes to a PE already marked ended (see
	// the package comment, Supervision, step 1).
	mu sync.Mutex

	exits    chan exit     // a PE has been reaped
	stopReq  chan struct{} // closed by Stop
	stopOnce sync.Once
	done     chan struct{} // closed when res and err are final
	cleanup  func()        // removes the build directory, or nil

	res Result
	err error
}

// proc is one PE.
type proc struct {
	rank           int
	cmd            *exec.Cmd
	pid            int
	start          time.Time
	stdout, stderr *lineWriter // nil when that output is discarded

	ended   bool // guarded by Group.mu: the PE is a zombie or reaped
	killed  bool // guarded by Group.mu: ended, by a signal (set with ended by reap; firstFailure)
	stopped bool // guarded by Group.mu: the supervisor sent it a stop signal
}

type exit struct {
	rank  int
	end   time.Time
	state *os.ProcessState
	err   error
}

// Start resolves prog (building it when it is a Go package), starts
// opts.N PEs running it with args, and returns the group supervising them.
// Cancelling ctx stops the job as a timeout does. If a PE cannot be
// started, the PEs started before it are killed and reaped before Start
// returns the error.
func Start(ctx context.Context, opts Options, prog string, args ...string) (*Group, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	return StartApps(ctx, opts, []App{{N: opts.N, Prog: prog, Args: args}})
}

// An App is one program of a job that runs several (MPMD: mpirun's
// "-n 2 ./a : -n 2 ./b"): N PEs of Prog with Args. The ranks follow the
// order of the apps: the first app's PEs are ranks 0 to N-1, the next
// app's follow, and every PE belongs to the one job, with one segment.
type App struct {
	N    int
	Prog string
	Args []string
}

// StartApps is Start for a job of several programs. opts.N must be 0
// or the sum of the apps' N (it is set to the sum).
func StartApps(ctx context.Context, opts Options, apps []App) (*Group, error) {
	total := 0
	for i, a := range apps {
		if a.N < 1 {
			return nil, fmt.Errorf("launch: %w: program %d (%s): number of PEs %d: want at least 1", errs.ErrBadConfig, i+1, a.Prog, a.N)
		}
		total += a.N
	}
	if len(apps) == 0 || opts.N != 0 && opts.N != total {
		return nil, fmt.Errorf("launch: %w: %d PEs in Options.N, %d in %d programs: they must agree", errs.ErrBadConfig, opts.N, total, len(apps))
	}
	opts.N = total
	if err := opts.check(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("launch: %w", err)
	}
	if opts.Grace == 0 {
		opts.Grace = DefaultGrace
	}
	if opts.StopSignal == 0 {
		opts.StopSignal = syscall.SIGTERM
	}
	if opts.Job == "" {
		opts.Job = NewJobID()
	}
	env := baseEnv(os.Environ(), &opts, opts.Job)
	if opts.PeerTimeout == 0 {
		// The PEs' own peer timeout, from the environment they get.
		d, err := config.PeerTimeout(lookup(env))
		if err != nil {
			return nil, fmt.Errorf("launch: %w", err)
		}
		opts.PeerTimeout = d
	}
	// Each program once, in the order given; rank r runs exes[appOf[r]].
	var exes []string
	var cleanups []func()
	cleanup := func() {
		for _, c := range cleanups {
			c()
		}
	}
	for _, a := range apps {
		exe, c, err := resolve(ctx, opts.Dir, a.Prog, opts.BuildFlags)
		if err != nil {
			cleanup()
			return nil, err
		}
		exes = append(exes, exe)
		if c != nil {
			cleanups = append(cleanups, c)
		}
	}
	g := &Group{
		job:     opts.Job,
		opts:    opts,
		fork:    newForker(),
		exits:   make(chan exit, opts.N),
		stopReq: make(chan struct{}),
		done:    make(chan struct{}),
		cleanup: cleanup,
	}
	var outMu sync.Mutex
	g.start = time.Now()
	app, first := 0, 0 // the app of rank, and its first rank
	for rank := 0; rank < opts.N; rank++ {
		if rank-first == apps[app].N {
			app, first = app+1, rank
		}
		exe, args := exes[app], apps[app].Args
		p := &proc{rank: rank}
		var prefix []byte
		if opts.Tag {
			prefix = []byte("[pe " + strconv.Itoa(rank) + "] ")
		}
		p.cmd = &exec.Cmd{
			Path: exe,
			Args: append([]string{exe}, args...),
			Env:  peEnv(env, rank),
			Dir:  opts.Dir,
			SysProcAttr: &syscall.SysProcAttr{
				Setpgid:   true,            // a process group per PE: see the package comment
				Pdeathsig: syscall.SIGKILL, // fires when the fork thread ends: see forker
			},
			// Reaping waits for the output pipes to close; a process that
			// escaped the PE's group and holds them open may delay it only
			// this long.
			WaitDelay: time.Second,
		}
		if opts.Stdout != nil {
			p.stdout = &lineWriter{mu: &outMu, w: opts.Stdout, prefix: prefix}
			p.cmd.Stdout = p.stdout
		}
		if opts.Stderr != nil {
			p.stderr = &lineWriter{mu: &outMu, w: opts.Stderr, prefix: prefix}
			p.cmd.Stderr = p.stderr
		}
		if err := g.fork.do(p.cmd.Start); err != nil {
			err = fmt.Errorf("%w: start PE %d of job %s: %v", ErrProgram, rank, g.job, err)
			g.abortStart()
			return nil, err
		}
		p.pid, p.start = p.cmd.Process.Pid, time.Now()
		g.procs = append(g.procs, p)
		go g.reap(p)
	}
	go g.supervise(ctx)
	return g, nil
}

// abortStart ends a group some of whose PEs failed to start: the others
// are killed and reaped, and everything is cleaned up as after a job.
func (g *Group) abortStart() {
	g.signalAll(syscall.SIGKILL, true)
	for range g.procs {
		<-g.exits
	}
	g.finish()
}

// reap waits for p to end (Supervision, step 1) and reports it.
func (g *Group) reap(p *proc) {
	killed, werr := unix.WaitExitedNoReap(p.pid)
	end := time.Now()
	g.mu.Lock()
	p.ended, p.killed = true, killed
	g.mu.Unlock()
	if werr == nil {
		// p is a zombie, so its group id is still its own: kill what is
		// left in the group. ESRCH: nothing is.
		unix.KillGroup(p.pid, syscall.SIGKILL)
	}
	err := p.cmd.Wait()
	if p.stdout != nil {
		p.stdout.flush()
	}
	if p.stderr != nil {
		p.stderr.flush()
	}
	g.exits <- exit{rank: p.rank, end: end, state: p.cmd.ProcessState, err: err}
}

// stopReason records why the supervisor began stopping the job.
type stopReason int

const (
	running stopReason = iota
	byFailure
	byTimeout
	byContext
	byRequest
	byStall
)

// stallPoll is how often the supervisor looks at the state of the PEs
// left once one has exited (Supervision, step 3); stallPollEarly how often
// before, so that the peer timeout of a PE stopped early counts from its
// stop, not from the others' exit (which itself may come a peer timeout
// after the stop: they wait for it in Close).
const (
	stallPoll      = 100 * time.Millisecond
	stallPollEarly = time.Second
)

// supervise collects the PEs' exits and stops the job when it must
// (Supervision, steps 2 and 3), then finishes it (step 4).
func (g *Group) supervise(ctx context.Context) {
	var timeout <-chan time.Time
	if g.opts.Timeout > 0 {
		t := time.NewTimer(g.opts.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var kill <-chan time.Time
	reason := running
	stop := func(r stopReason) {
		if reason != running {
			return
		}
		reason = r
		g.signalAll(g.opts.StopSignal, true)
		kill = time.After(g.opts.Grace)
	}
	res := Result{Job: g.job, PEs: make([]PEStatus, len(g.procs)), FirstFailed: -1}
	done, stopReq := ctx.Done(), g.stopReq
	// The PEs' states are polled, often once a PE has exited: when all
	// those left have stayed stopped for the peer timeout, nothing will
	// ever end the job but a SIGCONT nobody may send.
	early := time.NewTicker(stallPollEarly)
	defer early.Stop()
	poll := early.C
	stoppedSince := make([]time.Time, len(g.procs))
	for left := len(g.procs); left > 0; {
		select {
		case e := <-g.exits:
			left--
			st := g.status(e)
			res.PEs[e.rank] = st
			if st.Failed() && !st.Stopped && res.FirstFailed < 0 && reason == running {
				res.FirstFailed = g.firstFailure(e.rank, st, res.PEs)
				stop(byFailure)
			}
			if poll == early.C && left > 0 && reason == running {
				early.Stop()
				t := time.NewTicker(stallPoll)
				defer t.Stop()
				poll = t.C
			}
		case now := <-poll:
			if reason != running {
				poll = nil
				continue
			}
			// Before any PE has exited, the polls only note stops.
			if ranks := g.stalled(now, stoppedSince); ranks != nil && left < len(g.procs) {
				// A stopped process acts on no signal but SIGKILL (and
				// SIGCONT): the stop signal would wait for a SIGCONT.
				reason, res.Stalled, poll = byStall, ranks, nil
				g.signalAll(syscall.SIGKILL, true)
			}
		case <-timeout:
			timeout = nil
			stop(byTimeout)
		case <-done:
			done = nil
			stop(byContext)
		case <-stopReq:
			stopReq = nil
			stop(byRequest)
		case <-kill:
			kill = nil
			g.signalAll(syscall.SIGKILL, true)
		}
	}
	res.Elapsed = time.Since(g.start)

	stopped := 0
	for _, st := range res.PEs {
		if st.Stopped {
			stopped++
		}
	}
	var err error
	switch {
	case res.FirstFailed >= 0:
		st := res.PEs[res.FirstFailed]
		res.Status = st.Status()
		err = fmt.Errorf("%w: job %s: %v", ErrFailed, g.job, st)
		if stopped > 0 {
			err = fmt.Errorf("%w; stopped the %s still running", err, pes(stopped))
		}
	case reason == byTimeout:
		res.Status, res.TimedOut = StatusTimeout, true
		err = fmt.Errorf("%w: job %s: after %v, stopped the %s still running", ErrTimeout, g.job, g.opts.Timeout, pes(stopped))
	case reason == byContext:
		res.Status = StatusStopped
		err = fmt.Errorf("launch: job %s: stopped %s: %w", g.job, pes(stopped), context.Cause(ctx))
	case reason == byRequest:
		res.Status = StatusStopped
		err = fmt.Errorf("%w: job %s: stopped %s on request", ErrStopped, g.job, pes(stopped))
	case reason == byStall:
		res.Status = StatusStalled
		err = fmt.Errorf("%w: job %s: %s stopped (state T: SIGSTOP) for %v after every other PE had exited, and nothing would resume %s: killed (SYMHEAP_PEER_TIMEOUT is %v; send SIGCONT sooner to let a stopped PE go on)",
			ErrStalled, g.job, g.named(res.Stalled), g.opts.PeerTimeout, them(len(res.Stalled)), g.opts.PeerTimeout)
	}
	removed, rmErr := g.finish()
	res.Removed = removed
	if rmErr != nil {
		err = errors.Join(err, fmt.Errorf("launch: job %s: clean up /dev/shm: %w", g.job, rmErr))
	}
	g.res, g.err = res, err
	close(g.done)
}

func pes(n int) string {
	if n == 1 {
		return "1 PE"
	}
	return strconv.Itoa(n) + " PEs"
}

func them(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

// named names the PEs of these ranks with their pids: "PE 2 (pid 4242)",
// "PEs 1 (pid 4241) and 2 (pid 4242)".
func (g *Group) named(ranks []int) string {
	var b strings.Builder
	b.WriteString("PE")
	if len(ranks) > 1 {
		b.WriteString("s")
	}
	for i, r := range ranks {
		switch {
		case i == 0:
			b.WriteString(" ")
		case i == len(ranks)-1:
			b.WriteString(" and ")
		default:
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d (pid %d)", r, g.procs[r].pid)
	}
	return b.String()
}

// stalled looks at the PEs not yet ended and records since when each has
// been seen stopped (state T in /proc/PID/stat; zero when it was not). It
// returns their ranks when every one of them has been stopped for the
// peer timeout, and nil otherwise. It holds g.mu, so that the pid of a PE
// not marked ended is still that PE's (Supervision, step 1).
func (g *Group) stalled(now time.Time, since []time.Time) []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ranks []int
	all := true
	for _, p := range g.procs {
		if p.ended {
			continue
		}
		if st, err := unix.ProcessState(p.pid); err != nil || st != 'T' {
			since[p.rank], all = time.Time{}, false
			continue
		}
		if since[p.rank].IsZero() {
			since[p.rank] = now
		}
		all = all && now.Sub(since[p.rank]) >= g.opts.PeerTimeout
		ranks = append(ranks, p.rank)
	}
	if !all || len(ranks) == 0 {
		return nil
	}
	return ranks
}

// status turns a reaped PE's state into its PEStatus.
// firstFailure names the job's failure when PE rank, whose status is st,
// is the first failing exit the supervisor collects (Supervision, step 2).
// An exit with a status may follow another PE's death: a PE that finds a
// peer gone reports it and exits, and its exit can reach the supervisor
// before the dead PE's (each is collected by a goroutine of its own). So
// unless st is a death by a signal itself, a PE not yet collected that
// has already been killed by a signal (no signal has been sent by the
// group yet) is the failure instead, the lowest rank of them: one its
// goroutine found so (reap: killed) or, before that goroutine ran, one
// the kernel shows so (EndedBySignal), which is then marked ended, as the
// zombie it is, so that the stop signal does not count it as stopped. A
// PE killed by a signal drops its liveness lock, which its peers watch,
// before it becomes a zombie; on a busy machine its last steps can wait
// for a CPU while a peer reports it gone and exits: so a PE found exiting
// (ProcessExiting: it runs no code of its own any more) is waited for,
// and counts if a signal ended it. seen holds the statuses collected so
// far (Pid set once collected).
func (g *Group) firstFailure(rank int, st PEStatus, seen []PEStatus) int {
	if st.Signal != 0 {
		return rank
	}
	var exiting []*proc
	g.mu.Lock()
	for _, p := range g.procs {
		if p.rank == rank || seen[p.rank].Pid != 0 {
			continue
		}
		if !p.ended && unix.EndedBySignal(p.pid) {
			p.ended, p.killed = true, true
		}
		if p.killed {
			g.mu.Unlock()
			return p.rank
		}
		if !p.ended && unix.ProcessExiting(p.pid) {
			exiting = append(exiting, p)
		}
	}
	g.mu.Unlock()
	// Outside the lock, which reap takes once the PE has ended.
	for _, p := range exiting {
		killed, err := unix.WaitExitedNoReap(p.pid)
		g.mu.Lock()
		if err == nil && killed {
			p.ended, p.killed = true, true
		}
		killed = p.killed // err: reap was first, and set it
		g.mu.Unlock()
		if killed {
			return p.rank
		}
	}
	return rank
}

func (g *Group) status(e exit) PEStatus {
	p := g.procs[e.rank]
	g.mu.Lock()
	stopped := p.stopped
	g.mu.Unlock()
	st := PEStatus{Rank: p.rank, Pid: p.pid, ExitCode: -1, Stopped: stopped,
		Runtime: e.end.Sub(p.start), Ended: e.end.Sub(g.start)}
	if e.state == nil {
		// Wait failed without a state: only possible if the process was
		// reaped elsewhere. Report it as killed, which it was for us.
		st.Signal = syscall.SIGKILL
		return st
	}
	ws, _ := e.state.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled():
		st.Signal = ws.Signal()
	default:
		st.ExitCode = e.state.ExitCode()
	}
	return st
}

// finish is Supervision, step 4: it runs once every PE has been reaped.
func (g *Group) finish() ([]string, error) {
	g.fork.close()
	if g.cleanup != nil {
		g.cleanup()
	}
	return RemoveSegmentFiles(g.job)
}

// signalAll sends sig to every PE not yet ended (to its process group);
// with stop it marks them as stopped by the launcher.
func (g *Group) signalAll(sig syscall.Signal, stop bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range g.procs {
		if !p.ended {
			if stop {
				p.stopped = true
			}
			g.signalLocked(p, sig)
		}
	}
}

// signalLocked sends sig to p's process group, or to p alone when p has
// left its group. g.mu is held and p has not ended.
func (g *Group) signalLocked(p *proc, sig syscall.Signal) error {
	err := unix.KillGroup(p.pid, sig)
	if err == unix.ESRCH {
		err = p.cmd.Process.Signal(sig)
	}
	return err
}

// Job returns the job id.
func (g *Group) Job() string { return g.job }

// Pids returns the process ids of the PEs, by rank.
func (g *Group) Pids() []int {
	pids := make([]int, len(g.procs))
	for i, p := range g.procs {
		pids[i] = p.pid
	}
	return pids
}

// Signal sends sig to every PE still running (to each PE's process group).
// It is how signals received by the launcher are passed on; the PEs'
// reaction is theirs, and a PE killed by a forwarded signal counts as a
// failure.
func (g *Group) Signal(sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return fmt.Errorf("launch: unsupported signal %v", sig)
	}
	g.signalAll(s, false)
	return nil
}

// SignalPE sends sig to the PE of this rank (to its process group). It
// returns os.ErrProcessDone if the PE has ended.
func (g *Group) SignalPE(rank int, sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return fmt.Errorf("launch: unsupported signal %v", sig)
	}
	if rank < 0 || rank >= len(g.procs) {
		return fmt.Errorf("launch: job %s has no PE %d", g.job, rank)
	}
	p := g.procs[rank]
	g.mu.Lock()
	defer g.mu.Unlock()
	if p.ended {
		return os.ErrProcessDone
	}
	return g.signalLocked(p, s)
}

// Forward passes every signal received on c to all PEs (Signal) until the
// job has ended. The caller owns c: it registers it with signal.Notify
// before Start, so that no signal is lost in between, and calls
// signal.Stop after Wait.
func (g *Group) Forward(c <-chan os.Signal) {
	go func() {
		for {
			select {
			case s := <-c:
				g.Signal(s)
			case <-g.done:
				return
			}
		}
	}()
}

// Stop ends the job as a failure would: the stop signal (SIGTERM unless
// Options.StopSignal says otherwise) to every PE, SIGKILL after the grace
// period. Wait then reports ErrStopped, unless a PE had failed
// before.
func (g *Group) Stop() {
	g.stopOnce.Do(func() { close(g.stopReq) })
}

// Done is closed when the job has ended and been cleaned up.
func (g *Group) Done() <-chan struct{} { return g.done }

// Wait waits for the job to end and returns its result; err is nil only if
// every PE exited 0 and clean-up succeeded. It may be called any number of
// times, from any goroutine.
func (g *Group) Wait() (Result, error) {
	<-g.done
	return g.res, g.err
}

// forker is the goroutine that forks every PE of a group (package comment,
// Starting, step 2). It is locked to its OS thread from its first to its
// last instruction, and it runs until close, which the group calls only
// after its last PE has been reaped: the thread the PEs' Pdeathsig is tied
// to outlives them.
type forker struct{ calls chan func() }

func newForker() *forker {
	f := &forker{calls: make(chan func())}
	go func() {
		runtime.LockOSThread()
		for fn := range f.calls {
			fn()
		}
		// Unlocking hands the thread back to the runtime; no PE depends
		// on it any more.
		runtime.UnlockOSThread()
	}()
	return f
}

// do runs fn on the fork thread.
func (f *forker) do(fn func() error) error {
	errc := make(chan error, 1)
	f.calls <- func() { errc <- fn() }
	return <-errc
}

func (f *forker) close() { close(f.calls) }

var _ io.Writer = (*lineWriter)(nil)
