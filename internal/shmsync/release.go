package shmsync

import "sync/atomic"

// Release stores.
//
// A sync/atomic store is sequentially consistent: on amd64 an XCHG, which
// waits until the store has reached the cache (it takes the line in the
// exclusive state and drains the store buffer). A word that publishes data
// to another process needs less: release order, that every earlier store
// of this process is visible before it. On amd64 (TSO) every plain store
// has that order, and a plain store waits for nothing: it leaves the store
// buffer together with the stores before it, so a publishing word and the
// payload written just before it in the same cache line cross to the
// reader in one transfer instead of two.
//
// StoreRelease32 and StoreRelease64 are that store: a plain MOV on amd64
// (in assembly, so that the compiler can neither drop nor move it), the
// sequentially consistent store elsewhere and under the race detector. They give no store-to-load
// order: a writer that must read a word another process writes (a
// sleepers count, before a futex wake) after its release store needs a
// full fence between them, or the reader's side must fence for it
// (membarrier; see the root package's wait.go).

// StoreRelease32 stores v into *w with release order.
func StoreRelease32(w *atomic.Uint32, v uint32) { storeRelease32(w, v) }

// StoreRelease64 stores v into *w with release order.
func StoreRelease64(w *atomic.Uint64, v uint64) { storeRelease64(w, v) }
