package symheap

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/symheap/symheap/internal/cabi"
	"github.com/symheap/symheap/internal/calls"
	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/segment"
	"github.com/symheap/symheap/internal/transport"
)

// PEs on other nodes, over a transport.Net (UCX in the ucx build, TCP in
// every build) joined by a transport.Bootstrap (PMIx in the ucx build, a
// rendezvous at SYMHEAP_BOOT in every build).
//
// # Bootstrap
//
// Init asks the bootstrap for this PE's rank, the job's size and the
// node of every PE. The PEs of a node share the node's segment, which
// keeps the job's numbering: every node's segment has a control block and
// a partition slot for every PE of the job, and only the node's own PEs
// attach and back theirs (segment.Params.Local). So a rank, a heap offset
// and a control-block offset mean the same on every node, and the layers
// above index every PE alike.
//
// A job whose PEs are all on one node stops there: no transport.
// Otherwise every PE opens the transport (startFar), which registers two
// regions, once: its symmetric heap (the target of puts, gets and
// atomics) and the node's control blocks (which a wait pings to tell a
// stopped PE from a busy one); allocation never registers anything. The
// transport publishes what its peers need through the bootstrap and
// fences (the cross-node part of Init's barrier: every heap is formatted
// before it). Connections are made lazily, on the first operation to a
// PE, so start-up costs the fence and nothing per PE.
//
// # Progress
//
// Over a network without remote memory access (UCX over TCP), puts and
// atomics are performed at the target in software, when the target's
// transport progresses. Every blocking operation progresses while it
// waits; every wait of the runtime progresses in its condition
// (WaitUntil, the allocation records, the barrier); and a progress
// goroutine sleeps in Net.Sleep until something arrives, so a PE busy in
// its own code, or asleep in a futex wait, still serves the others. After
// each wake-up the goroutine wakes this PE's sleepers, whose condition
// may have been changed by what arrived, and matches the receives that
// wait to be matched (msg_far.go, progressMatch): a sender of a
// rendezvous message waits for its receiver's receive, which must not
// wait in turn for the receiving PE to call a message function.
//
// # Barrier
//
// PE.Barrier and the world team's Sync are hierarchical: every PE
// completes its operations (Quiet, a flush), the node's PEs meet in the
// segment's barrier, the node's lowest rank (its leader) runs a
// dissemination barrier with the other nodes' leaders over tagged
// messages (ceil(log2 nodes) rounds), and the node's PEs meet again. A
// leader that finds a PE lost leaves the rank in its control block
// (control.farLost) before the second meeting, so that every PE of the
// node returns the error; one that finds a PE of another node in another
// collective call (pingCalls) leaves farLostDiverged.
//
// # Atomics
//
// An atomic on a PE of this node is a CPU atomic on the shared segment;
// one on a PE of another node is the transport's, which both UCX over
// TCP (its software atomics) and the TCP transport perform at the target
// with the same locked CPU instructions on the same coherent memory. The
// two kinds are atomic with respect to each other. A NIC's hardware
// atomics would not be (they are not atomic with the CPU's): no transport
// here uses them.
//
// # Faults
//
// When a PE dies its connections fail and the transport reports it
// (transport.PeerError); the bootstrap's launcher events (a process
// terminated or aborted) are recorded too. Both become ErrPeerLost naming
// the PE. A stopped PE on another node is reported when an operation on
// it has not completed for SYMHEAP_PEER_TIMEOUT.

// MultiNode reports whether this build reaches PEs on other nodes. Every
// build does: over TCP (internal/tcp) in every build, over UCX in the ucx
// build.
const MultiNode = true

// farLayer is a PE's multi-node state. Set in Init, read-only after, but
// for lost and epoch.
type farLayer struct {
	pe      *PE
	boot    transport.Bootstrap
	net     transport.Net
	far     []int // the PEs on other nodes
	leaders []int // the lowest rank of each node, by node
	node    int   // this PE's node
	leader  bool  // this PE is its node's leader

	epoch    uint32                // barriers made (leaders)
	told     atomic.Bool           // this PE has announced a lost PE
	lost     atomic.Pointer[error] // the first failure of a cross-node barrier
	progStop chan struct{}
	progDone chan struct{}
	msgs     farMsgs // messages (msg_far.go)
	// The leader's buffers for the allocation records (farRecords):
	// made once, for every PE of the job.
	recOut, recIn []uint64
	recSends      []transport.Req
	// met counts this PE's meetings with each PE of the job in the node
	// part of a team's barrier (farTeamSync).
	met []atomic.Uint32
	// pings are the checks of waits for a message from each PE (pinger).
	pings []func() error
}

// discover reads the job from a bootstrap (internal/transport: PMIx under
// a PMIx launcher in the ucx build, a rendezvous at SYMHEAP_BOOT in every
// build) when one finds its launcher, else from the environment alone: a
// job on this node. A launcher that says the job spans nodes without a
// bootstrap to join them is refused: each node's PEs would run as a job
// of their own, or wait for PEs that never come.
func discover(j *job) (topology, *farLayer, error) {
	boot, err := transport.Detect(getenv("SYMHEAP_BOOTSTRAP"), getenv, whoOf(j, getenv))
	if err != nil {
		return topology{}, nil, fmt.Errorf("symheap: %w", err)
	}
	if boot == nil {
		return placement(j.npes), nil, spanRefused(j)
	}
	fail := func(err error) (topology, *farLayer, error) {
		boot.Close()
		return topology{}, nil, fmt.Errorf("symheap: reading the job from %s: %w", boot.Name(), err)
	}
	rank, size := boot.Rank(), boot.Size()
	if size < 1 || rank < 0 || rank >= size || size > segment.MaxPEs {
		return fail(fmt.Errorf("rank %d of %d PEs: %w (a job has 1 to %d PEs)", rank, size, ErrBadConfig, segment.MaxPEs))
	}
	ids, err := boot.Nodes()
	if err != nil {
		return fail(err)
	}
	if len(ids) != size {
		return fail(fmt.Errorf("%d node names for %d PEs: %w", len(ids), size, ErrBadConfig))
	}
	t := topology{nodeOf: numberNodes(ids)}
	for r, n := range t.nodeOf {
		if n == t.nodeOf[rank] {
			t.local = append(t.local, r)
		}
	}
	j.rank, j.npes, j.source = rank, size, boot.Name()
	// One segment per node: the node's number in its name keeps nodes
	// that share a /dev/shm apart.
	j.id = fmt.Sprintf("%s.n%d", boot.Job(), t.nodeOf[rank])
	if len(t.local) == size {
		boot.Close() // one node: nothing more to ask
		return t, nil, nil
	}
	f := &farLayer{boot: boot, node: t.nodeOf[rank]}
	seen := map[int]bool{}
	for r, n := range t.nodeOf {
		if n != f.node {
			f.far = append(f.far, r)
		}
		if !seen[n] {
			seen[n] = true
			f.leaders = append(f.leaders, r)
		}
	}
	f.leader = t.local[0] == rank
	f.met = make([]atomic.Uint32, size)
	if f.leader {
		f.recOut = make([]uint64, 0, 9*len(t.local))
		f.recIn = make([]uint64, 9*size)
	}
	return t, f, nil
}

// spanRefused is the error of a job that a launcher says spans nodes
// when no bootstrap joins them; nil for every other job.
func spanRefused(j *job) error {
	s := j.span
	if s.vars == "" {
		return nil
	}
	where := fmt.Sprintf("%d of them on this node", s.here)
	switch {
	case s.here == 0 && s.nodes > 1:
		where = fmt.Sprintf("on %d nodes", s.nodes)
	case s.nodes > 1:
		where += fmt.Sprintf(", on %d nodes", s.nodes)
	}
	todo := "set SYMHEAP_BOOT=host:port (an address the job's first PE listens on, reachable from every node) to join the nodes over TCP, or build with `go build -tags ucx` and run under a PMIx launcher (mpirun, srun --mpi=pmix), or run the job on one node"
	if cabi.Hosted {
		todo = "the C library, libsymheap, is single-node: run the job on one node"
	}
	return fmt.Errorf("symheap: %s says the job has %d PEs, %s, but nothing joins this node to the others: %w (%s)",
		s.vars, s.total, where, ErrBadConfig, todo)
}

// startFar opens the transport (SYMHEAP_TRANSPORT, else the build's
// best), before Init's barrier: it registers the PE's symmetric heap
// and the node's control blocks, publishes what the other PEs need to
// reach them, and fences with every PE of the job.
func (pe *PE) startFar() error {
	f := pe.farL
	if f == nil {
		return nil
	}
	f.pe = pe
	f.makePingers(pe.npes)
	cbs := pe.sp.Mem()[pe.sp.Lay.CBOff : pe.sp.Lay.CBOff+uint64(pe.npes)*pe.sp.Lay.CBSize]
	net, err := transport.Open(getenv("SYMHEAP_TRANSPORT"), transport.Config{
		Boot:       f.boot,
		Regions:    [][]byte{transport.RegionHeap: pe.sp.Heap(pe.rank), transport.RegionControl: cbs},
		PeerErrors: pe.set.peerErrors,
		Timeout:    pe.set.peerTimeout,
		Announced:  f.onAnnounced,
		Lost:       func(int) error { return f.launcherLost() },
	})
	if err != nil {
		return fmt.Errorf("symheap: Init: joining the other nodes: %w", err)
	}
	f.net = net
	// The standing receive of other nodes' announcements of a lost PE.
	if err := net.Watch(farTag(tagLost, 0, 0, 0), 0xff<<56); err != nil {
		return fmt.Errorf("symheap: Init: %w", err)
	}
	pe.rma.useRemote(&pe.sp, f, f.far)
	f.progStop, f.progDone = make(chan struct{}), make(chan struct{})
	go f.progress()
	farJob.Store(pe)
	return nil
}

// progress is the progress goroutine: it sleeps on the worker's event
// descriptor, progresses, wakes this PE's sleepers, whose condition what
// it processed may have changed, and runs the matching step of messages
// (progressMatch) for a PE that is not in a message call.
func (f *farLayer) progress() {
	defer close(f.progDone)
	sleep := 50 * time.Millisecond
	for {
		select {
		case <-f.progStop:
			return
		default:
		}
		if v, ok := f.net.Sleep(sleep); ok && v&announceExit != 0 {
			f.onAnnounced(v) // exits
		}
		// UCX stored what arrived with plain stores; a full fence before
		// the sleepers load, as a put's P2 (wait.go).
		core.FullFence()
		f.pe.rma.wake(f.pe.rank)
		sleep = 50 * time.Millisecond
		if f.pe.progressMatch() {
			sleep = busySleep
		}
	}
}

// closeFar leaves the multi-node job: a cross-node barrier (when barrier:
// nobody reaches into this PE's memory after it), then the worker and
// PMIx. It runs after the node's last barrier of Close.
//
// In a job that lost a PE (lost, or the barrier's error) it leaves the
// UCX worker as it is, for the process's exit to release: UCX 1.13's
// handling of a connection that failed while a wireup reply to its peer
// waited to be sent ends in an assertion that aborts the process (a check
// later versions dropped), and a PE going down has nothing more to
// complete across nodes.
func (pe *PE) closeFar(barrier bool, lost error) error {
	f := pe.farL
	if f == nil || f.net == nil {
		if f != nil {
			f.boot.Close()
		}
		return lost
	}
	err := lost
	if barrier && err == nil {
		err = pe.farBarrier()
	}
	farJob.CompareAndSwap(pe, nil)
	close(f.progStop)
	<-f.progDone
	if !errors.Is(err, ErrPeerLost) {
		f.net.Close()
	}
	f.boot.Close()
	return err
}

// finalize disconnects from the launcher, for an Init that fails before
// the segment is open. A nil f does nothing.
func (f *farLayer) finalize() {
	if f != nil {
		f.boot.Close()
	}
}

// launcherLost is the PMIx side of liveness: a process the launcher
// reported terminated.
func (f *farLayer) launcherLost() error {
	if r, st, ok := f.boot.Lost(); ok {
		return fmt.Errorf("PE %d on node %d terminated (the launcher reports %s): %w", r, f.pe.topo.nodeOf[r], st, ErrPeerLost)
	}
	return nil
}

// farCheck is the multi-node part of the liveness check of every wait: a
// PE on another node whose connection failed, or that the launcher
// reported gone.
func (pe *PE) farCheck() error {
	f := pe.farL
	if f == nil || f.net == nil {
		return nil
	}
	if e := f.lost.Load(); e != nil {
		return *e
	}
	if err := f.launcherLost(); err != nil {
		return err
	}
	if err := f.announced(); err != nil {
		return err
	}
	if p, err := f.net.Failed(); err != nil {
		pe.farAnnounce(p)
		return f.peerLost(p, err)
	}
	return nil
}

// farAnnounce tells the PEs of the other nodes, once, that PE p (found
// lost on this node, or by this PE) is gone: their waits end with
// ErrPeerLost naming it even if they never talk to p or its node.
//
// Not p itself: it cannot act on it, and an endpoint made now to a PE
// that was killed or stopped is a connection UCX 1.13 may fail while its
// wireup is under way, which ends in an assertion that aborts this
// process (a PE that announced a stopped PE of the other node died so,
// now and then, in the cluster tests' stop case, leaving its node's
// segment behind).
func (pe *PE) farAnnounce(p int) {
	f := pe.farL
	if f == nil || f.net == nil || p < 0 || !f.told.CompareAndSwap(false, true) {
		return
	}
	to := make([]int, 0, len(f.far))
	for _, q := range f.far {
		if q != p {
			to = append(to, q)
		}
	}
	f.net.Announce(to, farTag(tagLost, pe.rank, 0, 0), uint64(p), false)
}

// announceExit is the bit of an announcement that carries GlobalExit's
// status instead of a lost PE; announceDiverged the bit of one that says
// that the announcing PE (the value's low bits) found PEs in different
// collective calls.
const (
	announceExit     = 1 << 63
	announceDiverged = 1 << 62
)

// announced returns the error of a loss another node announced (or
// exits, if it announced GlobalExit).
func (f *farLayer) announced() error {
	if v, ok := f.net.Watched(); ok {
		return f.onAnnounced(v)
	}
	return nil
}

// onAnnounced is what an announcement means: GlobalExit's status, on
// which this PE leaves and exits at once (as its node's exit watcher
// would), or a lost PE.
func (f *farLayer) onAnnounced(v uint64) error {
	if v&announceExit != 0 {
		f.pe.nodeExit(int(v & 0xff)) // does not return
	}
	if v&announceDiverged != 0 {
		by := int(v &^ announceDiverged)
		if by >= f.pe.npes {
			by = -1
		}
		node := -1
		if by >= 0 {
			node = f.pe.topo.nodeOf[by]
		}
		return f.pe.calls.Adopt(fmt.Errorf("%s on PE %d: PE %d of node %d found PEs in different collective calls (its message names them): %w",
			calls.Describe(f.pe.calls.Own().Load()), f.pe.rank, by, node, ErrDiverged))
	}
	if v >= uint64(f.pe.npes) {
		return fmt.Errorf("a PE on another node is gone (an announcement named %d): %w", v, ErrPeerLost)
	}
	return fmt.Errorf("PE %d on node %d is gone (announced by another node): %w", v, f.pe.topo.nodeOf[v], ErrPeerLost)
}

// farExit tells every PE of the other nodes to exit with code
// (GlobalExit).
func (pe *PE) farExit(code int) {
	if f := pe.farL; f != nil && f.net != nil {
		// Flushed: the other nodes' PEs have the request before this
		// node's PEs start exiting (whose lost connections they would
		// otherwise see first).
		f.net.Announce(f.far, farTag(tagLost, pe.rank, 0, 0), announceExit|uint64(code&0xff), true)
	}
}

// farAlive reports whether PE p, on another node, is not known lost.
func (pe *PE) farAlive(p int) bool {
	f := pe.farL
	if f == nil || f.net == nil {
		return false
	}
	if r, _, ok := f.boot.Lost(); ok && r == p {
		return false
	}
	if v, ok := f.net.Watched(); ok && int(v) == p {
		return false
	}
	q, _ := f.net.Failed()
	return q != p
}

// peerLost turns a UCX failure on PE p into ErrPeerLost naming it.
func (f *farLayer) peerLost(p int, err error) error {
	if errors.Is(err, ErrPeerLost) || !errors.Is(err, transport.ErrPeer) {
		return err
	}
	if e := f.announced(); e != nil {
		return e // what the PE's node said before it went
	}
	var pe *transport.PeerError
	if errors.As(err, &pe) && pe.Peer >= 0 {
		p = pe.Peer
	}
	if !errors.Is(err, transport.ErrTimeout) {
		// A PE that exits on a GlobalExit of another node drops its
		// connections: if that is why, the request is on its way too.
		for t0 := time.Now(); time.Since(t0) < 50*time.Millisecond; time.Sleep(time.Millisecond) {
			if e := f.announced(); e != nil {
				return e
			}
		}
	}
	if p < 0 {
		return fmt.Errorf("a PE on another node is lost: %w (%v)", ErrPeerLost, err)
	}
	how := "is gone"
	if errors.Is(err, transport.ErrTimeout) {
		how = "has stopped answering"
	}
	return fmt.Errorf("PE %d on node %d %s: %w (%v)", p, f.pe.topo.nodeOf[p], how, ErrPeerLost, err)
}

// The Remote (transport.Remote) over the Net: region 0 of every far PE is
// its symmetric heap.

func (f *farLayer) Put(target int, off core.HeapOff, src []byte, nbi bool) error {
	return f.peerLost(target, f.net.Put(target, transport.RegionHeap, uint64(off), src, nbi))
}

func (f *farLayer) Get(dst []byte, source int, off core.HeapOff) error {
	return f.peerLost(source, f.net.Get(dst, source, transport.RegionHeap, uint64(off)))
}

func (f *farLayer) Atomic(op transport.AMO, target int, off core.HeapOff, size int, v, cmp uint64) (uint64, error) {
	old, err := f.net.Atomic(op, target, transport.RegionHeap, uint64(off), size, v, cmp)
	return old, f.peerLost(target, err)
}

func (f *farLayer) Fence() error { return f.peerLost(-1, f.net.Fence()) }
func (f *farLayer) Quiet() error { return f.peerLost(-1, f.net.Flush()) }
func (f *farLayer) Progress()    { f.net.Progress() }

// farRecords brings the allocation records of phase seq across nodes
// (symalloc.go, "The records"), once this PE has published its own. The
// node's leader waits for the records of its node's PEs, sends them in
// one tagged message to every other node's leader, and writes what it
// receives from them into this node's copies of their PEs' control
// blocks, publishing each with its seq store, as the PE itself does on
// its own node; then it wakes the node's sleepers. The other PEs of the
// node just wait for every record, as on one node. So a phase costs one
// message per pair of nodes, in one round, and the node's PEs meet in
// shared memory: the shape of the hierarchical barrier.
func (pe *PE) farRecords(seq uint64) error {
	f := pe.farL
	if f == nil || f.net == nil || !f.leader {
		return nil
	}
	h := &pe.ext.sym
	slot := seq % 2
	arrived := func() bool {
		for _, p := range pe.topo.local {
			// Seq-cst load; pairs with PE p's seq store (exchange).
			if h.ctl[p].allocRec[slot].seq.Load() < seq {
				return false
			}
		}
		return true
	}
	fail := func(p int, err error) error {
		var perr *transport.PeerError
		if errors.As(err, &perr) && perr.Peer >= 0 {
			p = perr.Peer
		}
		if !errors.Is(err, ErrDiverged) {
			pe.farAnnounce(p)
		}
		return pe.nodeFail(p, f.fail(f.peerLost(p, err)))
	}
	if !arrived() {
		if err := pe.rma.pollThenWait(pe.rank, arrived, h.lost); err != nil {
			return err
		}
	}
	const words = 9 // rank and the eight values of a record
	out := f.recOut[:0]
	for _, p := range pe.topo.local {
		// Loads after PE p's seq store was seen.
		v := h.ctl[p].allocRec[slot].load()
		out = append(out, uint64(p), v.seq, v.call, v.kind, v.size, v.align, v.in, v.out, v.hints)
	}
	f.recOut = out
	msg := core.Bytes(core.AddrOf(&out[0]), uint64(len(out))*8)
	tag := func(src int) uint64 { return farTag(tagAlloc, src, 0, uint32(seq)) }
	sends := f.recSends[:0]
	for _, l := range f.leaders {
		if l == pe.rank {
			continue
		}
		r, err := f.net.SendNB(l, tag(pe.rank), msg)
		if err != nil {
			return fail(l, err)
		}
		sends = append(sends, r)
	}
	f.recSends = sends
	in := f.recIn
	for _, l := range f.leaders {
		if l == pe.rank {
			continue
		}
		n, _, err := f.net.Recv(core.Bytes(core.AddrOf(&in[0]), uint64(len(in))*8), tag(l), tagFull, l, f.pinger(l))
		if err != nil {
			return fail(l, err)
		}
		if n <= 0 || n%(words*8) != 0 {
			return fail(l, fmt.Errorf("allocation records of %d bytes from PE %d: %w", n, l, ErrBadArg))
		}
		for i := 0; i < n/8; i += words {
			p := int(in[i])
			if p < 0 || p >= pe.npes || pe.topo.nodeOf[p] == f.node {
				return fail(l, fmt.Errorf("allocation record of PE %d from PE %d: %w", p, l, ErrBadArg))
			}
			rec := &h.ctl[p].allocRec[slot].allocRecord
			core.SetPlain(&rec.call, in[i+2])
			core.SetPlain(&rec.kind, in[i+3])
			core.SetPlain(&rec.size, in[i+4])
			core.SetPlain(&rec.align, in[i+5])
			core.SetPlain(&rec.in, in[i+6])
			core.SetPlain(&rec.out, in[i+7])
			core.SetPlain(&rec.hints, in[i+8])
			// Seq-cst store: publishes the fields to the node's PEs, as
			// PE p's own store does on its node.
			rec.seq.Store(in[i+1])
		}
	}
	// The node's PEs may sleep on their records: wake them (the seq
	// stores above are the fence wakeSleepers asks for).
	pe.rma.wakeSleepers()
	for i, r := range sends {
		for {
			done, _, err := f.net.Test(r, -1)
			if err != nil {
				return fail(-1, err)
			}
			if done {
				break
			}
			if err := pe.peerLost(); errors.Is(err, ErrDiverged) {
				return pe.nodeFail(-1, f.fail(err)) // announced by another node: tell this one's PEs
			} else if err != nil {
				return err
			}
			f.net.WaitEvent()
		}
		sends[i] = nil
	}
	return nil
}

// farLeaderLost is the multi-node part of a collective allocation's
// liveness check for the node's other PEs: the loss their leader found
// while it exchanged the records (farRecords).
func (pe *PE) farLeaderLost() error {
	f := pe.farL
	if f == nil || f.net == nil || f.leader {
		return nil
	}
	return pe.lostBy(pe.topo.local[0])
}

// lostBy returns the loss that PE l, a leader of this node (of the node's
// PEs, or of a team's members on it), recorded in its control block.
func (pe *PE) lostBy(l int) error {
	// Seq-cst load; pairs with the leader's store (farRecords,
	// farTeamSync, farBarrier).
	if v := pe.ctl[l].farLost.Load(); v == farLostDiverged {
		return pe.calls.Adopt(fmt.Errorf("%s on PE %d: PE %d, which meets the other nodes for this node, found that a PE there made another call (its message names both): %w",
			calls.Describe(pe.calls.Own().Load()), pe.rank, l, ErrDiverged))
	} else if v >= 2 {
		return fmt.Errorf("PE %d on node %d is gone (found by this node's leader, PE %d): %w", v-2, pe.topo.nodeOf[v-2], l, ErrPeerLost)
	} else if v != 0 {
		return fmt.Errorf("a PE on another node is gone (found by this node's leader, PE %d): %w", l, ErrPeerLost)
	}
	return nil
}

// farLostDiverged in a leader's control.farLost says that it found a PE
// of another node in another collective call (pingCalls).
const farLostDiverged = -1

// Message tags of the runtime's own traffic: kind, sender, round, epoch.
const (
	tagBarrier = 1
	tagLost    = 2 // a PE announces a lost PE to the other nodes' PEs
	tagMsg     = 3 // Send and Recv: the sender's rank and the user's tag
	tagTeam    = 4 // Sync of a team made by Split: team key, sender, round, epoch
	tagAlloc   = 5 // a node's allocation records: sender, phase (farRecords)
	tagFull    = ^uint64(0)
	tagAnyUser = ^uint64(0) &^ (1<<36 - 1) // matches any user tag
)

func msgTag(src, tag int) uint64 { return tagMsg<<56 | uint64(src&0xfffff)<<36 | uint64(tag) }

func farTag(kind uint64, src int, round int, epoch uint32) uint64 {
	return kind<<56 | uint64(src&0xfffff)<<36 | uint64(round&0xf)<<32 | uint64(epoch)
}

// farBarrier is the hierarchical barrier (see "Barrier" above). The caller
// has completed its operations.
func (pe *PE) farBarrier() error {
	f := pe.farL
	if e := f.lost.Load(); e != nil {
		return *e
	}
	if err := f.net.Flush(); err != nil {
		return f.fail(f.peerLost(-1, err))
	}
	// The node's meetings check the calls of its PEs as the team layer's
	// barrier does; the leader's waits for the other nodes' check theirs
	// (pingCalls).
	sameCall := func() error { return pe.calls.Check(nil) }
	if err := pe.seg.BarrierCheck(sameCall); err != nil {
		if p, _ := pe.seg.LostPeer(nil); p >= 0 && !errors.Is(err, ErrDiverged) {
			pe.farAnnounce(p)
		}
		return f.fail(err)
	}
	var err error
	if f.leader {
		var lost int
		lost, err = f.leaderBarrier()
		if err != nil {
			if !errors.Is(err, ErrDiverged) { // a divergence loses no PE
				pe.farAnnounce(lost)
			}
			// Left for the node's PEs, which load it after the second
			// meeting below.
			pe.nodeFail(lost, err)
		}
	}
	if err2 := pe.seg.BarrierCheck(sameCall); err == nil && err2 != nil {
		err = err2
	}
	if err == nil && !f.leader {
		err = pe.lostBy(pe.topo.local[0])
	}
	if err != nil {
		return f.fail(err)
	}
	return nil
}

// farTeamSync is the barrier of a team made by Split in a job on several
// nodes, hierarchical as the world's: the team's members on each node
// meet their node's leader (the lowest of them) in shared memory
// (nodeArrive, nodeGather, nodeRelease), the leaders of the team's nodes
// run a dissemination barrier over UCX tagged messages (ceil(log2 nodes)
// rounds, the tags carrying the team's key, the sender, the round and
// the team's barrier count), and each leader releases its node's
// members. A team within one node makes no network traffic.
func (pe *PE) farTeamSync(ft *farTeamState) error {
	f := pe.farL
	if e := f.lost.Load(); e != nil {
		return *e
	}
	ft.epoch++
	l := ft.local[0]
	if pe.rank != l {
		return pe.nodeArrive(l)
	}
	if err := pe.nodeGather(ft.local); err != nil {
		return err
	}
	n := len(ft.leaders)
	me := slices.Index(ft.leaders, pe.rank)
	tag := func(src, round int) uint64 {
		return tagTeam<<56 | (ft.key&0xfff)<<44 | uint64(src&0xfffff)<<24 | uint64(round&0xf)<<20 | uint64(ft.epoch&0xfffff)
	}
	fail := func(p int, err error) error { return pe.nodeFail(p, f.fail(f.peerLost(p, err))) }
	for k, d := 0, 1; d < n; k, d = k+1, d*2 {
		to, from := ft.leaders[(me+d)%n], ft.leaders[(me-d+n)%n]
		if err := f.net.Send(to, tag(pe.rank, k), nil, f.pinger(to)); err != nil {
			return fail(to, err)
		}
		if _, _, err := f.net.Recv(nil, tag(from, k), tagFull, from, f.pinger(from)); err != nil {
			return fail(from, err)
		}
	}
	pe.nodeRelease(ft.local)
	return nil
}

// The node part of farTeamSync. Each PE has, in its control block, two
// words for every PE of the job (farSyncArea): its arrivals at that PE
// as its leader, and its releases of that PE as its leader; and each PE
// counts, in its process, the meetings it has had with every other PE
// (farLayer.met). A member and its leader meet in the same order on both
// sides (the calls of two PEs on the teams they share must come in one
// order, or they would wait for each other), so the k-th arrival of a
// member at a leader, and the leader's k-th release of it, belong to the
// same barrier, whichever team it is. The counts are stored with
// sequentially consistent stores and waited for on the reader's signal
// word (rma.waitSignal), whose sleepers the writer wakes.

// syncWords returns PE p's words for partner q: its arrivals at q and its
// releases of q.
func (pe *PE) syncWords(p, q int) (arrive, release *atomic.Uint32) {
	b, _ := core.SliceData(pe.sp.Bytes(farSyncArea, p))
	w := core.SliceAt[atomic.Uint32](b, 2*pe.npes)
	return &w[2*q], &w[2*q+1]
}

// nodeShare is the leader's side of a collective's node step: every other
// member of local waits (nodeArrive) until the leader has fetched from
// other nodes what they all need, then copies it from the leader in
// shared memory.
func (pe *PE) nodeShare(local []int) error {
	if err := pe.nodeGather(local); err != nil {
		return err
	}
	pe.nodeRelease(local)
	return nil
}

// nodeFail records, for the PEs of this node waiting for this PE as
// their leader (lostBy: the node's PEs in a collective allocation, a
// team's members in its barrier or a collective's node step), that an
// operation on PE p of another node failed with err, and returns err.
func (pe *PE) nodeFail(p int, err error) error {
	v := int64(p) + 2
	if errors.Is(err, ErrDiverged) {
		v = farLostDiverged
	}
	// Seq-cst store; the node's members load it in their wait's check.
	pe.ctl[pe.rank].farLost.Store(v)
	pe.rma.wakeAll()
	return err
}

// reachedCount reports whether count v has reached want, across the wrap.
func reachedCount(v, want uint32) bool { return int32(v-want) >= 0 }

// nodeArrive is a member's part: arrive at leader l, wait for its release.
func (pe *PE) nodeArrive(l int) error {
	f := pe.farL
	k := f.met[l].Add(1)
	arrive, _ := pe.syncWords(pe.rank, l)
	// Seq-cst store; pairs with the leader's load in nodeGather, and
	// orders this PE's earlier stores before it.
	arrive.Store(k)
	pe.rma.wake(l)
	_, release := pe.syncWords(l, pe.rank)
	cond := func() bool { return reachedCount(release.Load(), k) } // seq-cst; pairs with nodeRelease's store
	check := func() error {
		// The leader's report first: after a divergence it leaves at once.
		if err := pe.lostBy(l); err != nil {
			return err
		}
		return pe.peerLost()
	}
	if cond() {
		return nil
	}
	if err := pe.rma.pollThenWait(pe.rank, cond, check); err != nil {
		return f.fail(fmt.Errorf("team barrier, waiting for the team's leader on this node, PE %d: %w", l, err))
	}
	return nil
}

// nodeGather is a leader's first part: wait until every other member of
// local (the team's members on this node, increasing, the leader first)
// has arrived.
func (pe *PE) nodeGather(local []int) error {
	f := pe.farL
	for _, q := range local[1:] {
		k := f.met[q].Add(1)
		arrive, _ := pe.syncWords(q, pe.rank)
		cond := func() bool { return reachedCount(arrive.Load(), k) } // seq-cst; pairs with nodeArrive's store
		if cond() {
			continue
		}
		if err := pe.rma.pollThenWait(pe.rank, cond, pe.peerLost); err != nil {
			return f.fail(fmt.Errorf("team barrier, waiting for PE %d of this node: %w", q, err))
		}
	}
	return nil
}

// nodeRelease is a leader's last part: release the other members of
// local.
func (pe *PE) nodeRelease(local []int) {
	f := pe.farL
	for _, q := range local[1:] {
		_, release := pe.syncWords(pe.rank, q)
		release.Store(f.met[q].Load()) // seq-cst; pairs with nodeArrive's load
		pe.rma.wake(q)
	}
}

// fail records the first failure of a cross-node barrier: every later
// one returns it.
func (f *farLayer) fail(err error) error {
	if f.lost.CompareAndSwap(nil, &err) && errors.Is(err, ErrDiverged) {
		f.announceDiverged()
	}
	return *f.lost.Load()
}

// announceDiverged tells the other nodes' leaders, once, that this PE (a
// leader) found PEs in different collective calls: their waits end with
// ErrDiverged, even those that would otherwise find this PE's node gone
// first (its PEs leave at once), and each tells its node's PEs
// (farLostDiverged). Flushed, for that reason. Only leaders, which
// already talk to each other: a connection made now to a PE that leaves
// right after is what UCX 1.13's wireup does not survive (see closeFar).
func (f *farLayer) announceDiverged() {
	if f.net == nil || !f.leader || !f.told.CompareAndSwap(false, true) {
		return
	}
	to := make([]int, 0, len(f.leaders))
	for _, l := range f.leaders {
		if l != f.pe.rank {
			to = append(to, l)
		}
	}
	f.net.Announce(to, farTag(tagLost, f.pe.rank, 0, 0), announceDiverged|uint64(f.pe.rank), true)
}

// pinger returns the check of a wait for a message from PE p: p may be
// waiting itself, so its silence proves nothing; but a PE that cannot
// answer a get of 8 bytes of its control blocks within
// SYMHEAP_PEER_TIMEOUT is stopped (its progress goroutine answers
// otherwise). It pings every quarter of the timeout, and checks what the
// liveness check of every wait checks.
//
// The checks are made once, at Init (makePingers), so that a wait that
// never gets to them (a message that was already there) costs nothing.
func (f *farLayer) pinger(p int) func() error { return f.pings[p] }

// makePingers makes pinger's check for every PE of the job. Each pings on
// its own schedule, counted from Init; waits in several goroutines may
// share one.
func (f *farLayer) makePingers(npes int) {
	t0 := time.Now()
	f.pings = make([]func() error, npes)
	for p := range f.pings {
		var last atomic.Int64 // since t0, ns
		f.pings[p] = func() error {
			if err := f.pe.peerLost(); err != nil {
				return err
			}
			now := int64(time.Since(t0))
			if time.Duration(now-last.Load()) < f.pe.set.peerTimeout/4 {
				return nil
			}
			last.Store(now)
			return f.pingCalls(p)
		}
	}
}

// pingCalls is a ping of PE p that reads its call word and counts
// (internal/calls) from its node, and checks them against this PE's call:
// a PE of another node in another collective call (a node's leader waits
// for the other nodes' leaders, in the barrier or the allocation
// records) is found as a PE of this node is, by the wait's check.
func (f *farLayer) pingCalls(p int) error {
	buf := make([]byte, calls.Size)
	at := uint64(f.pe.sp.CBSeg(p, calls.Off(f.pe.npes))) - f.pe.sp.Lay.CBOff // in region 1, the node's control blocks
	if err := f.net.Get(buf[calls.WordOff:calls.WordOff+8], p, transport.RegionControl, at+calls.WordOff); err != nil {
		return err
	}
	// The counts after the word, so that counts read after a word that
	// says p left are final (Tracker.CheckRemote).
	if err := f.net.Get(buf[calls.CountsOff:], p, transport.RegionControl, at+calls.CountsOff); err != nil {
		return err
	}
	return f.pe.calls.CheckRemote(p, core.View[calls.Area](buf))
}

// leaderBarrier is the dissemination barrier among the nodes' leaders.
// On failure it returns the PE found lost (-1: unknown) and the error.
func (f *farLayer) leaderBarrier() (int, error) {
	n := len(f.leaders)
	me := sort.SearchInts(f.leaders, f.pe.rank)
	f.epoch++
	lost := func(p int, err error) (int, error) {
		if errors.Is(err, ErrDiverged) {
			return -1, err
		}
		var pe *transport.PeerError
		if errors.As(err, &pe) && pe.Peer >= 0 {
			p = pe.Peer
		}
		if v, ok := f.net.Watched(); ok && v < uint64(f.pe.npes) {
			p = int(v) // another node named the lost PE
		}
		return p, f.peerLost(p, err)
	}
	for k, d := 0, 1; d < n; k, d = k+1, d*2 {
		to, from := f.leaders[(me+d)%n], f.leaders[(me-d+n)%n]
		if err := f.net.Send(to, farTag(tagBarrier, f.pe.rank, k, f.epoch), nil, f.pinger(to)); err != nil {
			return lost(to, err)
		}
		if _, _, err := f.net.Recv(nil, farTag(tagBarrier, from, k, f.epoch), tagFull, from, f.pinger(from)); err != nil {
			return lost(from, err)
		}
	}
	return -1, nil
}

// numberNodes renumbers launcher node ids as 0, 1, ... in the order of
// each node's lowest rank.
func numberNodes[K comparable](ids []K) []int {
	seen := map[K]int{}
	out := make([]int, len(ids))
	for r, id := range ids {
		n, ok := seen[id]
		if !ok {
			n = len(seen)
			seen[id] = n
		}
		out[r] = n
	}
	return out
}
