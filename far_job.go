package symheap

import (
	"fmt"
	"sync/atomic"

	"github.com/symheap/symheap/internal/cabi"
	"github.com/symheap/symheap/internal/calls"
	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/far"
	"github.com/symheap/symheap/internal/msg"
	"github.com/symheap/symheap/internal/segment"
	"github.com/symheap/symheap/internal/team"
	"github.com/symheap/symheap/internal/transport"
)

// A job on several nodes: the PE finds its bootstrap (discover), makes
// the multi-node layer (internal/far) before its segment is open, starts
// it after (startFar), and leaves it in Close (closeFar). The layer
// reaches the PE through farRuntime only.

// MultiNode reports whether this build reaches PEs on other nodes. Every
// build does: over TCP (internal/tcp) in every build, over UCX in the ucx
// build.
const MultiNode = true

// discover reads the job from a bootstrap (internal/transport: PMIx under
// a PMIx launcher in the ucx build, a rendezvous at SYMHEAP_BOOT in every
// build) when one finds its launcher, else from the environment alone: a
// job on this node. A launcher that says the job spans nodes without a
// bootstrap to join them is refused: each node's PEs would run as a job
// of their own, or wait for PEs that never come.
func discover(j *job, set settings) (topology, *far.Layer, error) {
	boot, err := transport.Detect(getenv("SYMHEAP_BOOTSTRAP"), getenv, whoOf(j, getenv))
	if err != nil {
		return topology{}, nil, fmt.Errorf("symheap: %w", err)
	}
	if boot == nil {
		return placement(j.npes), nil, spanRefused(j)
	}
	fail := func(err error) (topology, *far.Layer, error) {
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
	return t, far.New(far.Config{Boot: boot, Transport: getenv("SYMHEAP_TRANSPORT"), Rank: rank, NPEs: size,
		NodeOf: t.nodeOf, Local: t.local, PeerTimeout: set.peerTimeout, PeerErrors: set.peerErrors}), nil
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
		todo = "set SYMHEAP_BOOT=host:port (an address the job's first PE listens on, reachable from every node) to join the nodes over TCP, or build libsymheap with `make capi CAPI_TAGS=ucx` and run under a PMIx launcher (mpirun, srun --mpi=pmix), or run the job on one node"
	}
	return fmt.Errorf("symheap: %s says the job has %d PEs, %s, but nothing joins this node to the others: %w (%s)",
		s.vars, s.total, where, ErrBadConfig, todo)
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

// startFar connects the multi-node layer, before Init's barrier: the
// transport registers the PE's symmetric heap and the node's control
// blocks, and the one-sided operations to other nodes' PEs route to it.
func startFar(pe *PE) error {
	if pe.far == nil {
		return nil
	}
	cbs := pe.sp.Mem()[pe.sp.Lay.CBOff : pe.sp.Lay.CBOff+uint64(pe.npes)*pe.sp.Lay.CBSize]
	regions := [][]byte{transport.RegionHeap: pe.sp.Heap(pe.rank), transport.RegionControl: cbs}
	if cabi.Hosted {
		// A C program's static data, which its C library reaches on the
		// other nodes' PEs by offset (static.c: the same executable,
		// so the same offsets).
		regions = append(regions, cabi.Static.Mem) // transport.RegionStatic
	}
	if h := &pe.ext.hooks; h.decision.Enabled {
		pe.far.UseCache(h.mon)
	}
	if err := pe.far.Start(farRuntime{pe}, regions); err != nil {
		return fmt.Errorf("symheap: Init: %w", err)
	}
	pe.rma.useRemote(&pe.sp, pe.far, pe.far.Far())
	farJob.Store(pe)
	return nil
}

// closeFar leaves the multi-node layer (far.Layer.Close).
func closeFar(pe *PE, barrier bool, lost error) error {
	farJob.CompareAndSwap(pe, nil)
	return pe.far.Close(barrier, lost)
}

// farOf returns the multi-node layer of the process's PE in a job that
// spans nodes, for the calls that reach the PE only through it (teams,
// requests); nil otherwise. One atomic load.
func farOf() *far.Layer {
	if pe := farJob.Load(); pe != nil {
		return pe.far
	}
	return nil
}

// farRuntime is the PE as the multi-node layer sees it: far.Runtime.
type farRuntime struct{ pe *PE }

func (r farRuntime) Check() error          { return r.pe.check() }
func (r farRuntime) CheckPE(p int) error   { return r.pe.checkPE(p) }
func (r farRuntime) PeerLost() error       { return r.pe.peerLost() }
func (r farRuntime) CollectiveLost() error { return r.pe.collectiveLost() }
func (r farRuntime) NodeExit(code int)     { r.pe.nodeExit(code) }
func (r farRuntime) Wake(p int)            { r.pe.rma.wake(p) }
func (r farRuntime) WakeSleepers()         { r.pe.rma.wakeSleepers() }
func (r farRuntime) WakeAll()              { r.pe.rma.wakeAll() }
func (r farRuntime) QuietAll()             { r.pe.rma.quietAll() }
func (r farRuntime) Calls() *calls.Tracker { return r.pe.calls }
func (r farRuntime) Msg() *msg.Layer       { return &r.pe.ext.msg }
func (r farRuntime) World() *team.Team     { return r.pe.ext.teams.World() }

func (r farRuntime) PollThenWait(cond func() bool, check func() error) error {
	return r.pe.rma.pollThenWait(r.pe.rank, cond, check)
}

func (r farRuntime) NodeBarrier(check func() error) error { return r.pe.seg.BarrierCheck(check) }

func (r farRuntime) NodeLostPeer() int {
	p, _ := r.pe.seg.LostPeer(nil)
	return p
}

func (r farRuntime) FarLost(p int) *atomic.Int64 { return &r.pe.ctl[p].farLost }

func (r farRuntime) SyncWords(p int) []atomic.Uint32 {
	return core.Reinterpret[atomic.Uint32](r.pe.sp.Bytes(farSyncArea, p))[:2*r.pe.npes]
}

func (r farRuntime) FarRecord(p int) *atomic.Uint64 {
	return &core.Reinterpret[atomic.Uint64](r.pe.sp.Bytes(farSyncArea, p))[r.pe.npes]
}

func (r farRuntime) CallsAt(p int) uint64 {
	return uint64(r.pe.sp.CBSeg(p, calls.Off(r.pe.npes))) - r.pe.sp.Lay.CBOff
}

func (r farRuntime) Get(dst, src []byte, p int) error { return Get(r.pe, dst, src, p) }

func (r farRuntime) RecordSeq(p int, slot uint64) uint64 {
	return r.pe.ctl[p].allocRec[slot].seq.Load()
}

func (r farRuntime) LoadRecord(p int, slot uint64) [far.RecordWords]uint64 {
	v := r.pe.ctl[p].allocRec[slot].load()
	return [far.RecordWords]uint64{v.seq, v.call, v.kind, v.size, v.align, v.in, v.out, v.hints}
}

func (r farRuntime) StoreRecord(p int, slot uint64, v [far.RecordWords]uint64) {
	rec := &r.pe.ctl[p].allocRec[slot].allocRecord
	core.SetPlain(&rec.call, v[1])
	core.SetPlain(&rec.kind, v[2])
	core.SetPlain(&rec.size, v[3])
	core.SetPlain(&rec.align, v[4])
	core.SetPlain(&rec.in, v[5])
	core.SetPlain(&rec.out, v[6])
	core.SetPlain(&rec.hints, v[7])
	// Seq-cst store: publishes the fields to the node's PEs, as PE p's
	// own store does on its node.
	rec.seq.Store(v[0])
}
