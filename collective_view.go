package symheap

import "github.com/symheap/symheap/internal/core"

// Views of the team area and its scratch buffers, and reinterpretation of
// integer slices for the bitwise reductions (core does the arithmetic).

// teamSlotOf views slot id of PE p's team area.
func (pe *PE) teamSlotOf(p, id int) *teamSlot {
	return core.At[teamSlot](pe.sp.CBAddr(p, teamArea.Off(pe.npes)+MaxTeams*teamCounterSize+core.CBOff(id)*teamSlotSize))
}

// teamCounterOf views the barrier counter of team id, in PE 0's block.
func (pe *PE) teamCounterOf(id int) *teamCounter {
	return core.At[teamCounter](pe.sp.CBAddr(0, teamArea.Off(pe.npes)+core.CBOff(id)*teamCounterSize))
}

// bufOf views n elements of T in the buffer of slot s for call k: the
// inline one when they fit, else the scratch one. Buffers are 8-byte
// aligned and n*sizeof(T) <= scratchSize.
func bufOf[T any](s *teamSlot, k uint64, n int) []T {
	p := core.AddrOf(&s.scratch[k&1])
	if uint64(n)*core.SizeOf[T]() <= inlineSize {
		p = core.AddrOf(&s.inline[k&1])
	}
	return core.SliceAt[T](p, n)
}

// reinterpret views s as a slice of U, an unsigned integer type of T's
// size (bitwise reductions on any integer type).
func reinterpret[U, T any](s []T) []U { return core.Reinterpret[U](s) }

// remote views n elements of T at offset off of world PE p's symmetric heap.
func remote[T any](pe *PE, p int, off uint64, n int) []T {
	return core.SliceAt[T](pe.sp.HeapAddr(p, core.HeapOff(off)), n)
}

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
