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
