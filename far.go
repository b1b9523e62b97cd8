package symheap

import (
	"strconv"
	"sync/atomic"

	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/transport"
)

// farJob is the process's PE while it belongs to a job that spans nodes
// (set by startFar, cleared by Close), for the team calls, which reach
// the PE only through it: one atomic load on their path.
var farJob atomic.Pointer[PE]

// farSyncArea holds each PE's words of the node part of a split team's
// barrier in a job on several nodes (internal/far, Runtime.SyncWords):
// two uint32 per PE of the job, then the record of the PE's call on such
// a team (Runtime.FarRecord). It is registered in every job, so that the
// control blocks of a job on one node and of one on several are laid out
// alike.
var farSyncArea = core.RegisterArea("farsync", func(npes int) uint64 { return uint64(npes)*8 + 8 })

// Placement: where each PE runs. A job on one node (shrun, or any
// launcher without a bootstrap) has every PE on node 0. Under a
// bootstrap (PMIx, the rendezvous), it tells the node of every PE
// (far_job.go), the PEs of one node share the node's segment, and PEs of
// other nodes are reached through the transport (transport.go).

// topology is the job's placement, as the launcher reported it.
type topology struct {
	nodeOf []int // node number of every PE, numbered 0.. in order of first rank
	local  []int // the PEs of this node, increasing
}

// placement returns the placement of a single-node job of npes PEs.
func placement(npes int) topology {
	t := topology{nodeOf: make([]int, npes), local: make([]int, npes)}
	for i := range t.local {
		t.local[i] = i
	}
	return t
}

// Node returns the node PE p runs on, numbered from 0 in the order of the
// nodes' lowest ranks; -1 if p is not a PE of the job. Every PE of a job
// started on one node is on node 0.
func (pe *PE) Node(p int) int {
	if pe == nil || p < 0 || p >= pe.npes {
		return -1
	}
	return pe.topo.nodeOf[p]
}

// Nodes returns the number of nodes the job runs on.
func (pe *PE) Nodes() int {
	if pe == nil {
		return 0
	}
	n := 0
	for _, v := range pe.topo.nodeOf {
		n = max(n, v+1)
	}
	return n
}

// NodePEs returns the PEs on this PE's node, in increasing order,
// this PE included: those whose symmetric heaps Ptr can reach.
func (pe *PE) NodePEs() []int {
	if pe == nil {
		return nil
	}
	return append([]int(nil), pe.topo.local...)
}

// whoOf is what the launcher's variables say of this PE's place in the
// whole job, for a bootstrap (transport.Who): Open MPI's, PMI's and
// Slurm's world rank and size; a job's own otherwise.
func whoOf(j *job, getenv func(string) string) transport.Who {
	vars := map[string][2]string{
		"Open MPI": {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
		"PMI":      {"PMI_RANK", "PMI_SIZE"},
		"Slurm":    {"SLURM_PROCID", "SLURM_NTASKS"},
	}
	w := transport.Who{Rank: j.rank, Size: j.npes, Job: j.id}
	if v, ok := vars[j.source]; ok {
		r, err1 := strconv.Atoi(getenv(v[0]))
		n, err2 := strconv.Atoi(getenv(v[1]))
		if err1 != nil || err2 != nil {
			r, n = -1, -1
		}
		w.Rank, w.Size = r, n
	}
	return w
}
