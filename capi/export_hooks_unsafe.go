//go:build symheap_capi

package main

// The Go side of the C library's memory hooks (hooks.c): a source of the
// PE's memory monitor that drains the hooks' ring at every Sync, and the
// self-test at shmem_init that proves which events the hooks deliver.

/*
#include <stdlib.h>
#include <sys/mman.h>
#include "shmemi_hooks.h"

static uintptr_t shmemi_map_anon(size_t n) {
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? 0 : (uintptr_t)p;
}
static int shmemi_unmap(uintptr_t a, size_t n) { return munmap((void *)a, n); }
static int shmemi_drop(uintptr_t a, size_t n) {
	for (size_t i = 0; i < n; i += 4096)
		((volatile char *)a)[i] = 1;
	return madvise((void *)a, n, MADV_DONTNEED);
}
static uintptr_t shmemi_malloc(size_t n) { return (uintptr_t)malloc(n); }
static uintptr_t shmemi_realloc(uintptr_t a, size_t n) { return (uintptr_t)realloc((void *)a, n); }
static void shmemi_free(uintptr_t a) { free((void *)a); }
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/internal/cabi"
	"github.com/symheap/symheap/memhook"
)

// The ring's kinds are memhook's.
var _ = [1]struct{}{}[int(memhook.Free)-C.SHMEMI_HOOK_FREE+int(memhook.Chunk)-C.SHMEMI_HOOK_CHUNK+
	int(memhook.Unmap)-C.SHMEMI_HOOK_UNMAP+int(memhook.Remove)-C.SHMEMI_HOOK_REMOVE]

// cHooks is the hooks' ring as a memhook.Source.
type cHooks struct {
	mu     sync.Mutex // serialises drains; guards cursor and buf
	cursor C.uint64_t
	buf    *[64]C.struct_shmemi_hook_event // C memory: the C side writes it
}

func (h *cHooks) Listen(on bool) { C.shmemi_hooks_listen(cbool(on)) }

// everything is the range a lost event stands for.
var everything = memhook.Range{Start: 0, End: ^uintptr(0)}

func (h *cHooks) Drain(m *memhook.Monitor) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for {
		var lost C.int
		k := int(C.shmemi_hooks_take(&h.cursor, &h.buf[0], C.int(len(h.buf)), &lost))
		for _, e := range h.buf[:k] {
			m.Publish(memhook.Kind(e.kind), memhook.Range{Start: uintptr(e.start), End: uintptr(e.end)})
		}
		if lost != 0 {
			m.Publish(memhook.Unmap, everything)
		}
		if k < len(h.buf) {
			return
		}
	}
}

// cHeap is C's malloc as a memhook.Heap, cMapper C's mmap as a
// memhook.Mapper: the self-test's releases go through the hooks.
type cHeap struct{}

func (cHeap) Alloc(n uint64) (uintptr, error) {
	if a := uintptr(C.shmemi_malloc(C.size_t(n))); a != 0 {
		return a, nil
	}
	return 0, errors.New("malloc failed")
}
func (cHeap) Realloc(a uintptr, n uint64) (uintptr, error) {
	if b := uintptr(C.shmemi_realloc(C.uintptr_t(a), C.size_t(n))); b != 0 {
		return b, nil
	}
	return 0, errors.New("realloc failed")
}
func (cHeap) Free(a uintptr) error { C.shmemi_free(C.uintptr_t(a)); return nil }

type cMapper struct{}

func (cMapper) Map(n uintptr) (uintptr, error) {
	if a := uintptr(C.shmemi_map_anon(C.size_t(n))); a != 0 {
		return a, nil
	}
	return 0, errors.New("mmap failed")
}
func (cMapper) Unmap(a, n uintptr) error {
	if C.shmemi_unmap(C.uintptr_t(a), C.size_t(n)) != 0 {
		return errors.New("munmap failed")
	}
	return nil
}
func (cMapper) DropPages(a, n uintptr) error {
	if C.shmemi_drop(C.uintptr_t(a), C.size_t(n)) != 0 {
		return errors.New("madvise failed")
	}
	return nil
}

// startHooks makes the hooks a source of p's monitor and runs the
// self-test (Open MPI's: 4 MiB allocated and freed, a realloc, a munmap, a
// madvise), whose flags symheap stat shows. With caching on, it warns as
// the Go runtime does when FREE or MUNMAP is missing. Without a monitor
// (SYMHEAP_MEMHOOK_DISABLE) the hooks stay off.
func startHooks(p *symheap.PE) {
	m := p.Monitor()
	if m == nil {
		return
	}
	h := &cHooks{buf: (*[64]C.struct_shmemi_hook_event)(C.calloc(64, C.sizeof_struct_shmemi_hook_event))}
	m.AddSource(h)
	res := m.SelfTestWith(cHeap{}, cMapper{}, "C library hooks (malloc, free, realloc, munmap, madvise)")
	cabi.MonitorTested(p, uint32(res.Flags))
	if d := os.Getenv("SYMHEAP_CDEBUG"); d != "" && d != "0" {
		// One line, which symheap info's C probe reads.
		fmt.Fprintf(os.Stderr, "symheap: PE %d: C hooks: %s\n", p.Rank(), strings.ReplaceAll(strings.TrimSpace(strings.TrimPrefix(res.String(), "memory monitor: ")), "\n", ";"))
	}
	if on, why := p.CachingEnabled(); on {
		d := memhook.Decision{Enabled: true, Reason: why}
		if msg := memhook.SupportWarning(d, res.Flags); msg != "" {
			fmt.Fprintln(os.Stderr, msg)
		}
	}
}
