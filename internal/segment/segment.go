// Package segment owns the one POSIX shared-memory segment of a job: its
// creation or attachment, its header, its placement at the same address in
// every PE, the per-PE partitions, liveness, and its removal.
//
// # Layout
//
//	offset 0          header (HeaderSize): identity, parameters, agreement
//	                  words, the world barrier, one slot per PE
//	CBOff             N control blocks of CBSize bytes (runtime-owned)
//	PartOff           N partitions of PartStride bytes, each
//	                    [0, HeapSize)                  symmetric heap
//	                    [SharedOff, SharedOff+SharedSize) local shared heap
//
// PartOff, PartStride and SharedOff are multiples of alloc.MaxAlign and the
// mapping's base is aligned to it in every PE, so an offset aligned to a
// power of two up to MaxAlign is an address aligned to it as well. The gaps
// that rounding leaves are never handed out and never touched; every byte
// that is handed out has been reserved with fallocate by the creator, so a
// store can never raise SIGBUS for want of space in /dev/shm.
//
// # Opening, step by step
//
//  1. Create the file with O_CREAT|O_EXCL, mode 0600, and take an exclusive
//     flock at once. If it exists, open it, check owner and mode, and see
//     whether it is stale (exclusive flock obtainable, no PE's liveness lock
//     held, header complete): a stale segment is removed and step 1 retried.
//  2. The creator checks free space, sizes and fallocates the file, writes
//     the header, takes its liveness lock and publishes state=ready. It then
//     drops the exclusive flock for a shared one, and removes the user's
//     segments on this node that dead jobs left behind, as `symheap clean`
//     would but only those whose PEs' processes have all ended and that
//     were made SweepAge ago or more (Sweep): a launcher that kills its
//     job leaves them. When /dev/shm lacks the space for the new segment,
//     the creator first removes every such segment, however young.
//  3. A joiner takes a shared flock (it cannot while the creator holds the
//     exclusive one), waits a bounded time for state=ready, and validates
//     the header against its own parameters.
//  4. Every PE takes an OFD write lock on byte LiveLockBase+rank of the file
//     (its liveness token: it vanishes with the process), and records its
//     pid in its slot.
//  5. Placement rounds: PE 0 proposes an address that is free in its
//     /proc/self/maps, in a window away from the Go heap; every PE maps
//     there with MAP_FIXED_NOREPLACE and reports success or failure; when
//     all N have reported, all succeeded → same-address mode; else every
//     PE unmaps and the next round starts, at most MaxRounds times, after
//     which every PE maps anywhere (offset mode). A PE configured for
//     offset mode fails every round at once, which ends the rounds.
//
// # Liveness
//
// Every attached PE holds a shared flock for as long as it is attached, so
// "every PE is gone" is proved by taking the exclusive flock. Which PE is
// gone is proved by its OFD byte lock: F_OFD_GETLK from any other open file
// description sees it while, and only while, the PE's descriptor is open.
// Neither can be fooled by pid reuse.
//
// # Jobs on several nodes
//
// A job that spans nodes has one segment per node, in the job's
// numbering: NPEs control blocks and partition slots, of which only the
// node's PEs (Params.Local) attach and back theirs with memory. Placement
// rounds, the barrier and the liveness checks count those PEs only (the
// lowest of them proposes the address); everything else is as above.
//
// # Leaving
//
// Close drops the liveness lock and the shared flock, then tries the
// exclusive flock without blocking; whoever gets it is the last PE out and
// unlinks the file (after checking that the path still names this file).
package segment

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/internal/config"
	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/shmsync"
	"github.com/symheap/symheap/internal/unix"
)

const (
	// Magic opens every segment: "SYMHEAP" and a NUL, little-endian.
	Magic = 0x0050414548_4d5953
	// Version is the layout version; a segment of another version is refused.
	Version = 2
	// HeaderSize is the bytes reserved for the header at offset 0.
	HeaderSize = 64 << 10
	// MaxPEs is the largest job a segment can hold.
	MaxPEs = 512
	// MaxRounds bounds the placement rounds before offset mode.
	MaxRounds = 8
	// LiveLockBase is the file offset of PE 0's liveness byte lock. It lies
	// beyond any real segment size: byte locks need no bytes.
	LiveLockBase = 1 << 50
	// Align is the alignment of partitions and of the mapping's base.
	Align = alloc.MaxAlign
)

// States of the header's state word.
const (
	stateInit   = 0
	stateReady  = 1
	stateFailed = 2
)

// Placement modes, as recorded in the header.
const (
	ModeUndecided   = 0
	ModeSameAddress = 1
	ModeOffset      = 2
)

// PE slot states.
const (
	slotEmpty    = 0
	slotAttached = 1
	slotClosed   = 2
)

// Params describe the segment a PE wants. Every PE of a job passes the same
// values (except Rank); a joiner whose values differ from the creator's is
// refused with a message naming both.
type Params struct {
	Job        string
	Rank, NPEs int
	HeapSize   uint64
	SharedSize uint64
	CBSize     uint64 // bytes of control block per PE
	CBSum      uint64 // digest of the control blocks' layout (its areas' names, sizes and places): PEs built alike agree
	// FormatsSum is the digest of the formats Go and C PEs share
	// (internal/cabi.Sum): a Go program and a libsymheap built from
	// different versions of symheap disagree on it.
	FormatsSum  uint64
	Allocator   string // component name, recorded for the job
	ForceOffset bool   // do not try the same address
	InitTimeout time.Duration
	// Protect maps the other PEs' symmetric heaps read-only in the main
	// mapping, and maps the segment a second time, writable, as the alias
	// through which the runtime's API writes (see Alias).
	Protect bool
	// Stop, if not nil, can end Open's waits for the other PEs (the
	// creator's header, the placement rounds): it is asked in their
	// checks, and its error ends Open, which leaves nothing behind (the
	// root's InitCtx).
	Stop func() error
	// PeerTimeout is how long a PE may go without a heartbeat (stopped,
	// or starved of CPU) before the others declare it lost; 0: 10 s.
	PeerTimeout time.Duration
	// ReadOnly attaches for inspection only (symheap stat): no locks taken
	// beyond a shared flock, no liveness token, mapped read-only.
	ReadOnly bool
	// Local lists, in increasing order, the ranks that attach to this
	// segment when the job spans several nodes: the PEs of this node.
	// The segment keeps the job's numbering (NPEs control blocks and
	// partitions, indexed by job rank) so that every offset and rank
	// means the same on every node; only the local ranks' partitions are
	// backed with memory, and placement, the barrier and the liveness
	// checks count only them. nil: every rank is local.
	Local []int
	// NodeOf, in a job on several nodes, is the node of every rank; the
	// creator records it in the header for the inspector (Node). Nil on
	// one node.
	NodeOf []int
}

// Segment is one PE's attachment to the job's segment.
type Segment struct {
	p      Params
	path   string
	fd     int
	hdrMap unix.Mapping // the header alone, mapped early
	m      unix.Mapping // the whole segment
	alias  unix.Mapping // protected mode: the writable second mapping
	h      *header
	lay    Layout
	local  []int // the ranks that attach (Params.Local, or all)
	closed atomic.Bool
	// beforeLoss runs before a check reports a PE gone (BeforeLoss).
	beforeLoss atomic.Pointer[func()]

	// Heartbeat: this PE's beater goroutine, and what this PE last saw of
	// every other PE's beat (local memory, guarded by seenMu).
	beatStop chan struct{}
	beatDone chan struct{}
	seenMu   sync.Mutex
	seen     []beatSeen
}

type beatSeen struct {
	beat uint64
	at   time.Time
}

// HeartbeatPeriod is how often a PE bumps its heartbeat.
const HeartbeatPeriod = 100 * time.Millisecond

// Layout is where everything lies, computed from the parameters alone.
type Layout struct {
	NPEs                 int
	HeapSize, SharedSize uint64
	CBOff, CBSize        uint64
	PartOff, PartStride  uint64
	SharedOff            uint64
	Total                uint64
}

func roundUp(x, a uint64) uint64 { return (x + a - 1) &^ (a - 1) }

// ComputeLayout lays out a segment for these sizes.
func ComputeLayout(npes int, heap, shared, cb uint64) (Layout, error) {
	if npes < 1 || npes > MaxPEs {
		return Layout{}, fmt.Errorf("segment: a job of %d PEs: %w (a segment holds 1 to %d PEs)", npes, errs.ErrBadConfig, MaxPEs)
	}
	const limit = config.MaxHeapSize // 64 TiB: far beyond any node, far below overflow
	switch {
	case heap > limit:
		return Layout{}, fmt.Errorf("segment: symmetric heap of %s per PE: %w (at most %s: lower %s)", FormatSize(heap), errs.ErrBadConfig, FormatSize(limit), config.EnvHeap)
	case shared > limit:
		return Layout{}, fmt.Errorf("segment: local shared heap of %s per PE: %w (at most %s: lower %s)", FormatSize(shared), errs.ErrBadConfig, FormatSize(limit), config.EnvSharedHeap)
	case cb > 1<<30:
		return Layout{}, fmt.Errorf("segment: control block of %s per PE: %w (at most 1G)", FormatSize(cb), errs.ErrBadConfig)
	}
	l := Layout{NPEs: npes, HeapSize: roundUp(heap, unix.PageSize), SharedSize: roundUp(shared, unix.PageSize)}
	l.CBSize = roundUp(cb, unix.PageSize)
	l.CBOff = HeaderSize
	l.PartOff = roundUp(l.CBOff+uint64(npes)*l.CBSize, Align)
	l.SharedOff = roundUp(l.HeapSize, Align)
	l.PartStride = l.SharedOff + roundUp(l.SharedSize, Align)
	if l.PartStride == 0 {
		l.PartStride = Align
	}
	l.Total = l.PartOff + uint64(npes)*l.PartStride
	if l.Total/uint64(npes) > 2*limit {
		return Layout{}, fmt.Errorf("segment: layout overflows: %w", errs.ErrBadConfig)
	}
	return l, nil
}

// Backed is the list of byte ranges handed out (and so fallocated).
func (l Layout) Backed() [][2]uint64 { return l.BackedFor(nil) }

// BackedFor is Backed when only the ranks in local (nil: all) attach:
// the header, every control block, and the local ranks' partitions.
func (l Layout) BackedFor(local []int) [][2]uint64 {
	r := [][2]uint64{{0, l.CBOff + uint64(l.NPEs)*l.CBSize}}
	if local == nil {
		local = allRanks(l.NPEs)
	}
	for _, pe := range local {
		base := l.PartOff + uint64(pe)*l.PartStride
		if l.HeapSize > 0 {
			r = append(r, [2]uint64{base, l.HeapSize})
		}
		if l.SharedSize > 0 {
			r = append(r, [2]uint64{base + l.SharedOff, l.SharedSize})
		}
	}
	return r
}

// BackedBytes is the total of Backed.
func (l Layout) BackedBytes() uint64 { return l.BackedBytesFor(nil) }

// BackedBytesFor is the total of BackedFor.
func (l Layout) BackedBytesFor(local []int) uint64 {
	var n uint64
	for _, r := range l.BackedFor(local) {
		n += r[1]
	}
	return n
}

func allRanks(n int) []int {
	r := make([]int, n)
	for i := range r {
		r[i] = i
	}
	return r
}

func randomGen() uint64 {
	var b [8]byte
	rand.Read(b[:])
	g := binary.LittleEndian.Uint64(b[:])
	if g == 0 {
		g = 1
	}
	return g
}

// Open creates or attaches to the job's segment and maps it. See the
// package comment for the steps.
func Open(p Params) (*Segment, error) {
	if p.Job == "" {
		return nil, fmt.Errorf("segment: empty job id: %w", errs.ErrBadConfig)
	}
	if p.Rank < 0 || p.Rank >= p.NPEs {
		return nil, fmt.Errorf("segment: rank %d of %d PEs: %w", p.Rank, p.NPEs, errs.ErrBadConfig)
	}
	lay, err := ComputeLayout(p.NPEs, p.HeapSize, p.SharedSize, p.CBSize)
	if err != nil {
		return nil, err
	}
	local := p.Local
	if local == nil {
		local = allRanks(p.NPEs)
	}
	mine := false
	for i, r := range local {
		if r < 0 || r >= p.NPEs || (i > 0 && r <= local[i-1]) {
			return nil, fmt.Errorf("segment: local ranks %v of %d PEs: %w (want increasing ranks of the job)", local, p.NPEs, errs.ErrBadConfig)
		}
		mine = mine || r == p.Rank
	}
	if !mine {
		return nil, fmt.Errorf("segment: rank %d is not among the local ranks %v: %w", p.Rank, local, errs.ErrBadConfig)
	}
	if p.InitTimeout <= 0 {
		p.InitTimeout = 30 * time.Second
	}
	s := &Segment{p: p, path: Path(unix.Getuid(), p.Job), fd: -1, lay: lay, local: local}
	if err := s.openFile(); err != nil {
		return nil, err
	}
	if err := s.place(); err != nil {
		s.abandon()
		return nil, err
	}
	if s.p.Protect {
		if err := s.protect(); err != nil {
			s.abandon()
			return nil, err
		}
	}
	if s.p.PeerTimeout <= 0 {
		s.p.PeerTimeout = 10 * time.Second
	}
	s.seen = make([]beatSeen, lay.NPEs)
	s.beatStop, s.beatDone = make(chan struct{}), make(chan struct{})
	go s.heartbeat()
	return s, nil
}

// heartbeat bumps this PE's beat until Close. A PE that stops beating for
// PeerTimeout while holding its liveness lock is stopped (SIGSTOP), or so
// starved that the job cannot progress: the others report it lost.
func (s *Segment) heartbeat() {
	defer close(s.beatDone)
	t := time.NewTicker(HeartbeatPeriod)
	defer t.Stop()
	slot := &s.h.pes[s.p.Rank]
	for {
		// Read by the other PEs' stall checks (relaxed: only progress
		// matters).
		slot.beat.Add(1)
		select {
		case <-s.beatStop:
			return
		case <-t.C:
		}
	}
}

// stalled reports whether PE pe's heartbeat has not moved for PeerTimeout
// as seen from here, and its process is not merely waiting for a CPU.
func (s *Segment) stalled(pe int) (time.Duration, bool) {
	if s.seen == nil || pe == s.p.Rank {
		return 0, false
	}
	b := s.h.pes[pe].beat.Load()
	now := time.Now()
	s.seenMu.Lock()
	defer s.seenMu.Unlock()
	v := &s.seen[pe]
	if v.at.IsZero() || v.beat != b {
		v.beat, v.at = b, now
		return 0, false
	}
	d := now.Sub(v.at)
	if d <= s.p.PeerTimeout {
		return d, false
	}
	// No beat for the whole timeout. A process with a thread waiting for
	// a CPU is starved, not stuck: with hundreds of PEs on a few cores
	// the scheduler may leave one waiting that long, and the job still
	// moves. Stopped (state T), or with every thread asleep, it is stuck;
	// and so is a PE of this very process (tests), which runs as we do.
	if pid := s.Pid(pe); pid == unix.Getpid() {
		return d, true
	} else if st, err := unix.ProcessState(pid); err == nil && st != 'T' && st != 't' {
		if run, err := unix.ProcessRunnable(pid); err == nil && run {
			return d, false
		}
	}
	return d, true
}

// openFile performs steps 1 to 4.
func (s *Segment) openFile() error {
	deadline := time.Now().Add(s.p.InitTimeout)
	for attempt := 0; ; attempt++ {
		fd, err := unix.Open(s.path, unix.OCreat|unix.OExcl|unix.ORdwr|unix.ONofollow, 0o600)
		if err == nil {
			// Step 1: we are the creator. Take the exclusive lock before
			// anything else; a joiner that slips in between sees an empty
			// file and waits (see join).
			s.fd = fd
			if err := unix.Flock(fd, unix.LockExclusive, false); err != nil {
				s.fail(err)
				return fmt.Errorf("segment: lock %s: %w", s.path, err)
			}
			if err := s.create(); err != nil {
				return err
			}
			// Once per job and node: remove what dead jobs of this user
			// left on the node (best effort; never a live job's).
			Sweep(unix.Getuid(), SweepAge)
			return nil
		}
		if err != unix.EEXIST {
			return fmt.Errorf("segment: create %s: %v: %w", s.path, err, errs.ErrSegment)
		}
		fd, err = unix.Open(s.path, unix.ORdwr|unix.ONofollow, 0)
		if err == unix.ENOENT {
			continue // removed between our two opens: try to create again
		}
		if err != nil {
			return fmt.Errorf("segment: open %s: %v: %w (another user's file, or a symbolic link, squats on the name)", s.path, err, errs.ErrSegment)
		}
		s.fd = fd
		stale, err := s.join(deadline)
		if err == nil {
			return nil
		}
		// The header mapping holds the open file description, and with it
		// our flock: unmap before closing.
		s.unmapAll()
		unix.Close(s.fd)
		s.fd = -1
		if !stale || attempt > 3 {
			return err
		}
		// A stale segment was removed: create afresh.
	}
}

// create is step 2.
func (s *Segment) create() error {
	l := s.lay
	_, free, err := unix.FreeSpace(unix.ShmDir)
	if err == nil && free < l.BackedBytesFor(s.p.Local) {
		// Dead jobs' segments may hold the space: remove them, however
		// young, and look again.
		if removed, _ := Sweep(unix.Getuid(), 0); len(removed) > 0 {
			_, free, err = unix.FreeSpace(unix.ShmDir)
		}
	}
	if err == nil && free < l.BackedBytesFor(s.p.Local) {
		e := fmt.Errorf("segment: job needs %s of shared memory (%d PEs × heap %s + shared heap %s + control) but %s has only %s free: %w (lower SHMEM_SYMMETRIC_SIZE or SYMHEAP_SHARED_SIZE, or enlarge %s)",
			FormatSize(l.BackedBytesFor(s.p.Local)), len(s.local), FormatSize(l.HeapSize), FormatSize(l.SharedSize), unix.ShmDir, FormatSize(free), errs.ErrOutOfMemory, unix.ShmDir)
		s.fail(e)
		return e
	}
	if err := unix.Ftruncate(s.fd, int64(l.Total)); err != nil {
		e := fmt.Errorf("segment: size %s to %s: %v: %w", s.path, FormatSize(l.Total), err, errs.ErrSegment)
		s.fail(e)
		return e
	}
	for _, r := range l.BackedFor(s.p.Local) {
		if err := unix.Fallocate(s.fd, int64(r[0]), int64(r[1])); err != nil {
			_, free, _ := unix.FreeSpace(unix.ShmDir)
			var e error
			if err == unix.ENOSPC {
				e = fmt.Errorf("segment: reserving %s of shared memory failed: %s has %s free: %w (lower SHMEM_SYMMETRIC_SIZE or SYMHEAP_SHARED_SIZE)",
					FormatSize(l.BackedBytesFor(s.p.Local)), unix.ShmDir, FormatSize(free), errs.ErrOutOfMemory)
			} else {
				e = fmt.Errorf("segment: fallocate %s: %v: %w", s.path, err, errs.ErrSegment)
			}
			s.fail(e)
			return e
		}
	}
	if err := s.mapHeader(); err != nil {
		s.fail(err)
		return err
	}
	h := s.h
	h.magic = Magic
	h.version = Version
	h.size = l.Total
	h.uid = uint64(unix.Getuid())
	h.gen = randomGen()
	h.npes = uint64(l.NPEs)
	h.heapSize, h.sharedSize = l.HeapSize, l.SharedSize
	h.cbOff, h.cbSize, h.cbSum, h.formatsSum = l.CBOff, l.CBSize, s.p.CBSum, s.p.FormatsSum
	h.partOff, h.partStride, h.sharedOff = l.PartOff, l.PartStride, l.SharedOff
	h.created = uint64(time.Now().UnixNano())
	putString(h.allocator[:], s.p.Allocator)
	putString(h.job[:], s.p.Job)
	if len(s.p.NodeOf) == l.NPEs {
		for p, n := range s.p.NodeOf {
			h.pes[p].node = uint32(n) + 1
		}
		h.node = uint32(s.p.NodeOf[s.p.Rank]) + 1
	}
	if s.p.ForceOffset {
		h.forceOffset.Store(1)
	}
	if err := s.takeLiveness(); err != nil {
		s.fail(err)
		return err
	}
	if dieBeforeReady() {
		// Test hook: the creator dies holding the half-made segment.
		unix.Kill(unix.Getpid(), 9)
	}
	// Publish: every header write above happens before this store; pairs
	// with the joiners' load of state in join.
	h.state.Store(stateReady)
	shmsync.Wake(&h.stateWord, &h.stateSleepers)
	// Keep the file locked against "stale" verdicts: the liveness lock is
	// held, so dropping EX for SH cannot expose an unowned segment.
	unix.Flock(s.fd, unix.LockUnlock, false)
	if err := unix.Flock(s.fd, unix.LockShared, false); err != nil {
		return fmt.Errorf("segment: lock %s: %w", s.path, err)
	}
	return nil
}

// dieBeforeReady is a test hook (SYMHEAP_DEBUG_DIE_BEFORE_READY=1).
func dieBeforeReady() bool { return os.Getenv("SYMHEAP_DEBUG_DIE_BEFORE_READY") == "1" }

// fail records a creator's failure in the header (if mapped) so joiners
// report it, and removes the file.
func (s *Segment) fail(cause error) {
	if s.h != nil {
		putString(s.h.failMsg[:], cause.Error())
		s.h.state.Store(stateFailed)
		shmsync.Wake(&s.h.stateWord, &s.h.stateSleepers)
	}
	unix.Unlink(s.path)
	s.unmapAll()
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
}

// join is step 3. stale reports that the file was found stale and removed.
func (s *Segment) join(deadline time.Time) (stale bool, err error) {
	uid, mode, _, err := unix.Fstat(s.fd)
	if err != nil {
		return false, fmt.Errorf("segment: stat %s: %v: %w", s.path, err, errs.ErrSegment)
	}
	if int(uid) != unix.Getuid() {
		return false, fmt.Errorf("segment: %s belongs to uid %d, not to us (uid %d): %w (refusing to share memory with another user)", s.path, uid, unix.Getuid(), errs.ErrSegment)
	}
	if mode != 0o600 {
		return false, fmt.Errorf("segment: %s has mode %#o, want 0600: %w (not made by symheap; remove it)", s.path, mode, errs.ErrSegment)
	}
	firstEmpty := time.Time{}
	allocated := int64(0)
	for {
		if err := unix.Flock(s.fd, unix.LockShared, true); err == nil {
			_, _, size, _ := unix.Fstat(s.fd)
			if size >= HeaderSize {
				if err := s.mapHeader(); err != nil {
					return false, err
				}
				if s.h.magic != Magic || s.h.version != Version {
					// Not a segment of ours, or of another layout: refuse,
					// and leave the file alone.
					return false, s.validate()
				}
				// Pairs with the creator's store of stateReady.
				st := s.h.state.Load()
				if st == stateReady {
					break
				}
				if st == stateFailed {
					return false, fmt.Errorf("segment: the PE that created %s failed: %s: %w", s.path, getString(s.h.failMsg[:]), errs.ErrSegment)
				}
				// Not ready, yet nobody holds the exclusive lock: the
				// creator died between creating and publishing.
				s.tryRemoveStale()
				return false, fmt.Errorf("segment: the PE that created %s died before finishing it: %w (the job must be restarted; the segment was removed)", s.path, errs.ErrPeerLost)
			}
			// Empty file and no exclusive lock: the creator is between
			// its open and its flock, or died there. Allow it a moment.
			if firstEmpty.IsZero() {
				firstEmpty = time.Now()
			} else if time.Since(firstEmpty) > time.Second {
				s.tryRemoveStale()
				return false, fmt.Errorf("segment: %s was created but never initialised: its creator died: %w (the segment was removed; restart the job)", s.path, errs.ErrPeerLost)
			}
			unix.Flock(s.fd, unix.LockUnlock, false)
		}
		// The creator reserves the segment (fallocate) before it
		// publishes the header: gigabytes at hundreds of PEs, which may
		// take longer than the timeout on a busy machine. While the
		// reservation grows, the wait is not stuck.
		if a, err := unix.Allocated(s.fd); err == nil && a != allocated {
			allocated, deadline = a, time.Now().Add(s.p.InitTimeout)
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("segment: timed out after %v waiting for %s to be initialised (raise %s if PEs start slowly): %w", s.p.InitTimeout, s.path, config.EnvInitTimeout, errs.ErrSegment)
		}
		if s.p.Stop != nil {
			if err := s.p.Stop(); err != nil {
				return false, fmt.Errorf("segment: waiting for %s to be initialised: %w", s.path, err)
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := s.validate(); err != nil {
		// A complete header from another job or another version: if
		// nobody is attached it is stale and can go.
		if s.isStale() {
			s.tryRemoveStale()
			return true, err
		}
		return false, err
	}
	if s.isStale() {
		// Ready, complete, and yet nobody is attached: a crashed job
		// with our id left it behind.
		s.tryRemoveStale()
		return true, fmt.Errorf("segment: %s was left by a dead job: %w", s.path, errs.ErrSegment)
	}
	return false, s.takeLiveness()
}

// isStale reports whether no PE is attached: no liveness lock is held. The
// caller holds a shared flock, so it cannot prove more than that.
func (s *Segment) isStale() bool {
	if s.h == nil {
		return false
	}
	n := int(s.h.npes)
	if n < 1 || n > MaxPEs {
		n = MaxPEs
	}
	for pe := 0; pe < n; pe++ {
		if held, err := unix.OFDLocked(s.fd, LiveLockBase+int64(pe)); err != nil || held {
			return false
		}
	}
	// The creator takes its liveness lock before publishing, so a ready
	// segment with none held has no live PE.
	return s.h.state.Load() == stateReady
}

// tryRemoveStale removes the file if the exclusive flock can be had.
func (s *Segment) tryRemoveStale() {
	unix.Flock(s.fd, unix.LockUnlock, false)
	if unix.Flock(s.fd, unix.LockExclusive, true) == nil {
		s.unlinkIfSame()
	}
	unix.Flock(s.fd, unix.LockUnlock, false)
	s.unmapAll()
}

// validate checks the header against this PE's parameters.
func (s *Segment) validate() error {
	_, _, size, err := unix.Fstat(s.fd)
	if err != nil {
		return fmt.Errorf("segment: stat %s: %v: %w", s.path, err, errs.ErrSegment)
	}
	if err := ValidateHeader(s.hdrMap.Mem, uint64(size), uint64(unix.Getuid())); err != nil {
		return fmt.Errorf("segment: %s: %w", s.path, err)
	}
	h, l := s.h, s.lay
	if s.p.ReadOnly {
		s.lay = h.layout()
		return nil
	}
	var diff []string
	if h.npes != uint64(l.NPEs) {
		diff = append(diff, fmt.Sprintf("PEs: job has %d, this PE says %d", h.npes, l.NPEs))
	}
	if h.heapSize != l.HeapSize {
		diff = append(diff, fmt.Sprintf("symmetric heap: job has %s, this PE asks %s (SHMEM_SYMMETRIC_SIZE)", FormatSize(h.heapSize), FormatSize(l.HeapSize)))
	}
	if h.sharedSize != l.SharedSize {
		diff = append(diff, fmt.Sprintf("shared heap: job has %s, this PE asks %s (SYMHEAP_SHARED_SIZE)", FormatSize(h.sharedSize), FormatSize(l.SharedSize)))
	}
	if h.cbSize != l.CBSize {
		diff = append(diff, fmt.Sprintf("control block: job has %d, this PE wants %d (different symheap versions?)", h.cbSize, l.CBSize))
	} else if h.cbSum != s.p.CBSum {
		diff = append(diff, fmt.Sprintf("control-block areas: the job's digest is %#x, this PE's %#x (its program was built with a different symheap: build every PE's program with the same version)", h.cbSum, s.p.CBSum))
	}
	if h.formatsSum != s.p.FormatsSum {
		diff = append(diff, fmt.Sprintf("formats shared by Go and C: the job's digest is %#x, this PE's %#x (a Go program and libsymheap, or two programs, built from different versions of symheap: rebuild them from one)", h.formatsSum, s.p.FormatsSum))
	}
	if a := getString(h.allocator[:]); s.p.Allocator != "" && a != s.p.Allocator {
		diff = append(diff, fmt.Sprintf("allocator: job uses %q, this PE asks %q (SYMHEAP_ALLOCATOR)", a, s.p.Allocator))
	}
	if len(diff) > 0 {
		return fmt.Errorf("segment: PE %d disagrees with the job's segment: %s: %w", s.p.Rank, strings.Join(diff, "; "), errs.ErrBadConfig)
	}
	return nil
}

// ValidateHeader checks the identity fields of a header image against the
// file size and the expected owner. It never panics, whatever the bytes.
func ValidateHeader(b []byte, fileSize, uid uint64) error {
	if len(b) < HeaderSize {
		return fmt.Errorf("header of %d bytes, want %d: %w", len(b), HeaderSize, errs.ErrSegment)
	}
	h := headerOf(b)
	if h.magic != Magic {
		return fmt.Errorf("bad magic %#x (not a symheap segment): %w", h.magic, errs.ErrSegment)
	}
	if h.version != Version {
		return fmt.Errorf("layout version %d, this symheap reads version %d: %w (all PEs must run the same symheap; remove the segment)", h.version, Version, errs.ErrSegment)
	}
	if h.uid != uid {
		return fmt.Errorf("header says owner uid %d, we are %d: %w", h.uid, uid, errs.ErrSegment)
	}
	if h.gen == 0 {
		return fmt.Errorf("zero generation: %w", errs.ErrSegment)
	}
	if h.npes < 1 || h.npes > MaxPEs {
		return fmt.Errorf("header says %d PEs: %w", h.npes, errs.ErrSegment)
	}
	want, err := ComputeLayout(int(h.npes), h.heapSize, h.sharedSize, h.cbSize)
	if err != nil {
		return fmt.Errorf("header sizes: %v: %w", err, errs.ErrSegment)
	}
	if got := h.layout(); got != want {
		return fmt.Errorf("header layout %+v does not follow from its sizes (%+v): %w", got, want, errs.ErrSegment)
	}
	if h.size != want.Total || fileSize != h.size {
		return fmt.Errorf("header says %d bytes, layout %d, file %d: %w", h.size, want.Total, fileSize, errs.ErrSegment)
	}
	return nil
}

// takeLiveness is step 4.
func (s *Segment) takeLiveness() error {
	if s.p.ReadOnly {
		return nil
	}
	if err := unix.OFDLock(s.fd, LiveLockBase+int64(s.p.Rank), true); err != nil {
		if errors.Is(err, unix.EAGAIN) {
			return fmt.Errorf("segment: another process is already PE %d of job %q: %w (two PEs with one rank: check SYMHEAP_PE / the launcher)", s.p.Rank, s.p.Job, errs.ErrBadConfig)
		}
		return fmt.Errorf("segment: liveness lock: %v: %w", err, errs.ErrSegment)
	}
	slot := &s.h.pes[s.p.Rank]
	slot.pid.Store(uint64(unix.Getpid()))
	slot.state.Store(slotAttached)
	s.h.attached.Add(1)
	return nil
}

// Alive reports whether PE pe still holds its liveness token.
func (s *Segment) Alive(pe int) bool {
	if pe == s.p.Rank && !s.p.ReadOnly {
		return true
	}
	held, err := unix.OFDLocked(s.fd, LiveLockBase+int64(pe))
	return err == nil && held
}

// Closed reports whether PE pe left the job through Close.
func (s *Segment) Closed(pe int) bool { return s.h.pes[pe].state.Load() == slotClosed }

// Node returns the node PE pe runs on and this segment's node, in a job
// on several nodes (Params.NodeOf); ok false in a job on one node.
func (s *Segment) Node(pe int) (node, here int, ok bool) {
	if s.h.node == 0 || s.h.pes[pe].node == 0 {
		return 0, 0, false
	}
	return int(s.h.pes[pe].node) - 1, int(s.h.node) - 1, true
}

// Pid returns the process id PE pe recorded when it attached.
func (s *Segment) Pid(pe int) int { return int(s.h.pes[pe].pid.Load()) }

// CheckPeers returns ErrPeerLost naming the first PE of the list (all PEs
// when pes is nil) that is gone without closing.
func (s *Segment) CheckPeers(pes []int) error {
	_, err := s.LostPeer(pes)
	return err
}

// LostPeer is CheckPeers that also returns the PE found gone (-1 if none).
func (s *Segment) LostPeer(pes []int) (int, error) {
	var lost = -1
	err := s.checkPeers(pes, &lost, true)
	return lost, err
}

// CheckDead is CheckPeers for PEs that died or stalled only: a PE that
// left through Close is not reported. The runtime asks it first, before
// it asks whether a PE in Close left a collective call unmade, so that a
// death is reported as such, not as what the survivors did after it.
func (s *Segment) CheckDead(pes []int) error {
	var lost = -1
	return s.checkPeers(pes, &lost, false)
}

// BeforeLoss sets f to run before a check reports a PE of this node
// that died or closed (CheckPeers, LostPeer, CheckDead, the barrier's
// check): the runtime's wait while a GlobalExit of the node is under way,
// in which the node's PEs leave one by one and this process too is about
// to exit with the exit's code.
func (s *Segment) BeforeLoss(f func()) { s.beforeLoss.Store(&f) }

func (s *Segment) checkPeers(pes []int, lost *int, closedToo bool) error {
	check := func(pe int) error {
		if s.Alive(pe) {
			if d, stuck := s.stalled(pe); stuck && !s.Closed(pe) {
				*lost = pe
				how := "has not been scheduled"
				if st, err := unix.ProcessState(s.Pid(pe)); err == nil && st == 'T' {
					how = "is stopped (SIGSTOP or a debugger) and has not run"
				}
				return fmt.Errorf("PE %d (pid %d) of job %q %s for %v: %w (SYMHEAP_PEER_TIMEOUT is %v)",
					pe, s.Pid(pe), s.p.Job, how, d.Round(time.Millisecond), errs.ErrPeerLost, s.p.PeerTimeout)
			}
			return nil
		}
		how := "died"
		if s.Closed(pe) {
			if !closedToo {
				return nil
			}
			how = "closed"
		}
		if f := s.beforeLoss.Load(); f != nil {
			(*f)()
		}
		*lost = pe
		return fmt.Errorf("PE %d (pid %d) of job %q %s: %w", pe, s.Pid(pe), s.p.Job, how, errs.ErrPeerLost)
	}
	if pes == nil {
		for _, pe := range s.local {
			if err := check(pe); err != nil {
				return err
			}
		}
		return nil
	}
	for _, pe := range pes {
		if err := check(pe); err != nil {
			return err
		}
	}
	return nil
}

// Barrier synchronises all PEs of the job through the header's barrier.
//
// Once a PE is found gone the barrier is broken for good (see
// shmsync.Barrier), and every later call, in every PE, returns ErrPeerLost
// naming that PE.
func (s *Segment) Barrier() error {
	err := s.h.barrier.Wait(len(s.local), func() (int, error) { return s.LostPeer(nil) })
	if errors.Is(err, shmsync.ErrBroken) {
		m, _ := s.h.barrier.Broken()
		return fmt.Errorf("PE %d (pid %d) of job %q is gone: %w", m, s.Pid(m), s.p.Job, errs.ErrPeerLost)
	}
	return err
}

// Close leaves the job; the last PE out removes the segment. Idempotent.
func (s *Segment) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.release()
	s.unmapAll()
	err := unix.Close(s.fd)
	s.fd = -1
	return err
}

// Leave is Close for a process about to exit (GlobalExit): it gives up
// this PE's locks and, if it is the last PE out, removes the file, but it
// leaves the mappings in place, since other goroutines of the process may
// still be reading shared memory until the exit. Idempotent.
func (s *Segment) Leave() {
	if s.closed.CompareAndSwap(false, true) {
		s.release()
	}
}

// release is what Close and Leave share: stop the heartbeat, mark the slot
// closed, drop the liveness lock and the shared flock (explicitly: a
// mapping of the file keeps the open file description, and with it the
// locks, alive), and unlink the file if the exclusive flock can be had.
func (s *Segment) release() {
	if s.beatStop != nil {
		close(s.beatStop)
		<-s.beatDone
	}
	if !s.p.ReadOnly && s.h != nil {
		s.h.pes[s.p.Rank].state.Store(slotClosed)
		s.h.attached.Add(^uint32(0))
		unix.OFDLock(s.fd, LiveLockBase+int64(s.p.Rank), false)
	}
	unix.Flock(s.fd, unix.LockUnlock, false)
	if !s.p.ReadOnly && unix.Flock(s.fd, unix.LockExclusive, true) == nil {
		s.unlinkIfSame()
		unix.Flock(s.fd, unix.LockUnlock, false)
	}
}

// RemoveBroken removes the segment's name for a job that has lost a PE,
// when every other attached PE is gone, closed, or stalled past
// PeerTimeout (a stopped PE keeps its liveness lock, so Close's "last PE
// out" never comes): the file then goes when the last mapping does. It
// reports whether it removed the name. The caller has left the job's
// collective life (its Close found the job broken).
func (s *Segment) RemoveBroken() bool {
	for _, pe := range s.local {
		if pe == s.p.Rank || s.Closed(pe) || !s.Alive(pe) {
			continue
		}
		if _, stuck := s.stalled(pe); !stuck {
			return false
		}
	}
	s.unlinkIfSame()
	return true
}

// abandon undoes a failed Open after the file was joined.
func (s *Segment) abandon() {
	s.closed.Store(false)
	s.Close()
}

func (s *Segment) unlinkIfSame() {
	if unix.SameFile(s.fd, s.path) {
		unix.Unlink(s.path)
	}
}

// Path is the segment's file.
func (s *Segment) Path() string { return s.path }

// Layout returns the segment's layout.
func (s *Segment) Layout() Layout { return s.lay }

// Rank and NPEs identify this PE.
func (s *Segment) Rank() int { return s.p.Rank }

// NPEs is the number of PEs of the job.
func (s *Segment) NPEs() int { return s.lay.NPEs }

// Local returns the ranks that attach to this segment (Params.Local), in
// increasing order: every rank, unless the job spans nodes.
func (s *Segment) Local() []int { return s.local }

// Mode returns ModeSameAddress or ModeOffset.
func (s *Segment) Mode() int { return int(s.h.mode.Load()) }

// SameAddress reports whether every PE maps the segment at one address.
func (s *Segment) SameAddress() bool { return s.Mode() == ModeSameAddress }

// Allocator returns the allocator component recorded for the job.
func (s *Segment) Allocator() string { return getString(s.h.allocator[:]) }

// Generation returns the segment's random generation number.
func (s *Segment) Generation() uint64 { return s.h.gen }

// Job returns the job id recorded in the header.
func (s *Segment) Job() string { return getString(s.h.job[:]) }

// Created returns the creation time recorded in the header.
func (s *Segment) Created() time.Time { return time.Unix(0, int64(s.h.created)) }

// FormatSize prints a byte count in its largest binary unit: a whole
// number when exact ("32M"), else to a tenth ("22.3G", never "23370948K").
func FormatSize(n uint64) string {
	for _, u := range []struct {
		shift  uint
		suffix string
	}{{40, "T"}, {30, "G"}, {20, "M"}, {10, "K"}} {
		if n < 1<<u.shift {
			continue
		}
		if n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d%s", n>>u.shift, u.suffix)
		}
		return fmt.Sprintf("%.1f%s", float64(n)/float64(uint64(1)<<u.shift), u.suffix)
	}
	return fmt.Sprintf("%dB", n)
}

func putString(dst []byte, s string) {
	clear(dst)
	copy(dst[:len(dst)-1], s)
}

func getString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
