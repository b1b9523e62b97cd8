package team

import (
	"sync/atomic"

	"github.com/symheap/symheap/internal/core"
)

// Views of the team area and its scratch buffers, and reinterpretation of
// integer slices for the bitwise reductions (core does the arithmetic).

// slotOf views slot id of PE p's team area.
func (l *Layer) slotOf(p, id int) *teamSlot {
	return core.At[teamSlot](l.sp.CBAddr(p, teamArea.Off(l.sp.NPEs)+core.CBOff(id)*teamSlotSize))
}

// bufAt returns the buffer of slot s for call k that holds nb bytes: the
// inline one when they fit, else the scratch one. Buffers are 8-byte
// aligned and nb <= scratchSize.
func bufAt(s *teamSlot, k uint64, nb uint64) core.Ptr {
	if nb <= inlineSize {
		return core.AddrOf(&s.inlined[k&1])
	}
	return core.AddrOf(&s.scratch[k&1])
}

// bufOf views n elements of T in the buffer of slot s for call k (bufAt).
func bufOf[T any](s *teamSlot, k uint64, n int) []T {
	return core.SliceAt[T](bufAt(s, k, uint64(n)*core.SizeOf[T]()), n)
}

// reinterpret views s as a slice of U, an unsigned integer type of T's
// size (bitwise reductions on any integer type).
func reinterpret[U, T any](s []T) []U { return core.Reinterpret[U](s) }

// remote returns the address of offset off of world PE p's symmetric heap.
func (t *Team) remote(p int, off uint64) core.Ptr { return t.l.sp.HeapAddr(p, core.HeapOff(off)) }

// offMemo remembers where one array lies in this PE's symmetric heap, so
// that a collective called again on the same array skips the translation.
// The address is kept as an integer, only ever compared: a symmetric
// address always translates to the same offset while the segment is mapped.
type offMemo struct {
	addr, n, off uint64
}

func (m *offMemo) lookup(p core.Ptr, n uint64) (uint64, bool) {
	if m.n != 0 && m.addr == uint64(uintptr(p)) && m.n == n {
		return m.off, true
	}
	return 0, false
}

func (m *offMemo) store(p core.Ptr, n, off uint64) {
	m.addr, m.n, m.off = uint64(uintptr(p)), n, off
}

// at returns the address of element i.
func (v Vec) at(i int) core.Ptr { return core.Add(v.p, uint64(i)*v.esz) }

// addr is the address of x, a word or line in the segment, for a copy or
// a prefetch.
func addr[T any](x *T) core.Ptr { return core.AddrOf(x) }

// addOff is p moved on by n bytes.
func addOff(p core.Ptr, n uint64) core.Ptr { return core.Add(p, n) }

// barrierBase is the address of PE p's barrier area.
func (l *Layer) barrierBase(p int) core.Ptr { return l.sp.CBAddr(p, barrierArea.Off(l.sp.NPEs)) }

// headOf views PE p's barrier head.
func (l *Layer) headOf(p int) *barrierHead { return core.At[barrierHead](l.barrierBase(p)) }

// countOf views PE p's count line for team id.
func (l *Layer) countOf(p, id int) *barrierCount {
	off := core.SizeOf[barrierHead]() + uint64(id)*barrierTeamSize(l.sp.NPEs)
	return core.At[barrierCount](core.Add(l.barrierBase(p), off))
}

// roundsOf views PE p's round lines for team id, rounds(size) of them
// for a team of size members (at most rounds(npes)).
func (l *Layer) roundsOf(p, id int) []*barrierRound {
	first := core.Add(core.AddrOf(l.countOf(p, id)), core.SizeOf[barrierCount]())
	rs := make([]*barrierRound, rounds(l.sp.NPEs))
	for r := range rs {
		rs[r] = core.At[barrierRound](core.Add(first, uint64(r)*core.SizeOf[barrierRound]()))
	}
	return rs
}

// agreeRoundsOf views PE p's agreement round lines, after the team ids'
// parts of its barrier area (agree.go).
func (l *Layer) agreeRoundsOf(p int) []*agreeRound {
	first := core.Add(l.barrierBase(p), core.SizeOf[barrierHead]()+MaxTeams*barrierTeamSize(l.sp.NPEs))
	rs := make([]*agreeRound, rounds(l.sp.NPEs))
	for r := range rs {
		rs[r] = core.At[agreeRound](core.Add(first, uint64(r)*core.SizeOf[agreeRound]()))
	}
	return rs
}

// storeRecord stores rec, or the poisoned record (every word all ones),
// into the words of an agreement line's data at p (agree.go): plain
// stores, published by the line's seq store after them. Written out: the
// first store is Go's nil check, where a loop over w would check with a
// load from the line.
func storeRecord(p core.Ptr, rec *[AgreeWords]uint64, poison bool) {
	v := *rec
	if poison {
		v = [AgreeWords]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
	}
	w := (*[AgreeWords]uint64)(p)
	w[0], w[1], w[2], w[3], w[4], w[5], w[6] = v[0], v[1], v[2], v[3], v[4], v[5], v[6]
}

// sameRecord reports whether the record in the words at p equals rec;
// atomic loads, after the seq load that published them.
func sameRecord(p core.Ptr, rec *[AgreeWords]uint64) bool {
	w := (*[AgreeWords]atomic.Uint64)(p)
	for i := range w {
		if w[i].Load() != rec[i] {
			return false
		}
	}
	return true
}
