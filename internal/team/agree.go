package team

import (
	"sync/atomic"

	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/shmsync"
)

// The agreement: the collective allocation's exchange of records on one
// node (the root's symalloc.go, "The records"; the C library's
// capi/symalloc.c runs the same), a dissemination barrier whose post
// lines carry each PE's record.
//
// Every PE of the job takes part, in the world's order (topology keys,
// as the barrier: dissem.go). Its lines are the agreement's round lines
// of the barrier area, after the team ids' (dissem.go, "The barrier
// area"): rounds(npes) round lines, no count line. Phase s (the record's
// sequence number, counted by the caller, from 1; Go and C of one
// process count on one word) uses line s%2 of each round; the lines
// start at 0 in a fresh segment, so every base is 0.
//
// In phase s, a PE at position p of the order, holding its record v
// (AgreeWords words) and a flag ok (true at first):
//
//  1. For each round r = 0 .. ⌈log₂ N⌉-1: store v in its line (r, s%2)
//     if ok, else the poisoned record (every word all ones; no call has
//     it); publish s (Layer.publish: release or seq-cst as the post
//     lines); wait until the line (r, s%2) of the PE j 2^r places before
//     it holds s; ok = ok and j's line holds v.
//  2. Ask for the next phase's lines in the exclusive state.
//
// After round r a PE's ok says that every PE of the 2^(r+1) before it in
// the order (itself included) holds v: j's line said so of the 2^r before
// j, the PE's own rounds of the 2^r before itself. After ⌈log₂ N⌉ rounds
// ok says it of all N, on every PE alike: if any two records differ,
// every PE's view covers both, and a PE whose record differs from its own
// sees a poisoned or different line. A PE that is not ok reads every
// PE's record (the root's diverged) to name the ones that differ: the
// cost of N reads falls on the error path only.
//
// A line's data are overwritten in phase s+2, after its reader has read
// them in phase s: the writer cannot end phase s+1 before every PE has
// entered it, after ending s. Per PE and phase: ⌈log₂ N⌉ lines written,
// ⌈log₂ N⌉ read, a critical path of ⌈log₂ N⌉ transfers; the records came
// before with N-1 lines read per PE per phase (O(N), each line read by
// N-1 PEs). Each line has one reader, so a publication wakes at most one
// sleeper, where publishing a record woke every PE that slept.

// agreeRound is a PE's lines of one round of the agreement, by the
// parity of the phase.
type agreeRound struct {
	line [2]agreeLine
}

// agreeLine is a post line whose count of sleepers is on the next line:
// the owner's load of it right after publishing would otherwise wait for
// the line it has just written, which its reader polls and so takes away
// from it every phase, to come back (a store to a line that is away waits
// in the store buffer; a load from it waits for the line). Its reader
// changes it only to sleep, so the owner finds it in its cache. 2 PEs, a
// Malloc+Free loop, C: 0.51-0.54 µs a pair with the count on the seq's
// line, 0.40-0.46 with the records before (perf: a fifth of the
// agreement's samples on that load).
type agreeLine struct {
	seq      atomic.Uint32 // the phase published, modulo 2^32; futex word
	_        uint32
	data     [postData]byte // the record
	sleepers atomic.Uint32  // processes asleep on seq
	_        [60]byte
}

// AgreeFlat is the largest job whose collective allocations exchange
// records without the agreement: every PE reads every other PE's record
// line at once (the root's symalloc.go, "The records"; the C library's
// capi/symalloc.c alike, SHMEMI_AGREE_FLAT). The small reductions' flat
// form stops at the same size (postFlat).
const AgreeFlat = postFlat

// AgreeWords is the words of a record that the agreement compares: the
// root's allocation record without its seq (call, kind, size, align, in,
// out, hints), 56 bytes, a post line's data.
const AgreeWords = postData / 8

// agreeLines are the round lines of one PE's agreement, by round and
// parity.
type agreeLines struct {
	mine [][2]agreeRef // this PE's
	from [][2]agreeRef // round r: the lines of the PE it waits for
	lc   collCounter   // the line-count model's counts (linecount builds only)
}

// agreeRef is the addresses of one agreeLine's words, taken once. Taking
// them in a phase (&line.seq) makes Go check the line's pointer for nil
// with a load from the line, and a load from a line that is away waits
// for it, where a store waits in the store buffer: in a 2-PE Malloc+Free
// loop those loads took a third of the agreement's samples (perf), on
// this PE's own line, which its reader had just taken away.
type agreeRef struct {
	seq, sleepers *atomic.Uint32
	data          core.Ptr // the record's words
}

// ref takes the addresses of line's words.
func ref(line *agreeLine) agreeRef {
	return agreeRef{seq: &line.seq, sleepers: &line.sleepers, data: addr(&line.data)}
}

// place chooses the PEs this PE waits for (as dissem.place; bases 0).
func (a *agreeLines) place(rank int, keys []uint64, linesOf func(p int) []*agreeRound) {
	n := len(keys)
	order, pos := orderOf(keys, rank)
	both := func(rd *agreeRound) [2]agreeRef { return [2]agreeRef{ref(&rd.line[0]), ref(&rd.line[1])} }
	a.mine = make([][2]agreeRef, rounds(n))
	a.from = make([][2]agreeRef, rounds(n))
	for r := range a.from {
		a.mine[r] = both(linesOf(rank)[r])
		a.from[r] = both(linesOf(order[(pos-1<<r+n)%n])[r])
	}
}

// Agree runs phase seq of the agreement with this PE's record rec, and
// reports whether every PE's record of the phase equals it. check is the
// liveness check of its sleeps, whose error Agree returns as it is (the
// caller's wording names the call). The
// caller has completed its puts (Quiet): every store before the call is
// visible to the PEs that leave the phase. Called by one goroutine at a
// time (the caller's lock of its collective allocations).
func (l *Layer) Agree(seq uint64, rec *[AgreeWords]uint64, check func() error) (bool, error) {
	if l.agree.mine == nil {
		l.placeAgree()
	}
	return l.agreeOn(&l.agree, seq, rec, check)
}

// placeAgree places this PE in the agreement, in the world's order. Every
// PE's key was stored before Init's barrier.
func (l *Layer) placeAgree() {
	keys := make([]uint64, l.sp.NPEs)
	for p := range keys {
		// Seq-cst load of a word stored once at the PE's Init, before the
		// segment barrier that ended it.
		keys[p] = l.headOf(p).key.Load()
	}
	l.agree.place(l.sp.Rank, keys, l.agreeRoundsOf)
}

// agreeOn is Agree on the lines a (steps in this file's comment).
func (l *Layer) agreeOn(a *agreeLines, seq uint64, rec *[AgreeWords]uint64, check func() error) (bool, error) {
	s := uint32(seq) // lines compare modulo 2^32, as every post line
	ok := true
	a.lc.begin()
	for r, from := range a.from {
		// Step 1. The record (or the poison) first, then the release
		// store that publishes it with s.
		pl := &a.mine[r][s&1]
		storeRecord(pl.data, rec, !ok)
		a.lc.wrote(pl.seq)
		l.publishWord(pl.seq, pl.sleepers, s)
		// A few pauses before the first look at the other's line, which
		// a PE arriving about now is writing (shmsync.SettlePolls).
		for range l.settle {
			shmsync.Pause()
		}
		src := &from[s&1]
		if err := l.awaitAgree(src, s, check); err != nil {
			return false, err
		}
		a.lc.read(src.seq)
		// Loads after the seq load that saw s; the owner rewrites them
		// only in phase s+2.
		ok = ok && sameRecord(src.data, rec)
	}
	a.lc.end()
	// Step 2. The next phase's lines: their reader read them in the phase
	// before this one, which it left before this PE could leave this.
	for _, mine := range a.mine {
		shmsync.PrefetchW(core.AddrOf(mine[(s+1)&1].seq))
	}
	return ok, nil
}

// awaitAgree waits until the line pl holds s: poll and yield under the
// runtime's pacing, then sleep ("Post lines", Sleeping).
func (l *Layer) awaitAgree(pl *agreeRef, s uint32, check func() error) error {
	// Seq-cst loads; pair with the owner's store in publish, after which
	// the line's data are visible here.
	seq := pl.seq
	cond := func() bool { return reached(seq.Load(), s) }
	if cond() {
		return nil
	}
	if p := shmsync.Pace(); p.Until(cond) {
		return nil
	}
	return l.sleepOnWord(seq, pl.sleepers, cond, check)
}
