package symheap

// Collectives on teams: Broadcast, Reduce, FCollect and AllToAll, with the
// semantics of OpenSHMEM 1.5's team-based routines.
//
// Every PE reads its peers' symmetric data directly through the shared
// mapping (heapAddr of the peer plus the object's offset); no data is sent.
// The team's synchronisation (team.go) gives two shapes of call:
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
// then arrives (which tells the root the buffer may be reused).
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
//     member wrote its own dst); the others only arrive.
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

	"github.com/symheap/symheap/internal/core"
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

// Broadcast copies root's src into dst on every member of the team, root
// included (shmem_broadcast). root is a rank of the team. dst and src are
// symmetric, of equal length; they may be the same array but may not
// partly overlap. On return dst holds the data and src may be reused.
func Broadcast[T any](t *Team, dst, src []T, root int) error {
	const what = "Broadcast"
	if err := t.enter(what); err != nil {
		return err
	}
	defer t.leave()
	if err := checkPointerFree[T](); err != nil {
		return err
	}
	if len(dst) != len(src) {
		return fmt.Errorf("symheap: %s: dst has %d elements, src %d: %w (they must be equal)", what, len(dst), len(src), ErrBadArg)
	}
	if root < 0 || root >= t.size {
		return fmt.Errorf("symheap: %s: root %d is not a rank of the team (0 to %d): %w", what, root, t.size-1, ErrBadPE)
	}
	n := len(src)
	if n == 0 {
		return nil
	}
	_, sOff, same, err := locatePair(t, what, dst, src, true)
	if err != nil {
		return err
	}
	k := t.begin()
	me := t.rank
	if uint64(n)*core.SizeOf[T]() <= scratchSize {
		if me == root {
			// Readers are done by their arrival in this call.
			if err := t.scratchFree(k, 1); err != nil {
				return err
			}
			copy(bufOf[T](t.slots[me], k, n), src)
			t.arrive()
			if !same {
				copy(dst, src)
			}
			return nil
		}
		if err := t.waitFor(root, t.arrivals+1); err != nil {
			return err
		}
		copy(dst, bufOf[T](t.slots[root], k, n))
		t.arrive()
		return nil
	}
	if err := t.barrier(); err != nil {
		return err
	}
	switch {
	case me != root:
		copy(dst, remote[T](t.pe, t.members[root], sOff, n))
	case !same:
		copy(dst, src)
	}
	t.arrive()
	if me == root {
		return t.waitAll()
	}
	return nil
}

// Reduce combines src of every member element by element with op and
// leaves the result in dst on every member (shmem_TYPE_OP_reduce, which
// 1.5 defines as an all-reduce). dst and src are symmetric, of equal
// length; they may be the same array but may not partly overlap.
func Reduce[T Number](t *Team, dst, src []T, op Op) error {
	const what = "Reduce"
	if err := t.enter(what); err != nil {
		return err
	}
	defer t.leave()
	if err := checkOp[T](op); err != nil {
		return err
	}
	if len(dst) != len(src) {
		return fmt.Errorf("symheap: %s: dst has %d elements, src %d: %w (they must be equal)", what, len(dst), len(src), ErrBadArg)
	}
	n := len(src)
	if n == 0 {
		return nil
	}
	dOff, sOff, same, err := locatePair(t, what, dst, src, true)
	if err != nil {
		return err
	}
	k := t.begin()
	sz := core.SizeOf[T]()
	if uint64(n)*sz <= scratchSize {
		// Readers are done by their first arrival in the next call.
		if err := t.scratchFree(k, 2); err != nil {
			return err
		}
		copy(bufOf[T](t.slots[t.rank], k, n), src)
		if err := t.barrier(); err != nil {
			return err
		}
		// Every member folds in rank order, so all get the same bits.
		copy(dst, bufOf[T](t.slots[0], k, n))
		for j := 1; j < t.size; j++ {
			combine(dst, bufOf[T](t.slots[j], k, n), op)
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
		acc := dst[c:e]
		if !same {
			copy(acc, src[c:e])
		}
		off := uint64(c) * sz
		for j, p := range t.members {
			if j != t.rank {
				combine(acc, remote[T](t.pe, p, sOff+off, e-c), op)
			}
		}
		for j, p := range t.members {
			if j != t.rank {
				copy(remote[T](t.pe, p, dOff+off, e-c), acc)
			}
		}
	}
	return t.barrier()
}

// FCollect concatenates every member's src into dst on every member, in
// rank order (shmem_fcollect): dst has Size()*len(src) elements. dst and
// src are symmetric and may not overlap.
func FCollect[T any](t *Team, dst, src []T) error {
	const what = "FCollect"
	if err := t.enter(what); err != nil {
		return err
	}
	defer t.leave()
	if err := checkPointerFree[T](); err != nil {
		return err
	}
	m := len(src)
	if hi, lo := bits.Mul64(uint64(m), uint64(t.size)); hi != 0 || lo != uint64(len(dst)) {
		return fmt.Errorf("symheap: %s: dst has %d elements, want %d (team size %d × len(src) %d): %w", what, len(dst), uint64(m)*uint64(t.size), t.size, m, ErrBadArg)
	}
	if m == 0 {
		return nil
	}
	_, sOff, _, err := locatePair(t, what, dst, src, false)
	if err != nil {
		return err
	}
	k := t.begin()
	if uint64(m)*core.SizeOf[T]() <= scratchSize {
		// Readers are done by their first arrival in the next call.
		if err := t.scratchFree(k, 2); err != nil {
			return err
		}
		copy(bufOf[T](t.slots[t.rank], k, m), src)
		if err := t.barrier(); err != nil {
			return err
		}
		for j := range t.size {
			if j == t.rank {
				copy(dst[j*m:(j+1)*m], src)
			} else {
				copy(dst[j*m:(j+1)*m], bufOf[T](t.slots[j], k, m))
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
			copy(dst[j*m:(j+1)*m], src)
		} else {
			copy(dst[j*m:(j+1)*m], remote[T](t.pe, t.members[j], sOff, m))
		}
	}
	return t.barrier()
}

// AllToAll exchanges blocks (shmem_alltoall): src and dst hold Size()
// blocks of len(src)/Size() elements each, and block j of member i's src
// becomes block i of member j's dst. dst and src are symmetric, of equal
// length (a multiple of the team size), and may not overlap.
func AllToAll[T any](t *Team, dst, src []T) error {
	const what = "AllToAll"
	if err := t.enter(what); err != nil {
		return err
	}
	defer t.leave()
	if err := checkPointerFree[T](); err != nil {
		return err
	}
	if len(dst) != len(src) || len(src)%t.size != 0 {
		return fmt.Errorf("symheap: %s: dst has %d elements, src %d: %w (they must be equal and a multiple of the team size %d)", what, len(dst), len(src), ErrBadArg, t.size)
	}
	n := len(src)
	if n == 0 {
		return nil
	}
	m := n / t.size
	_, sOff, _, err := locatePair(t, what, dst, src, false)
	if err != nil {
		return err
	}
	k := t.begin()
	me := t.rank
	sz := core.SizeOf[T]()
	if uint64(n)*sz <= scratchSize {
		// Readers are done by their first arrival in the next call.
		if err := t.scratchFree(k, 2); err != nil {
			return err
		}
		copy(bufOf[T](t.slots[me], k, n), src)
		if err := t.barrier(); err != nil {
			return err
		}
		for j := range t.size {
			if j == me {
				copy(dst[j*m:(j+1)*m], src[me*m:(me+1)*m])
			} else {
				copy(dst[j*m:(j+1)*m], bufOf[T](t.slots[j], k, n)[me*m:(me+1)*m])
			}
		}
		return nil
	}
	if err := t.barrier(); err != nil {
		return err
	}
	block := uint64(me*m) * sz
	for i := range t.size {
		j := (me + i) % t.size
		if j == me {
			copy(dst[j*m:(j+1)*m], src[me*m:(me+1)*m])
		} else {
			copy(dst[j*m:(j+1)*m], remote[T](t.pe, t.members[j], sOff+block, m))
		}
	}
	return t.barrier()
}

// locatePair finds dst and src (both non-empty) in this PE's symmetric
// heap and checks their overlap: same reports dst and src are one array,
// which is accepted only when allowSame.
func locatePair[T any](t *Team, what string, dst, src []T, allowSame bool) (dOff, sOff uint64, same bool, err error) {
	dp, dn := core.SliceData(dst)
	sp, sn := core.SliceData(src)
	var owner int
	var ok bool
	if dOff, ok = t.memo[0].lookup(dp, dn); !ok {
		var o core.HeapOff
		if o, owner, ok = t.pe.sp.HeapOffset(dp, dn); !ok || owner != t.pe.rank {
			return 0, 0, false, notSymmetric(t, what, "dst", len(dst), dp, ok, owner)
		}
		dOff = uint64(o)
		t.memo[0].store(dp, dn, dOff)
	}
	if sOff, ok = t.memo[1].lookup(sp, sn); !ok {
		var o core.HeapOff
		if o, owner, ok = t.pe.sp.HeapOffset(sp, sn); !ok || owner != t.pe.rank {
			return 0, 0, false, notSymmetric(t, what, "src", len(src), sp, ok, owner)
		}
		sOff = uint64(o)
		t.memo[1].store(sp, sn, sOff)
	}
	same = dOff == sOff && dn == sn
	if dOff < sOff+sn && sOff < dOff+dn && !(same && allowSame) {
		rule := "they may not overlap"
		if allowSame {
			rule = "they may be the same array but may not partly overlap"
		}
		return 0, 0, false, fmt.Errorf("symheap: %s: dst [%#x, %#x) and src [%#x, %#x) of the symmetric heap overlap: %w (%s)",
			what, dOff, dOff+dn, sOff, sOff+sn, ErrBadArg, rule)
	}
	return dOff, sOff, same, nil
}

func notSymmetric(t *Team, what, name string, n int, p any, inHeap bool, owner int) error {
	if inHeap {
		return fmt.Errorf("symheap: %s: %s (%d elements at %p) lies in PE %d's symmetric heap, not this PE's (%d): %w (pass this PE's copy, as returned by Malloc)",
			what, name, n, p, owner, t.pe.rank, ErrNotSymmetric)
	}
	return fmt.Errorf("symheap: %s: %s (%d elements at %p) is not in the symmetric heap: %w (allocate it with symheap.Malloc, alike on every PE)",
		what, name, n, p, ErrNotSymmetric)
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

// checkOp refuses unknown ops and bitwise ops on floats.
func checkOp[T Number](op Op) error {
	switch op {
	case OpSum, OpProd, OpMin, OpMax:
		return nil
	case OpAnd, OpOr, OpXor:
		if isFloat[T]() {
			var z T
			return fmt.Errorf("symheap: Reduce: %v on %T: %w (bitwise reductions are defined on integers only)", op, z, ErrBadOp)
		}
		return nil
	}
	return fmt.Errorf("symheap: Reduce: unknown operation %v: %w (use OpSum, OpProd, OpMin, OpMax, OpAnd, OpOr or OpXor)", op, ErrBadOp)
}

// combine folds x into acc element by element: acc[i] = acc[i] op x[i].
// op has been checked.
func combine[T Number](acc, x []T, op Op) {
	x = x[:len(acc)]
	switch op {
	case OpSum:
		for i := range acc {
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
