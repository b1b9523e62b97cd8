//go:build amd64 && !race

package memcopy

import "unsafe"

// Move copies n bytes from src to dst (overlap allowed, as copy).
// Implemented in memcopy_amd64.s: the vector copy when the rule allows it
// (useVec, Small <= n <= LocalMax, blocks apart), else moveGo.
//
//go:noescape
func Move(dst, src unsafe.Pointer, n uintptr)

// moveGo is reached from Move's assembly only (a tail jump), which the
// tools that look for unused code do not read.
var _ = moveGo
