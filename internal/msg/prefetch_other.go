//go:build !amd64 || race

package msg

import "sync/atomic"

// prefetchW is a hint that has no portable form: nothing here (and under
// the race detector, which cannot see an assembly routine's access).
func prefetchW(*atomic.Uint64) {}
