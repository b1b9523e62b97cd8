package team

// Teams: the design. The package comment (doc.go) has the overview and
// the locks.
//
// A team is a set of the job's PEs that runs collectives together. Every
// team that strided splits can make is strided in the world's numbering
// (a strided subset of a strided set is strided), so a team is three
// numbers: the world PE of its rank 0, the world stride between ranks
// (negative for a reversed team, 0 for a team of one) and its size.
//
// # Shared state: team slots
//
// Each PE's control block holds a team area (teamArea):
//
//	slot 0 .. MaxTeams-1, teamSlotSize each, one per team id; id 0 is the world team
//
// and a barrier area (barrierArea, dissem.go): its count word and round
// lines per team id for the full barrier.
//
// A team has a job-wide id, and each member uses the slot of that number in
// its own control block. A slot holds
//
//	arrived   the member's arrivals at the team's synchronisation points:
//	          monotonic, never reset; the futex word its waiters sleep on
//	sleepers  processes asleep on arrived
//	inlined   two 24-byte buffers in arrived's cache line, and
//	scratch   two 512-byte buffers, where the member leaves its
//	          contribution to a small collective, chosen by the parity of
//	          the call number (inline when it fits: the line transfer that
//	          shows a waiter the arrival then brings the data along)
//	post      a ring of postRing post lines: the Broadcasts of at most
//	          postData bytes that the member roots ("Post lines")
//	gather    two post lines: its contributions to Reduces of at most
//	          postData bytes
//	done      a line whose number counts the small Broadcasts the member
//	          is done with
//
// # Full barriers: dissemination
//
// A full barrier (Sync, PE.Barrier, and every collective that must know
// all members are there) is a dissemination barrier (dissem.go has its
// words, its steps and why it beat a tree): in ⌈log₂ n⌉ rounds each
// member publishes its count of barriers in a line of its own, one per
// round, and waits for one other member's line, 2^r places before it in
// the team's order, which puts members that share an L3 or a NUMA node
// next to each other (topo.go). No line has two writers; each member
// writes ⌈log₂ n⌉ lines and reads ⌈log₂ n⌉ lines per barrier, and the
// critical path is ⌈log₂ n⌉ line transfers, where the counter that every
// member added to in turn had n. The counts are never reset: a member's
// count word for the team id (in its own control block, which the C
// library's world barrier reads and writes too) says which barrier comes
// next, and each waiter compares the line's number with the one its
// owner publishes in the same barrier (its base when the team was made,
// plus the barrier's number on the team). A team of two is the case of
// one round: each member publishes in its line and waits for the
// other's, both lines crossing at once, as the pair barrier that came
// before did.
//
// A barrier that found a member gone can never complete correctly again,
// and the surviving members must not go on: their next barrier would
// count a round the dead member never made. So the first full barrier of
// a PE that fails remembers its error (lost), and every later one returns
// it at once, without publishing. The survivors then stop in the barrier
// the dead member missed, which none of them can complete: every member's
// last round depends, through the earlier rounds, on every other
// member's arrival.
//
// The only state a barrier keeps in the process is the team's partners
// and this PE's base (placed once), so Sync and PE.Barrier take no lock;
// the count word is touched by plain loads and release stores. Besides
// the stores of the rounds, any atomic read-modify-write on the barrier's
// path (a lock's, an unlock's) adds a sizeable share to a 2-PE barrier
// (figures: docs/bench/design-measurements.md). The calls of a PE on a
// team must not overlap, as OpenSHMEM demands of the threads of a PE; the
// collectives, which keep state, are serialised by a mutex, and Sync
// finds overlapping calls with a busy word that only plain loads and
// stores touch (inUse), on a best-effort basis: two calls that start
// within nanoseconds of each other may both pass, and then the barrier no
// longer separates the PEs' calls. Detected, an overlapping Sync returns
// ErrBadArg without arriving. PE.Barrier first completes the PE's puts as
// Quiet does (Runtime.Quiet), with no read-modify-write where waiters
// fence for puts themselves: a member that sees a round's number sees
// every store its publisher saw, the release stores being ordered after
// them.
//
// Inside a collective a full barrier also counts as an arrival of every
// member (arrivals, below), but it does not store the members' arrived
// words: once it is over every member has made at least as many arrivals
// as this one (allAt), and a member waiting for a later arrival of
// another waits for a partial arrival (arrive), which stores the whole
// count, full barriers included. So a member's word may lag behind its
// arrivals, never behind what anybody waits for; and it still only grows.
// Sync is not an arrival: it leaves the collectives' counts alone.
//
// # Synchronisation
//
// Outside full barriers a member arrives by storing base + its count of
// arrivals in its own arrived word (waking sleepers if any). A member that
// has made a arrivals on the team waits, for every
// member j, until arrived_j reaches base_j + a (modulo 2^32), where base_j
// is j's word when the team was made. Words are never reset, so that a slow
// member of a destroyed team that still reads a word the slot's next team
// advances can only see it grow. A member's arrival is a store to a cache
// line of its own; its wait reads one line per member, and it remembers what it saw (seen), so that it
// reads a line again only when it needs more than it saw.
//
// Waiting polls (a member on another core arrives within a few line
// transfers), then polls between sched_yields (so that a member waiting
// for the CPU we hold gets it), then sleeps on the futex and checks the
// members' liveness on every sleep timeout (shmsync.WaitWord): a dead
// member becomes ErrPeerLost well within a second.
//
// Every collective call makes the same number of arrivals on every member
// (one or two), so a member knows, for every call, the count each member's
// word reaches with each of its arrivals. That is how scratch buffers are
// reused, by call parity: when a member writes its buffer k%2 in call k it
// notes the arrival by which every reader will be done with it (readDone):
// the end of the call for a small Broadcast, whose readers arrive after
// reading; the first arrival of the next call for calls whose readers read
// after a barrier. Before writing the buffer again it waits until every
// member has made that arrival (scratchFree). Calls with a full barrier
// find the wait over at once; a small Broadcast has no barrier: its root
// writes and arrives without waiting, the others wait for the root alone,
// read, then arrive, so a root runs up to two calls ahead of its slowest
// reader. Calls that work in place on peers' arrays start with a full
// barrier.
//
// # Post lines: collectives of a few words
//
// A Broadcast or Reduce of at most postData (56) bytes goes through post
// lines: cache lines of one owner holding a number (seq), a futex
// sleepers count and the data, which the line transfer that shows a
// reader the number brings along. Neither takes a call number or counts
// as an arrival; each has its own count, the same on every member, since
// every member makes the same calls with the same sizes.
//
// A small Broadcast is the team's n-th: its root writes src into line
// n%postRing of its ring and publishes seq = base + n + 1; every other
// member waits for that number, copies the data into dst and publishes
// n+1 in its done line; the root does too, without waiting. Before the
// root reuses a line (n >= postRing) every member must be done with call
// n-postRing (awaitDone). The root keeps what it last saw of each done
// line (seenDone) and reads one only when that falls short; it then
// waits until the reader is half a ring further, reading its line only
// every few pauses. So a root running ahead reads a reader's done line
// a few times every postRing/2 calls, and its readers never wait for it:
// consecutive calls use different lines, and a root runs up to postRing
// calls ahead of its slowest reader, who asks for the line postAhead
// calls ahead of the one it reads (shmsync.PrefetchR), so that the transfers
// overlap.
//
// A small Reduce is the team's g-th: every member writes its src into
// its gather line g%2 and publishes g+1, waits for every other member's
// line g%2, and folds the lines in rank order (so every member gets the
// same bits). Two lines suffice: a member that reaches call g has seen
// every other member publish g-1, which each did only after it had read
// every line of call g-2, the one that line g%2 held. That is the flat
// form, for teams of up to postFlat (4) members; a larger team runs the
// same call up and down a binomial tree over the same two lines
// (postReduceTree), so that a member reads at most ⌈log₂ n⌉+1 lines
// instead of n-1, each member publishing 2g+1 with its partial and 2g+2
// with the result.
//
// Publication (publish) is a release store of seq after the data, then a
// load of the line's sleepers count; the store waits for nothing (a
// sequentially consistent store would wait for the readers' copies of the
// line to be invalidated). Once it published, the owner asks for its next
// line in the exclusive state (shmsync.PrefetchW, which does not wait), so that
// its next write finds the line ready and the next locked instruction
// (the next call's lock) does not wait for it: that made a 1-int64
// Broadcast much faster (measured: docs/bench/design-measurements.md,
// «internal/team/post.go, prefetch»).
//
// Sleeping. A waiter polls and yields under the runtime's pacing, then
// (S1) adds itself to the line's sleepers, (S2) runs membarrier's global
// fence, and loops: load seq, test, FutexWait on seq while it still
// holds that value, with a liveness check on every timeout. The release
// store gives no order between the publisher's seq store (P1) and its
// sleepers load (P2), so the sleeper's fence stands in, as for the root
// package's signal waits (wait.go): if P2 reads zero, P2 precedes S1, so
// P2 and P1 before it come before the point where S2 splits the
// publisher, and the waiter's first test after S2 sees P1; if P2 reads
// non-zero the publisher wakes the futex after P1, and the waiter either
// saw the new number or its FutexWait finds it changed or is woken. This
// needs the publisher registered for membarrier (Layer.relaxed); a
// process that could not register publishes with a sequentially
// consistent store instead, and a waiter whose fence fails sleeps in 1 ms
// slices.
//
// A node with more PEs than CPUs online publishes with the sequentially
// consistent store too, and its sleepers make no fence: there most waits
// sleep (shmsync, "Pacing": no polling, a few yields), and the global
// fence, which interrupts every CPU running a registered process, costs
// far more than the store's own fence saves. A 16-PE barrier on 2 CPUs,
// both forms alternating (a loop of 1000, p50 of batches of 10): 869-887
// µs with the fence, 379-386 without (docs/bench/scale.md,
// "Oversubscribed"). Every PE of the node decides alike: the PEs of the
// node (its topology) against the CPUs online (unix.OnlineCPUs, not this
// process's affinity), the same figures for all; and the C library's
// world barrier, on the same lines, takes the runtime's decision
// (cabi.Layout.PostRelaxed).
//
// Every new team reads, at Split step 4, the largest number in each
// member's ring and gather lines, its done number and its barrier count:
// the bases, as for arrived. A line of the slot's previous team holds at most
// its base, below anything this team waits for.
//
// # Making a team (Split), step by step
//
//  1. Every member of the parent checks the triplet; the check depends on
//     the arguments alone, so every PE refuses alike and nobody waits.
//  2. The new team's rank 0 (its leader) takes a free id from the job's
//     bitmap (core.TeamIDs, in PE 0's control block, where symheap stat
//     counts the ids) with compare-and-swap, and leaves the id, or noTeam
//     when all are taken, in its parent scratch buffer.
//  3. Parent barrier. Every PE reads the id; noTeam is an error on all.
//  4. Every member of the new team reads every member's arrived word of the
//     id's slot, its post lines' numbers and its barrier count: the
//     bases. They are stable:
//     the slot's previous team ended with a barrier (Destroy), and nobody
//     arrives on the new team before step 5 is over on every PE.
//  5. Parent barrier. Members return the new team, the others nil.
//
// Destroy is a team barrier, after which the leader clears the id's bit.

import (
	"fmt"
	"math/bits"
	"sync/atomic"

	"github.com/symheap/symheap/internal/calls"
	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/shmsync"
	"github.com/symheap/symheap/internal/unix"
)

const (
	// MaxTeams bounds the teams alive at once in a job, the world team
	// included. Split fails with ErrOutOfMemory when all are in use.
	MaxTeams = 64

	inlineSize   = 24                                   // bytes of one buffer in the arrived word's line
	scratchSize  = 512                                  // bytes of one scratch buffer
	teamSlotSize = 64 + 2*scratchSize + (postRing+3)*64 // one slot
	noTeam       = ^uint64(0)                           // "no id left" in Split's exchange
	worldTeam    = 0                                    // the world team's id
	teamIDMask   = ^uint64(0) >> (64 - MaxTeams)        // every id
)

// teamSlot is one PE's share of one team. A contribution of up to
// inlineSize bytes goes in the arrived word's own cache line, so that the
// line transfer that shows a waiter the arrival brings the data along.
type teamSlot struct {
	scratchHead
	post   [postRing]postLine // small Broadcasts this PE roots, by the team's count of them modulo postRing ("Post lines")
	gather [2]postLine        // this PE's contributions to small Reduces, by the parity of their count
	done   postLine           // the small Broadcasts this PE is done with (seq only)
}

// scratchHead is a team slot's arrived word and scratch buffers. The C
// library's world broadcasts of postData+1 to scratchSize bytes run
// treeBcast's steps on a block of this format of their own (capi/coll.c,
// shmemi_tree.h; cformat.go).
type scratchHead struct {
	arrived  atomic.Uint32 // this PE's arrivals on the team; futex word
	sleepers atomic.Uint32 // processes asleep on arrived
	inlined  [2][inlineSize]byte
	_        [8]byte
	scratch  [2][scratchSize]byte // larger contributions to small collectives, by call parity
}

// teamArea is the teams' area of every control block.
var teamArea = core.RegisterArea("team", teamAreaSize)

// teamAreaSize is the bytes of each control block reserved for teams.
func teamAreaSize(npes int) uint64 {
	return MaxTeams * teamSlotSize
}

// Runtime is what the layer asks of the runtime of its PE. Every method
// may be called with a Team.mu held and must not take a lock of the
// runtime's that is held while the layer is called (PE.mu may be: the
// root package's Close holds it).
type Runtime interface {
	// Check returns an error wrapping errs.ErrClosed once the PE is
	// closed, else nil. The layer calls it once it has seen
	// Config.Closed set, for the error's wording.
	Check() error
	// CheckPeers returns an error wrapping errs.ErrPeerLost naming the
	// first of pes (world PE numbers) that is gone.
	CheckPeers(pes []int) error
	// CheckDead is CheckPeers for the members that died or stalled: a
	// member that left through Close is not reported.
	CheckDead(pes []int) error
	// WakeSleepers takes Quiet's wake-up step for this PE's puts: it
	// wakes whoever sleeps waiting for a change to a PE's symmetric heap.
	// The caller has just made a full fence after the puts.
	WakeSleepers()
	// Quiet is PE.Quiet: it completes this PE's puts, with a full fence
	// or, where waiters fence for the puts themselves, with one owed to
	// this PE's next load of shared memory, and takes the wake-up step.
	Quiet()
}

// Config is what the layer is given of its PE's state: plain data, read
// on the fast paths without a call.
type Config struct {
	Space  *core.Space  // the segment as this PE sees it
	Closed *atomic.Bool // set once the PE is closed (then every call fails with Runtime.Check's error)
	// Calls publishes every call of the layer and checks, in every wait,
	// that the members make the same calls (package calls).
	Calls *calls.Tracker
	// Home is this PE's index among its node's PEs, which names the CPU
	// it is expected to run on (unix.HomeCPU; "Topology", topo.go).
	Home int
	// NodePEs is the number of PEs on this PE's node: with more than the
	// CPUs online, the post lines are published with seq-cst stores
	// ("Post lines", Sleeping).
	NodePEs int
}

// Layer is a PE's teams: the world team and the count of the handles of
// split teams. Its fields are immutable after Init, handles aside (an
// atomic); each Team guards its own state (Team).
type Layer struct {
	rt     Runtime
	sp     *core.Space
	closed *atomic.Bool
	calls  *calls.Tracker
	world  *Team

	// relaxed: this process is registered for asymmetric fences
	// (membarrier) and its node has a CPU for every PE, so its post lines
	// are published with release stores ("Post lines", Sleeping). Set by
	// Init.
	relaxed bool
	// settle: the pauses a pair barrier makes between publishing its
	// count and its first look at the peer's (shmsync.SettlePolls). Set
	// by Init.
	settle int

	handles atomic.Int32 // this PE's handles of split teams not yet destroyed; any goroutine

	// agree: this PE's lines of the collective allocation's agreement
	// and whom it waits for (agree.go); placed at its first phase, used
	// under the caller's lock of its collective allocations.
	agree agreeLines
}

// Init publishes this PE's topology key and makes the world team. Every
// PE's words of slot 0 and its barrier count for id 0 are zero in a fresh
// segment, so the bases are zero. The caller's barrier after Init orders
// the key before any member's first full barrier, which reads it.
func (l *Layer) Init(rt Runtime, c Config) {
	l.rt, l.sp, l.closed, l.calls = rt, c.Space, c.Closed, c.Calls
	registered := unix.MembarrierRegister() == nil
	cpus := unix.OnlineCPUs()
	l.relaxed = registered && (cpus == 0 || c.NodePEs <= cpus)
	l.Retune()
	cpu, err := unix.HomeCPU(c.Home)
	if err != nil {
		cpu = -1 // key 0: ordered by rank
	}
	// Seq-cst store, before the Init barrier; pairs with the loads of
	// placeBarrier on every member.
	l.headOf(l.sp.Rank).key.Store(topoKey(sysRoot, cpu))
	l.world = l.newTeam(worldTeam, 0, 1, l.sp.NPEs, l.sp.Rank, false)
}

// Retune reads again the pauses this layer derives from the transfer
// time (shmsync.SettlePolls), once Init has measured it between PEs.
func (l *Layer) Retune() { l.settle = shmsync.SettlePolls() }

// World returns the team of every PE of the job, in PE order.
func (l *Layer) World() *Team { return l.world }

// Relaxed reports whether this PE publishes its post lines with release
// stores, its sleepers fencing for them ("Post lines", Sleeping): the C
// library's world barrier, on the same lines, does as the runtime does.
func (l *Layer) Relaxed() bool { return l.relaxed }

// Handles returns how many teams made by Split this PE is a member of and
// has not destroyed.
func (l *Layer) Handles() int { return int(l.handles.Load()) }

// Barrier is PE.Barrier's: a full barrier of the world team, which turns
// a lost PE into ErrPeerLost, as the segment's barrier does. Its arrival
// is a full fence, which completes this PE's puts as Quiet would; right
// after it, the barrier wakes whoever sleeps waiting for them
// (Runtime.WakeSleepers). Like Sync, it takes no lock.
func (l *Layer) Barrier() error { return l.world.lockFreeBarrier(calls.Barrier, true, nil) }

// BarrierStop is Barrier that stop can end (Stoppable barriers).
func (l *Layer) BarrierStop(stop func() error) error {
	return l.world.lockFreeBarrier(calls.Barrier, true, stop)
}

// Team is a set of PEs that run collectives together: the world team of
// every PE, or a team made by Split. A *Team is this PE's handle of its
// membership; the collectives on one team must be called by every member
// in the same order, and not concurrently from several goroutines of one
// PE (OpenSHMEM's rule for the threads of a PE). Overlapping collectives
// are serialised by mu; Sync and Layer.Barrier, which take no lock so as
// to stay fast, return ErrBadArg when they find another call of the PE in
// progress on the team (best effort: see "Full barriers").
//
// The fields above mu are immutable once the team is made. Of the rest,
// the atomics are this PE's only (no other process sees them) and say who
// touches them; the plain fields are guarded by mu.
type Team struct {
	rt                  Runtime
	l                   *Layer
	closed              *atomic.Bool // the PE's (Config.Closed)
	id                  int          // slot number, worldTeam for the world
	start, stride, size int          // world PE of rank i: start + stride*i
	rank                int          // this PE's rank in the team
	members             []int
	slots               []*teamSlot // every member's slot, by rank
	bases               []uint32    // every member's arrived word when the team was made
	barBase             []uint32    // every member's barrier count when the team was made
	live                func() error

	mu        CallLock
	busy      atomic.Uint32         // 1 while a goroutine of this PE is in a call (best effort: see "Full barriers")
	bar       dissem                // the full barrier's partners and counts (dissem.go); one call at a time (busy), placed at the first barrier or by Split
	destroyed atomic.Bool           // set by Destroy, under mu; read by Sync without it
	lost      atomic.Pointer[error] // the error of the full barrier that found a member gone; every later one returns it (see "Full barriers")
	calls     uint64                // collective calls made on the team; call k uses scratch k%2
	arrivals  uint32                // this PE's arrivals on the team (the same count on every member)
	allAt     uint32                // every member has made at least this many arrivals (the last full barrier's)
	curStart  uint32                // arrivals before the current call
	readDone  [2]uint32             // per own scratch buffer: the arrival count by which its readers are done
	kidsOnly  [2]bool               // per own scratch buffer: its readers are this PE's children in a treeBcast (collective.go), not every member
	kidsRoot  [2]int                // per own scratch buffer, when kidsOnly: the root of that treeBcast, whose tree names the children
	seen      []uint32              // per member: arrivals it is known to have made (saves loads of its line)
	bcasts    uint32                // small Broadcasts made through post lines ("Post lines")
	gathers   uint32                // small Reduces made through gather lines
	postBase  []uint32              // per member: the largest seq of its post ring when the team was made
	gathBase  []uint32              // per member: the largest seq of its gather lines then
	doneBase  []uint32              // per member: its done line's seq then
	seenDone  []uint32              // per member: small Broadcasts it is known to be done with
	memo      [2]offMemo            // the last dst and src found in the symmetric heap
	clc       collCounter           // the line-count model's counts of the collectives (linecount builds only); under mu
}

// newTeam makes this PE's handle of team id; readBases reads the members'
// current arrived words and the id's counter, else they are taken as zero.
func (l *Layer) newTeam(id, start, stride, size, rank int, readBases bool) *Team {
	rt := l.rt
	t := &Team{rt: rt, l: l, closed: l.closed, id: id, start: start, stride: stride, size: size, rank: rank,
		members: make([]int, size), slots: make([]*teamSlot, size), bases: make([]uint32, size), seen: make([]uint32, size),
		postBase: make([]uint32, size), gathBase: make([]uint32, size), doneBase: make([]uint32, size), seenDone: make([]uint32, size),
		barBase: make([]uint32, size)}
	for i := range size {
		p := start + stride*i
		t.members[i] = p
		t.slots[i] = l.slotOf(p, id)
		if readBases {
			// Seq-cst load of a word nobody changes now (step 4 of
			// Split); the parent barrier of step 3 ordered the slot's
			// last arrivals, on its previous team, before it.
			t.bases[i] = t.slots[i].arrived.Load()
			t.postBase[i] = lastPost(t.slots[i].post[:])
			t.gathBase[i] = lastPost(t.slots[i].gather[:])
			t.doneBase[i] = t.slots[i].done.seq.Load()
			// The slot's previous team made its last full barrier
			// (Destroy's) before any member left it.
			t.barBase[i] = l.countOf(p, id).count.Load()
		}
	}
	t.bar.count = &l.countOf(l.sp.Rank, id).count
	t.bar.base = t.barBase[rank]
	if readBases {
		// Every member published its topology key at Init.
		t.placeBarrier()
	}
	members := t.members
	tr := l.calls
	t.live = func() error {
		// A death first, then the calls (the root's collectiveLost says
		// why), then members that left.
		if err := rt.CheckDead(members); err != nil {
			return err
		}
		if err := tr.Check(members); err != nil {
			return err
		}
		return rt.CheckPeers(members)
	}
	if readBases {
		tr.Own().Reset(id) // before Split's last barrier: no member calls on the team yet
	}
	return t
}

// Rank returns this PE's number in the team, 0 to Size()-1; -1 for a nil
// team (a PE that is not a member).
func (t *Team) Rank() int {
	if t == nil {
		return -1
	}
	return t.rank
}

// Size returns the number of PEs in the team; 0 for a nil team.
func (t *Team) Size() int {
	if t == nil {
		return 0
	}
	return t.size
}

// WorldRank returns the world PE number of the team's rank r, or -1 if r
// is not a rank of the team (shmem_team_translate_pe to the world team).
func (t *Team) WorldRank(r int) int {
	if t == nil || r < 0 || r >= t.size {
		return -1
	}
	return t.start + t.stride*r
}

// TeamRank returns the rank in the team of world PE p, or -1 if p is not a
// member.
func (t *Team) TeamRank(p int) int {
	if t == nil {
		return -1
	}
	d := p - t.start
	if t.stride == 0 {
		if d == 0 {
			return 0
		}
		return -1
	}
	if d%t.stride != 0 || d/t.stride < 0 || d/t.stride >= t.size {
		return -1
	}
	return d / t.stride
}

// enter starts a call of kind k on the team: it checks the handle, takes
// t.mu, which the caller releases, and publishes the call (package
// calls).
func (t *Team) enter(k calls.Kind) error { return t.enterArgs(k, 0) }

// enterArgs is enter for a call with arguments to compare across the
// members (calls.Args; package calls, "Arguments").
func (t *Team) enterArgs(k calls.Kind, args uint64) error {
	what := k.String()
	if err := t.usable(what); err != nil {
		return err
	}
	t.mu.Lock()
	if t.destroyed.Load() {
		t.mu.Unlock()
		return t.usable(what)
	}
	if err := t.l.calls.Enter(k, t.id, args); err != nil {
		t.mu.Unlock()
		return err
	}
	// Wait for a Sync of another goroutine to end (it takes no lock).
	// Plain load; pairs with the release stores of inUse and leave.
	if t.busy.Load() != 0 {
		for p := shmsync.PaceLocal(); t.busy.Load() != 0; {
			p.Step()
		}
	}
	shmsync.StoreRelease32(&t.busy, 1)
	return nil
}

// leave ends a call that began with enter.
func (t *Team) leave() {
	t.l.calls.Leave()
	shmsync.StoreRelease32(&t.busy, 0) // release; pairs with the loads in enter and inUse
	t.mu.Unlock()
}

// inUse marks the team busy for a Sync, or reports that a call of another
// goroutine of this PE is in progress on it.
func (t *Team) inUse(what string) error {
	// Plain load and release store, not a read-modify-write (see "Full
	// barriers": best effort); pair with the stores of enter, leave and
	// other Syncs.
	if t.busy.Load() != 0 {
		return fmt.Errorf("symheap: %s on team %d while another goroutine of PE %d is in a call on it: %w (a PE's calls on a team must not overlap; make them from one goroutine, or order them)",
			what, t.id, t.l.sp.Rank, errs.ErrBadArg)
	}
	shmsync.StoreRelease32(&t.busy, 1)
	return nil
}

// usable checks that the handle may be used.
func (t *Team) usable(what string) error {
	if t == nil {
		return fmt.Errorf("symheap: %s on a nil team: %w (Split returns nil to the PEs that are not members; only members may use the team)", what, errs.ErrBadArg)
	}
	// This PE's closed flag, stored by Close (any goroutine); the runtime
	// words the error.
	if t.closed.Load() {
		if err := t.rt.Check(); err != nil {
			return err
		}
	}
	if t.destroyed.Load() {
		return fmt.Errorf("symheap: %s on team %d after Destroy: %w", what, t.id, errs.ErrBadArg)
	}
	return nil
}

// arrive records this PE's arrival at the team's next synchronisation
// point. Called with t.mu held.
func (t *Team) arrive() {
	if t.size == 1 {
		return
	}
	t.arrivals++
	s := t.slots[t.rank]
	// Seq-cst store of the whole count (full barriers do not store it:
	// see "Full barriers"), after this PE's scratch and data writes; pairs
	// with the loads of every member waiting for it (waitFor), which then
	// read them. Then the wake-up step, as shmsync.Wake.
	s.arrived.Store(t.bases[t.rank] + t.arrivals)
	if s.sleepers.Load() != 0 { // seq-cst, after the store; pairs with a sleeper's increment
		shmsync.WakeAll(&s.arrived)
	}
}

// begin starts a collective call and returns its number. Called with t.mu
// held, by every call that synchronises.
func (t *Team) begin() uint64 {
	k := t.calls
	t.calls++
	t.curStart = t.arrivals
	return k
}

// scratchFree waits until this PE may write its scratch buffer k%2 in call
// k, that is until every reader of what it last wrote there is done, and
// records that this call's readers are done once every member has made
// done arrivals in this call. Called with t.mu held.
func (t *Team) scratchFree(k uint64, done uint32) error {
	if t.size == 1 {
		return nil
	}
	t.kidsOnly[k&1] = false
	b := &t.readDone[k&1]
	for j := range t.slots {
		if err := t.waitFor(j, *b); err != nil {
			return err
		}
	}
	*b = t.curStart + done
	return nil
}

// waitAll waits until every member has arrived as often as this PE has.
// Called with t.mu held.
func (t *Team) waitAll() error {
	if t.size == 1 {
		return nil
	}
	for j := range t.slots {
		if err := t.waitFor(j, t.arrivals); err != nil {
			return err
		}
	}
	return nil
}

// waitFor waits until member j has made a arrivals on the team.
func (t *Team) waitFor(j int, a uint32) error {
	if j == t.rank || reached(t.allAt, a) || reached(t.seen[j], a) {
		return nil
	}
	s, base := t.slots[j], t.bases[j]
	// Seq-cst loads; pair with member j's increment in arrive, after which
	// its writes are visible here.
	arrived := func() bool {
		v := s.arrived.Load() - base
		if reached(v, a) {
			t.seen[j] = v
			return true
		}
		return false
	}
	if arrived() {
		return nil
	}
	// Poll, then yield, then sleep, under the runtime's one pacing
	// (shmsync "Pacing"): a member running on another core arrives within
	// a few cache-line transfers; one that waits for the core we hold
	// gets it when we yield.
	if err := shmsync.WaitWord(&s.arrived, &s.sleepers, arrived, t.live); err != nil {
		return fmt.Errorf("symheap: team %d (%d PEs) waiting for rank %d (PE %d): %w", t.id, t.size, j, t.members[j], err)
	}
	return nil
}

// reached reports whether counter v has reached want, modulo 2^32.
func reached(v, want uint32) bool { return int32(v-want) >= 0 }

// barrier is a full barrier of the team inside a collective: it counts as
// an arrival (see "Full barriers"). Called with t.mu held.
func (t *Team) barrier() error {
	if t.size == 1 {
		return nil
	}
	t.arrivals++
	if err := t.fullBarrier(false, nil); err != nil {
		return err
	}
	t.allAt = t.arrivals
	return nil
}

// fullBarrier is a full barrier of the team (see "Full barriers"):
// dissemination (dissem.go). quiet: complete this PE's puts first
// (PE.Barrier); check is the liveness check of the wait's sleeps, nil for
// the team's (live).
func (t *Team) fullBarrier(quiet bool, check func() error) error {
	return t.dissemBarrier(quiet, check)
}

// Sync waits until every member of the team has called Sync
// (shmem_team_sync). It orders memory only as a barrier does; it does not
// complete outstanding non-blocking puts (PE.Barrier and Quiet do). It
// takes no lock: a Sync that finds another call of this PE in progress on
// the team returns ErrBadArg (see Team).
func (t *Team) Sync() error {
	if err := t.usable("Sync"); err != nil {
		return err
	}
	if t.size == 1 {
		return nil
	}
	return t.lockFreeBarrier(calls.Sync, false, nil)
}

// SyncInCall is the team's barrier as a step of a collective call that
// its caller entered on the team itself (the C library's collectives,
// which publish their call through the same words: internal/calls): it
// enters no call of its own, so its round lines carry the caller's
// record, and members that passed other sizes or another root to that
// call fail with ErrDiverged here instead of reading each other's bytes
// as if they agreed.
func (t *Team) SyncInCall() error {
	if err := t.usable("Sync"); err != nil {
		return err
	}
	if t.size == 1 {
		return nil
	}
	if err := t.inUse("Sync"); err != nil {
		return err
	}
	err := t.fullBarrier(false, nil)
	shmsync.StoreRelease32(&t.busy, 0) // release; pairs with the loads in enter and inUse
	return err
}

// SyncStop is Sync that stop can end (Stoppable barriers).
func (t *Team) SyncStop(stop func() error) error {
	if err := t.usable("Sync"); err != nil {
		return err
	}
	if err := stop(); err != nil {
		return fmt.Errorf("symheap: Sync on team %d: %w (not begun: nothing changed)", t.id, err)
	}
	if t.size == 1 {
		return nil
	}
	return t.lockFreeBarrier(calls.Sync, false, stop)
}

// lockFreeBarrier is the barrier of Sync and PE.Barrier (kind k): the
// busy check of inUse around fullBarrier (quiet as there), published
// as a call (package calls). stop, if not nil, can end the wait
// (Stoppable barriers).
func (t *Team) lockFreeBarrier(k calls.Kind, quiet bool, stop func() error) error {
	if err := t.inUse(k.String()); err != nil {
		return err
	}
	if err := t.l.calls.Enter(k, t.id, 0); err != nil {
		shmsync.StoreRelease32(&t.busy, 0)
		return err
	}
	var err error
	if stop == nil {
		err = t.fullBarrier(quiet, nil)
	} else {
		err = t.stoppableBarrier(quiet, stop)
	}
	t.l.calls.Leave()
	shmsync.StoreRelease32(&t.busy, 0) // release; pairs with the loads in enter and inUse
	return err
}

// Stoppable barriers. SyncStop and BarrierStop (the root's SyncCtx and
// BarrierCtx) give the barrier's waits a liveness check that asks stop
// first, so that the caller's context ends the wait within a sleep slice
// (shmsync.SleepSlice), through the path a lost PE takes. An arrival
// cannot be taken back: the other members may have counted it, or be
// waiting for it. So a barrier that stop ended leaves the team broken as
// a lost member does (lost), and the PE's calls broken as a divergence
// does (calls.Tracker.Cancel, "Cancelled calls"): every later collective
// call of this PE fails at once, and the other members' waits that need
// this PE end with ErrDiverged naming the cancelled call instead of
// hanging. A wait whose condition holds when stop is found ended
// completes normally (shmsync.Lost re-tests it).

// stoppableBarrier is fullBarrier that stop can end. Called by
// lockFreeBarrier, in the call.
func (t *Team) stoppableBarrier(quiet bool, stop func() error) error {
	var cause error // stop's error, once it ended the wait
	check := func() error {
		if err := stop(); err != nil {
			cause = err
			return err
		}
		return t.live()
	}
	err := t.fullBarrier(quiet, check)
	if err == nil || cause == nil {
		return err
	}
	lost := fmt.Errorf("symheap: %w", t.l.calls.Cancel(cause))
	t.lost.Store(&lost)
	return lost
}

// Split makes a new team of the parent's ranks start, start+stride, ...,
// size of them (shmem_team_split_strided). It is collective over the
// parent: every member calls it with the same triplet. Members of the new
// team get their handle, the other PEs of the parent a nil *Team and a nil
// error. The new team's rank i is the parent's rank start+stride*i; a
// negative stride makes a team in reverse order; a stride of 0 is allowed
// for a team of one. A triplet that leaves the parent (or wraps around) is
// ErrBadArg on every PE; when MaxTeams teams are alive it is
// ErrOutOfMemory on every PE.
func (t *Team) Split(start, stride, size int) (*Team, error) {
	if err := t.enter(calls.Split); err != nil {
		return nil, err
	}
	defer t.leave()
	if err := t.checkTriplet(start, stride, size); err != nil {
		return nil, err
	}
	l := t.l
	k := t.begin()
	leader := start // parent rank of the new rank 0
	newRank := -1
	if d := t.rank - start; stride == 0 {
		if d == 0 {
			newRank = 0
		}
	} else if d%stride == 0 && d/stride >= 0 && d/stride < size {
		newRank = d / stride
	}

	// Step 2.
	if t.rank == leader {
		// Read between the first and the second arrival.
		if err := t.scratchFree(k, 2); err != nil {
			return nil, err
		}
		id, ok := l.takeTeamID()
		rec := bufOf[uint64](t.slots[t.rank], k, 1)
		rec[0] = noTeam
		if ok {
			rec[0] = uint64(id)
		}
	}
	// Step 3.
	if err := t.barrier(); err != nil {
		return nil, err
	}
	id := bufOf[uint64](t.slots[leader], k, 1)[0]
	if id == noTeam {
		return nil, fmt.Errorf("symheap: Split(%d, %d, %d) of a team of %d: %w (all %d team ids are in use; Destroy the teams no longer needed)",
			start, stride, size, t.size, errs.ErrOutOfMemory, MaxTeams)
	}
	// Step 4.
	var nt *Team
	if newRank >= 0 {
		nt = l.newTeam(int(id), t.start+t.stride*start, t.stride*stride, size, newRank, true)
		l.handles.Add(1)
	}
	// Step 5.
	if err := t.barrier(); err != nil {
		return nil, err
	}
	return nt, nil
}

// checkTriplet validates a Split triplet against the team.
func (t *Team) checkTriplet(start, stride, size int) error {
	bad := func(why string) error {
		return fmt.Errorf("symheap: Split(start %d, stride %d, size %d) of a team of %d PEs: %w (%s)", start, stride, size, t.size, errs.ErrBadArg, why)
	}
	switch {
	case size < 1:
		return bad("size must be at least 1")
	case start < 0 || start >= t.size:
		return bad(fmt.Sprintf("start must be a rank of the parent, 0 to %d", t.size-1))
	case stride == 0 && size != 1:
		return bad("stride 0 makes a team of one only")
	}
	// The last rank, computed without overflow: |stride|*(size-1) must fit
	// in the parent.
	if stride != 0 {
		span := uint64(size - 1)
		step := uint64(stride)
		if stride < 0 {
			step = uint64(-stride)
		}
		hi, lo := bits.Mul64(span, step)
		room := uint64(t.size - 1 - start)
		if stride < 0 {
			room = uint64(start)
		}
		if hi != 0 || lo > room {
			return bad("the last rank start+stride*(size-1) falls outside the parent")
		}
	}
	return nil
}

// Destroy ends the team (shmem_team_destroy). It is collective over the
// team; afterwards its id can be reused and the handle is unusable. A nil
// team (a PE that is not a member) does nothing. The world team cannot be
// destroyed.
func (t *Team) Destroy() error {
	if t == nil {
		return nil
	}
	if err := t.enter(calls.Destroy); err != nil {
		return err
	}
	defer t.leave()
	if t.id == worldTeam {
		return fmt.Errorf("symheap: Destroy of the world team: %w (it lives until Close)", errs.ErrBadArg)
	}
	t.begin()
	t.destroyed.Store(true)
	t.l.handles.Add(-1)
	if err := t.barrier(); err != nil {
		return err
	}
	if t.rank == 0 {
		t.l.freeTeamID(t.id)
	}
	return nil
}

// takeTeamID takes a free team id from the job-wide bitmap.
func (l *Layer) takeTeamID() (int, bool) {
	h := l.sp.TeamIDs()
	for {
		// Seq-cst load and CAS; pair with other leaders' CAS and with
		// freeTeamID's And on any PE.
		u := h.Used.Load()
		free := ^u &^ (1 << worldTeam) & teamIDMask
		if free == 0 {
			return 0, false
		}
		id := bits.TrailingZeros64(free)
		if h.Used.CompareAndSwap(u, u|1<<id) {
			return id, true
		}
	}
}

// freeTeamID returns id to the bitmap.
func (l *Layer) freeTeamID(id int) {
	// Seq-cst; pairs with takeTeamID's load and CAS on the leader of the
	// next team to take the id.
	l.sp.TeamIDs().Used.And(^(uint64(1) << id))
}
