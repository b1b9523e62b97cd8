// Package calls is what each PE publishes of the collective call it is
// in, so that no collective waits silently: a PE that waits for others
// and finds one in a different collective, or in Close, or gone, fails
// with one message naming each PE's call instead of waiting forever.
//
// # Layout
//
// Each PE's control block holds an Area: one word that says which call
// the PE is in (Word), on a line of its own, and the PE's count of the
// collective calls it has made on each team id (Counts). Only the PE
// writes its area; the other PEs read it only when a wait has lasted a
// sleep slice (shmsync.SleepSlice), so the lines stay in the writer's
// cache and a call pays two or three stores to them.
//
// A Word packs, from the low bits up: the call's number on its team (the
// count after the call was counted, 40 bits), the team id (8 bits), the
// kind (8 bits) and the state (in a call, or between calls). The C
// library (capi) publishes the same words through the offsets
// cabi.Layout gives it, with the kinds of this package (generated into
// capi/shmemi_calls.h by capi/gen).
//
// Each PE also records what it passed to each of its last ArgsDepth
// calls on each team id (Args: the bytes a member contributes and the
// root, packed with the call's kind and number), so that a check can tell
// PEs that made the same call with different arguments ("Arguments").
//
// # Paths
//
//	Enter   1. count the call on its team: Counts[team] + 1 (a load and a
//	           store: a PE's calls on a team do not overlap)
//	        2. the call's Args in entry count%ArgsDepth of the team's
//	        3. Word = {in a call, kind, team, count}
//	Leave   Word's state back to "between calls", the rest kept, so that
//	        a message can name the last call of a PE that is computing
//	Close   Word = {in a call, Close}; a PE out of the job, Left
//	Check   (a wait's liveness check, after a slice ran out) for every
//	        PE the wait depends on, compare its Word with this PE's
//	        (Diverged); the caller re-tests its condition before it
//	        reports anything (shmsync.Lost), so a PE that completed our
//	        call and went on to another is never reported
//
// # What counts as divergence
//
// Let this PE be in call n of kind K on team T. Another member q of T
// diverges when q is in call n on T of another kind, or when q is in
// Close or has left the job without making call n on T of kind K (its
// counts are final then). A PE in Close finds divergence in a member in
// a call of the world team that it never made (number above its own
// count); a call on another team is left to the other PE's check, which
// knows this PE is a member of that team. A member that is behind (in an
// earlier call on T), computing, or in a call on another team is waited
// for: it may still come. A member whose word says it found a divergence
// (Broken) makes no more calls: it diverges from this PE's call n on T
// when it never made call n, or found the divergence in it, and from a
// PE in Close always.
//
// # Arguments
//
// The sizes of a collective decide its path (post lines, scratch
// buffers, trees, the source read in place), so PEs that pass different
// sizes to the same call may take different paths and wait for ever for
// steps the others never take; where the paths meet, they exchange wrong
// bytes. Member q also diverges from this PE's call n of kind K on T when
// q's record of its call n on T (q in it, past it, or in Close or gone
// after it) is of another kind, or of kind K with other arguments. A
// record says which call it is (the low bits of its number and its kind),
// so one overwritten ArgsDepth calls later, or being written, is not
// compared; neither is a call without arguments (Args 0: barriers, syncs,
// allocations, which compare theirs themselves, and collect, whose sizes
// differ by design). The check runs after a sleep slice, as every other
// rule; and the team layer's barriers (internal/team, dissem.go; the C
// library's world barrier alike) carry each PE's record (Record) in their
// lines to their readers, which compare it at once (Differs): PEs in one
// barrier are in one call. Paths that differ but meet without a wait or a
// barrier return wrong bytes unreported.
//
// # Cancelled calls
//
// A call whose caller's context ended while it waited (the root
// package's BarrierCtx and SyncCtx) cannot be taken back: the other
// members may have counted its arrival, or be waiting for it. The PE
// then breaks its tracker as a divergence does (Cancel: every later
// collective call of the PE fails at once) and publishes its word with
// Broken and Cancelled set, the cancelled call kept in it. Its counts
// are final from then on, as a PE's in Close, and the cancelled call
// itself counts as not made: q, cancelled, diverges from this PE's call
// n on T when q's last call on T is below n, or is call n of another
// kind, or is call n on T, the cancelled one; and from a PE in Close
// always (q leaves without Close's barrier). A member's wait that the
// cancelled PE had already let through (its arrival was counted before
// it gave up) ends normally: the caller re-tests its condition before it
// reports anything.
package calls

import (
	"fmt"
	"sync/atomic"

	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/shmsync"
)

// Kind is the kind of a collective call.
type Kind uint8

// The kinds. Their values are shared with the C library (capi/gen writes
// them into capi/shmemi_calls.h): append only.
const (
	None Kind = iota
	Barrier
	Sync
	Malloc
	Calloc
	Align
	MallocWithHints
	Realloc
	Free
	Split
	Destroy
	Broadcast
	Reduce
	FCollect
	Collect
	AllToAll
	AllToAlls
	Close
	Left
	Scan // the C library's shmem_sum_inscan and shmem_sum_exscan (OpenSHMEM 1.6)
	numKinds
)

var names = [numKinds]string{None: "no call", Barrier: "Barrier", Sync: "Sync", Malloc: "Malloc", Calloc: "Calloc",
	Align: "Align", MallocWithHints: "MallocWithHints", Realloc: "Realloc", Free: "Free", Split: "Split",
	Destroy: "Destroy", Broadcast: "Broadcast", Reduce: "Reduce", FCollect: "FCollect", Collect: "Collect",
	AllToAll: "AllToAll", AllToAlls: "AllToAlls", Close: "Close", Left: "Close (left)",
	Scan: "Scan"}

func (k Kind) String() string {
	if k < numKinds {
		return names[k]
	}
	return fmt.Sprintf("call kind %d", uint8(k))
}

// Kinds lists every kind with its name, for the C header's generator.
func Kinds() []Kind {
	ks := make([]Kind, numKinds)
	for i := range ks {
		ks[i] = Kind(i)
	}
	return ks
}

// MaxTeams is the number of team ids (internal/team's MaxTeams).
const MaxTeams = 64

// The Word's fields.
const (
	NumBits   = 40
	TeamShift = NumBits
	KindShift = TeamShift + 8
	InCall    = uint64(1) << 63
	// Broken is set in the word of a PE that found a divergence: the C
	// library's next collective call then ends the job (the runtime's
	// calls return the error themselves).
	Broken = uint64(1) << 62
	// Cancelled is set, with Broken, in the word of a PE whose call in
	// it was cancelled (Tracker.Cancel): see "Cancelled calls".
	Cancelled = uint64(1) << 61
	numMask   = uint64(1)<<NumBits - 1
)

// Word is a published call word.
type Word uint64

// Pack returns the word of call num of kind k on team, in a call.
func Pack(k Kind, team int, num uint64) Word {
	return Word(InCall | uint64(k)<<KindShift | uint64(team&0xff)<<TeamShift | num&numMask)
}

func (w Word) Kind() Kind   { return Kind(uint64(w) >> KindShift) }
func (w Word) Team() int    { return int(uint64(w)>>TeamShift) & 0xff }
func (w Word) Num() uint64  { return uint64(w) & numMask }
func (w Word) InCall() bool { return uint64(w)&InCall != 0 }

// Cancelled reports whether w is the word of a PE whose call in it was
// cancelled ("Cancelled calls").
func (w Word) Cancelled() bool { return uint64(w)&Cancelled != 0 }

// ArgsDepth is the calls on a team whose arguments a PE keeps: as many
// as a broadcast's root may run ahead of a member (internal/team's post
// ring), so that a member behind finds the root's record of its call.
const ArgsDepth = 32

// An Args record packs, from the high bits down: the call's number
// modulo 256 (ArgsNumShift), its kind (ArgsKindShift), then the
// arguments (the low 48 bits; 0: none to compare): ArgsSet, the bytes
// each member contributes modulo 2^31 (ArgsBytesShift) and the root plus
// one (the low 16 bits; 0: no root).
const (
	ArgsNumShift   = 56
	ArgsKindShift  = 48
	ArgsSet        = uint64(1) << 47
	ArgsBytesShift = 16
	ArgsBytesMask  = 1<<31 - 1                    // of the bytes, after the shift
	ArgsRootMask   = 1<<ArgsBytesShift - 1        // of the root plus one
	ArgsMask       = uint64(1)<<ArgsKindShift - 1 // of the arguments
	ArgsNumMask    = 1<<(64-ArgsNumShift) - 1     // of the number, after the shift
)

// RecordOf is the record of call num of kind k with arguments args (Args;
// 0: none to compare).
func RecordOf(k Kind, num, args uint64) uint64 {
	return num<<ArgsNumShift | uint64(k)<<ArgsKindShift | args&ArgsMask
}

// FarTeam is the team field of the call words that describe calls on a
// team made by Split in a job on several nodes (internal/far), which has
// no team id: their records travel in that layer's own barrier.
const FarTeam = 0xff

// Args returns the arguments of a call that contributes bytes per member
// (a broadcast's, a reduction's vector, an fcollect's block, an
// alltoall's block) from root (-1: none).
func Args(bytes uint64, root int) uint64 {
	return ArgsSet | (bytes&ArgsBytesMask)<<ArgsBytesShift | uint64(root+1)&ArgsRootMask
}

// describeArgs says what a record's arguments are, for a message: " of
// 64 B from root 0".
func describeArgs(a uint64) string {
	if a&ArgsSet == 0 {
		return ""
	}
	s := fmt.Sprintf(" of %d B", a>>ArgsBytesShift&ArgsBytesMask)
	if r := a & ArgsRootMask; r != 0 {
		s += fmt.Sprintf(" from root %d", r-1)
	}
	return s
}

// Area is one PE's part of every control block.
type Area struct {
	word atomic.Uint64 // Word; written by the PE only (Enter, Leave, SetClose), read by the others' checks
	_    [56]byte
	// counts[t] is the PE's latest call on team id t as a Word between
	// calls: its number (the count of collective calls the PE made on
	// the team since the team was made: Reset) and its kind. Written by
	// the PE only.
	counts [MaxTeams]atomic.Uint64
	// args[t*ArgsDepth + n%ArgsDepth] is the record of the PE's call n on
	// team id t ("Arguments"). Written by the PE only.
	args [MaxTeams * ArgsDepth]atomic.Uint64
}

// Size is the bytes of an Area.
const Size = 64 + MaxTeams*8 + MaxTeams*ArgsDepth*8

// area is the calls' area of every control block.
var area = core.RegisterArea("calls", func(int) uint64 { return Size })

// Off returns the offset of the Area in the control blocks of a job of
// npes PEs (for the C library).
func Off(npes int) core.CBOff { return area.Off(npes) }

// Areas views every PE's Area in sp (nil for a PE without a control
// block here: on another node).
func Areas(sp *core.Space, here func(pe int) bool) []*Area {
	as := make([]*Area, sp.NPEs)
	for p := range as {
		if here == nil || here(p) {
			as[p] = core.View[Area](sp.Bytes(area, p))
		}
	}
	return as
}

// WordOff, CountsOff and ArgsOff are the offsets of the word, the counts
// and the argument records in an Area (cabi.Layout hands them to the C
// library).
const (
	WordOff   = 0
	CountsOff = 64
	ArgsOff   = CountsOff + MaxTeams*8
)

// Enter counts a call of kind k on team and publishes it. Release
// stores, which wait for nothing (a sequentially consistent store would
// cost a sizeable share of a 2-PE barrier): the other PEs load the words
// only after a sleep slice, and a word seen late is an older call, with a
// smaller number, which no rule reports.
//
// args are the call's arguments (Args; 0: none to compare).
func (a *Area) Enter(k Kind, team int, args uint64) {
	c := &a.counts[team&(MaxTeams-1)]
	w := Pack(k, team, Word(c.Load()).Num()+1) // only this PE writes c
	shmsync.StoreRelease64(a.argsOf(team, w.Num()), RecordOf(k, w.Num(), args))
	shmsync.StoreRelease64(c, uint64(w)&^InCall)
	shmsync.StoreRelease64(&a.word, uint64(w))
}

// argsOf returns the word of the record of call n on team id.
func (a *Area) argsOf(team int, n uint64) *atomic.Uint64 {
	return &a.args[(team&(MaxTeams-1))*ArgsDepth+int(n%ArgsDepth)]
}

// record returns the PE's record of call n on team id, and whether it
// has it (the record is of call n, not of another ArgsDepth away).
func (a *Area) record(team int, n uint64) (uint64, bool) {
	r := a.argsOf(team, n).Load()
	return r, r>>ArgsNumShift == n&ArgsNumMask && r != 0
}

// Leave marks the PE between calls again, keeping its last call's kind
// and number for messages. A release store, as Enter's.
func (a *Area) Leave() { shmsync.StoreRelease64(&a.word, a.word.Load()&^InCall) }

// SetClose publishes that the PE is in Close (k = Close) or has left the
// job (k = Left).
func (a *Area) SetClose(k Kind) { a.word.Store(uint64(Pack(k, 0, 0))) }

// Reset starts the count of team id anew: a new team took the id (Split).
func (a *Area) Reset(team int) { a.counts[team&(MaxTeams-1)].Store(0) }

// Load returns the PE's published word. Seq-cst; pairs with the PE's
// stores in Enter, Leave and SetClose.
func (a *Area) Load() Word { return Word(a.word.Load()) }

// Count returns the PE's count of calls on team id.
func (a *Area) Count(team int) uint64 { return a.Last(team).Num() }

// Last returns the PE's latest call on team id, as a Word between calls.
func (a *Area) Last(team int) Word { return Word(a.counts[team&(MaxTeams-1)].Load()) }

// brokenMember reports whether q (theirs), whose word says it found a
// divergence, will never join this PE's call mine: it makes no more
// calls, and the one in its word, where it found it, it may have left
// half done.
func brokenMember(mine Word, theirs *Area) bool {
	w := theirs.Load()
	if uint64(w)&Broken == 0 || w.Cancelled() || !mine.InCall() {
		return false
	}
	last := theirs.Last(mine.Team())
	return mine.Kind() == Close || last.Num() < mine.Num() || w.Team() == mine.Team() && w.Num() == mine.Num()
}

// divergedCall reports whether PE q, whose area is theirs, will never
// join the call of this PE's word mine (this PE's area is own), by the
// calls' kinds and numbers ("What counts as divergence"); argsDiffer and
// brokenMember are the other two ways.
func divergedCall(mine Word, own *Area, theirs *Area) bool {
	w := theirs.Load()
	if !mine.InCall() {
		return false
	}
	if w.Cancelled() {
		// q makes no more calls, and did not make the one in its word
		// ("Cancelled calls").
		if mine.Kind() == Close {
			return true
		}
		last := theirs.Last(mine.Team())
		return last.Num() < mine.Num() ||
			last.Num() == mine.Num() && (last.Kind() != mine.Kind() || w.Team() == mine.Team() && w.Num() == mine.Num())
	}
	if mine.Kind() == Close {
		// q in a call of the world team that this PE never made. (A call
		// on another team is reported by q's check, which knows that
		// this PE is a member; this one may not be.)
		return w.InCall() && w.Kind() != Close && w.Team() == 0 && w.Num() > own.Count(0)
	}
	switch k := w.Kind(); {
	case k == Left || k == Close && w.InCall():
		// q's counts are final: did it make this call before it left?
		last := theirs.Last(mine.Team())
		if last.Num() < mine.Num() || last.Num() == mine.Num() && last.Kind() != mine.Kind() {
			return true
		}
	case w.InCall() && w.Team() == mine.Team() && w.Num() == mine.Num() && w.Kind() != mine.Kind():
		return true
	}
	return false
}

// argsDiffer reports whether PE q (theirs) made this PE's call mine with
// another kind or other arguments, by its record of it ("Arguments"),
// and returns the record.
func argsDiffer(mine Word, own, theirs *Area) (uint64, bool) {
	if !mine.InCall() || mine.Num() == 0 || mine.Kind() == Close || mine.Kind() == Left {
		return 0, false
	}
	if theirs.Last(mine.Team()).Num() < mine.Num() {
		return 0, false // q has not made the call (yet)
	}
	m, ok := own.record(mine.Team(), mine.Num())
	if !ok {
		return 0, false
	}
	r, ok := theirs.record(mine.Team(), mine.Num())
	if !ok {
		return 0, false
	}
	if recordKind(r) != recordKind(m) {
		return r, true
	}
	return r, r&ArgsMask != 0 && m&ArgsMask != 0 && r&ArgsMask != m&ArgsMask
}

// Record returns this PE's record of its call in progress on team id
// ("Arguments"), or 0 when it is in no call on that team or has none.
// The team layer's barriers carry it to their partners (Differs). A nil
// Tracker has none.
func (t *Tracker) Record(team int) uint64 {
	if t == nil {
		return 0
	}
	w := t.own.Load()
	if !w.InCall() || w.Team() != team&0xff || w.Kind() == Close {
		return 0
	}
	if r, ok := t.own.record(team, w.Num()); ok {
		return r
	}
	return 0
}

// Differs returns the error, kept for every later call, of this PE's call
// (its record mine, from Record) that met PE q's call of record theirs in
// a step of one protocol: q made another call, or this one with other
// arguments. It returns nil when either record is 0 or they are equal.
func (t *Tracker) Differs(mine, theirs uint64, q int) error {
	if mine == 0 || theirs == 0 || mine == theirs {
		return nil // the barrier's path: no load of the call word
	}
	return t.DiffersIn(t.own.Load(), mine, theirs, q)
}

// DiffersIn is Differs for call w of this PE (Pack), which it makes
// outside its call word: a call on a team split across nodes (FarTeam).
func (t *Tracker) DiffersIn(w Word, mine, theirs uint64, q int) error {
	if mine == 0 || theirs == 0 || mine == theirs {
		return nil
	}
	// The record keeps its call's number modulo 256: q's is the nearest
	// to ours with those bits.
	n := w.Num() + uint64(int64(int8(uint8(theirs>>ArgsNumShift)-uint8(w.Num()))))
	hint := "every PE must pass the same sizes and root to a collective call"
	if recordKind(theirs) != recordKind(mine) || n != w.Num() {
		hint = "every PE must make the same collective calls in the same order"
	}
	err := fmt.Errorf("%s on PE %d met %s on PE %d: %w (%s)", describeCall(w, mine), t.rank,
		describeCall(Pack(recordKind(theirs), w.Team(), n), theirs), q, errs.ErrDiverged, hint)
	return t.Adopt(err)
}

// recordKind returns the kind of the call of record r.
func recordKind(r uint64) Kind { return Kind(r >> ArgsKindShift & 0xff) }

// Describe says which call w is, for a message: "Barrier (call #12)" on
// the world team (id 0), "Sync (call #3 on team 2)" on another.
func Describe(w Word) string {
	switch k := w.Kind(); {
	case k == Close || k == Left:
		return Close.String()
	case k == None:
		return "no collective call yet"
	case !w.InCall():
		return fmt.Sprintf("no collective call (its last was %s)", Describe(w|Word(InCall)))
	case w.Team() == 0:
		return fmt.Sprintf("%s (call #%d)", k, w.Num())
	case w.Team() == FarTeam:
		return fmt.Sprintf("%s (call #%d on a team split across nodes)", k, w.Num())
	default:
		return fmt.Sprintf("%s (call #%d on team %d)", k, w.Num(), w.Team())
	}
}

// Tracker is a PE's handle on every PE's Area, and the divergence it
// found, which every later collective call of the PE returns at once: the
// PEs no longer make the same calls, so none can complete.
type Tracker struct {
	areas  []*Area // every PE's, by rank
	own    *Area
	rank   int
	detail func(pe int, w Word) string
	broken atomic.Pointer[error]
}

// NewTracker returns PE rank's tracker over areas (every PE's, by rank;
// nil for a PE whose area this process cannot read). detail, if not nil,
// adds to the name of PE pe's call w (the size of an allocation).
func NewTracker(areas []*Area, rank int, detail func(pe int, w Word) string) *Tracker {
	return &Tracker{areas: areas, own: areas[rank], rank: rank, detail: detail}
}

// Own returns this PE's area.
func (t *Tracker) Own() *Area { return t.own }

// Enter counts and publishes a collective call of kind k on team with
// args (Args; 0: none to compare), or returns the divergence found
// earlier without doing anything.
func (t *Tracker) Enter(k Kind, team int, args uint64) error {
	if e := t.broken.Load(); e != nil {
		return fmt.Errorf("symheap: %s: %w", k, *e)
	}
	t.own.Enter(k, team, args)
	return nil
}

// Leave ends the call Enter began. After a divergence the word keeps the
// call that met it, for good: the other PEs' checks then name that call,
// whether this PE has left the job or not.
func (t *Tracker) Leave() {
	if t.broken.Load() == nil {
		t.own.Leave()
	}
}

// SetClose is Area.SetClose, but after a divergence, which the word keeps
// (Leave).
func (t *Tracker) SetClose(k Kind) {
	if t.broken.Load() == nil {
		t.own.SetClose(k)
	}
}

// Broken returns the divergence found, or nil. Like Check's errors, it
// does not start with "symheap:": the caller says which call met it.
func (t *Tracker) Broken() error {
	if e := t.broken.Load(); e != nil {
		return *e
	}
	return nil
}

// Check is a wait's divergence check: it returns, and keeps for every
// later call, the error naming this PE's call and the first PE of pes
// (all PEs when nil) whose call shows it will never join it. The caller
// re-tests its wait's condition first (shmsync.Lost).
//
// A member that diverged by its own call is named before one that only
// found a divergence elsewhere (brokenMember): the first says what went
// wrong.
func (t *Tracker) Check(pes []int) error {
	if !t.own.Load().InCall() {
		return nil
	}
	for _, broken := range []bool{false, true} {
		if pes == nil {
			for q, a := range t.areas {
				if err := t.check(q, a, broken); err != nil {
					return err
				}
			}
			continue
		}
		for _, q := range pes {
			if q >= 0 && q < len(t.areas) {
				if err := t.check(q, t.areas[q], broken); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// CheckRemote is Check of PE q, whose area this process cannot read, on a
// copy of it (read across the network: the word first, then the counts,
// so that counts read after a word that says q left are final).
func (t *Tracker) CheckRemote(q int, theirs *Area) error {
	if !t.own.Load().InCall() {
		return nil
	}
	return t.check(q, theirs, true)
}

// Adopt keeps err, a divergence that another PE of this node found and
// reported (a node's leader, which checks the other nodes), as Check
// keeps its own, and returns the one kept.
func (t *Tracker) Adopt(err error) error {
	if t.broken.CompareAndSwap(nil, &err) {
		shmsync.StoreRelease64(&t.own.word, t.own.word.Load()|Broken)
	}
	return *t.broken.Load()
}

// Cancel breaks the tracker because this PE's call in progress was
// cancelled by cause (its caller's context ended while it waited), and
// publishes it to the other PEs ("Cancelled calls"). It returns the error
// kept for every later call, which wraps both cause and
// errs.ErrDiverged; like Check's, it does not start with "symheap:". If
// the tracker was broken already, the divergence kept stays.
func (t *Tracker) Cancel(cause error) error {
	mine := t.own.Load()
	err := fmt.Errorf("%s on PE %d was cancelled (%w): %w (no collective call of this PE can complete any more, nor can the other PEs' calls that need it; Close every PE)",
		t.describe(t.rank, mine), t.rank, cause, errs.ErrDiverged)
	if t.broken.CompareAndSwap(nil, &err) {
		// Release store: the other PEs load the word after a sleep slice;
		// the counts they read after it are final.
		shmsync.StoreRelease64(&t.own.word, uint64(mine)|Broken|Cancelled)
	}
	return *t.broken.Load()
}

// check is Check of PE q, whose area is theirs (nil: none to check).
//
// broken: whether a member that only found a divergence elsewhere counts
// (brokenMember).
func (t *Tracker) check(q int, theirs *Area, broken bool) error {
	mine := t.own.Load()
	if q == t.rank || theirs == nil {
		return nil
	}
	byCall := divergedCall(mine, t.own, theirs)
	r, byArgs := argsDiffer(mine, t.own, theirs)
	if !byCall && !byArgs && !(broken && brokenMember(mine, theirs)) {
		return nil
	}
	w := theirs.Load()
	gone, hint := "", "every PE must make the same collective calls in the same order, and reach Close together"
	switch {
	case w.Cancelled():
		gone, hint = ", which was cancelled there", "a PE whose collective call was cancelled makes no more; Close every PE"
	case w.Kind() == Left:
		gone = ", which has left the job"
	}
	theirsCall := t.describe(q, w)
	if byArgs && !byCall {
		// Named by q's record of the call, whatever q is in now.
		m, _ := t.own.record(mine.Team(), mine.Num())
		mineCall := describeCall(mine, m)
		theirsCall = describeCall(Pack(recordKind(r), mine.Team(), mine.Num()), r)
		now := ""
		if !(w.InCall() && w.Team() == mine.Team() && w.Num() == mine.Num()) {
			now = ", now in " + t.describe(q, w)
		}
		hint = "every PE must pass the same sizes and root to a collective call"
		if recordKind(r) != mine.Kind() {
			hint = "every PE must make the same collective calls in the same order"
		}
		err := fmt.Errorf("%s on PE %d met %s on PE %d%s%s: %w (%s)", mineCall, t.rank, theirsCall, q, now, gone, errs.ErrDiverged, hint)
		return t.Adopt(err)
	}
	if !byCall {
		// brokenMember
		gone, hint = ", which found a divergence there", "a PE that found a divergence makes no more collective calls; Close every PE"
	}
	err := fmt.Errorf("%s on PE %d met %s on PE %d%s: %w (%s)",
		t.describe(t.rank, mine), t.rank, theirsCall, q, gone, errs.ErrDiverged, hint)
	return t.Adopt(err)
}

// describeCall is Describe of call w (in a call) with the arguments of
// its record r: "Broadcast of 8 B from root 0 (call #2)".
func describeCall(w Word, r uint64) string {
	s, k := Describe(w|Word(InCall)), w.Kind().String()
	return k + describeArgs(r) + s[len(k):]
}

func (t *Tracker) describe(pe int, w Word) string {
	s := Describe(w)
	if t.detail != nil && w.InCall() {
		if d := t.detail(pe, w); d != "" {
			k := w.Kind().String()
			s = k + d + s[len(k):]
		}
	}
	return s
}
