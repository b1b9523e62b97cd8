//go:build symheap_capi

package main

// The registration cache for C programs (shmemx.h: shmemx_reg_get,
// shmemx_reg_valid, shmemx_reg_put): the PE's rcache.Cache, the same one
// Go programs get from PE.RegistrationCache, which hears of every release
// the PE's monitor hears (the C hooks' free, munmap, madvise and mremap,
// and the frees of other PEs). C holds a registration as a number; the
// entries stay on the Go side.

/*
#include <stdint.h>
#include <stddef.h>
*/
import "C"

import (
	"fmt"
	"sync"

	"github.com/symheap/symheap/rcache"
)

var regs struct {
	mu   sync.Mutex
	next uint64 // the last handle given; handles start at 1
	held map[uint64]*rcache.Entry
}

//export symheapc_go_reg_get
func symheapc_go_reg_get(addr C.uintptr_t, n C.size_t, out *C.uint64_t, errbuf *C.char, en C.size_t) C.int {
	if pe == nil {
		setErr(errbuf, en, fmt.Errorf("symheap: called before shmem_init"))
		return 1
	}
	if addr == 0 || n == 0 {
		setErr(errbuf, en, fmt.Errorf("symheap: %d bytes at %#x: nothing to register (pass a buffer of at least one byte)", uint64(n), uint64(addr)))
		return 1
	}
	rc, err := pe.RegistrationCache()
	if err != nil {
		setErr(errbuf, en, err)
		return 1
	}
	e, err := rc.Get(rcache.Range{Start: uintptr(addr), End: uintptr(addr) + uintptr(n)}, rcache.Transports(0))
	if err != nil {
		setErr(errbuf, en, fmt.Errorf("symheap: %w", err))
		return 1
	}
	regs.mu.Lock()
	defer regs.mu.Unlock()
	if regs.held == nil {
		regs.held = map[uint64]*rcache.Entry{}
	}
	regs.next++
	regs.held[regs.next] = e
	*out = C.uint64_t(regs.next)
	return 0
}

// held returns the entry of handle h, or nil.
func held(h C.uint64_t) *rcache.Entry {
	regs.mu.Lock()
	defer regs.mu.Unlock()
	return regs.held[uint64(h)]
}

// symheapc_go_reg_valid returns 1 while no release of the registration's
// memory has been heard, 0 after, -1 for a handle that is not held. It
// first takes in every release published so far (the C hooks' ring and
// other PEs' frees), so a free that returned before this call counts.
//
//export symheapc_go_reg_valid
func symheapc_go_reg_valid(h C.uint64_t) C.int {
	e := held(h)
	if e == nil {
		return -1
	}
	if rc, err := pe.RegistrationCache(); err == nil {
		rc.Flush() // the monitor's Sync, then the invalidations
	}
	if e.Valid() {
		return 1
	}
	return 0
}

// symheapc_go_reg_put gives the registration back: 0, or -1 for a handle
// that is not held.
//
//export symheapc_go_reg_put
func symheapc_go_reg_put(h C.uint64_t) C.int {
	regs.mu.Lock()
	e := regs.held[uint64(h)]
	delete(regs.held, uint64(h))
	regs.mu.Unlock()
	if e == nil {
		return -1
	}
	rc, err := pe.RegistrationCache()
	if err != nil {
		return -1
	}
	if rc.Put(e) != nil {
		return -1
	}
	return 0
}
