package shmsync

import _ "unsafe" // go:linkname

// Monotonic returns the machine's CLOCK_MONOTONIC in nanoseconds: one
// clock for every process of the node, and the clock of the futex
// timeouts (FutexWait). time.Now's monotonic reading cannot stand in: it
// counts from the start of its own process, so two PEs' readings do not
// compare. The runtime's nanotime reads CLOCK_MONOTONIC through the vDSO
// (no system call); it is one of the runtime functions that stay
// reachable by linkname (go.dev/issue/67401).
//
//go:linkname Monotonic runtime.nanotime
func Monotonic() int64
