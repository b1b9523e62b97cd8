package symheap

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"strings"
	"sync"

	"github.com/symheap/symheap/internal/calls"
	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/shmsync"
	"github.com/symheap/symheap/internal/team"
	"github.com/symheap/symheap/internal/transport"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/internal/segment"
)

// Symmetric allocation.
//
// Every PE runs the same deterministic allocator over its own symmetric
// heap with the same sequence of calls, so a symmetric object has the same
// offset in every partition. Each call:
//
//  1. validates its arguments (the same on every PE, so every PE refuses
//     alike, without synchronising);
//  2. for Free and Realloc, publishes a record of the call (number, kind,
//     arguments, the offset it was given) and waits until every PE has
//     published its record of the same phase: everybody has reached the
//     call, so nobody still uses the memory; then compares every record
//     with its own;
//  3. allocates (or frees) locally. A Free frees only after step 2, never
//     while its record travels: until every PE has reached the Free, any
//     of them may still read this PE's copy, and freeing writes the
//     allocator's links into the block (checkFreeEntryBarrier);
//  4. except for Free, publishes its record again, now with the resulting
//     offset, waits for every PE's, and compares: any difference returns
//     ErrDiverged on every PE, naming the PEs, the call numbers and the
//     arguments, and undoes the local part.
//
// The exchange of records is itself the synchronisation OpenSHMEM asks of
// shmem_malloc and shmem_free (a barrier): a PE returns from Malloc only
// when every PE has allocated, and starts a Free only when every PE has
// reached it. Merging the two makes the divergence check nearly free, since
// the records travel on the cache lines that the barrier would move anyway
// (BenchmarkRMA/MallocFree reports it as check-ns).
//
// # The records
//
// Each PE has two record slots in its control block (allocRecord), and
// phase k of its calls writes slot k%2: the owner stores the fields and
// seq = k. How the other PEs learn them depends on the job:
//
//   - Flat, up to team.AgreeFlat PEs on one node, and across nodes: the
//     slot is published with the store of seq (a release store after
//     Quiet's part, as the world barrier publishes, where this process
//     registered for membarrier; a sequentially consistent one
//     otherwise); a reader waits until it sees seq >= k in every PE's
//     slot (across nodes, the node's leader brings the other nodes'
//     records into this node's copies of their blocks: internal/far),
//     then compares the fields: N-1 lines read per PE and phase, at once.
//     Waiting sleeps on the waiter's own signal word (wait.go);
//     publishing wakes every PE with sleepers.
//   - More PEs on one node: the record goes along a dissemination barrier
//     whose post lines carry it (internal/team, agree.go, Layer.Agree):
//     in each of ⌈log₂ N⌉ rounds a PE publishes its record (or, once it
//     has seen a difference, a poisoned one) and compares the line of the
//     PE 2^r places before it with its own, so that after the last round
//     every PE knows whether all N records are alike: ⌈log₂ N⌉ lines
//     written and read per PE and phase, and one reader per line, so a
//     publication wakes at most one sleeper. Only when they differ does
//     a PE read every PE's slot (diverged), to name the PEs that differ.
//     The slot's seq is a plain store, published by the first round.
//
// Why flat up to 4: at 2 PEs both forms move one line each way, and the
// flat one costs less around it (a Malloc+Free pair 0.53-0.68 µs against
// 0.62-0.79 in Go, 0.47-0.51 against 0.53-0.71 in C, alternating); at 4
// PEs on 2 cores the flat form's reads mostly find lines already
// published where the rounds wait in turn (Go 22-23 µs against 32-43).
// From 8 PEs the agreement wins (2 cores: Go 500-560 → 121-132 µs, at 16
// 2297-2727 → 1149-1163; docs/bench/scale.md).
//
// A PE can be at most one phase ahead of any other (it cannot finish
// phase k+1 without every PE's record of k+1, which each writes after
// finishing phase k), so slot k%2 (and line k%2 of each round) holds k or
// k-2 while anyone still waits for or reads phase k, and is overwritten
// (by phase k+2) only after every PE has finished with k.
//
// The flat form was measured against other designs in a loop of 2-PE
// Malloc+Free pairs, and each of these lost or tied
// (docs/bench/design-measurements.md): one shared counter per phase with
// the records' digests summed into the add; one line of seqs and digests
// shared by four PEs; seq on a line of its own; CLDEMOTE of the published
// line. What made it faster was the world barrier's recipe, which both
// forms follow: a release store to publish, a few pauses before the first
// look at the others' lines (shmsync.SettlePolls), and the next phase's
// line prefetched for writing once the phase is over.

// Hints for MallocWithHints: the OpenSHMEM 1.5 bits. Any combination, and
// unknown bits, are accepted; memory from any hint works for every
// operation.
type Hints uint64

const (
	// HintAtomicsRemote: the object will be the target of remote atomics.
	// symheap gives it whole cache lines (64-byte aligned, size rounded up
	// to 64) so that atomics on it never share a line with bulk data.
	HintAtomicsRemote Hints = 1 << 0
	// HintSignalRemote: the object will be used for signals (as the
	// atomics hint).
	HintSignalRemote Hints = 1 << 1
)

const cacheLine = 64

// Call kinds in allocation records.
const (
	callMalloc = iota + 1
	callCalloc
	callAlign
	callHints
	callRealloc
	callFree
)

// callKinds are the kinds the call words publish (internal/calls).
var callKinds = [...]calls.Kind{callMalloc: calls.Malloc, callCalloc: calls.Calloc, callAlign: calls.Align,
	callHints: calls.MallocWithHints, callRealloc: calls.Realloc, callFree: calls.Free}

var callNames = map[uint64]string{callMalloc: "Malloc", callCalloc: "Calloc", callAlign: "Align",
	callHints: "MallocWithHints", callRealloc: "Realloc", callFree: "Free"}

const noOff = math.MaxUint64

// Malloc allocates n elements of T in every PE's symmetric heap. It is
// collective: every PE calls it with the same n in the same order. n == 0
// returns nil at once, without a barrier.
func Malloc[T any](pe *PE, n int) ([]T, error) {
	return symAlloc[T](pe, n, 0, callMalloc, 0)
}

// Calloc is Malloc with the memory zeroed.
func Calloc[T any](pe *PE, n int) ([]T, error) {
	return symAlloc[T](pe, n, 0, callCalloc, 0)
}

// Align is Malloc with the block aligned to align bytes: a power of two up
// to 8 MiB, else ErrBadAlign.
func Align[T any](pe *PE, align uintptr, n int) ([]T, error) {
	if align == 0 || bits.OnesCount64(uint64(align)) != 1 || align > alloc.MaxAlign {
		if err := pe.check(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("symheap: Align(%d): %w (a power of two from 1 to %d)", align, ErrBadAlign, alloc.MaxAlign)
	}
	return symAlloc[T](pe, n, uint64(align), callAlign, 0)
}

// MallocWithHints is Malloc with usage hints (see Hints).
func MallocWithHints[T any](pe *PE, n int, hints Hints) ([]T, error) {
	return symAlloc[T](pe, n, 0, callHints, hints)
}

// Realloc resizes a symmetric block to n elements, collectively. A nil s
// allocates; n == 0 frees and returns nil. The contents are kept up to the
// smaller size. On failure s is intact and still allocated, except in one
// case: if the PEs agreed on the call but their allocators returned
// different offsets (their heaps had diverged before), the resized block
// is returned with ErrDiverged.
func Realloc[T any](pe *PE, s []T, n int) ([]T, error) {
	if s == nil {
		return Malloc[T](pe, n)
	}
	if n == 0 {
		return nil, Free(pe, s)
	}
	if err := pe.check(); err != nil {
		return nil, err
	}
	size, err := elemBytes[T](n)
	if err != nil {
		return nil, err
	}
	p, _ := core.SliceData(s)
	o, _, ok := pe.sp.HeapOffset(p, 1)
	in := uint64(o)
	if !ok {
		return nil, fmt.Errorf("symheap: Realloc of %p: %w (not returned by Malloc)", p, ErrNotSymmetric)
	}
	pe.mu.Lock()
	defer pe.mu.Unlock()
	resized := uint64(noOff) // the block's offset once resized here
	if err := pe.ext.sym.collective(callRealloc, size, 0, in, 0, func() (uint64, error) {
		// The heap reports what it releases (alloc.Reporting).
		off, err := pe.ext.sym.heap.Realloc(alloc.Off(in), size)
		if err != nil {
			return noOff, err
		}
		resized = uint64(off)
		return resized, nil
	}); err != nil {
		if resized != noOff {
			// The PEs diverged after this one resized its block (their
			// arguments agreed, their results did not): the old block
			// may be gone, so hand back the one that holds the data.
			return core.SliceAt[T](pe.sp.HeapAddr(pe.rank, core.HeapOff(resized)), n), err
		}
		return s, err
	}
	out := pe.ext.sym.out()
	return core.SliceAt[T](pe.sp.HeapAddr(pe.rank, core.HeapOff(out)), n), nil
}

// Free releases a symmetric block, collectively: it starts with a barrier,
// so no PE still uses the block. A nil s does nothing.
func Free[T any](pe *PE, s []T) error {
	if err := pe.check(); err != nil {
		return err
	}
	if s == nil {
		return nil
	}
	p, _ := core.SliceData(s)
	o, _, ok := pe.sp.HeapOffset(p, 1)
	in := uint64(o)
	if !ok {
		return fmt.Errorf("symheap: Free of %p: %w (not returned by Malloc)", p, ErrNotSymmetric)
	}
	pe.mu.Lock()
	defer pe.mu.Unlock()
	return pe.ext.sym.collective(callFree, 0, 0, in, 0, func() (uint64, error) {
		if err := pe.ext.sym.heap.Free(alloc.Off(in)); err != nil { // reports the release (alloc.Reporting)
			return noOff, err
		}
		return in, nil
	})
}

func symAlloc[T any](pe *PE, n int, align uint64, kind uint64, hints Hints) ([]T, error) {
	if err := pe.check(); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	size, err := elemBytes[T](n)
	if err != nil {
		return nil, err
	}
	if a := core.AlignOf[T](); align < a {
		align = a
	}
	// Every block is aligned to alloc.MinAlign at least: an alignment
	// below it asks for nothing more, and is recorded as it, so that a
	// Malloc[int64] on a Go PE and a shmem_malloc of the same bytes on a
	// C PE (whose type the C library does not know) are the same call.
	if align < alloc.MinAlign {
		align = alloc.MinAlign
	}
	if kind == callHints && hints&(HintAtomicsRemote|HintSignalRemote) != 0 {
		if align < cacheLine {
			align = cacheLine
		}
		size = (size + cacheLine - 1) &^ (cacheLine - 1)
	}
	pe.mu.Lock()
	defer pe.mu.Unlock()
	err = pe.ext.sym.collective(kind, size, align|uint64(hints)<<32, noOff, hints, func() (uint64, error) {
		off, err := pe.ext.sym.heap.Alloc(size, align)
		if err != nil {
			return noOff, err
		}
		if kind == callCalloc {
			clear(core.SliceAt[byte](pe.sp.HeapAddr(pe.rank, core.HeapOff(uint64(off))), int(size)))
		}
		return uint64(off), nil
	})
	if err != nil {
		return nil, err
	}
	out := pe.ext.sym.out()
	return core.SliceAt[T](pe.sp.HeapAddr(pe.rank, core.HeapOff(out)), n), nil
}

// collective runs one collective allocation call (steps 2 to 4 above).
// op performs the local part and returns the resulting offset.
func (h *symHeap) collective(kind, size, align, in uint64, hints Hints, op func() (uint64, error)) error {
	if err := h.calls.Enter(callKinds[kind], 0, 0); err != nil {
		return err
	}
	defer h.calls.Leave()
	h.nums[numCall]++
	if kind == callFree || kind == callRealloc {
		v, err := h.exchange(kind, size, align, in, noOff, hints)
		if err != nil {
			return err
		}
		if err := h.compare(h.nums[numSeq], false, v); err != nil {
			return err
		}
	}
	out, opErr := op()
	if opErr != nil {
		out = noOff
	}
	if kind == callFree {
		if opErr != nil {
			return h.allocError(kind, size, opErr)
		}
		core.Bump(&h.stats.SymFrees)
		return nil
	}
	v, err := h.exchange(kind, size, align, in, out, hints)
	if err != nil {
		h.undo(kind, out, opErr)
		return err
	}
	if err := h.compare(h.nums[numSeq], true, v); err != nil {
		h.undo(kind, out, opErr)
		return err
	}
	if opErr != nil {
		return h.allocError(kind, size, opErr)
	}
	core.Bump(&h.stats.SymAllocs)
	return nil
}

// undo frees the block a failed call allocated locally, so that a
// diverged call leaves nothing behind. A Realloc keeps what it has: the
// old block is gone only if it moved.
func (h *symHeap) undo(kind, out uint64, opErr error) {
	if opErr == nil && kind != callRealloc {
		h.heap.Free(alloc.Off(out))
	}
}

// symHeap is the symmetric heap layer: this PE's heap and the collective
// allocation calls made on it, with their records (the records themselves
// are in every PE's control block, control.allocRec).
//
// Locks: every call runs under the PE's call lock (pe.mu), which
// serialises this PE's collective calls; nothing else touches the heap or
// the fields below, so the heap's allocator has no lock of its own. The
// records are published and read with atomics ("The records").
type symHeap struct {
	heap  alloc.Allocator // this PE's symmetric heap; reports its releases (alloc.Reporting)
	sp    *core.Space
	ctl   []*control // every PE's control block
	stats *core.Stats
	rma   *rmaLayer      // the completion and wake-up protocol, and the waits
	teams *team.Layer    // the agreement that exchanges records on one node (Layer.Agree)
	calls *calls.Tracker // publishes every call (internal/calls)
	lost  func() error   // the liveness check of every PE, and whether they make the same call
	// farRecords brings the records of a phase across nodes, into this
	// node's copies of the other nodes' PEs' control blocks; farLost
	// reports a loss found on the way (internal/far, Layer.Records). No-ops on one node.
	farRecords func(seq uint64) error
	farLost    func() error

	// settle: the pauses between publishing a record and the first look
	// at the others' (shmsync.SettlePolls; Retune).
	settle int
	// nums: this PE's collective allocation phases made (nums[numSeq])
	// and calls made (nums[numCall]): in own, or, where the C library
	// publishes records of this PE too (cabi.ShareRecords), in C's
	// memory, where both sides read and write them.
	nums *[2]uint64
	own  [2]uint64
	mine [2]recValues // this PE's records of the last two phases
}

// The indices of symHeap.nums.
const (
	numSeq  = 0
	numCall = 1
)

// Retune reads again the settling pauses, from the transfer time the
// PEs measured between themselves (probe.go).
func (h *symHeap) Retune() { h.settle = shmsync.SettlePolls() }

// out returns the offset of the last phase's result.
func (h *symHeap) out() uint64 { return h.mine[h.nums[numSeq]%2].out }

// recValues are the values of one allocRecord, read out of shared memory
// or kept in this process.
type recValues struct {
	seq, call, kind, size, align, in, out, hints uint64
}

// load reads a record's fields (after its seq was seen: exchange).
func (r *allocRecord) load() recValues {
	return recValues{seq: r.seq.Load(), call: r.call.Load(), kind: r.kind.Load(), size: r.size.Load(),
		align: r.align.Load(), in: r.in.Load(), out: r.out.Load(), hints: r.hints.Load()}
}

// verdict is what an exchange learned of the other PEs' records of its
// phase.
type verdict uint8

const (
	unread verdict = iota // published and arrived: compare reads them
	alike                 // the agreement found every record equal to this PE's
	differ                // it found one that differs: compare names them
)

// exchange publishes this PE's record of the next phase and waits until
// every PE has published its own (see "The records" above). This PE's
// own values stay in h.mine too: compare reads them from there, because
// reading one's own record back after the others have read it costs a
// cache miss.
func (h *symHeap) exchange(kind, size, align, in, out uint64, hints Hints) (verdict, error) {
	h.nums[numSeq]++
	seq, call := h.nums[numSeq], h.nums[numCall]
	rank := h.sp.Rank
	// Field by field: a composite literal is built on the stack and then
	// copied, and the copy's wide loads stall on the narrow stores.
	v := &h.mine[seq%2]
	v.seq, v.call, v.kind, v.size, v.align, v.in, v.out, v.hints = seq, call, kind, size, align, in, out, uint64(hints)
	rec := &h.ctl[rank].allocRec[seq%2].allocRecord
	// The fields are published by the seq store below (a release: on
	// amd64 a locked instruction, on arm64 STLR), or on one node by the
	// agreement's first post line; readers load them after they see seq,
	// or after the agreement, so they need no atomic writes of their own.
	core.SetPlain(&rec.call, v.call)
	core.SetPlain(&rec.kind, v.kind)
	core.SetPlain(&rec.size, v.size)
	core.SetPlain(&rec.align, v.align)
	core.SetPlain(&rec.in, v.in)
	core.SetPlain(&rec.out, v.out)
	core.SetPlain(&rec.hints, v.hints)
	if h.sp.NPEs == 1 {
		// Nobody to wait for or to publish to: a plain store, and the
		// barrier's Quiet, as Barrier does in a job of one PE.
		core.SetPlain(&rec.seq, seq)
		h.rma.quietAll()
		return alike, nil
	}
	if !h.rma.far && h.sp.NPEs > team.AgreeFlat {
		// From the arguments, not from v: wide loads of v would wait for
		// the narrow stores above.
		words := [team.AgreeWords]uint64{call, kind, size, align, in, out, uint64(hints)}
		return h.agree(seq, &words, rec)
	}
	if h.rma.mb.Load() == mbReady {
		// As the world barrier publishes (internal/team, pairBarrier):
		// Quiet's fence, owed to this PE's next load ("Quiet's fence"
		// in rma.go), then a release store, which publishes the record
		// and every earlier store of this PE, puts included, to the PEs
		// that see seq; pairs with their seq loads in arrived. The wake-up
		// step's load may pass the store: waiters that sleep fence for
		// it (wait.go W2), as for a put.
		h.rma.quietFence()
		shmsync.StoreRelease64(&rec.seq, seq)
		h.rma.wakeSleepers()
		// A few pauses before the first look at the other PEs' records,
		// which PEs arriving about now are writing (shmsync.SettlePolls).
		for range h.settle {
			shmsync.Pause()
		}
	} else {
		// Seq-cst store: publishes the record, and (a full fence) orders
		// this PE's earlier stores, puts included, before it; pairs with
		// the other PEs' seq loads in arrived.
		rec.seq.Store(seq)
		// Wake the PEs waiting for this record, and any waiting for our
		// earlier puts (NBI ones), as a barrier's Quiet would; the seq
		// store above is the fence wakeSleepers asks for.
		h.rma.wakeSleepers()
	}
	if h.rma.far {
		if err := h.farRecords(seq); err != nil {
			return unread, fmt.Errorf("symheap: %s (call #%d) exchanging its record with other nodes: %w", callNames[kind], call, err)
		}
	}
	arrived := func() bool {
		for p, c := range h.ctl {
			// Seq-cst load; pairs with PE p's seq store above.
			if p != rank && c.allocRec[seq%2].seq.Load() < seq {
				return false
			}
		}
		return true
	}
	lost := h.lost
	if h.rma.far {
		// The node's leader brings the other nodes' records
		// (farRecords), and may find a PE lost on the way.
		lost = func() error {
			// The leader's report first: after a divergence it leaves
			// at once, and its leaving is not the cause.
			if err := h.farLost(); err != nil {
				return err
			}
			return h.lost()
		}
	}
	if err := h.rma.pollThenWait(rank, arrived, lost); err != nil {
		return unread, fmt.Errorf("symheap: %s waiting for the other PEs: %w", callNames[kind], err)
	}
	// The next phase's record line, for writing: every other PE has read
	// it (each published this phase's record only after it had finished
	// with the last one), and its stores then find it here.
	h.prefetchRecord(rank, (seq+1)%2)
	return unread, nil
}

// agree is exchange on one node: the record goes to the other PEs along
// the agreement's dissemination rounds (internal/team, agree.go), which
// also say whether every PE's record equals this one. The record line
// stays this PE's, stored for the error path (diverged) and the calls'
// messages (callDetail), which read it after the agreement; its seq
// store is plain, published by the agreement's first post line.
func (h *symHeap) agree(seq uint64, words *[team.AgreeWords]uint64, rec *allocRecord) (verdict, error) {
	core.SetPlain(&rec.seq, seq)
	// Quiet: the fence (or its debt, paid by the release store that
	// publishes the first round) and the wake-up step for this PE's puts,
	// as the barrier's.
	h.rma.quietAll()
	ok, err := h.teams.Agree(seq, words, h.lost)
	if err != nil {
		return unread, fmt.Errorf("symheap: %s waiting for the other PEs: %w", callNames[words[1]], err)
	}
	if ok {
		return alike, nil
	}
	return differ, nil
}

// allMatch reports whether every other PE's record of phase seq holds v
// (out only if withOut). It compares field by field and stops at the
// first difference; compare then names them all.
func (h *symHeap) allMatch(seq uint64, v *recValues, withOut bool) bool {
	for p, c := range h.ctl {
		if p == h.sp.Rank {
			continue
		}
		// Loads after PE p's seq store was seen (exchange); the fields
		// cannot change before this PE publishes its next phase.
		r := &c.allocRec[seq%2].allocRecord
		if r.call.Load() != v.call || r.kind.Load() != v.kind || r.size.Load() != v.size || r.align.Load() != v.align ||
			r.in.Load() != v.in || r.hints.Load() != v.hints || (withOut && r.out.Load() != v.out) {
			return false
		}
	}
	return true
}

// testSkipDivergenceCheck makes compare succeed without looking, so that
// a benchmark can measure what the check costs.
var testSkipDivergenceCheck bool

// compare checks every PE's record of phase seq against ours, given what
// the exchange learned of them.
func (h *symHeap) compare(seq uint64, withOut bool, v verdict) error {
	if testSkipDivergenceCheck {
		return nil
	}
	switch {
	case v == alike:
		return nil
	case v == unread && h.allMatch(seq, &h.mine[seq%2], withOut):
		return nil
	}
	return h.diverged(seq, withOut)
}

// diverged returns the error that names every PE whose record of phase
// seq differs from this PE's (out only if withOut), or nil if none does.
// It reads this PE's own record too, so it serves the phases the C
// library exchanged (cabi.Diverged) as well as this layer's.
func (h *symHeap) diverged(seq uint64, withOut bool) error {
	mine := h.ctl[h.sp.Rank].allocRec[seq%2].load()
	var bad []string
	for p, c := range h.ctl {
		if p == h.sp.Rank {
			continue
		}
		// Loads after PE p's seq store was seen (exchange); the fields
		// cannot change before this PE publishes its next phase.
		r := c.allocRec[seq%2].load()
		if !withOut {
			r.out = mine.out
		}
		if r != mine {
			bad = append(bad, describe(p, r))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("symheap: collective allocation diverged: %s; but %s: %w (every PE must make the same collective allocations in the same order)",
		describe(h.sp.Rank, mine), strings.Join(bad, "; "), ErrDiverged)
}

// callDetail adds to the name of PE p's collective call w, for the
// message of a divergence: the size of an allocation, from p's latest
// allocation record when it is of that kind (internal/calls).
func (pe *PE) callDetail(p int, w calls.Word) string {
	c := pe.ctl[p]
	r := &c.allocRec[0].allocRecord
	if o := &c.allocRec[1].allocRecord; o.seq.Load() > r.seq.Load() {
		r = o
	}
	v := r.load()
	if v.kind >= uint64(len(callKinds)) || callKinds[v.kind] != w.Kind() || v.kind == callFree {
		return ""
	}
	return fmt.Sprintf(" of %d B", v.size)
}

func describe(p int, r recValues) string {
	s := fmt.Sprintf("PE %d call #%d %s(", p, r.call, callNames[r.kind])
	switch r.kind {
	case callFree:
		s += fmt.Sprintf("offset %#x)", r.in)
	case callRealloc:
		s += fmt.Sprintf("offset %#x, %d B)", r.in, r.size)
	default:
		s += fmt.Sprintf("%d B, align %d", r.size, r.align&0xffffffff)
		if r.hints != 0 {
			s += fmt.Sprintf(", hints %#x", r.hints)
		}
		s += ")"
	}
	if r.out != noOff {
		s += fmt.Sprintf(" -> offset %#x", r.out)
	} else if r.kind != callFree && r.kind != callRealloc {
		s += " -> failed"
	}
	return s
}

func (h *symHeap) allocError(kind, size uint64, err error) error {
	if errors.Is(err, ErrOutOfMemory) {
		st := h.heap.Stats()
		return fmt.Errorf("symheap: %s of %d bytes: %w (symmetric heap %s per PE, largest free block %s; raise SHMEM_SYMMETRIC_SIZE or Config.HeapSize)",
			callNames[kind], size, ErrOutOfMemory, segment.FormatSize(h.sp.Lay.HeapSize), segment.FormatSize(st.LargestFree))
	}
	return fmt.Errorf("symheap: %s: %w", callNames[kind], err)
}

// elemBytes is n elements of T in bytes, with the argument checks every
// allocation makes.
func elemBytes[T any](n int) (uint64, error) {
	if n < 0 {
		return 0, fmt.Errorf("symheap: %d elements: %w (must be >= 0)", n, ErrBadArg)
	}
	if err := plainData[T](); err != nil {
		return 0, err
	}
	sz := core.SizeOf[T]()
	hi, lo := bits.Mul64(uint64(n), sz)
	if hi != 0 || lo > 1<<62 {
		return 0, fmt.Errorf("symheap: %d elements of %d bytes: %w (request overflows)", n, sz, ErrOutOfMemory)
	}
	return lo, nil
}

var pointerFree sync.Map // reflect.Type -> error (nil when pointer-free)

// checkPointerFree refuses element types that hold Go pointers: shared
// memory is not scanned by the garbage collector.
func checkPointerFree[T any]() error {
	t := reflect.TypeFor[T]()
	if v, ok := pointerFree.Load(t); ok {
		if v == nil {
			return nil
		}
		return v.(error)
	}
	var err error
	if path := pointerPath(t); path != "" {
		err = fmt.Errorf("symheap: element type %v holds a pointer (%s): %w (shared memory may hold only plain data)", t, path, ErrPointerType)
	}
	if err == nil {
		pointerFree.Store(t, nil)
	} else {
		pointerFree.Store(t, err)
	}
	return err
}

// pointerPath names the first pointer-holding part of t, or "".
func pointerPath(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.String, reflect.Interface,
		reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return t.Kind().String()
	case reflect.Array:
		if t.Len() == 0 {
			return ""
		}
		if p := pointerPath(t.Elem()); p != "" {
			return "array of " + p
		}
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if p := pointerPath(t.Field(i).Type); p != "" {
				return "field " + t.Field(i).Name + ": " + p
			}
		}
	}
	return ""
}

// Ptr returns a slice through which this PE can load and store PE
// target's copy of the symmetric object s directly, or nil if target does
// not exist, is on another node, or s is not symmetric (Reach says which). In protected mode (Config.Protect) the
// slice onto another PE's copy is read-only: a store through it faults.
// Stores through it are plain stores: Quiet completes them and wakes PEs
// waiting on them.
func Ptr[T any](pe *PE, s []T, target int) []T {
	if pe.check() != nil || target < 0 || target >= pe.npes || s == nil || pe.rma.route(target) == transport.Far {
		return nil
	}
	p, n := core.SliceData(s)
	off, _, ok := pe.sp.HeapOffset(p, n)
	if !ok {
		return nil
	}
	return core.SliceAt[T](pe.sp.ViewAddr(target, core.HeapOff(off)), len(s))
}
