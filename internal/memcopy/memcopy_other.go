//go:build !amd64 || race

package memcopy

import "unsafe"

// Other architectures, and the race detector (which sees copy's accesses
// but not an assembly routine's), copy with the runtime's memmove.
const useRep, streamFrom, useVec, vecBelow = false, 0, false, 0

func repMovsb(dst, src unsafe.Pointer, n uintptr) { panic("memcopy: no REP MOVSB here") }

func ntMove(dst, src unsafe.Pointer, n uintptr) { panic("memcopy: no streaming copy here") }
