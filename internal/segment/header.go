package segment

import (
	"sync/atomic"

	"github.com/symheap/symheap/internal/shmsync"
)

// peSlot is one PE's entry in the header.
type peSlot struct {
	pid   atomic.Uint64 // written by the PE when it attaches
	_     [8]byte
	state atomic.Uint32 // slotEmpty, slotAttached, slotClosed
	_     [4]byte
	beat  atomic.Uint64 // heartbeat: incremented by the PE every HeartbeatPeriod
	node  uint32        // the PE's node + 1 in a job on several nodes (Params.NodeOf), 0 on one node; written by the creator
	_     [28]byte
}

// header is the segment's first HeaderSize bytes. The identity fields are
// written by the creator before it publishes state=ready and never again;
// the rest are atomics shared by every PE.
type header struct {
	magic      uint64
	version    uint64
	size       uint64 // total bytes of the file
	uid        uint64 // owner
	gen        uint64 // random, per creation
	npes       uint64
	heapSize   uint64
	sharedSize uint64
	cbOff      uint64
	cbSize     uint64
	partOff    uint64
	partStride uint64
	sharedOff  uint64
	created    uint64 // unix nanoseconds
	allocator  [32]byte
	job        [128]byte
	failMsg    [512]byte

	state         atomic.Uint32 // stateInit → stateReady or stateFailed
	stateWord     atomic.Uint32 // futex word bumped when state changes
	stateSleepers atomic.Uint32
	forceOffset   atomic.Uint32 // some PE insists on offset mode
	mode          atomic.Uint32 // ModeSameAddress or ModeOffset, once decided
	attached      atomic.Uint32 // PEs attached now
	base          atomic.Uint64 // the agreed address in same-address mode
	cbSum         uint64        // digest of the control blocks' areas (Params.CBSum)
	node          uint32        // this segment's node + 1 in a job on several nodes, 0 on one node
	_             uint32
	formatsSum    uint64 // digest of the formats Go and C PEs share (Params.FormatsSum)
	_             [8]byte

	// Placement rounds (step 5 of Open).
	proposal      [MaxRounds]atomic.Uint64 // 0: not yet proposed; noAddress: give up
	arrived       [MaxRounds]atomic.Uint32
	failed        [MaxRounds]atomic.Uint32
	roundWord     atomic.Uint32 // futex word bumped on every proposal and arrival
	roundSleepers atomic.Uint32
	_             [56]byte

	barrier shmsync.Barrier // the world barrier

	pes [MaxPEs]peSlot
}

// noAddress as a proposal means the proposer found no free window.
const noAddress = ^uint64(0)

func (h *header) layout() Layout {
	return Layout{
		NPEs: int(h.npes), HeapSize: h.heapSize, SharedSize: h.sharedSize,
		CBOff: h.cbOff, CBSize: h.cbSize, PartOff: h.partOff, PartStride: h.partStride,
		SharedOff: h.sharedOff, Total: h.size,
	}
}
