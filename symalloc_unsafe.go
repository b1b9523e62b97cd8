package symheap

import (
	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/shmsync"
)

// prefetchRecord asks for the line of PE rank's allocation record of
// phase slot, for writing.
func (h *symHeap) prefetchRecord(rank int, slot uint64) {
	shmsync.PrefetchW(core.AddrOf(&h.ctl[rank].allocRec[slot]))
}
