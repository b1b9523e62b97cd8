//go:build amd64 && !race

package shmsync

import "unsafe"

// PrefetchW asks for the cache line at p in the exclusive state, without
// waiting for it (PREFETCHW; a no-op on CPUs without it). The owner of a
// line that other PEs read calls it ahead of its next write, once they
// are done with the line: the write then neither waits for the line nor
// holds up the next locked instruction (internal/team's post lines,
// internal/msg's rings).
//
//go:noescape
func PrefetchW(p unsafe.Pointer)

// PrefetchR asks for the cache line at p in the shared state, without
// waiting for it (PREFETCHT0): a reader calls it for a line another PE
// will have written by the time it reads it, so that the transfer
// overlaps the work in between (internal/team's post lines).
//
//go:noescape
func PrefetchR(p unsafe.Pointer)
