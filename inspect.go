package symheap

import (
	"fmt"
	"time"

	"github.com/symheap/symheap/internal/core"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/internal/segment"
	"github.com/symheap/symheap/internal/unix"
)

// JobInfo is a live job as symheap stat sees it.
type JobInfo struct {
	Job         string
	Path        string
	NPEs        int
	Allocator   string
	SameAddress bool
	Created     time.Time
	PEs         []PEInfo
}

// PEInfo is one PE's figures, read from shared memory.
type PEInfo struct {
	Rank  int
	Pid   int
	Alive bool
	State string // "attached", "closed", "dead"

	Heap   alloc.Stats // symmetric heap
	Shared alloc.Stats // local shared heap

	SymAllocs, SymFrees       uint64
	SharedAllocs, SharedFrees uint64
	RemoteFrees               uint64
	Puts, Gets, Atomics       uint64
	MsgEager, MsgSingleCopy   uint64
	MsgKernel, MsgBounce      uint64
	RCache                    RCacheFigures
}

// RCacheFigures are the registration cache's counters of one PE.
type RCacheFigures struct {
	Hits, Misses, Registrations, Deregistrations uint64
	Evictions, Invalidations, BytesRegistered    uint64
}

// Block is one block of a heap map.
type Block struct {
	Off, Size uint64
	Used      bool
}

// JobView is a read-only attachment to a live job's segment.
type JobView struct {
	seg  *segment.Segment
	comp alloc.Component
}

// InspectJob attaches read-only to the segment of a job of this user (a
// job id, a segment name or a path). It takes no lock and no liveness
// token: it can neither keep the segment alive nor pass for a PE.
func InspectJob(job string) (*JobView, error) {
	seg, err := segment.Inspect(job)
	if err != nil {
		return nil, err
	}
	comp, ok := alloc.Lookup(seg.Allocator())
	if !ok {
		seg.Close()
		return nil, fmt.Errorf("symheap: job uses allocator %q, unknown to this build: %w", seg.Allocator(), ErrBadConfig)
	}
	return &JobView{seg: seg, comp: comp}, nil
}

// Close detaches.
func (v *JobView) Close() error { return v.seg.Close() }

// Info reads the job's figures now.
func (v *JobView) Info() JobInfo {
	s := v.seg
	ji := JobInfo{Job: s.Job(), Path: s.Path(), NPEs: s.NPEs(), Allocator: s.Allocator(),
		SameAddress: s.SameAddress(), Created: s.Created()}
	for p := 0; p < s.NPEs(); p++ {
		st := core.NewSpace(s, p, s.NPEs()).Stats(p)
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
				BytesRegistered: st.RCacheBytes.Load()},
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
		if a, err := v.comp.Attach(s.Heap(p)); err == nil {
			pi.Heap = a.Stats()
		}
		if a, err := v.comp.Attach(s.Shared(p)); err == nil {
			pi.Shared = a.Stats()
		}
		ji.PEs = append(ji.PEs, pi)
	}
	return ji
}

// HeapMap lists the blocks of PE p's symmetric heap (shared=false) or
// local shared heap (shared=true), in offset order. The heap is read while
// its owner may change it: the map is a snapshot good for a picture, not
// for an invariant check.
func (v *JobView) HeapMap(p int, shared bool) ([]Block, uint64, error) {
	if p < 0 || p >= v.seg.NPEs() {
		return nil, 0, fmt.Errorf("symheap: PE %d: %w", p, ErrBadPE)
	}
	mem := v.seg.Heap(p)
	if shared {
		mem = v.seg.Shared(p)
	}
	a, err := v.comp.Attach(mem)
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

// ListJobs lists this user's segments: live jobs and stale leftovers.
func ListJobs() ([]segment.Entry, error) { return segment.List(unix.Getuid()) }

// CleanStale removes this user's segments whose PEs are all gone.
func CleanStale() ([]segment.Entry, error) { return segment.Clean(unix.Getuid()) }

// ResolveParams reports every setting Init would use with cfg, with its
// value and where it came from (default, environment, Config).
func ResolveParams(cfg Config) ([]Param, error) {
	s, err := resolve(cfg, getenv)
	return s.params, err
}

// Version is symheap's version.
const Version = "0.1.0"

// CheckHeaps runs the allocator's full invariant check over this PE's
// symmetric heap and local shared heap. It is meant for tests and
// debugging: it walks every block.
func (pe *PE) CheckHeaps() error {
	if err := pe.check(); err != nil {
		return err
	}
	pe.mu.Lock()
	defer pe.mu.Unlock()
	if pe.heap != nil {
		if err := pe.heap.Check(); err != nil {
			return fmt.Errorf("symheap: PE %d symmetric heap: %w", pe.rank, err)
		}
	}
	if pools := pe.ext.shared.pools; pe.rank < len(pools) && pools[pe.rank] != nil {
		if err := pools[pe.rank].Check(); err != nil {
			return fmt.Errorf("symheap: PE %d shared heap: %w", pe.rank, err)
		}
	}
	return nil
}
