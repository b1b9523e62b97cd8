//go:build !amd64 || race

package shmsync

import "sync/atomic"

// Without TSO a plain store has no release order: use the atomic store
// (on arm64 an STLR, itself a release store). Under the race detector too,
// which sees the ordering of sync/atomic operations only.

func storeRelease32(w *atomic.Uint32, v uint32) { w.Store(v) }

func storeRelease64(w *atomic.Uint64, v uint64) { w.Store(v) }
