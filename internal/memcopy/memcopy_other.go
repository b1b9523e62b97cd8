//go:build !amd64

package memcopy

import "unsafe"

// Other architectures copy with the runtime's memmove.
const useRep, repBelow = false, 0

func repMovsb(dst, src unsafe.Pointer, n uintptr) { panic("memcopy: no REP MOVSB here") }
