package core

import (
	"math/bits"
	"sync/atomic"
)

// TeamIDs is the job-wide bitmap of team ids in use, in an area of its own
// of PE 0's control block (the other PEs' copies of the area are unused).
// The runtime's teams (internal/team) take and free ids in
// it; symheap stat counts them through a read-only attachment.
type TeamIDs struct {
	// Bit i: id i belongs to a live team. Bit 0, the world team's id, is
	// never set. Seq-cst loads, CASes and Ands by the leaders of Split
	// and by Destroy, on any PE.
	Used atomic.Uint64
}

var teamIDsArea = RegisterArea("teamids", func(int) uint64 { return SizeOf[TeamIDs]() })

// TeamIDs returns the job's bitmap of team ids in use.
func (s *Space) TeamIDs() *TeamIDs { return View[TeamIDs](s.Bytes(teamIDsArea, 0)) }

// InUse returns the number of team ids taken in the job, the world team's
// included.
func (t *TeamIDs) InUse() int {
	// Seq-cst load; pairs with the CASes and Ands of the team layer on
	// any PE.
	return 1 + bits.OnesCount64(t.Used.Load())
}
