//go:build !ucx

package symheap

// Without the ucx build tag symheap has no transport to other nodes:
// a job is the PEs of one node, as the environment describes them.

// MultiNode reports whether this build reaches PEs on other nodes (the
// ucx build tag).
const MultiNode = false

// farLayer is the multi-node state of a PE; empty in this build.
type farLayer struct{}

// discover reads the job's placement; in this build every PE of the
// job is on this node.
func discover(j *job) (topology, *farLayer, error) { return placement(j.npes), nil, nil }

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
