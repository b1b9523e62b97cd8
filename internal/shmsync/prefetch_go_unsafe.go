//go:build !amd64 || race

package shmsync

import "unsafe"

// PrefetchW is a hint with no portable form: nothing here, nor under the
// race detector (see prefetch_asm_unsafe.go).
func PrefetchW(unsafe.Pointer) {}

// PrefetchR is as PrefetchW.
func PrefetchR(unsafe.Pointer) {}
