//go:build !race

package msg

import "sync/atomic"

// prefetchW asks for the line of p in the exclusive state without
// waiting for it (PREFETCHW; a no-op on CPUs without it): a ring's
// producer calls it for a line it will write soon (txRing.commit).
//
//go:noescape
func prefetchW(p *atomic.Uint64)
