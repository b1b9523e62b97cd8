//go:build !ucx

package symheap

import (
	"fmt"

	"github.com/symheap/symheap/internal/cabi"
)

// Without the ucx build tag symheap has no transport to other nodes:
// a job is the PEs of one node, as the environment describes them.

// MultiNode reports whether this build reaches PEs on other nodes (the
// ucx build tag).
const MultiNode = false

// farLayer is the multi-node state of a PE; empty in this build.
type farLayer struct{}

// discover reads the job's placement; in this build every PE of the
// job is on this node. A launcher that says the job spans nodes (more PEs
// in the job than on this node) is refused: each node's PEs would run as
// a job of their own, or wait for PEs that never come.
func discover(j *job) (topology, *farLayer, error) {
	if s := j.span; s.vars != "" {
		where := fmt.Sprintf("%d of them on this node", s.here)
		switch {
		case s.here == 0 && s.nodes > 1:
			where = fmt.Sprintf("on %d nodes", s.nodes)
		case s.nodes > 1:
			where += fmt.Sprintf(", on %d nodes", s.nodes)
		}
		todo := "build the program with `go build -tags ucx` (UCX and PMIx, under a PMIx launcher: mpirun, srun --mpi=pmix), or run the job on one node"
		if cabi.Hosted {
			todo = "the C library, libsymheap, is single-node: run the job on one node"
		}
		return topology{}, nil, fmt.Errorf("symheap: %s says the job has %d PEs, %s, but this build of symheap reaches only the PEs of its own node: %w (%s)",
			s.vars, s.total, where, ErrBadConfig, todo)
	}
	return placement(j.npes), nil, nil
}

func (f *farLayer) finalize()                                          {}
func (pe *PE) farAnnounce(p int)                                       {}
func (pe *PE) farExit(code int)                                        {}
func (pe *PE) startFar() error                                         { return nil }
func (pe *PE) closeFar(barrier bool, lost error) error                 { return lost }
func (pe *PE) farBarrier() error                                       { return nil }
func (pe *PE) farCheck() error                                         { return nil }
func (pe *PE) farAlive(p int) bool                                     { return false }
func (pe *PE) farRecords(seq uint64) error                             { return nil }
func (pe *PE) farLeaderLost() error                                    { return nil }
func (pe *PE) farMsgSend(buf []byte, dest, tag int) error              { return ErrNotSupported }
func (pe *PE) farMsgIsend(buf []byte, dest, tag int) (*Request, error) { return nil, ErrNotSupported }
func (pe *PE) farMsgRecv(buf []byte, source, tag int) (Status, error) {
	return Status{}, ErrNotSupported
}
func (pe *PE) farMsgIrecv(buf []byte, source, tag int) (*Request, error) { return nil, ErrNotSupported }
func farReqWait(req *Request) (Status, error, bool)                      { return Status{}, nil, false }
func farReqTest(req *Request) (bool, Status, error, bool)                { return false, Status{}, nil, false }
func farReqRelease(req *Request) (error, bool)                           { return nil, false }

// Without the ucx build no job spans nodes (farJob stays nil, farLock
// false), so the multi-node teams, collectives and locks
// (collective_far.go, lock_far.go) are never reached; these stand in for
// them.

// farTeamState has the fields the team API reads (team.go); without the
// ucx build there is never one.
type farTeamState struct {
	members []int
	rank    int
}

type farTeams struct{}

func farTeamOf(pe *PE, t *Team) *farTeamState                          { return nil }
func farTeam(t *Team) *PE                                              { return nil }
func farSync(pe *PE, t *Team) error                                    { return ErrNotSupported }
func farSplit(pe *PE, t *Team, start, stride, size int) (*Team, error) { return nil, ErrNotSupported }
func farDestroy(pe *PE, t *Team) error                                 { return ErrNotSupported }
func farBroadcast[T any](pe *PE, t *Team, dst, src []T, root int) error {
	return ErrNotSupported
}
func farFCollect[T any](pe *PE, t *Team, dst, src []T) error         { return ErrNotSupported }
func farAllToAll[T any](pe *PE, t *Team, dst, src []T) error         { return ErrNotSupported }
func farReduce[T Number](pe *PE, t *Team, dst, src []T, op Op) error { return ErrNotSupported }
func (pe *PE) farSetLock(l *int64) error                             { return ErrNotSupported }
func (pe *PE) farTestLock(l *int64) (bool, error)                    { return false, ErrNotSupported }
func (pe *PE) farClearLock(l *int64) error                           { return ErrNotSupported }
