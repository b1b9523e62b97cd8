//go:build !race

package small

import (
	"sync/atomic"
	"unsafe" // go:linkname, setA
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

// setA stores an A word: an ordinary store (the owner is its only
// writer). It needs release order only towards the store that later hands
// the block to another PE, which is a sequentially consistent or release
// store of the program's (a message, a Put, an atomic): x86-64 TSO keeps
// every store in order, and arm64's STLR orders the stores before it.
// Freers load A atomically. (core.SetPlain makes the same argument.)
func setA(w *atomic.Uint64, v uint64) { *(*uint64)(unsafe.Pointer(w)) = v }

// quiet and unquiet bracket Stats, Check and Walk, which read owner words
// unlocked (see the package comment).
func (*pinState) quiet()   {}
func (*pinState) unquiet() {}
