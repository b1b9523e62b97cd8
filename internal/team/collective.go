package team

// Collectives on teams: Broadcast, Reduce, FCollect and AllToAll, with the
// semantics of OpenSHMEM 1.5's team-based routines.
//
// Every PE reads its peers' symmetric data directly through the shared
// mapping (core.Space.HeapAddr of the peer plus the object's offset); no data is sent.
// The team's synchronisation (team.go) gives three shapes of call:
//
// A few words (Broadcast and Reduce of at most postData bytes): through
// post lines (team.go, "Post lines"; post.go), without a barrier.
//
// Small (a member's contribution fits a scratch buffer, scratchSize bytes):
//
//  1. wait until the member's scratch buffer k%2, where k is the call's
//     number on the team, is no longer read (scratchFree, see team.go:
//     usually already so);
//  2. copy the contribution (src) into it;
//  3. team barrier;
//  4. build dst from the members' scratch buffers.
//
// One barrier, and no member reads another's src or writes another's dst,
// so a member may return, and reuse src and dst, as soon as step 4 is done.
// Broadcast needs less than a barrier: its root arrives and returns at
// once; every other member waits for the root's arrival only, copies, and
// then arrives (which tells the root the buffer may be reused). On a team
// of more than postFlat (4) members it goes down a binomial tree of the
// members' scratch buffers instead (treeBcast): each member copies its
// parent's, so that no member reads more than its own few children's
// arrivals.
//
// Large:
//
//  1. team barrier: every member's src is ready, every dst is free;
//  2. the work, reading peers' src in place:
//     Broadcast: every member copies root's src into its own dst;
//     Reduce: member r reduces its own share of the element range over
//     every member's src and writes the result into every member's dst
//     (share boundaries fall on cache lines; a member reads and writes only
//     its share of anyone's arrays, so dst == src is safe);
//     FCollect: every member copies member j's src into block j of its dst;
//     AllToAll: every member copies block r of member j's src into block j
//     of its dst;
//  3. team barrier: nobody reads src, or writes dst, any more. In Broadcast
//     only the root must wait here (only its src was read, and every
//     member wrote its own dst); up to postFlat members the others only
//     arrive and the root waits for their arrivals, above it every member
//     makes the barrier, ⌈log₂ n⌉ lines instead of n-1 at the root.
//
// Argument checks depend on the arguments alone (lengths, root, op, the
// element type, whether dst and src lie in this PE's symmetric heap and
// overlap), so that when every PE passes the same arguments, as it must,
// every PE refuses alike without waiting for the others.
//
// Overlap rules (OpenSHMEM 1.5): Broadcast and Reduce accept dst and src
// that are the same array, but not arrays that partly overlap; FCollect and
// AllToAll accept no overlap at all. Violations are ErrBadArg.

import (
	"fmt"
	"math/bits"

	"github.com/symheap/symheap/internal/calls"
	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/memcopy"
)

// Number is the element types of reductions: integers and floats.
type Number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr |
		~float32 | ~float64
}

// Op is a reduction operation.
type Op int

// Reduction operations. The bitwise ones (OpAnd, OpOr, OpXor) are defined
// on integers only: on floats they are ErrBadOp.
const (
	OpSum Op = iota + 1
	OpProd
	OpMin
	OpMax
	OpAnd
	OpOr
	OpXor
)

var opNames = [...]string{OpSum: "sum", OpProd: "prod", OpMin: "min", OpMax: "max", OpAnd: "and", OpOr: "or", OpXor: "xor"}

func (op Op) String() string {
	if op >= OpSum && op <= OpXor {
		return opNames[op]
	}
	return fmt.Sprintf("Op(%d)", int(op))
}

// reduceChunk is the bytes a Reduce member processes at a time, so that its
// share of dst stays in the cache while every member's src is folded in.
const reduceChunk = 4096

// cacheLine is the line size that Reduce's shares are rounded to.
const cacheLine = 64

// Vec is a caller's slice as the collectives see it: the address of its
// first element, its length in elements and the size of one element.
// The root package makes one of each []T argument of Broadcast, FCollect
// and AllToAll (VecOf), so that they have one body for every element
// type; Reduce makes its own.
type Vec struct {
	p   core.Ptr
	n   int    // elements
	esz uint64 // bytes of one element (0 for an empty struct)
}

// VecOf describes s.
func VecOf[T any](s []T) Vec {
	p, _ := core.SliceData(s)
	return Vec{p: p, n: len(s), esz: core.SizeOf[T]()}
}

// bytes returns the bytes of the first n elements.
func (v Vec) bytes(n int) uint64 { return uint64(n) * v.esz }

// Broadcast copies root's src into dst on every member of the team, root
// included (shmem_broadcast); the root package's Broadcast documents it.
// typeErr is the root package's verdict on the element type (nil, or
// ErrPointerType): it is returned after the handle is checked, as every
// other argument error.
func (t *Team) Broadcast(dst, src Vec, root int, typeErr error) error {
	const what = "Broadcast"
	if err := t.enterArgs(calls.Broadcast, calls.Args(src.bytes(src.n), root)); err != nil {
		return err
	}
	defer t.leave()
	if typeErr != nil {
		return typeErr
	}
	if dst.n != src.n {
		return fmt.Errorf("symheap: %s: dst has %d elements, src %d: %w (they must be equal)", what, dst.n, src.n, errs.ErrBadArg)
	}
	if root < 0 || root >= t.size {
		return fmt.Errorf("symheap: %s: root %d is not a rank of the team (0 to %d): %w", what, root, t.size-1, errs.ErrBadPE)
	}
	n := src.n
	if n == 0 {
		return nil
	}
	dOff, sOff, same, err := t.locatePair(what, dst, src, true)
	if err != nil {
		return err
	}
	nb := src.bytes(n)
	if nb <= postData {
		return t.postBcast(dst.p, src.p, nb, root, same)
	}
	k := t.begin()
	me := t.rank
	if nb <= scratchSize && t.size > postFlat {
		return t.treeBcast(k, dst, src, nb, root, same)
	}
	if nb <= copyTreeMax && t.size > postFlat {
		return t.copyTree(dst, src, dOff, sOff, nb, root, same)
	}
	if nb <= scratchSize {
		if me == root {
			// Readers are done by their arrival in this call.
			if err := t.scratchFree(k, 1); err != nil {
				return err
			}
			copyOut(bufAt(t.slots[me], k, nb), src.p, nb)
			t.arrive()
			if !same {
				copyIn(dst.p, src.p, nb)
			}
			return nil
		}
		if err := t.waitFor(root, t.arrivals+1); err != nil {
			return err
		}
		copyIn(dst.p, bufAt(t.slots[root], k, nb), nb)
		t.arrive()
		return nil
	}
	if err := t.barrier(); err != nil {
		return err
	}
	switch {
	case me != root:
		copyIn(dst.p, t.remote(t.members[root], sOff), nb)
		t.clc.copied(nb)
	case !same:
		copyIn(dst.p, src.p, nb)
	}
	if t.size > postFlat {
		// The root learns that nobody reads its src any more from a
		// barrier, ⌈log₂ n⌉ lines, not from n-1 members' arrival lines.
		return t.barrier()
	}
	t.arrive()
	if me == root {
		return t.waitAll()
	}
	return nil
}

// treeBcast is the Broadcast of more than postData bytes that fit a
// scratch buffer, on a team of more than postFlat members: down a
// binomial tree rooted at root, over the members' scratch buffers k%2. In
// the tree's numbering v = (rank - root) mod n, member v's parent is v
// minus its lowest set bit, its children v+1, v+2, v+4, ... below that
// bit. A member waits for its parent's arrival in this call, copies the
// parent's buffer into its own (when it has children) and into dst, and
// arrives; the root copies src into its buffer and arrives at once. So a
// member reads one buffer and the arrival lines of at most ⌈log₂ n⌉
// children (before it reuses its buffer), and the data reach the last
// member after ⌈log₂ n⌉ copies, where the root of the flat form read
// n-1 members' arrival lines. A member's buffer is read by its children
// only, who are done with it by their arrival in this call.
func (t *Team) treeBcast(k uint64, dst, src Vec, nb uint64, root int, same bool) error {
	n := t.size
	v := (t.rank - root + n) % n
	low := v & -v
	kids := treeKids(t.rank, root, n)
	// Only the children read this PE's buffer, when this PE last wrote it
	// in a treeBcast too (kidsOnly): the children in that call's tree,
	// whose root may not be this call's (another root, other children);
	// after another collective, every member may (scratchFree).
	b := &t.readDone[k&1]
	if t.kidsOnly[k&1] {
		for _, j := range treeKids(t.rank, t.kidsRoot[k&1], n) {
			if err := t.waitFor(j, *b); err != nil {
				return err
			}
		}
		*b = t.curStart + 1
	} else if err := t.scratchFree(k, 1); err != nil {
		return err
	}
	t.kidsOnly[k&1], t.kidsRoot[k&1] = true, root
	from := src.p
	if v != 0 {
		p := (v - low + root) % n
		if err := t.waitFor(p, t.arrivals+1); err != nil {
			return err
		}
		from = bufAt(t.slots[p], k, nb)
	}
	if len(kids) > 0 {
		copyOut(bufAt(t.slots[t.rank], k, nb), from, nb)
		t.clc.copied(nb)
		if v != 0 {
			from = bufAt(t.slots[t.rank], k, nb)
		}
	} else if v != 0 {
		// A leaf reads its parent's buffer into dst before it arrives:
		// its arrival tells the parent it is done with the buffer, which
		// the parent may then write for a later call.
		copyIn(dst.p, from, nb)
		t.clc.copied(nb)
		t.arrive()
		return nil
	}
	t.arrive()
	if v != 0 || !same {
		copyIn(dst.p, from, nb)
		t.clc.copied(nb)
	}
	return nil
}

// copyTreeMax is the largest Broadcast that goes down copyTree: above
// it, each of the tree's ⌈log₂ n⌉ levels would copy the whole array in
// turn, where the members of the flat form copy the root's at once.
const copyTreeMax = 64 << 10

// copyTree is the Broadcast of more than a scratch buffer, up to
// copyTreeMax bytes, on a team of more than postFlat members: down
// treeBcast's binomial tree, each member copying its parent's dst (the
// root's src, for the root's children) into its own. A member waits for
// its parent's arrival in this call, copies, arrives, and then waits for
// its children's arrivals: they read its dst (the root its src) until
// then, and the caller may change them once the call returns (every
// collective returns only when no member reads its arrays any more, so
// none reads this PE's dst when the call starts). A member reads its
// parent's nb bytes and the arrival lines of its parent and of at most
// ⌈log₂ n⌉ children, copies nb bytes, and waits in no barrier: the flat
// form's barrier, copy, barrier made every member wait 2·⌈log₂ n⌉
// rounds.
func (t *Team) copyTree(dst, src Vec, dOff, sOff, nb uint64, root int, same bool) error {
	n := t.size
	v := (t.rank - root + n) % n
	if v != 0 {
		p := (v - v&-v + root) % n
		if err := t.waitFor(p, t.arrivals+1); err != nil {
			return err
		}
		off := dOff
		if p == root {
			off = sOff
		}
		copyIn(dst.p, t.remote(t.members[p], off), nb)
		t.clc.copied(nb)
	}
	t.arrive()
	if v == 0 && !same {
		copyIn(dst.p, src.p, nb)
		t.clc.copied(nb)
	}
	// The children, as treeKids (without its slice: no allocation).
	for c := 1; c < kidSpan(v, n); c <<= 1 {
		if err := t.waitFor((v+c+root)%n, t.arrivals); err != nil {
			return err
		}
	}
	return nil
}

// treeKids returns the children of rank in treeBcast's binomial tree of n
// members rooted at root: in the tree's numbering v = (rank - root) mod
// n, the members v+1, v+2, v+4, ... below v's lowest set bit (every power
// of two for the root).
func treeKids(rank, root, n int) []int {
	v := (rank - root + n) % n
	var kids []int
	for c := 1; c < kidSpan(v, n); c <<= 1 {
		kids = append(kids, (v+c+root)%n)
	}
	return kids
}

// kidSpan bounds the children of member v (in the tree's numbering) of
// a binomial tree of n members: they are v+c for c = 1, 2, 4, ... below
// it, below v's lowest set bit and within the team (every power of two
// below n for the root, v = 0).
func kidSpan(v, n int) int {
	if v == 0 {
		return n
	}
	return min(v&-v, n-v)
}

// Reduce combines src of every member element by element with op and
// leaves the result in dst on every member (shmem_TYPE_OP_reduce, which
// 1.5 defines as an all-reduce); the root package's Reduce documents it.
// It is generic so that the folding loops (combine) are compiled for the
// element type; the rest of the call (reduce) works on bytes, as the other
// collectives, and calls the loops once per member and chunk.
func Reduce[T Number](t *Team, dst, src []T, op Op) error {
	return t.reduce(VecOf(dst), VecOf(src), op, checkOp[T](op), combine[T])
}

// ReduceFold is Reduce over n elements of esz bytes at dst and src,
// folded by fold (acc[i] = acc[i] op x[i] for n elements): the C
// library's reductions, whose element types and operations are its own,
// go through it in a job with Go PEs, so that every PE takes the same
// steps. fold must give every PE the same bits for the same inputs.
func (t *Team) ReduceFold(dst, src core.Ptr, n int, esz uint64, fold func(acc, x core.Ptr, n int)) error {
	if n > 0 && esz == 0 {
		return fmt.Errorf("symheap: Reduce: elements of 0 bytes: %w", errs.ErrBadArg)
	}
	return t.reduce(Vec{p: dst, n: n, esz: esz}, Vec{p: src, n: n, esz: esz}, OpSum, nil,
		func(acc, x core.Ptr, n int, _ Op) { fold(acc, x, n) })
}

// reduce is Reduce on bytes: opErr is checkOp's verdict, returned after
// the handle is checked; fold is combine for the element type.
func (t *Team) reduce(dst, src Vec, op Op, opErr error, fold func(acc, x core.Ptr, n int, op Op)) error {
	const what = "Reduce"
	if err := t.enterArgs(calls.Reduce, calls.Args(src.bytes(src.n), -1)); err != nil {
		return err
	}
	defer t.leave()
	if opErr != nil {
		return opErr
	}
	if dst.n != src.n {
		return fmt.Errorf("symheap: %s: dst has %d elements, src %d: %w (they must be equal)", what, dst.n, src.n, errs.ErrBadArg)
	}
	n := src.n
	if n == 0 {
		return nil
	}
	dOff, sOff, same, err := t.locatePair(what, dst, src, true)
	if err != nil {
		return err
	}
	if nb := src.bytes(n); nb <= postData {
		return t.postReduce(dst.p, src.p, n, nb, op, fold)
	}
	k := t.begin()
	sz := src.esz
	if nb := src.bytes(n); nb <= scratchSize {
		// Readers are done by their first arrival in the next call.
		if err := t.scratchFree(k, 2); err != nil {
			return err
		}
		copyOut(bufAt(t.slots[t.rank], k, nb), src.p, nb)
		if err := t.barrier(); err != nil {
			return err
		}
		// Every member folds in rank order, so all get the same bits.
		copyIn(dst.p, bufAt(t.slots[0], k, nb), nb)
		for j := 1; j < t.size; j++ {
			fold(dst.p, bufAt(t.slots[j], k, nb), n, op)
		}
		return nil
	}
	if err := t.barrier(); err != nil {
		return err
	}
	lo, hi := share(n, int(sz), t.size, t.rank)
	step := max(reduceChunk/int(sz), 1)
	for c := lo; c < hi; c += step {
		e := min(c+step, hi)
		acc, nb := dst.at(c), src.bytes(e-c)
		if !same {
			copyIn(acc, src.at(c), nb)
			t.clc.copied(nb)
		}
		off := uint64(c) * sz
		for j, p := range t.members {
			if j != t.rank {
				fold(acc, t.remote(p, sOff+off), e-c, op)
				t.clc.copied(nb)
			}
		}
		for j, p := range t.members {
			if j != t.rank {
				copyOut(t.remote(p, dOff+off), acc, nb)
				t.clc.copied(nb)
			}
		}
	}
	return t.barrier()
}

// FCollect concatenates every member's src into dst on every member, in
// rank order (shmem_fcollect); the root package's FCollect documents it.
// typeErr is as Broadcast's.
func (t *Team) FCollect(dst, src Vec, typeErr error) error {
	const what = "FCollect"
	if err := t.enterArgs(calls.FCollect, calls.Args(src.bytes(src.n), -1)); err != nil {
		return err
	}
	defer t.leave()
	if typeErr != nil {
		return typeErr
	}
	m := src.n
	if hi, lo := bits.Mul64(uint64(m), uint64(t.size)); hi != 0 || lo != uint64(dst.n) {
		return fmt.Errorf("symheap: %s: dst has %d elements, want %d (team size %d × len(src) %d): %w", what, dst.n, uint64(m)*uint64(t.size), t.size, m, errs.ErrBadArg)
	}
	if m == 0 {
		return nil
	}
	_, sOff, _, err := t.locatePair(what, dst, src, false)
	if err != nil {
		return err
	}
	k := t.begin()
	mb := src.bytes(m)
	if mb <= scratchSize {
		// Readers are done by their first arrival in the next call.
		if err := t.scratchFree(k, 2); err != nil {
			return err
		}
		copyOut(bufAt(t.slots[t.rank], k, mb), src.p, mb)
		if err := t.barrier(); err != nil {
			return err
		}
		for j := range t.size {
			if j == t.rank {
				copyIn(dst.at(j*m), src.p, mb)
			} else {
				copyIn(dst.at(j*m), bufAt(t.slots[j], k, mb), mb)
			}
		}
		return nil
	}
	if err := t.barrier(); err != nil {
		return err
	}
	// Start at our own block so members do not all read rank 0 first.
	for i := range t.size {
		j := (t.rank + i) % t.size
		if j == t.rank {
			copyIn(dst.at(j*m), src.p, mb)
		} else {
			copyIn(dst.at(j*m), t.remote(t.members[j], sOff), mb)
		}
	}
	return t.barrier()
}

// AllToAll exchanges blocks (shmem_alltoall): block j of member i's src
// becomes block i of member j's dst; the root package's AllToAll
// documents it. typeErr is as Broadcast's.
func (t *Team) AllToAll(dst, src Vec, typeErr error) error {
	const what = "AllToAll"
	if err := t.enterArgs(calls.AllToAll, calls.Args(src.bytes(src.n), -1)); err != nil {
		return err
	}
	defer t.leave()
	if typeErr != nil {
		return typeErr
	}
	if dst.n != src.n || src.n%t.size != 0 {
		return fmt.Errorf("symheap: %s: dst has %d elements, src %d: %w (they must be equal and a multiple of the team size %d)", what, dst.n, src.n, errs.ErrBadArg, t.size)
	}
	n := src.n
	if n == 0 {
		return nil
	}
	m := n / t.size
	_, sOff, _, err := t.locatePair(what, dst, src, false)
	if err != nil {
		return err
	}
	k := t.begin()
	me := t.rank
	nb, mb := src.bytes(n), src.bytes(m)
	if nb <= scratchSize {
		// Readers are done by their first arrival in the next call.
		if err := t.scratchFree(k, 2); err != nil {
			return err
		}
		copyOut(bufAt(t.slots[me], k, nb), src.p, nb)
		if err := t.barrier(); err != nil {
			return err
		}
		for j := range t.size {
			if j == me {
				copyIn(dst.at(j*m), src.at(me*m), mb)
			} else {
				copyIn(dst.at(j*m), addOff(bufAt(t.slots[j], k, nb), uint64(me)*mb), mb)
			}
		}
		return nil
	}
	if err := t.barrier(); err != nil {
		return err
	}
	block := uint64(me) * mb
	for i := range t.size {
		j := (me + i) % t.size
		if j == me {
			copyIn(dst.at(j*m), src.at(me*m), mb)
		} else {
			copyIn(dst.at(j*m), t.remote(t.members[j], sOff+block), mb)
		}
	}
	return t.barrier()
}

// locatePair finds dst and src (both non-empty) in this PE's symmetric
// heap and checks their overlap: same reports dst and src are one array,
// which is accepted only when allowSame.
func (t *Team) locatePair(what string, dst, src Vec, allowSame bool) (dOff, sOff uint64, same bool, err error) {
	sp := t.l.sp
	dp, dn := dst.p, dst.bytes(dst.n)
	spp, sn := src.p, src.bytes(src.n)
	var owner int
	var ok bool
	if dOff, ok = t.memo[0].lookup(dp, dn); !ok {
		var o core.HeapOff
		if o, owner, ok = sp.HeapOffset(dp, dn); !ok || owner != sp.Rank {
			return 0, 0, false, t.notSymmetric(what, "dst", dst.n, dp, ok, owner)
		}
		dOff = uint64(o)
		t.memo[0].store(dp, dn, dOff)
	}
	if sOff, ok = t.memo[1].lookup(spp, sn); !ok {
		var o core.HeapOff
		if o, owner, ok = sp.HeapOffset(spp, sn); !ok || owner != sp.Rank {
			return 0, 0, false, t.notSymmetric(what, "src", src.n, spp, ok, owner)
		}
		sOff = uint64(o)
		t.memo[1].store(spp, sn, sOff)
	}
	same = dOff == sOff && dn == sn
	if dOff < sOff+sn && sOff < dOff+dn && !(same && allowSame) {
		rule := "they may not overlap"
		if allowSame {
			rule = "they may be the same array but may not partly overlap"
		}
		return 0, 0, false, fmt.Errorf("symheap: %s: dst [%#x, %#x) and src [%#x, %#x) of the symmetric heap overlap: %w (%s)",
			what, dOff, dOff+dn, sOff, sOff+sn, errs.ErrBadArg, rule)
	}
	return dOff, sOff, same, nil
}

func (t *Team) notSymmetric(what, name string, n int, p any, inHeap bool, owner int) error {
	if inHeap {
		return fmt.Errorf("symheap: %s: %s (%d elements at %p) lies in PE %d's symmetric heap, not this PE's (%d): %w (pass this PE's copy, as returned by Malloc)",
			what, name, n, p, owner, t.l.sp.Rank, errs.ErrNotSymmetric)
	}
	return fmt.Errorf("symheap: %s: %s (%d elements at %p) is not in the symmetric heap: %w (allocate it with symheap.Malloc, alike on every PE)",
		what, name, n, p, errs.ErrNotSymmetric)
}

// share returns the element range [lo, hi) of n elements of sz bytes that
// member r of a team of size reduces: equal shares rounded up to whole
// 64-byte lines.
func share(n, sz, size, r int) (lo, hi int) {
	q := max(cacheLine/sz, 1)
	per := (n + size - 1) / size
	per = (per + q - 1) / q * q
	lo = min(r*per, n)
	hi = min(lo+per, n)
	return lo, hi
}

// isFloat reports whether T is a floating-point type.
func isFloat[T Number]() bool {
	var one, two T = 1, 2
	return one/two != 0
}

// checkOp refuses unknown ops and bitwise ops on floats. The refusal is
// built apart (opError), off the path of every call.
func checkOp[T Number](op Op) error {
	if op >= OpSum && op <= OpMax || op >= OpAnd && op <= OpXor && !isFloat[T]() {
		return nil
	}
	return opError[T](op)
}

// opError is checkOp's refusal.
func opError[T Number](op Op) error {
	if op >= OpAnd && op <= OpXor {
		var z T
		return fmt.Errorf("symheap: Reduce: %v on %T: %w (bitwise reductions are defined on integers only)", op, z, errs.ErrBadOp)
	}
	return fmt.Errorf("symheap: Reduce: unknown operation %v: %w (use OpSum, OpProd, OpMin, OpMax, OpAnd, OpOr or OpXor)", op, errs.ErrBadOp)
}

// combine folds the n elements of T at x into the n at acc, element by
// element: acc[i] = acc[i] op x[i]. op has been checked.
func combine[T Number](accp, xp core.Ptr, n int, op Op) {
	acc, x := core.SliceAt[T](accp, n), core.SliceAt[T](xp, n)
	x = x[:len(acc)] // one bounds check, not one per element
	switch op {
	case OpSum:
		// Eight elements a turn: a fold of 4 KiB of int64 in cache ran
		// faster than one element at a time (measured:
		// docs/bench/design-measurements.md, «internal/team, Reduce's
		// fold»).
		i := 0
		for ; i+8 <= len(acc); i += 8 {
			a, b := acc[i:i+8:i+8], x[i:i+8:i+8]
			a[0] += b[0]
			a[1] += b[1]
			a[2] += b[2]
			a[3] += b[3]
			a[4] += b[4]
			a[5] += b[5]
			a[6] += b[6]
			a[7] += b[7]
		}
		for ; i < len(acc); i++ {
			acc[i] += x[i]
		}
	case OpProd:
		for i := range acc {
			acc[i] *= x[i]
		}
	case OpMin:
		for i := range acc {
			acc[i] = min(acc[i], x[i])
		}
	case OpMax:
		for i := range acc {
			acc[i] = max(acc[i], x[i])
		}
	default:
		switch core.SizeOf[T]() {
		case 1:
			bitwise(reinterpret[uint8](acc), reinterpret[uint8](x), op)
		case 2:
			bitwise(reinterpret[uint16](acc), reinterpret[uint16](x), op)
		case 4:
			bitwise(reinterpret[uint32](acc), reinterpret[uint32](x), op)
		default:
			bitwise(reinterpret[uint64](acc), reinterpret[uint64](x), op)
		}
	}
}

// bitwise is combine for the bitwise ops, on unsigned words of the
// element's size (the bits are the same for signed types).
func bitwise[U uint8 | uint16 | uint32 | uint64](acc, x []U, op Op) {
	x = x[:len(acc)]
	switch op {
	case OpAnd:
		for i := range acc {
			acc[i] &= x[i]
		}
	case OpOr:
		for i := range acc {
			acc[i] |= x[i]
		}
	case OpXor:
		for i := range acc {
			acc[i] ^= x[i]
		}
	}
}

// copyIn copies n bytes of a collective's data into memory this PE reads
// or keeps next (its dst, its accumulator): with memcopy.Move where it has
// the better copy for such a destination (memcopy.BetterLocal: the vector
// copy up to 16 KiB where the CPU has it), else with core.CopyBytes.
func copyIn(dst, src core.Ptr, n uint64) {
	if memcopy.BetterLocal[byte](n) {
		memcopy.Move(dst, src, uintptr(n))
		return
	}
	core.CopyBytes[byte](dst, src, n)
}

// copyOut copies n bytes of a collective's data into memory another PE
// reads next (a scratch slot, another member's dst): memcopy.Better,
// whose string moves hand the lines over faster above 1 KiB.
func copyOut(dst, src core.Ptr, n uint64) {
	if memcopy.Better[byte](n) {
		memcopy.Move(dst, src, uintptr(n))
		return
	}
	core.CopyBytes[byte](dst, src, n)
}
