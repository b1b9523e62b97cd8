package far

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/symheap/symheap/internal/calls"
	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/msg"
	"github.com/symheap/symheap/internal/team"
	"github.com/symheap/symheap/internal/transport"
	"github.com/symheap/symheap/memhook"
	"github.com/symheap/symheap/rcache"
)

// Runtime is what the layer needs of the PE that owns it: the node's
// waits and words, its liveness, the call tracker and the node's
// message layer. Its methods are called from the PE's goroutines and
// from the progress goroutine.
type Runtime interface {
	// Check reports whether the PE may be used (not closed, not broken).
	Check() error
	// CheckPE reports whether p is a PE of the job.
	CheckPE(p int) error
	// PeerLost is the liveness check of every wait: this node's PEs,
	// then the other nodes' (through Layer.Check).
	PeerLost() error
	// NodeExit ends every PE of this node with code, this one last.
	NodeExit(code int)
	// Wake wakes PE p's sleepers (a PE of this node); WakeSleepers this
	// PE's; WakeAll every PE's of the node.
	Wake(p int)
	WakeSleepers()
	WakeAll()
	// PollThenWait waits until cond holds, polling then sleeping, and
	// runs check between sleeps; its error ends the wait.
	PollThenWait(cond func() bool, check func() error) error
	// QuietAll completes this PE's puts and atomics, to every PE.
	QuietAll()
	// NodeBarrier is the barrier of this node's PEs; check runs while
	// it waits. NodeLostPeer returns a PE of the node found dead (-1:
	// none).
	NodeBarrier(check func() error) error
	NodeLostPeer() int
	// FarLost is PE p's word in which, as its node's leader, it leaves
	// the failure it found for the node's PEs (LostDiverged, 2 + a lost
	// PE's rank, 1: a PE not known which).
	FarLost(p int) *atomic.Int64
	// SyncWords are PE p's words of the node part of a split team's
	// barrier: two for every PE of the job (teamSync); FarRecord PE p's
	// record of its call on such a team, which its node's leader for the
	// team compares in the barrier.
	SyncWords(p int) []atomic.Uint32
	FarRecord(p int) *atomic.Uint64
	// Calls is the PE's collective-call tracker; CallsAt the offset of
	// PE p's calls area in the node's control blocks (RegionControl).
	Calls() *calls.Tracker
	CallsAt(p int) uint64
	// Msg is the node's message layer.
	Msg() *msg.Layer
	// World is the world team's handle.
	World() *team.Team
	// CollectiveLost is the liveness check of a collective call's waits:
	// the node's deaths, the calls, then PeerLost.
	CollectiveLost() error
	// Get copies len(dst) bytes of PE p's copy of the symmetric object
	// src into dst (on this node or another).
	Get(dst, src []byte, p int) error
	// The allocation records of phase slot (0 or 1) in PE p's control
	// block: RecordSeq loads its seq (seq-cst), LoadRecord its seq and
	// fields after that, StoreRecord writes the fields (v[1:]) plainly
	// and publishes them with a seq-cst store of v[0].
	RecordSeq(p int, slot uint64) uint64
	LoadRecord(p int, slot uint64) [RecordWords]uint64
	StoreRecord(p int, slot uint64, v [RecordWords]uint64)
}

// RecordWords is the number of words of an allocation record: its seq
// and seven values.
const RecordWords = 8

// Config is the job as the bootstrap described it, and the PE's settings.
type Config struct {
	Boot        transport.Bootstrap
	Transport   string // SYMHEAP_TRANSPORT: a transport's name, "" for the build's best
	Rank, NPEs  int
	NodeOf      []int // the node of every PE, numbered from 0 in the order of their lowest ranks
	Local       []int // the PEs of this node, increasing
	PeerTimeout time.Duration
	PeerErrors  bool
}

// Layer is a PE's multi-node state. Set in New and Start, read-only
// after, but for lost and epoch.
type Layer struct {
	rt         Runtime
	boot       transport.Bootstrap
	net        transport.Net
	transport  string
	rank, npes int
	nodeOf     []int // the node of every PE
	local      []int // the PEs of this node, increasing
	far        []int // the PEs on other nodes
	mirrors    []int // this PE's partner on each other node (New), connected at Start
	leaders    []int // the lowest rank of each node, by node
	node       int   // this PE's node
	leader     bool  // this PE is its node's leader
	timeout    time.Duration
	peerErrors bool
	cache      bool             // UseCache
	mon        *memhook.Monitor // UseCache

	epoch    uint32                // barriers made (leaders)
	told     atomic.Bool           // this PE has announced a lost PE
	spread   atomic.Bool           // this PE has told its node of an announcement (spreadLoss)
	lost     atomic.Pointer[error] // the first failure of a cross-node barrier
	progStop chan struct{}
	progDone chan struct{}
	msgs     msgs  // messages (msg.go)
	teams    teams // teams made by Split (team.go)
	// The leader's buffers for the allocation records (Records):
	// made once, for every PE of the job.
	recOut, recIn []uint64
	recSends      []transport.Req
	// met counts this PE's meetings with each PE of the job in the node
	// part of a team's barrier (teamSync).
	met []atomic.Uint32
	// pings are the checks of waits for a message from each PE (pinger).
	pings []func() error
}

// New makes the layer of a job on several nodes; Start connects it. Until
// Start, Close only disconnects from the bootstrap.
func New(c Config) *Layer {
	l := &Layer{boot: c.Boot, transport: c.Transport, rank: c.Rank, npes: c.NPEs, nodeOf: c.NodeOf, local: c.Local,
		node: c.NodeOf[c.Rank], timeout: c.PeerTimeout, peerErrors: c.PeerErrors}
	seen := map[int]bool{}
	for r, n := range l.nodeOf {
		if n != l.node {
			l.far = append(l.far, r)
		}
		if !seen[n] {
			seen[n] = true
			l.leaders = append(l.leaders, r)
		}
	}
	l.leader = l.local[0] == l.rank
	l.mirrors = mirrors(l.nodeOf, l.node, slices.Index(l.local, l.rank))
	l.met = make([]atomic.Uint32, l.npes)
	if l.leader {
		l.recOut = make([]uint64, 0, (RecordWords+1)*len(l.local))
		l.recIn = make([]uint64, (RecordWords+1)*l.npes)
	}
	return l
}

// mirrors returns the partners, on the nodes other than node, of the PE
// that is the i-th of its node: the i-th PE of each (modulo its size).
// The nodes' leaders are thus each other's partners. A PE's
// announcements go to its partners only (Announce), over connections
// made at Start; every PE of the job is some PE's partner unless its
// node is larger than every other, and a PE that hears an announcement
// tells its whole node (spreadLoss).
func mirrors(nodeOf []int, node, i int) []int {
	var byNode [][]int
	for r, n := range nodeOf {
		for len(byNode) <= n {
			byNode = append(byNode, nil)
		}
		byNode[n] = append(byNode[n], r)
	}
	var out []int
	for n, pes := range byNode {
		if n != node && len(pes) > 0 {
			out = append(out, pes[i%len(pes)])
		}
	}
	return out
}

// Far returns the PEs on other nodes.
func (l *Layer) Far() []int { return l.far }

// PeerErrors reports whether the transport reports a lost peer
// (Config.PeerErrors).
func (l *Layer) PeerErrors() bool { return l.peerErrors }

// Describe says how the transport reaches peer.
func (l *Layer) Describe(peer int) (string, error) { return l.net.Describe(peer) }

// UseCache, before Start, asks the transport to register the buffers of
// its operations through a registration cache subscribed to mon
// (transport.Config.Cache).
func (l *Layer) UseCache(mon *memhook.Monitor) { l.cache, l.mon = true, mon }

// CacheStats returns the figures of the transport's registration cache,
// false when it has none.
func (l *Layer) CacheStats() (rcache.Stats, bool) {
	if c, ok := l.net.(transport.Caching); ok && l.cache {
		return c.CacheStats(), true
	}
	return rcache.Stats{}, false
}

// Start opens the transport (Config.Transport, else the build's best),
// before Init's barrier: regions are the PE's symmetric heap and the
// node's control blocks (transport.RegionHeap, RegionControl), which it
// registers; it publishes what the other PEs need to reach them, and
// fences with every PE of the job. Then it starts the progress
// goroutine.
func (l *Layer) Start(rt Runtime, regions [][]byte) error {
	l.rt = rt
	l.makePingers(l.npes)
	net, err := transport.Open(l.transport, transport.Config{
		Boot:       l.boot,
		Regions:    regions,
		PeerErrors: l.peerErrors,
		Timeout:    l.timeout,
		Announced:  l.onAnnounced,
		Lost:       func(int) error { return l.launcherLost() },
		Cache:      l.cache,
		Monitor:    l.mon,
	})
	if err != nil {
		return fmt.Errorf("joining the other nodes: %w", err)
	}
	l.net = net
	// The standing receive of other nodes' announcements of a lost PE.
	if err := net.Watch(tagOf(tagLost, 0, 0, 0), 0xff<<56); err != nil {
		return err
	}
	l.progStop, l.progDone = make(chan struct{}), make(chan struct{})
	go l.progress()
	// The connections announcements take, made now, while every PE
	// answers (its progress goroutine runs); Announce makes none.
	if err := net.Connect(l.mirrors); err != nil {
		return fmt.Errorf("joining the other nodes: %w", err)
	}
	return nil
}

// progress is the progress goroutine: it sleeps on the worker's event
// descriptor, progresses, wakes this PE's sleepers, whose condition what
// it processed may have changed, and runs the matching step of messages
// (progressMatch) for a PE that is not in a message call.
func (l *Layer) progress() {
	defer close(l.progDone)
	sleep := 50 * time.Millisecond
	for {
		select {
		case <-l.progStop:
			return
		default:
		}
		if v, ok := l.net.Sleep(sleep); ok {
			if v&announceExit != 0 {
				l.onAnnounced(v) // exits
			}
			l.spreadLoss(v)
		}
		// The transport stored what arrived with plain stores; a full fence before
		// the sleepers load, as a put's P2 (wait.go).
		core.FullFence()
		l.rt.Wake(l.rank)
		sleep = 50 * time.Millisecond
		if l.progressMatch() {
			sleep = busySleep
		}
	}
}

// Close leaves the multi-node job: a cross-node barrier (when barrier:
// nobody reaches into this PE's memory after it), then the transport and
// the bootstrap. It runs after the node's last barrier of Close. Before
// Start it only disconnects from the bootstrap.
//
// In a job that lost a PE (lost, or the barrier's error) it leaves the
// transport as it is, for the process's exit to release: UCX 1.13's
// handling of a connection that failed while a wireup reply to its peer
// waited to be sent ends in an assertion that aborts the process (a check
// later versions dropped), and a PE going down has nothing more to
// complete across nodes.
func (l *Layer) Close(barrier bool, lost error) error {
	if l.net == nil {
		l.boot.Close()
		return lost
	}
	err := lost
	if barrier && err == nil {
		err = l.Barrier()
	}
	close(l.progStop)
	<-l.progDone
	if !errors.Is(err, errs.ErrPeerLost) {
		l.net.Close()
	}
	l.boot.Close()
	return err
}

// launcherLost is the bootstrap's side of liveness: a process the launcher
// reported terminated.
func (l *Layer) launcherLost() error {
	if r, st, ok := l.boot.Lost(); ok {
		if r >= 0 && r < l.npes && l.nodeOf[r] != l.node && l.rt != nil {
			l.leave(r, l.rank) // for the node's PEs, as a loss found on a connection (peerLost)
		}
		return gone(r, "PE %d on node %d terminated (the launcher reports %s): %w", r, l.nodeOf[r], st, errs.ErrPeerLost)
	}
	return nil
}

// Check is the multi-node part of the liveness check of every wait: a
// PE on another node whose connection failed, or that the launcher
// reported gone.
func (l *Layer) Check() error {
	if l == nil || l.net == nil {
		return nil
	}
	if e := l.lost.Load(); e != nil {
		return *e
	}
	if err := l.launcherLost(); err != nil {
		return err
	}
	if err := l.announced(); err != nil {
		return err
	}
	if err := l.heard(); err != nil {
		return err
	}
	if p, err := l.net.Failed(); err != nil {
		l.Announce(p)
		return l.peerLost(p, err)
	}
	return nil
}

// Announce tells the PEs of the other nodes, once, that PE p (found
// lost on this node, or by this PE) is gone: their waits end with
// errs.ErrPeerLost naming it even if they never talk to p or its node.
//
// It goes to this PE's partners (mirrors), over the connections made at
// Start, and each partner tells its node (spreadLoss). A connection made
// now, while PEs fail, is one UCX 1.13 may not survive: it aborts the
// process when a connection fails with its wireup reply still queued (a
// PE that announced to every PE of the other nodes, one of which
// announced to it at the same moment and then left, died so in the
// cluster tests' kill case; one that announced to the stopped PE itself
// did, in the stop case).
func (l *Layer) Announce(p int) {
	if l == nil || l.net == nil || p < 0 || !l.told.CompareAndSwap(false, true) {
		return
	}
	to := make([]int, 0, len(l.mirrors))
	for _, q := range l.mirrors {
		if q != p {
			to = append(to, q)
		}
	}
	l.net.Announce(to, tagOf(tagLost, l.rank, 0, 0), uint64(p), false)
}

// spreadLoss tells this node's PEs, once, of an announcement this PE
// heard (leave). Announcements of an exit or a divergence take other ways
// (onAnnounced: the node exits; the leaders, which alone hear of a
// divergence, tell their nodes themselves).
func (l *Layer) spreadLoss(v uint64) {
	if v&(announceExit|announceDiverged) != 0 || v >= uint64(l.npes) || !l.spread.CompareAndSwap(false, true) {
		return
	}
	l.leave(int(v), -1)
}

// leave leaves the loss of PE p, on another node, for this node's PEs,
// once: p's rank and the PE of this node that found it (by; -1 when
// another node announced it) go into the leader's farLost word
// (lostNoted), which every PE of the node checks (heard), and all are
// woken. A PE that found the loss itself leaves it before it returns
// the error, so the node's other PEs report the loss, not the PE's
// leaving after it (PE.peerLost looks here first).
func (l *Layer) leave(p, by int) {
	// Seq-cst; a leader's own finding (nodeFail) may replace it.
	if l.rt.FarLost(l.local[0]).CompareAndSwap(0, lostNoted(p, by)) {
		l.rt.WakeAll()
	}
}

// lostNoted is the farLost value of PE p's loss found by PE by of this
// node, or announced by another node (by = -1): below -1, the ranks in
// 24 bits each (a job has fewer than 2^20 PEs: the tags' width).
func lostNoted(p, by int) int64 { return -2 - int64(p) - int64(by+1)<<24 }

// notedBy decodes lostNoted: the lost PE and its finder.
func notedBy(v int64) (p, by int) {
	x := lostNoted(0, -1) - v
	return int(x & (1<<24 - 1)), int(x>>24) - 1
}

// heard returns the loss of a PE that a PE of this node found, or that
// another node announced to one (leave).
func (l *Layer) heard() error {
	if v := l.rt.FarLost(l.local[0]).Load(); v <= lostNoted(0, -1) {
		return l.heardErr(v)
	}
	return nil
}

// heardErr is the error of farLost value v <= lostNoted(0, -1).
func (l *Layer) heardErr(v int64) error {
	p, by := notedBy(v)
	switch {
	case p >= l.npes || by >= l.npes:
		return fmt.Errorf("a PE on another node is gone (farLost %d): %w", v, errs.ErrPeerLost)
	case by >= 0:
		return gone(p, "PE %d on node %d is gone (found by PE %d of this node): %w", p, l.nodeOf[p], by, errs.ErrPeerLost)
	}
	return gone(p, "PE %d on node %d is gone (announced by another node to a PE of this one): %w", p, l.nodeOf[p], errs.ErrPeerLost)
}

// NodeLost returns the loss (or divergence) that a PE of this node left
// for the others (leave, nodeFail), nil if none: what a PE reports when
// a PE of its node leaves, since that PE left because of it.
func (l *Layer) NodeLost() error {
	if l == nil || l.net == nil {
		return nil
	}
	return l.LostBy(l.local[0])
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
func (l *Layer) announced() error {
	if v, ok := l.net.Watched(); ok {
		l.spreadLoss(v)
		return l.onAnnounced(v)
	}
	return nil
}

// onAnnounced is what an announcement means: GlobalExit's status, on
// which this PE leaves and exits at once (as its node's exit watcher
// would), or a lost PE.
func (l *Layer) onAnnounced(v uint64) error {
	if v&announceExit != 0 {
		l.rt.NodeExit(int(v & 0xff)) // does not return
	}
	if v&announceDiverged != 0 {
		by := int(v &^ announceDiverged)
		if by >= l.npes {
			by = -1
		}
		node := -1
		if by >= 0 {
			node = l.nodeOf[by]
		}
		return l.rt.Calls().Adopt(fmt.Errorf("%s on PE %d: PE %d of node %d found PEs in different collective calls (its message names them): %w",
			calls.Describe(l.rt.Calls().Own().Load()), l.rank, by, node, errs.ErrDiverged))
	}
	if v >= uint64(l.npes) {
		return fmt.Errorf("a PE on another node is gone (an announcement named %d): %w", v, errs.ErrPeerLost)
	}
	return gone(int(v), "PE %d on node %d is gone (announced by another node): %w", v, l.nodeOf[v], errs.ErrPeerLost)
}

// Exit tells every PE of the other nodes to exit with code
// (GlobalExit).
func (l *Layer) Exit(code int) {
	if l != nil && l.net != nil {
		// Flushed: the other nodes' PEs have the request before this
		// node's PEs start exiting (whose lost connections they would
		// otherwise see first).
		// To the partners, each of which exits its node (onAnnounced).
		l.net.Announce(l.mirrors, tagOf(tagLost, l.rank, 0, 0), announceExit|uint64(code&0xff), true)
	}
}

// Alive reports whether PE p, on another node, is not known lost.
func (l *Layer) Alive(p int) bool {
	if l == nil || l.net == nil {
		return false
	}
	if r, _, ok := l.boot.Lost(); ok && r == p {
		return false
	}
	if v, ok := l.net.Watched(); ok && int(v) == p {
		return false
	}
	if v := l.rt.FarLost(l.local[0]).Load(); v <= lostNoted(0, -1) {
		if q, _ := notedBy(v); q == p {
			return false
		}
	}
	q, _ := l.net.Failed()
	return q != p
}

// goneError is the loss of a PE as this layer reports it: its rank goes
// with the message, so that a leader that leaves it for its node's PEs
// (nodeFail) or announces it to the other nodes names the PE the message
// names, whichever check found it.
type goneError struct {
	pe  int
	err error
}

func (e *goneError) Error() string { return e.err.Error() }
func (e *goneError) Unwrap() error { return e.err }

// gone is fmt.Errorf for the loss of PE pe.
func gone(pe int, format string, a ...any) error {
	return &goneError{pe, fmt.Errorf(format, a...)}
}

// lostRank returns the PE that err says is lost: a transport's failure on
// a peer, or a loss this layer reported; p if it says none.
func lostRank(err error, p int) int {
	var perr *transport.PeerError
	var g *goneError
	switch {
	case errors.As(err, &g):
		return g.pe
	case errors.As(err, &perr) && perr.Peer >= 0:
		return perr.Peer
	}
	return p
}

// peerLost turns a transport failure on PE p into errs.ErrPeerLost naming it.
func (l *Layer) peerLost(p int, err error) error {
	if errors.Is(err, errs.ErrPeerLost) || !errors.Is(err, transport.ErrPeer) {
		return err
	}
	if e := l.announced(); e != nil {
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
			if e := l.announced(); e != nil {
				return e
			}
		}
	}
	if p < 0 {
		return fmt.Errorf("a PE on another node is lost: %w (%v)", errs.ErrPeerLost, err)
	}
	how := "is gone"
	if errors.Is(err, transport.ErrTimeout) {
		how = "has stopped answering"
	}
	l.leave(p, l.rank)
	return gone(p, "PE %d on node %d %s: %w (%v)", p, l.nodeOf[p], how, errs.ErrPeerLost, err)
}

// The Remote (transport.Remote) over the Net: region 0 of every far PE is
// its symmetric heap.

func (l *Layer) Put(target int, off core.HeapOff, src []byte, nbi bool) error {
	return l.peerLost(target, l.net.Put(target, transport.RegionHeap, uint64(off), src, nbi))
}

func (l *Layer) Get(dst []byte, source int, off core.HeapOff) error {
	return l.peerLost(source, l.net.Get(dst, source, transport.RegionHeap, uint64(off)))
}

func (l *Layer) Atomic(op transport.AMO, target int, off core.HeapOff, size int, v, cmp uint64) (uint64, error) {
	old, err := l.net.Atomic(op, target, transport.RegionHeap, uint64(off), size, v, cmp)
	return old, l.peerLost(target, err)
}

// PutAt, GetAt and AtomicAt are Put, Get and Atomic on region r of the
// far PE: the C library's, whose static data are a region of their own
// (transport.RegionStatic).
func (l *Layer) PutAt(r transport.Region, target int, off uint64, src []byte, nbi bool) error {
	return l.peerLost(target, l.net.Put(target, r, off, src, nbi))
}

func (l *Layer) GetAt(r transport.Region, dst []byte, source int, off uint64) error {
	return l.peerLost(source, l.net.Get(dst, source, r, off))
}

func (l *Layer) AtomicAt(r transport.Region, op transport.AMO, target int, off uint64, size int, v, cmp uint64) (uint64, error) {
	old, err := l.net.Atomic(op, target, r, off, size, v, cmp)
	return old, l.peerLost(target, err)
}

func (l *Layer) Fence() error { return l.peerLost(-1, l.net.Fence()) }
func (l *Layer) Quiet() error { return l.peerLost(-1, l.net.Flush()) }
func (l *Layer) Progress()    { l.net.Progress() }

// Records brings the allocation records of phase seq across nodes
// (symalloc.go, "The records"), once this PE has published its own. The
// node's leader waits for the records of its node's PEs, sends them in
// one tagged message to every other node's leader, and writes what it
// receives from them into this node's copies of their PEs' control
// blocks, publishing each with its seq store, as the PE itself does on
// its own node; then it wakes the node's sleepers. The other PEs of the
// node just wait for every record, as on one node. So a phase costs one
// message per pair of nodes, in one round, and the node's PEs meet in
// shared memory: the shape of the hierarchical barrier.
func (l *Layer) Records(seq uint64) error {
	if l == nil || l.net == nil || !l.leader {
		return nil
	}
	slot := seq % 2
	arrived := func() bool {
		for _, p := range l.local {
			// Seq-cst load; pairs with PE p's seq store (exchange).
			if l.rt.RecordSeq(p, slot) < seq {
				return false
			}
		}
		return true
	}
	fail := func(p int, err error) error {
		p = lostRank(err, p)
		if !errors.Is(err, errs.ErrDiverged) {
			l.Announce(p)
		}
		e := l.fail(l.peerLost(p, err))
		return l.nodeFail(lostRank(e, p), e)
	}
	if !arrived() {
		if err := l.rt.PollThenWait(arrived, l.rt.CollectiveLost); err != nil {
			return err
		}
	}
	const words = RecordWords + 1 // rank and the record
	out := l.recOut[:0]
	for _, p := range l.local {
		// Loads after PE p's seq store was seen.
		v := l.rt.LoadRecord(p, slot)
		out = append(append(out, uint64(p)), v[:]...)
	}
	l.recOut = out
	msg := core.Reinterpret[byte](out)
	tag := func(src int) uint64 { return tagOf(tagAlloc, src, 0, uint32(seq)) }
	sends := l.recSends[:0]
	for _, ld := range l.leaders {
		if ld == l.rank {
			continue
		}
		r, err := l.net.SendNB(ld, tag(l.rank), msg)
		if err != nil {
			return fail(ld, err)
		}
		sends = append(sends, r)
	}
	l.recSends = sends
	in := l.recIn
	for _, ld := range l.leaders {
		if ld == l.rank {
			continue
		}
		n, _, err := l.net.Recv(core.Reinterpret[byte](in), tag(ld), tagFull, ld, l.pinger(ld))
		if err != nil {
			return fail(ld, err)
		}
		if n <= 0 || n%(words*8) != 0 {
			return fail(ld, fmt.Errorf("allocation records of %d bytes from PE %d: %w", n, ld, errs.ErrBadArg))
		}
		for i := 0; i < n/8; i += words {
			p := int(in[i])
			if p < 0 || p >= l.npes || l.nodeOf[p] == l.node {
				return fail(ld, fmt.Errorf("allocation record of PE %d from PE %d: %w", p, ld, errs.ErrBadArg))
			}
			// Published to the node's PEs by the seq store, as PE p's
			// own store does on its node.
			l.rt.StoreRecord(p, slot, [RecordWords]uint64(in[i+1:i+words]))
		}
	}
	// The node's PEs may sleep on their records: wake them (the seq
	// stores above are the fence WakeSleepers asks for).
	l.rt.WakeSleepers()
	for i, r := range sends {
		for {
			done, _, err := l.net.Test(r, -1)
			if err != nil {
				return fail(-1, err)
			}
			if done {
				break
			}
			if err := l.rt.PeerLost(); errors.Is(err, errs.ErrDiverged) {
				return l.nodeFail(-1, l.fail(err)) // announced by another node: tell this one's PEs
			} else if err != nil {
				return err
			}
			l.net.WaitEvent()
		}
		sends[i] = nil
	}
	return nil
}

// LeaderLost is the multi-node part of a collective allocation's
// liveness check for the node's other PEs: the loss their leader found
// while it exchanged the records (Records).
func (l *Layer) LeaderLost() error {
	if l == nil || l.net == nil || l.leader {
		return nil
	}
	return l.LostBy(l.local[0])
}

// LostBy returns the loss that PE ld, a leader of this node (of the
// node's PEs, or of a team's members on it), recorded in its control
// block.
func (l *Layer) LostBy(ld int) error {
	// Seq-cst load; pairs with the leader's store (Records,
	// teamSync, Barrier).
	if v := l.rt.FarLost(ld).Load(); v == LostDiverged {
		return l.rt.Calls().Adopt(fmt.Errorf("%s on PE %d: PE %d, which meets the other nodes for this node, found that a PE there made another call (its message names both): %w",
			calls.Describe(l.rt.Calls().Own().Load()), l.rank, ld, errs.ErrDiverged))
	} else if v >= 2 {
		return gone(int(v-2), "PE %d on node %d is gone (found by this node's leader, PE %d): %w", v-2, l.nodeOf[v-2], ld, errs.ErrPeerLost)
	} else if v <= lostNoted(0, -1) {
		return l.heardErr(v)
	} else if v != 0 {
		return fmt.Errorf("a PE on another node is gone (found by this node's leader, PE %d): %w", ld, errs.ErrPeerLost)
	}
	return nil
}

// LostDiverged in a leader's control.farLost says that it found a PE
// of another node in another collective call (pingCalls).
const LostDiverged = -1

// Message tags of the runtime's own traffic: kind, sender, round, epoch.
const (
	tagBarrier = 1
	tagLost    = 2 // a PE announces a lost PE to the other nodes' PEs
	tagMsg     = 3 // Send and Recv: the sender's rank and the user's tag
	tagTeam    = 4 // Sync of a team made by Split: team key, sender, round, epoch
	tagAlloc   = 5 // a node's allocation records: sender, phase (Records)
	tagFull    = ^uint64(0)
	tagAnyUser = ^uint64(0) &^ (1<<36 - 1) // matches any user tag
)

func msgTag(src, tag int) uint64 { return tagMsg<<56 | uint64(src&0xfffff)<<36 | uint64(tag) }

func tagOf(kind uint64, src int, round int, epoch uint32) uint64 {
	return kind<<56 | uint64(src&0xfffff)<<36 | uint64(round&0xf)<<32 | uint64(epoch)
}

// Barrier is the hierarchical barrier (see "Barrier" above). The caller
// has completed its operations.
func (l *Layer) Barrier() error {
	if e := l.lost.Load(); e != nil {
		return *e
	}
	if err := l.net.Flush(); err != nil {
		return l.fail(l.peerLost(-1, err))
	}
	// The node's meetings check the calls of its PEs as the team layer's
	// barrier does; the leader's waits for the other nodes' check theirs
	// (pingCalls).
	sameCall := func() error { return l.rt.Calls().Check(nil) }
	if err := l.rt.NodeBarrier(sameCall); err != nil {
		if p := l.rt.NodeLostPeer(); p >= 0 && !errors.Is(err, errs.ErrDiverged) {
			l.Announce(p)
		}
		return l.fail(err)
	}
	// Every PE of the node is in this call or past it: compare their
	// records of it with this PE's once (a wait compares them only when it
	// sleeps), as the team layer's barrier lines do on one node; the
	// leaders compare theirs across nodes (leaderBarrier).
	if err := sameCall(); err != nil {
		return l.fail(err)
	}
	var err error
	if l.leader {
		var lost int
		lost, err = l.leaderBarrier()
		if err != nil {
			if !errors.Is(err, errs.ErrDiverged) { // a divergence loses no PE
				l.Announce(lost)
			}
			// Left for the node's PEs, which load it after the second
			// meeting below.
			l.nodeFail(lost, err)
		}
	}
	if err2 := l.rt.NodeBarrier(sameCall); err == nil && err2 != nil {
		err = err2
	}
	if err == nil && !l.leader {
		err = l.LostBy(l.local[0])
	}
	if err != nil {
		return l.fail(err)
	}
	return nil
}

// teamSync is the barrier of a team made by Split in a job on several
// nodes, hierarchical as the world's: the team's members on each node
// meet their node's leader (the lowest of them) in shared memory
// (nodeArrive, nodeGather, nodeRelease), the leaders of the team's nodes
// run a dissemination barrier over tagged messages (ceil(log2 nodes)
// rounds, the tags carrying the team's key, the sender, the round and
// the team's barrier count), and each leader releases its node's
// members. A team within one node makes no network traffic.
func (l *Layer) teamSync(ft *splitTeam) error {
	if e := l.lost.Load(); e != nil {
		return *e
	}
	ft.epoch++
	// The record of this PE's call on the team (splitTeam.rec): a member
	// leaves it for its node's leader before it arrives (the arrival's
	// seq-cst store publishes it), the leader compares the node's with its
	// own once they have all arrived, and the leaders' messages carry
	// theirs, compared by the receiver: members that pass other sizes or
	// another root, or make another call, fail with ErrDiverged before
	// the call's steps, as on the world team (leaderBarrier).
	if ld := ft.local[0]; l.rank != ld {
		l.rt.FarRecord(l.rank).Store(ft.rec)
		return l.nodeArrive(ld)
	}
	if err := l.nodeGather(ft.local); err != nil {
		return err
	}
	differs := func(theirs uint64, q int) error {
		return l.rt.Calls().DiffersIn(calls.Pack(calls.Kind(ft.rec>>calls.ArgsKindShift&0xff), calls.FarTeam, ft.calls), ft.rec, theirs, q)
	}
	for _, q := range ft.local[1:] {
		if err := differs(l.rt.FarRecord(q).Load(), q); err != nil {
			return l.nodeFail(-1, l.fail(err))
		}
	}
	var out, in [8]byte
	binary.LittleEndian.PutUint64(out[:], ft.rec)
	n := len(ft.leaders)
	me := slices.Index(ft.leaders, l.rank)
	tag := func(src, round int) uint64 {
		return tagTeam<<56 | (ft.key&0xfff)<<44 | uint64(src&0xfffff)<<24 | uint64(round&0xf)<<20 | uint64(ft.epoch&0xfffff)
	}
	fail := func(p int, err error) error {
		e := l.fail(l.peerLost(p, err))
		return l.nodeFail(lostRank(e, p), e)
	}
	for k, d := 0, 1; d < n; k, d = k+1, d*2 {
		to, from := ft.leaders[(me+d)%n], ft.leaders[(me-d+n)%n]
		if err := l.net.Send(to, tag(l.rank, k), out[:], l.pinger(to)); err != nil {
			return fail(to, err)
		}
		got, _, err := l.net.Recv(in[:], tag(from, k), tagFull, from, l.pinger(from))
		if err != nil {
			return fail(from, err)
		}
		if theirs := binary.LittleEndian.Uint64(in[:]); got == len(in) {
			if err := differs(theirs, from); err != nil {
				return l.nodeFail(-1, l.fail(err))
			}
		}
	}
	l.nodeRelease(ft.local)
	return nil
}

// The node part of teamSync. Each PE has, in its control block, two
// words for every PE of the job (Runtime.SyncWords): its arrivals at that PE
// as its leader, and its releases of that PE as its leader; and each PE
// counts, in its process, the meetings it has had with every other PE
// (Layer.met). A member and its leader meet in the same order on both
// sides (the calls of two PEs on the teams they share must come in one
// order, or they would wait for each other), so the k-th arrival of a
// member at a leader, and the leader's k-th release of it, belong to the
// same barrier, whichever team it is. The counts are stored with
// sequentially consistent stores and waited for on the reader's signal
// word (rma.waitSignal), whose sleepers the writer wakes.

// syncWords returns PE p's words for partner q: its arrivals at q and its
// releases of q.
func (l *Layer) syncWords(p, q int) (arrive, release *atomic.Uint32) {
	w := l.rt.SyncWords(p)
	return &w[2*q], &w[2*q+1]
}

// nodeShare is the leader's side of a collective's node step: every other
// member of local waits (nodeArrive) until the leader has fetched from
// other nodes what they all need, then copies it from the leader in
// shared memory.
func (l *Layer) nodeShare(local []int) error {
	if err := l.nodeGather(local); err != nil {
		return err
	}
	l.nodeRelease(local)
	return nil
}

// nodeFail records, for the PEs of this node waiting for this PE as
// their leader (LostBy: the node's PEs in a collective allocation, a
// team's members in its barrier or a collective's node step), that an
// operation on PE p of another node failed with err, and returns err.
func (l *Layer) nodeFail(p int, err error) error {
	v := int64(p) + 2
	if errors.Is(err, errs.ErrDiverged) {
		v = LostDiverged
	}
	// Seq-cst store; the node's members load it in their wait's check.
	l.rt.FarLost(l.rank).Store(v)
	l.rt.WakeAll()
	return err
}

// reachedCount reports whether count v has reached want, across the wrap.
func reachedCount(v, want uint32) bool { return int32(v-want) >= 0 }

// nodeArrive is a member's part: arrive at leader ld, wait for its
// release.
func (l *Layer) nodeArrive(ld int) error {
	k := l.met[ld].Add(1)
	arrive, _ := l.syncWords(l.rank, ld)
	// Seq-cst store; pairs with the leader's load in nodeGather, and
	// orders this PE's earlier stores before it.
	arrive.Store(k)
	l.rt.Wake(ld)
	_, release := l.syncWords(ld, l.rank)
	cond := func() bool { return reachedCount(release.Load(), k) } // seq-cst; pairs with nodeRelease's store
	check := func() error {
		// The leader's report first: after a divergence it leaves at once.
		if err := l.LostBy(ld); err != nil {
			return err
		}
		return l.rt.PeerLost()
	}
	if cond() {
		return nil
	}
	if err := l.rt.PollThenWait(cond, check); err != nil {
		return l.fail(fmt.Errorf("team barrier, waiting for the team's leader on this node, PE %d: %w", ld, err))
	}
	return nil
}

// nodeGather is a leader's first part: wait until every other member of
// local (the team's members on this node, increasing, the leader first)
// has arrived.
func (l *Layer) nodeGather(local []int) error {
	for _, q := range local[1:] {
		k := l.met[q].Add(1)
		arrive, _ := l.syncWords(q, l.rank)
		cond := func() bool { return reachedCount(arrive.Load(), k) } // seq-cst; pairs with nodeArrive's store
		if cond() {
			continue
		}
		if err := l.rt.PollThenWait(cond, l.rt.PeerLost); err != nil {
			return l.fail(fmt.Errorf("team barrier, waiting for PE %d of this node: %w", q, err))
		}
	}
	return nil
}

// nodeRelease is a leader's last part: release the other members of
// local.
func (l *Layer) nodeRelease(local []int) {
	for _, q := range local[1:] {
		_, release := l.syncWords(l.rank, q)
		release.Store(l.met[q].Load()) // seq-cst; pairs with nodeArrive's load
		l.rt.Wake(q)
	}
}

// fail records the first failure of a cross-node barrier: every later
// one returns it.
func (l *Layer) fail(err error) error {
	if l.lost.CompareAndSwap(nil, &err) && errors.Is(err, errs.ErrDiverged) {
		l.announceDiverged()
	}
	return *l.lost.Load()
}

// announceDiverged tells the other nodes' leaders, once, that this PE (a
// leader) found PEs in different collective calls: their waits end with
// errs.ErrDiverged, even those that would otherwise find this PE's node gone
// first (its PEs leave at once), and each tells its node's PEs
// (LostDiverged). Flushed, for that reason. Only leaders, which
// already talk to each other: a connection made now to a PE that leaves
// right after is what UCX 1.13's wireup does not survive (see Close).
func (l *Layer) announceDiverged() {
	if l.net == nil || !l.leader || !l.told.CompareAndSwap(false, true) {
		return
	}
	to := make([]int, 0, len(l.leaders))
	for _, ld := range l.leaders {
		if ld != l.rank {
			to = append(to, ld)
		}
	}
	l.net.Announce(to, tagOf(tagLost, l.rank, 0, 0), announceDiverged|uint64(l.rank), true)
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
func (l *Layer) pinger(p int) func() error { return l.pings[p] }

// makePingers makes pinger's check for every PE of the job. Each pings on
// its own schedule, counted from Init; waits in several goroutines may
// share one.
func (l *Layer) makePingers(npes int) {
	t0 := time.Now()
	l.pings = make([]func() error, npes)
	for p := range l.pings {
		var last atomic.Int64 // since t0, ns
		l.pings[p] = func() error {
			if err := l.rt.PeerLost(); err != nil {
				return err
			}
			now := int64(time.Since(t0))
			if time.Duration(now-last.Load()) < l.timeout/4 {
				return nil
			}
			last.Store(now)
			return l.pingCalls(p)
		}
	}
}

// pingCalls is a ping of PE p that reads its call word and counts
// (internal/calls) from its node, and checks them against this PE's call:
// a PE of another node in another collective call (a node's leader waits
// for the other nodes' leaders, in the barrier or the allocation
// records) is found as a PE of this node is, by the wait's check.
func (l *Layer) pingCalls(p int) error {
	buf := make([]byte, calls.Size)
	at := l.rt.CallsAt(p)
	if err := l.net.Get(buf[calls.WordOff:calls.WordOff+8], p, transport.RegionControl, at+calls.WordOff); err != nil {
		return err
	}
	// The counts after the word, so that counts read after a word that
	// says p left are final (Tracker.CheckRemote).
	if err := l.net.Get(buf[calls.CountsOff:], p, transport.RegionControl, at+calls.CountsOff); err != nil {
		return err
	}
	return l.rt.Calls().CheckRemote(p, core.View[calls.Area](buf))
}

// leaderBarrier is the dissemination barrier among the nodes' leaders.
// On failure it returns the PE found lost (-1: unknown) and the error.
// Each message carries the record of the sender's call (internal/calls,
// "Arguments"), which the receiver compares with its own: the leaders of
// nodes whose PEs passed other sizes or another root to one collective,
// or made another call, fail with ErrDiverged (and tell their nodes)
// instead of going on to copy what does not match.
func (l *Layer) leaderBarrier() (int, error) {
	n := len(l.leaders)
	me := sort.SearchInts(l.leaders, l.rank)
	l.epoch++
	rec := l.rt.Calls().Record(0)
	var out, in [8]byte
	binary.LittleEndian.PutUint64(out[:], rec)
	lost := func(p int, err error) (int, error) {
		if errors.Is(err, errs.ErrDiverged) {
			return -1, err
		}
		p = lostRank(err, p)
		if v, ok := l.net.Watched(); ok && v < uint64(l.npes) {
			p = int(v) // another node named the lost PE
		}
		return p, l.peerLost(p, err)
	}
	for k, d := 0, 1; d < n; k, d = k+1, d*2 {
		to, from := l.leaders[(me+d)%n], l.leaders[(me-d+n)%n]
		if err := l.net.Send(to, tagOf(tagBarrier, l.rank, k, l.epoch), out[:], l.pinger(to)); err != nil {
			return lost(to, err)
		}
		got, _, err := l.net.Recv(in[:], tagOf(tagBarrier, from, k, l.epoch), tagFull, from, l.pinger(from))
		if err != nil {
			return lost(from, err)
		}
		if got == len(in) {
			if err := l.rt.Calls().Differs(rec, binary.LittleEndian.Uint64(in[:]), from); err != nil {
				return -1, err
			}
		}
	}
	return -1, nil
}
