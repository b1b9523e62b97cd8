//go:build symheap_capi

package main

/*
#include "smalloc.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/internal/cabi"
)

// The shared malloc's side of the runtime (smalloc.c).

// symheapc_go_smalloc takes the shared malloc's arena, size bytes (0:
// three quarters of the local shared heap), and describes it in out.
//
//export symheapc_go_smalloc
func symheapc_go_smalloc(out *C.struct_shmemi_smalloc_info, size C.uint64_t, errbuf *C.char, n C.size_t) C.int {
	a, err := cabi.SharedMalloc(pe, uint64(size))
	if err == nil && len(a.Classes) != C.SHMEMI_SMALL_NCLASSES {
		err = fmt.Errorf("symheap: shared malloc: %d size classes, the C library was built for %d: run go generate ./capi/gen", len(a.Classes), C.SHMEMI_SMALL_NCLASSES)
	}
	if err != nil {
		setErr(errbuf, n, err)
		return 1
	}
	out.shared_off, out.shared_size = C.uint64_t(a.SharedOff), C.uint64_t(a.SharedSize)
	out.front_word = C.uint64_t(a.FrontWord)
	out.arena, out.arena_size = C.uint64_t(a.Arena), C.uint64_t(a.ArenaSize)
	out.fallbacks = (*C.uint64_t)(a.Fallbacks) // in the segment, not Go memory: C may keep it
	for c, row := range a.Classes {
		for i, v := range row {
			out.classes[c][i] = C.uint64_t(v)
		}
	}
	out.nclasses = C.int(len(a.Classes))
	return 0
}

// symheapc_go_shared_free frees a block of a local shared heap that the
// runtime's pool, not the shared malloc, handed out (SharedAlloc's large
// blocks, of a Go PE or of this one): free() of a pointer another PE
// passed.
//
//export symheapc_go_shared_free
func symheapc_go_shared_free(p unsafe.Pointer, errbuf *C.char, n C.size_t) C.int {
	if err := symheap.SharedFree(pe, unsafe.Slice((*byte)(p), 1)); err != nil {
		setErr(errbuf, n, fmt.Errorf("%w (free of %p)", err, p))
		return 1
	}
	return 0
}
