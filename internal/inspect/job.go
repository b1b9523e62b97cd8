// Package inspect is the read-only view of symheap jobs for the symheap
// tool (cmd/symheap): a live job's per-PE figures and heap maps (stat),
// the list of this user's jobs and the removal of stale segments (stat
// and clean), and the report of what this build and machine offer (info).
//
// It reads what the runtime keeps in shared memory, through the same
// layers the runtime uses, never through the runtime itself:
//
//	segment   the job's header, liveness, pids, the heaps' place (segment.Inspect)
//	core      the control-block layout: the per-PE counters (core.Stats)
//	          and the job's team ids in use (core.TeamIDs)
//	alloc     the heaps' figures and blocks (Component.Attach, Stats, Walk;
//	          alloc/small over a local shared heap that has the front end)
//	config    the settings and their sources (config.Resolve), as Init resolves them
//
// A program that uses it must link the runtime (package symheap), as
// cmd/symheap does: the runtime's layers register their control-block
// areas from init functions, and the offsets of core.Stats depend on them.
// Open refuses a job whose control blocks this program lays out otherwise.
package inspect

import (
	"fmt"
	"time"

	"github.com/symheap/symheap/alloc"
	_ "github.com/symheap/symheap/alloc/all" // the built-in components, to read any job's heaps
	"github.com/symheap/symheap/alloc/small"
	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/segment"
	"github.com/symheap/symheap/internal/unix"
	"github.com/symheap/symheap/memhook"
)

// JobInfo is a live job as symheap stat shows it (and prints with --json).
type JobInfo struct {
	Job         string
	Path        string
	NPEs        int
	Allocator   string
	SameAddress bool
	Created     time.Time
	// Node is this segment's node in a job on several nodes (each node
	// has a segment of its own), and Nodes how many the job spans; 0 and
	// 1 on one node.
	Node, Nodes int
	PEs         []PEInfo
}

// PEInfo is one PE's figures, read from shared memory.
type PEInfo struct {
	Rank  int
	Pid   int
	Alive bool
	State string // "attached", "closed", "dead", "not started", "on node N" (a PE of another node: no figures here)
	Node  int    // the PE's node (0 on one node)

	Heap   alloc.Stats // symmetric heap
	Shared alloc.Stats // local shared heap

	SymAllocs, SymFrees       uint64
	SharedAllocs, SharedFrees uint64
	RemoteFrees               uint64
	Puts, Gets, Atomics       uint64
	MsgEager, MsgSingleCopy   uint64
	MsgKernel, MsgBounce      uint64
	RCache                    RCacheFigures
	// Monitor is the memory monitor's self-test result ("FREE|CHUNK|MUNMAP|REMOVE",
	// "none"), with " (C hooks)" when the C library's hooks were its
	// source; "" when no self-test ran.
	Monitor string
	// The C library's shared malloc (capi/smalloc.c): its arena's bytes
	// (0: off) and the blocks it served from the system allocator
	// because the arena was full.
	CMallocArena, CMallocFallbacks uint64
}

// RCacheFigures are the registration cache's counters of one PE.
type RCacheFigures struct {
	Hits, Misses, Registrations, Deregistrations uint64
	Evictions, Invalidations, BytesRegistered    uint64
	Stale                                        uint64 // entries of Go memory retired when their object was collected
}

// Block is one block of a heap map.
type Block struct {
	Off, Size uint64
	Used      bool
}

// Job is a read-only attachment to a live job's segment.
type Job struct {
	seg  *segment.Segment
	sp   *core.Space // the control blocks, as PE 0 would see them
	comp alloc.Component
}

// Open attaches read-only to the segment of a job of this user (a job id,
// a segment name or a path). It takes no lock and no liveness token: it
// can neither keep the segment alive nor pass for a PE.
func Open(job string) (*Job, error) {
	seg, err := segment.Inspect(job)
	if err != nil {
		return nil, err
	}
	comp, ok := alloc.Lookup(seg.Allocator())
	if !ok {
		seg.Close()
		return nil, fmt.Errorf("symheap: job uses allocator %q, unknown to this build: %w", seg.Allocator(), errs.ErrBadConfig)
	}
	lay := seg.Layout()
	if mine, err := segment.ComputeLayout(lay.NPEs, lay.HeapSize, lay.SharedSize, core.CBSize(lay.NPEs)); err != nil || mine.CBSize != lay.CBSize {
		seg.Close()
		return nil, fmt.Errorf("symheap: job %s has control blocks of %d bytes, this program lays them out in %d: %w (another symheap version, or a program that does not link package symheap)",
			seg.Job(), lay.CBSize, mine.CBSize, errs.ErrSegment)
	}
	return &Job{seg: seg, sp: core.NewSpace(seg, 0, lay.NPEs), comp: comp}, nil
}

// Close detaches.
func (v *Job) Close() error { return v.seg.Close() }

// Info reads the job's figures now.
func (v *Job) Info() JobInfo {
	s := v.seg
	ji := JobInfo{Job: s.Job(), Path: s.Path(), NPEs: s.NPEs(), Allocator: s.Allocator(),
		SameAddress: s.SameAddress(), Created: s.Created()}
	ji.Nodes = 1
	nodes := map[int]bool{}
	for p := 0; p < s.NPEs(); p++ {
		if node, here, ok := s.Node(p); ok {
			ji.Node = here
			nodes[node] = true
			if node != here {
				// Its control block here is a copy that only the node's
				// PEs write, its partition is not backed: nothing to read.
				ji.PEs = append(ji.PEs, PEInfo{Rank: p, Node: node, State: fmt.Sprintf("on node %d", node)})
				continue
			}
		}
		st := v.sp.Stats(p)
		pi := PEInfo{Rank: p, Pid: s.Pid(p), Alive: s.Alive(p),
			SymAllocs: st.SymAllocs.Load(), SymFrees: st.SymFrees.Load(),
			SharedAllocs: st.SharedAllocs.Load(), SharedFrees: st.SharedFrees.Load(),
			RemoteFrees: st.RemoteFrees.Load(),
			Puts:        st.Puts.Load(), Gets: st.Gets.Load(), Atomics: st.Atomics.Load(),
			MsgEager: st.MsgEager.Load(), MsgSingleCopy: st.MsgSingleCopy.Load(),
			MsgKernel: st.MsgKernel.Load(), MsgBounce: st.MsgBounce.Load(),
			RCache: RCacheFigures{Hits: st.RCacheHits.Load(), Misses: st.RCacheMisses.Load(),
				Registrations: st.RCacheRegs.Load(), Deregistrations: st.RCacheDeregs.Load(),
				Evictions: st.RCacheEvicts.Load(), Invalidations: st.RCacheInv.Load(),
				BytesRegistered: st.RCacheBytes.Load(), Stale: st.RCacheStale.Load()},
			Monitor:      monitorFlags(st.MonFlags.Load()),
			CMallocArena: st.CMallocArena.Load(), CMallocFallbacks: st.CMallocFallbacks.Load(),
		}
		switch {
		case s.Closed(p):
			pi.State = "closed"
		case pi.Alive:
			pi.State = "attached"
		case pi.Pid == 0:
			pi.State = "not started"
		default:
			pi.State = "dead"
			if unix.ProcessExists(pi.Pid) {
				pi.State = "dead (pid reused or exiting)"
			}
		}
		pi.Node = ji.Node
		if a, err := v.comp.Attach(s.Heap(p)); err == nil {
			pi.Heap = a.Stats()
		}
		if a, err := v.shared(p); err == nil {
			pi.Shared = a.Stats()
		}
		ji.PEs = append(ji.PEs, pi)
	}
	ji.Nodes = max(len(nodes), 1)
	return ji
}

// shared attaches to PE p's local shared heap: through its small-block
// front end when it has one (its header offset is in p's counters), so
// that the figures and the map show the small blocks, not their spans.
func (v *Job) shared(p int) (alloc.Allocator, error) {
	mem := v.seg.Shared(p)
	a, err := v.comp.Attach(mem)
	if err != nil {
		return nil, err
	}
	if hdr := v.sp.Stats(p).SharedFront.Load(); hdr != 0 {
		return small.Attach(a, mem, alloc.Off(hdr-1), nil)
	}
	return a, nil
}

// TeamsInUse returns the number of team ids taken in the job now, the
// world team's included: 1 plus the teams made by Split and not yet
// destroyed.
func (v *Job) TeamsInUse() int { return v.sp.TeamIDs().InUse() }

// HeapMap lists the blocks of PE p's symmetric heap (shared=false) or
// local shared heap (shared=true), in offset order, and the heap's size.
// The heap is read while its owner may change it: the map is a snapshot
// good for a picture, not for an invariant check.
func (v *Job) HeapMap(p int, shared bool) ([]Block, uint64, error) {
	if p < 0 || p >= v.seg.NPEs() {
		return nil, 0, fmt.Errorf("symheap: PE %d: %w", p, errs.ErrBadPE)
	}
	mem := v.seg.Heap(p)
	a, err := v.comp.Attach(mem)
	if shared {
		mem = v.seg.Shared(p)
		a, err = v.shared(p)
	}
	if err != nil {
		return nil, 0, err
	}
	var out []Block
	err = a.Walk(func(off alloc.Off, size uint64, used bool) bool {
		out = append(out, Block{uint64(off), size, used})
		return len(out) < 1<<20
	})
	return out, uint64(len(mem)), err
}

// ListJobs lists this user's segments: live jobs and stale leftovers,
// newest first.
func ListJobs() ([]segment.Entry, error) { return segment.List(unix.Getuid()) }

// CleanStale removes this user's segments whose PEs are all gone, and
// returns them.
func CleanStale() ([]segment.Entry, error) { return segment.Clean(unix.Getuid()) }

// monitorFlags renders a PE's Stats.MonFlags.
func monitorFlags(v uint64) string {
	if v&core.MonTested == 0 {
		return ""
	}
	s := memhook.Flags(v &^ (core.MonTested | core.MonCHooks)).String()
	if v&core.MonCHooks != 0 {
		s += " (C hooks)"
	}
	return s
}
