//go:build !race

package small

import (
	"sync/atomic"
	_ "unsafe" // go:linkname

	"github.com/symheap/symheap/internal/shmsync"
)

// Pinning: while pinned, the goroutine stays on its P and no other
// goroutine runs there, so per-P state needs no lock (sync.Pool works the
// same way, through the same runtime functions). Between pin and unpin
// nothing may block: no lock, no syscall, no call into inner.

//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()

type pinState struct{}

func (*pinState) pin() int { return procPin() }
func (*pinState) unpin()   { procUnpin() }

// storeRelease is a release store (a plain MOV on amd64).
func storeRelease(w *atomic.Uint64, v uint64) { shmsync.StoreRelease64(w, v) }

// quiet and unquiet bracket Stats, Check and Walk, which read owner words
// unlocked (see the package comment).
func (*pinState) quiet()   {}
func (*pinState) unquiet() {}
