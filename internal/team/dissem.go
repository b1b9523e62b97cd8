package team

import (
	"fmt"
	"math/bits"
	"sync/atomic"

	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/shmsync"
)

// The full barrier: a dissemination barrier over lines of each member's
// own. The design is in team.go ("Full barriers"); this file has the
// barrier area, the barrier and the choice of partners.
//
// # The barrier area
//
// Every control block holds a barrier area (barrierArea), the same words
// for the Go runtime and the C library (capi/coll.c), laid out by the
// types below, which internal/cabi generates into capi/shmemi_formats.h:
//
//	head                      64 B: this PE's topology key ("Topology", topo.go)
//	team 0 .. MaxTeams-1      each: a count line (barrierCount), then
//	                          rounds(npes) round lines (barrierRound)
//	agreement                 rounds(npes) round lines (agreeRound, agree.go)
//
// A PE's count word for a team id counts its full barriers on the teams
// that held the id, never reset; only its owner writes it (plain load,
// release store), so a Go call and a C call of one process on the world
// team take the next number alike. A round line pair holds two post
// lines (postLine: seq, sleepers) chosen by the parity of the owner's
// count: in its barrier numbered c the owner publishes c in line c%2 of
// every round in turn, and one other member reads each. Per PE the area
// is 64 + MaxTeams*(64 + 128*⌈log₂ npes⌉) + 256*⌈log₂ npes⌉ bytes: it
// grows with log N, not N (37 KiB at 16 PEs, 78 KiB at 512).
//
// # The barrier, step by step (a member at position p of the team's
// order o, of n members, in its barrier numbered c, b = c - its base)
//
//  1. c = count + 1, stored (owner only). PE.Barrier then completes the
//     PE's puts (Runtime.Quiet), as the pair barrier did.
//  2. For each round r = 0 .. ⌈log₂ n⌉-1: publish c in its own line
//     (r, c%2) with a release store and wake that line's sleepers
//     (Layer.publish); then wait until the line (r, (base_j+b)%2) of
//     member j = o[(p - 2^r) mod n] reaches base_j + b (awaitPost: poll,
//     yield, then sleep with a liveness check per slice).
//  3. Ask for the next barrier's lines, (r, (c+1)%2), in the exclusive
//     state (PREFETCHW): their reader read them two barriers ago.
//
// After round r a member knows that the 2^(r+1) members before it in the
// order have arrived (it heard from one who heard from 2^r before it);
// after ⌈log₂ n⌉ rounds, all n. Each line has one writer and one reader,
// so a member writes ⌈log₂ n⌉ lines and reads ⌈log₂ n⌉ lines of others
// per barrier, and the critical path is ⌈log₂ n⌉ line transfers (the
// line-count model checks both: linecount_on.go, dissem_test.go). With two
// members it is the pair barrier it replaces: one round, one line each.
//
// Why dissemination and not a tree. A fan-in/fan-out tree of degree k
// has 2·⌈log_k n⌉ transfers on its critical path (up and down), and its
// inner members read k lines each way; a counter-based fan-in (Open MPI's
// coll/sm: children add to their parent's word) makes the k children's
// adds queue on one line. Dissemination has ⌈log₂ n⌉: at n = 16, 4
// against 4 for a 4-ary tree done with k reads in parallel (2 up + 2
// down) — equal at best — and 8 for a binary tree; and no line has two
// writers, so no transfer waits for another. It costs n·⌈log₂ n⌉ line
// transfers in all against 2(n-1) for a tree: more traffic, on lines
// nobody else wants, spread over the rounds.
//
// Sleeping is the post lines' ("Post lines", Sleeping): a waiter counts
// itself in the sleepers word of the line it waits for, fences with
// membarrier (the publisher's store is a release store) and sleeps on
// the line's seq; the publisher's load of sleepers after its store finds
// it and wakes it. Each line has one reader, so each wake-up wakes one
// process.

// barrierHead is the first line of a PE's barrier area.
type barrierHead struct {
	key atomic.Uint64 // the PE's topology key (topo.go); stored at Init before its barrier, read by every member of every team made later
	_   [56]byte
}

// barrierCount is a PE's count line for one team id.
type barrierCount struct {
	count atomic.Uint32 // this PE's full barriers on the id, never reset; owner only (plain load, release store)
	_     [60]byte
}

// barrierRound is a PE's lines of one round for one team id.
type barrierRound struct {
	line [2]postLine // by the parity of the owner's count (seq; the data carry the owner's call record, and the line-count model's depth)
}

// barrierRecordOff is where a round line's data carry the record of the
// owner's call (package calls, "Arguments"), after the line-count model's
// 4 bytes.
const barrierRecordOff = 8

// rounds is the barrier rounds of a team of n: ⌈log₂ n⌉.
func rounds(n int) int {
	if n <= 1 {
		return 0
	}
	return bits.Len(uint(n - 1))
}

// barrierTeamSize is the bytes of one team id's part of the area.
func barrierTeamSize(npes int) uint64 {
	return core.SizeOf[barrierCount]() + uint64(rounds(npes))*core.SizeOf[barrierRound]()
}

// barrierArea is the barrier's area of every control block.
var barrierArea = core.RegisterArea("barrier", func(npes int) uint64 {
	return core.SizeOf[barrierHead]() + MaxTeams*barrierTeamSize(npes) + uint64(rounds(npes))*core.SizeOf[agreeRound]()
})

// BarrierOff is the offset of the barrier area in a control block (for
// the C library: cabi.Layout).
func BarrierOff(npes int) uint64 { return uint64(barrierArea.Off(npes)) }

// BarrierRounds is the round lines of a team id in a job of npes PEs
// (for the C library: cabi.Layout).
func BarrierRounds(npes int) int { return rounds(npes) }

// dissem is a team's dissemination barrier as this PE runs it: its own
// words and, by round, whom it waits for. Immutable once placed, but for
// the line counts (lc); used by one call at a time (Team.busy).
type dissem struct {
	count    *atomic.Uint32 // this PE's count word for the team's id
	base     uint32         // its value when the team was made
	mine     [][2]*postLine // this PE's lines, by round and parity
	from     [][2]*postLine // round r: the lines of the member it waits for
	fromBase []uint32       // that member's base
	fromRank []int          // its team rank
	lc       lineCounter    // the line-count model's counts (linecount builds only)
}

// lineAddrs takes the addresses of a round's two lines once: taking
// &round.line[p] in a barrier makes Go check round for nil with a load
// from line 0, whichever line the barrier uses, and a load from another
// PE's line (or from one's own, taken away by its reader) waits for a
// transfer (as agreeRef; agree.go). 2-PE Barrier (BenchmarkRMA, 3
// alternations): 339-375 ns with the loads, 256-265 without.
func lineAddrs(rd *barrierRound) [2]*postLine { return [2]*postLine{&rd.line[0], &rd.line[1]} }

// place chooses the partners of this PE's rounds from the team's order
// (topo.go). keys are the members' topology keys, by rank; bases their
// count words when the team was made; mine returns this PE's round lines
// and theirs(j) member j's.
func (d *dissem) place(rank int, keys []uint64, bases []uint32, mine func() []*barrierRound, theirs func(j int) []*barrierRound) {
	n := len(keys)
	order, pos := orderOf(keys, rank)
	d.mine = make([][2]*postLine, rounds(n))
	for r, rd := range mine()[:rounds(n)] {
		d.mine[r] = lineAddrs(rd)
	}
	d.from = make([][2]*postLine, rounds(n))
	d.fromBase = make([]uint32, rounds(n))
	d.fromRank = make([]int, rounds(n))
	for r := range d.from {
		j := order[(pos-1<<r+n)%n] // 2^r < n
		d.from[r] = lineAddrs(theirs(j)[r])
		d.fromBase[r] = bases[j]
		d.fromRank[r] = j
	}
}

// dissemBarrier is the team's full barrier (steps in this file's
// comment). quiet: complete this PE's puts first (PE.Barrier); check is
// the liveness check of the waits' sleeps, nil for the team's. Of the
// process's state it touches t.bar (one call at a time) and t.lost.
func (t *Team) dissemBarrier(quiet bool, check func() error) error {
	if lost := t.lost.Load(); lost != nil {
		return *lost
	}
	if t.bar.mine == nil {
		t.placeBarrier()
	}
	d := &t.bar
	// Step 1. Plain (seq-cst, a plain MOV on amd64) load and release
	// store of a word only this PE touches: no read-modify-write (Sync
	// and Barrier take no lock); the C library's world barrier in this
	// process takes its numbers from the same word.
	c := d.count.Load() + 1
	shmsync.StoreRelease32(d.count, c)
	if quiet {
		t.rt.Quiet()
	}
	b := c - d.base
	// The record of this PE's call (package calls, "Arguments"), which
	// each round's line carries to its reader: members in one barrier
	// are in one call, with the same arguments, or diverged.
	rec := t.l.calls.Record(t.id)
	d.lc.begin()
	for r, mine := range d.mine {
		// Step 2. Release store (publish): every earlier store of this PE
		// (data, puts, what earlier rounds told it) is visible to the
		// member that sees c.
		pl := mine[c&1]
		d.lc.wrote(pl)
		*core.At[uint64](addr(&pl.data[barrierRecordOff])) = rec
		t.l.publish(pl, c)
		// A few pauses before the first look at the other's line, which
		// a member arriving about now is writing (shmsync.SettlePolls).
		for range t.l.settle {
			shmsync.Pause()
		}
		base := d.fromBase[r]
		src := d.from[r][(base+b)&1]
		if err := t.awaitPost(d.fromRank[r], src, base, b, check); err != nil {
			j := d.fromRank[r]
			lost := fmt.Errorf("symheap: team %d (%d PEs) waiting in a barrier (round %d) for rank %d (PE %d): %w", t.id, t.size, r, j, t.members[j], err)
			t.lost.Store(&lost) // lost, not err: err's address would put every call's err on the heap
			return lost
		}
		d.lc.read(src)
		if err := t.l.calls.Differs(rec, *core.At[uint64](addr(&src.data[barrierRecordOff])), t.members[d.fromRank[r]]); err != nil {
			return fmt.Errorf("symheap: %w", err)
		}
	}
	d.lc.end()
	// Step 3. The next barrier's lines: their reader read them in the
	// barrier before this one, which it left before we could leave this.
	for _, mine := range d.mine {
		shmsync.PrefetchW(addr(mine[(c+1)&1]))
	}
	return nil
}

// placeBarrier places this PE in the team's barrier: its count word and
// lines, its partners by round, in the order the members' published
// topology keys give. The world team is placed at its first barrier
// (every PE published its key before Init's barrier), a team made by
// Split when it is made.
func (t *Team) placeBarrier() {
	l := t.l
	keys := make([]uint64, t.size)
	for i, p := range t.members {
		// Seq-cst load of a word stored once at the member's Init, before
		// the segment barrier that ended it.
		keys[i] = l.headOf(p).key.Load()
	}
	t.bar.place(t.rank, keys, t.barBase,
		func() []*barrierRound { return l.roundsOf(t.members[t.rank], t.id) },
		func(j int) []*barrierRound { return l.roundsOf(t.members[j], t.id) })
}
