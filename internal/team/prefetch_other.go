//go:build !amd64 || race

package team

// prefetchW is a no-op here (see prefetch_amd64.go).
func prefetchW(*postLine) {}

// prefetchR is a no-op here (see prefetch_amd64.go).
func prefetchR(*postLine) {}
