package symheap

import (
	"runtime"
	"time"

	"github.com/symheap/symheap/internal/shmsync"
)

// The transfer-time probe at Init: the leader waits up to probeArrive for
// the follower (which may still be waking from the barrier's sleep, a
// millisecond or more in a VM), then measures for up to probeLimit (its
// rounds take a small part of that when both have a core; longer means
// one of them has none now).
const (
	probeArrive = 20 * time.Millisecond
	probeLimit  = 2 * time.Millisecond
)

// probing reports whether this node's PEs measure the transfer time
// between them at Init (shmsync, "The transfer time, measured between
// PEs"): only where it is used, a node with a core for each of at least
// two PEs.
func probing(local int) bool { return local >= 2 && local <= runtime.NumCPU() }

// probeLine measures the transfer time between this node's first two PEs
// through the first one's control block, right after Init's barrier, and
// gives it to this process's pacing and to the layers that derive a poll
// count from it. The node's other PEs wait for the result. Without one
// (a PE had no core in time) the pacing keeps its default.
func (pe *PE) probeLine() {
	local := pe.topo.local
	if !probing(len(local)) {
		return
	}
	w := &pe.ctl[local[0]].probe
	var d time.Duration
	var ok bool
	switch pe.rank {
	case local[0], local[1]:
		d, ok = shmsync.ProbeLine(w, pe.rank == local[0], probeArrive, probeLimit)
	default:
		d, ok = shmsync.ProbeResult(w, 2*(probeArrive+probeLimit))
	}
	if !ok {
		return
	}
	shmsync.SetLine(d)
	pe.ext.msg.Retune()
	pe.ext.teams.Retune()
	pe.ext.sym.Retune()
}
