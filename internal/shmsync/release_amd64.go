//go:build !race

package shmsync

import "sync/atomic"

// Implemented in release_amd64.s: a plain MOV.

//go:noescape
func storeRelease32(w *atomic.Uint32, v uint32)

//go:noescape
func storeRelease64(w *atomic.Uint64, v uint64)
