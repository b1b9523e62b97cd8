package team

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/shmsync"
	"github.com/symheap/symheap/internal/unix"
)

// Post lines: the collectives of a few words. The design is in team.go
// ("Post lines"); this file has the lines, their publication and their
// waits.

const (
	// postRing is the post lines of a member's ring for small
	// Broadcasts: a root runs up to postRing calls ahead of its slowest
	// reader.
	postRing = 32
	// postData is the bytes a post line carries besides its words: a
	// Broadcast or Reduce of at most this many bytes goes through post
	// lines.
	postData = 56
	// postAhead is how many calls ahead a reader of a root's ring asks
	// for a line (shmsync.PrefetchR): within the half ring that a waiting root
	// keeps itself ahead (awaitDone).
	postAhead = 8
)

// postLine is one cache line that its owner publishes and other members
// wait for: a sequence number, the futex word of its waiters, and the
// data it publishes, which comes along with the number in the same
// transfer.
type postLine struct {
	seq      atomic.Uint32 // base + the number of the post; only grows (modulo 2^32); futex word
	sleepers atomic.Uint32 // processes asleep on seq
	data     [postData]byte
}

// publish makes the caller's earlier stores (the line's data among them)
// visible with seq = v, and wakes the sleepers. In a process registered
// for asymmetric fences the store is a release store, which waits for
// nothing: the sleepers' membarrier stands in for the fence that would
// order it before the load of sleepers ("Post lines", Sleeping).
func (l *Layer) publish(pl *postLine, v uint32) { l.publishWord(&pl.seq, &pl.sleepers, v) }

// publishWord is publish for a futex word seq and its count of sleepers.
func (l *Layer) publishWord(seq, sleepers *atomic.Uint32, v uint32) {
	if l.relaxed {
		shmsync.StoreRelease32(seq, v) // release; pairs with the waiters' loads (awaitPost), the sleepers' membarrier orders it before the load below
	} else {
		seq.Store(v) // seq-cst; pairs with the waiters' loads and their sleepers increment
	}
	// Seq-cst load; pairs with a sleeper's increment before its fence and
	// its last test of seq.
	if sleepers.Load() != 0 {
		shmsync.WakeAll(seq)
	}
}

// awaitPost waits until member j's post line pl has reached base+want
// (modulo 2^32). check is the liveness check of its sleep; nil: the
// team's (Team.live). Its error names neither symheap nor the team: the
// caller's does (waitErr).
func (t *Team) awaitPost(j int, pl *postLine, base, want uint32, check func() error) error {
	// Seq-cst load; pairs with the owner's store in publish, after which
	// the line's data are visible here.
	if reached(pl.seq.Load()-base, want) {
		return nil
	}
	return t.awaitPostSlow(j, pl, base, want, check)
}

// awaitPostSlow is awaitPost once the line was found short: poll and
// yield under the runtime's pacing, then sleep.
func (t *Team) awaitPostSlow(j int, pl *postLine, base, want uint32, check func() error) error {
	cond := func() bool { return reached(pl.seq.Load()-base, want) }
	if p := shmsync.Pace(); p.Until(cond) {
		return nil
	}
	if check == nil {
		check = t.live
	}
	return t.l.sleepOnPost(pl, cond, check)
}

// waitErr words the error of a collective's wait for member j.
func (t *Team) waitErr(j int, err error) error {
	return fmt.Errorf("symheap: team %d (%d PEs) waiting for rank %d (PE %d): %w", t.id, t.size, j, t.members[j], err)
}

// sleepOnPost sleeps on pl.seq until cond holds ("Post lines",
// Sleeping): announce, fence for the publishers, then test and sleep in
// a loop. check runs whenever a sleep slice has run out.
func (l *Layer) sleepOnPost(pl *postLine, cond func() bool, check func() error) error {
	return l.sleepOnWord(&pl.seq, &pl.sleepers, cond, check)
}

// sleepOnWord is sleepOnPost for a futex word seq and its count of
// sleepers.
func (l *Layer) sleepOnWord(seq, sleepers *atomic.Uint32, cond func() bool, check func() error) error {
	// S1: seq-cst; pairs with publish's load of sleepers.
	sleepers.Add(1)
	defer sleepers.Add(^uint32(0))
	slice := shmsync.SleepSlice
	// S2: the publishers' missing fence. Where it fails (it cannot, where
	// the publishers registered: the same kernel) a store that took no
	// wake-up step is seen within a short slice.
	if l.relaxed && unix.MembarrierGlobal() != nil {
		slice = time.Millisecond
	}
	return shmsync.SleepFenced(seq, slice, cond, check) // test and sleep
}

// lastPost returns the largest sequence number among lines (modulo 2^32):
// the base of a slot's lines for a new team (Split step 4).
func lastPost(lines []postLine) uint32 {
	// Seq-cst loads of words nobody changes now (Split step 4).
	b := lines[0].seq.Load()
	for i := 1; i < len(lines); i++ {
		if v := lines[i].seq.Load(); int32(v-b) > 0 {
			b = v
		}
	}
	return b
}

// postBcast is the small Broadcast's part on a member ("Post lines"):
// the root publishes src in line n%postRing of its ring, where n counts
// the team's small Broadcasts, once every member is done with what that
// line held; every other member waits for it and copies it into dst.
// Every member then counts the call as done in its done line. Called
// with t.mu held; nb <= postData.
func (t *Team) postBcast(dst, src core.Ptr, nb uint64, root int, same bool) error {
	n := t.bcasts
	t.bcasts++
	me := t.rank
	s := t.slots[me]
	if me == root {
		if n >= postRing {
			// Line n%postRing last held call n-postRing: every member
			// must be done with it.
			for j := range t.slots {
				if err := t.awaitDone(j, n-postRing+1, n-postRing/2); err != nil {
					return err
				}
			}
		}
		pl := &s.post[n%postRing]
		core.CopyBytes[byte](addr(&pl.data), src, nb)
		t.l.publish(pl, t.postBase[me]+n+1)
		// The next two calls' lines: their readers are most likely done
		// with them. Asking for each line two calls ahead, and once more
		// one call ahead, keeps the root from waiting for the readers'
		// copies to be invalidated whatever the distance between the root
		// and its readers; asking one call ahead only left that to how the
		// two fell in step at the start of a job.
		shmsync.PrefetchW(addr(&s.post[(n+1)%postRing]))
		shmsync.PrefetchW(addr(&s.post[(n+2)%postRing]))
		if !same {
			core.CopyBytes[byte](dst, src, nb)
		}
	} else {
		pl := &t.slots[root].post[n%postRing]
		if err := t.awaitPost(root, pl, t.postBase[root], n+1, nil); err != nil {
			return t.waitErr(root, err)
		}
		core.CopyBytes[byte](dst, addr(&pl.data), nb)
		// A later call's line: a root that runs ahead has written it, and
		// its transfer overlaps the calls in between.
		shmsync.PrefetchR(addr(&t.slots[root].post[(n+postAhead)%postRing]))
	}
	// Release store on a line of our own that a root reads once every few
	// calls; after the copy out of the root's line.
	t.l.publish(&s.done, t.doneBase[me]+n+1)
	return nil
}

// awaitDone waits until member j is done with the team's first a small
// Broadcasts, reading its done line only when what it saw last falls
// short. Once short, the root has run a whole ring ahead of j: it waits
// until j is done with enough (half a ring further), reading j's done
// line only every donePauses pauses. Every read takes the line from j,
// whose next publication must then fetch it back: a root that spun on it
// would cost j a line transfer on each call, and one that stopped at a
// would read it again on its next call.
func (t *Team) awaitDone(j int, a, enough uint32) error {
	if j == t.rank || reached(t.seenDone[j], a) {
		return nil
	}
	s := t.slots[j]
	base := t.doneBase[j]
	// Seq-cst load; pairs with j's publish of its done line, made after it
	// copied out of our line.
	if v := s.done.seq.Load() - base; reached(v, a) {
		t.seenDone[j] = v
		return nil
	}
	p := shmsync.Pace()
	cond := func() bool {
		if p.Polling() {
			for range donePauses {
				shmsync.Pause()
			}
		}
		return reached(s.done.seq.Load()-base, enough)
	}
	if !p.Until(cond) {
		if err := t.l.sleepOnPost(&s.done, cond, t.live); err != nil {
			return t.waitErr(j, err)
		}
	}
	t.seenDone[j] = s.done.seq.Load() - base
	return nil
}

// donePauses is the pauses between a waiting root's reads of a reader's
// done line (awaitDone): a few of its calls' worth.
const donePauses = 8

// postFlat is the largest team whose small Reduces every member folds
// from every other member's gather line (postReduceFlat): up to 4
// members, the n-1 lines read at once cost less than the tree's 2·⌈log₂ n⌉
// transfers one after another. Larger teams use the tree (postReduceTree).
const postFlat = 4

// postReduce is the small Reduce ("Post lines"), the team's g-th, where g
// counts its small reductions: by every member's gather line g%2, flat for
// teams of up to postFlat members, else up and down a binomial tree.
// Called with t.mu held; nb <= postData.
func (t *Team) postReduce(dst, src core.Ptr, n int, nb uint64, op Op, fold func(acc, x core.Ptr, n int, op Op)) error {
	g := t.gathers
	t.gathers++
	t.clc.begin()
	var err error
	if t.size <= postFlat {
		err = t.postReduceFlat(g, dst, src, n, nb, op, fold)
	} else {
		err = t.postReduceTree(g, dst, src, n, nb, op, fold)
	}
	t.clc.end()
	return err
}

// postReduceFlat: every member publishes its src in its gather line g%2
// (seq base+g+1), waits for every other member's, and folds them all in
// rank order, so that all get the same bits.
func (t *Team) postReduceFlat(g uint32, dst, src core.Ptr, n int, nb uint64, op Op, fold func(acc, x core.Ptr, n int, op Op)) error {
	me := t.rank
	mine := &t.slots[me].gather[g&1]
	core.CopyBytes[byte](addr(&mine.data), src, nb)
	t.clc.wrote(mine)
	t.l.publish(mine, t.gathBase[me]+g+1)
	// A few pauses before the first look at another member's line, which
	// a member arriving about now is writing (shmsync.SettlePolls, as in
	// pairBarrier).
	for range t.l.settle {
		shmsync.Pause()
	}
	for j := range t.slots {
		if j != me {
			pl := &t.slots[j].gather[g&1]
			if err := t.awaitPost(j, pl, t.gathBase[j], g+1, nil); err != nil {
				return t.waitErr(j, err)
			}
			t.clc.read(pl)
		}
	}
	// Every member folds in rank order, so all get the same bits.
	core.CopyBytes[byte](dst, addr(&t.slots[0].gather[g&1].data), nb)
	for j := 1; j < t.size; j++ {
		fold(dst, addr(&t.slots[j].gather[g&1].data), n, op)
	}
	// The next call's line: every member has read it (each published g,
	// which it does only after reading every line of g-1).
	shmsync.PrefetchW(addr(&t.slots[me].gather[(g+1)&1]))
	return nil
}

// postReduceTree is the small Reduce of a larger team over a binomial tree
// of ranks rooted at rank 0: rank r's parent is r minus its lowest set
// bit, its children r+1, r+2, r+4, ... below that bit (every power of two
// below the team's size for rank 0).
//
//  1. Up: a member copies src into its gather line g%2, folds in each
//     child's line, lowest child first, once the child has published it
//     with seq base+2g+1, and publishes its own (rank 0 does not: its
//     line then holds the result).
//  2. Down: a member other than rank 0 waits for its parent's line to
//     reach 2g+2 and copies the result from it into its own line; a
//     member with children publishes 2g+2.
//  3. dst is the result of its line.
//
// Every member gets the bits that rank 0 computed. A member reads at most
// ⌈log₂ n⌉ children's lines and its parent's, and the last member to
// finish does so after 2·⌈log₂ n⌉ line transfers, where the flat form
// reads n-1 lines on every member. The line of call g is reused by call
// g+2: its parent read the partial of g before it published the result
// of g, which the member waited for; its children read the result of g
// before they finished g, which they did before they published their
// partials of g+2, which the member waits for before it writes g+2's
// result (a leaf has no children and writes only its partial).
func (t *Team) postReduceTree(g uint32, dst, src core.Ptr, n int, nb uint64, op Op, fold func(acc, x core.Ptr, n int, op Op)) error {
	me := t.rank
	up, down := 2*g+1, 2*g+2
	mine := &t.slots[me].gather[g&1]
	acc := addr(&mine.data)
	core.CopyBytes[byte](acc, src, nb)
	low := me & -me // the lowest bit of the rank; 0 for rank 0
	children := false
	for c := 1; c < kidSpan(me, t.size); c <<= 1 {
		children = true
		j := me + c
		pl := &t.slots[j].gather[g&1]
		if err := t.awaitPost(j, pl, t.gathBase[j], up, nil); err != nil {
			return t.waitErr(j, err)
		}
		t.clc.read(pl)
		fold(acc, addr(&pl.data), n, op)
	}
	if me != 0 {
		t.clc.wrote(mine)
		t.l.publish(mine, t.gathBase[me]+up)
		p := me - low
		pl := &t.slots[p].gather[g&1]
		if err := t.awaitPost(p, pl, t.gathBase[p], down, nil); err != nil {
			return t.waitErr(p, err)
		}
		t.clc.read(pl)
		core.CopyBytes[byte](acc, addr(&pl.data), nb)
	}
	if children {
		t.clc.wrote(mine)
		t.l.publish(mine, t.gathBase[me]+down)
	}
	core.CopyBytes[byte](dst, acc, nb)
	// The next call's line: see above for why its readers are done.
	shmsync.PrefetchW(addr(&t.slots[me].gather[(g+1)&1]))
	return nil
}
