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
// it (PREFETCHT0): a reader of a root's ring calls it for the line of a
// call postAhead calls later after reading this call's, so that when the
// root runs ahead that line's transfer overlaps the calls in between
// ("Post lines").
//
//go:noescape
func prefetchR(p *postLine)
