//go:build !amd64 || race

package memcopy

import "unsafe"

// Move copies n bytes from src to dst (overlap allowed, as copy).
func Move(dst, src unsafe.Pointer, n uintptr) { moveGo(dst, src, n) }
