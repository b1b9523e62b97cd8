package symheap

import "unsafe"

// This file holds the pointer arithmetic of teams and collectives: views of
// the team area and its scratch buffers, and reinterpretation of integer
// slices for the bitwise reductions.

// The structs must match the sizes the layout reserves for them.
var (
	_ [teamSlotSize - unsafe.Sizeof(teamSlot{})]byte
	_ [unsafe.Sizeof(teamSlot{}) - teamSlotSize]byte
	_ [teamHdrSize - unsafe.Sizeof(teamHeader{})]byte
	_ [unsafe.Sizeof(teamHeader{}) - teamHdrSize]byte
	_ [teamCounterSize - unsafe.Sizeof(teamCounter{})]byte
	_ [unsafe.Sizeof(teamCounter{}) - teamCounterSize]byte
)

// teamSlotOf views slot id of PE p's team area.
func (pe *PE) teamSlotOf(p, id int) *teamSlot {
	return (*teamSlot)(pe.cbAddr(p, teamAreaOff()+teamHdrSize+MaxTeams*teamCounterSize+uint64(id)*teamSlotSize))
}

// teamCounterOf views the barrier counter of team id, in PE 0's block.
func (pe *PE) teamCounterOf(id int) *teamCounter {
	return (*teamCounter)(pe.cbAddr(0, teamAreaOff()+teamHdrSize+uint64(id)*teamCounterSize))
}

// teamHeader views PE 0's team header, which holds the job's id bitmap.
func (pe *PE) teamHeader() *teamHeader {
	return (*teamHeader)(pe.cbAddr(0, teamAreaOff()))
}

// bufOf views n elements of T in the buffer of slot s for call k: the
// inline one when they fit, else the scratch one. Buffers are 8-byte
// aligned and n*sizeof(T) <= scratchSize.
func bufOf[T any](s *teamSlot, k uint64, n int) []T {
	p := unsafe.Pointer(&s.scratch[k&1])
	if uint64(n)*sizeOf[T]() <= inlineSize {
		p = unsafe.Pointer(&s.inline[k&1])
	}
	return unsafe.Slice((*T)(p), n)
}

// reinterpret views s as a slice of U, an unsigned integer type of T's
// size (bitwise reductions on any integer type).
func reinterpret[U, T any](s []T) []U {
	return unsafe.Slice((*U)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}

// remote views n elements of T at offset off of world PE p's symmetric heap.
func remote[T any](pe *PE, p int, off uint64, n int) []T {
	return unsafe.Slice((*T)(pe.heapAddr(p, off)), n)
}

// offMemo remembers where one array lies in this PE's symmetric heap, so
// that a collective called again on the same array skips the translation.
// The address is kept as an integer, only ever compared: a symmetric
// address always translates to the same offset while the segment is mapped.
type offMemo struct {
	addr, n, off uint64
}

func (m *offMemo) lookup(p unsafe.Pointer, n uint64) (uint64, bool) {
	if m.n != 0 && m.addr == uint64(uintptr(p)) && m.n == n {
		return m.off, true
	}
	return 0, false
}

func (m *offMemo) store(p unsafe.Pointer, n, off uint64) {
	m.addr, m.n, m.off = uint64(uintptr(p)), n, off
}
