//go:build !race

package team

// prefetchW asks for post line p in the exclusive state, without
// waiting for it (PREFETCHW; a no-op on CPUs without it): the owner of a
// post line that a reader holds calls it ahead of its next write, so that
// the write neither waits for the line nor holds up the next locked
// instruction ("Post lines").
//
//go:noescape
func prefetchW(p *postLine)

// prefetchR asks for post line p in the shared state, without waiting for
// it (PREFETCHT0): a reader of a root's ring calls it for the next call's
// line after reading this call's, so that when the root runs ahead the
// next line's transfer overlaps the rest of this call ("Post lines").
//
//go:noescape
func prefetchR(p *postLine)
