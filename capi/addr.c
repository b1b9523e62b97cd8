//go:build symheap_capi

/*
 * addr.c - address translation, the slow cases (the common case is
 * shmemi_addr in shmem_internal.h): an address in another PE's copy of
 * the symmetric heap (from shmem_ptr), the program's static data, and
 * every error. It needs shmemi_L, shmemi_fatal and shmemi_need_init only,
 * so that the cross-language test of the translation
 * (capi/tests/xlang) runs it against the Go runtime's (core.Target) on
 * the same inputs.
 */
#include "shmem_internal.h"

char *shmemi_static_addr(const void *p, size_t n, int pe)
{
	uint64_t off = (uint64_t)((uintptr_t)p - (uintptr_t)shmemi_L.static_lo);
	if (shmemi_L.static_lo == NULL || off >= shmemi_L.static_size || n > shmemi_L.static_size - off)
		return NULL;
	if (pe == shmemi_L.me)
		return (char *)p;
	if (shmemi_L.static_peer == NULL || shmemi_L.static_peer[pe] == NULL)
		return NULL;
	return shmemi_L.static_peer[pe] + off;
}

/* shmemi_locate finds the symmetric object of n bytes at p: its heap
 * offset (kind 1) or static offset (kind 2); 0 if p is not symmetric. An
 * address in any PE's copy (from shmem_ptr) counts. */
int shmemi_locate(const void *p, size_t n, uint64_t *off)
{
	uintptr_t a = (uintptr_t)p;
	uintptr_t b = (uintptr_t)shmemi_L.base + shmemi_L.part_off;
	for (int k = 0; k < 2; k++) {
		if (k == 1) {
			if (shmemi_L.wbase == shmemi_L.base)
				break;
			b = (uintptr_t)shmemi_L.wbase + shmemi_L.part_off;
		}
		if (a >= b && shmemi_L.part_stride > 0) {
			uint64_t rel = a - b;
			uint64_t owner = rel / shmemi_L.part_stride, o = rel % shmemi_L.part_stride;
			if (owner < (uint64_t)shmemi_L.npes && o < shmemi_L.heap_size && n <= shmemi_L.heap_size - o) {
				*off = o;
				return 1;
			}
		}
	}
	uint64_t so = (uint64_t)(a - (uintptr_t)shmemi_L.static_lo);
	if (shmemi_L.static_lo && so < shmemi_L.static_size && n <= shmemi_L.static_size - so) {
		*off = so;
		return 2;
	}
	for (int q = 0; shmemi_L.static_peer && q < shmemi_L.npes; q++) {
		char *s = shmemi_L.static_peer[q];
		so = (uint64_t)(a - (uintptr_t)s);
		if (s && so < shmemi_L.static_size && n <= shmemi_L.static_size - so) {
			*off = so;
			return 2;
		}
	}
	return 0;
}

char *shmemi_addr_slow(const void *p, size_t n, int pe, const char *op)
{
	shmemi_need_init(op);
	if ((unsigned)pe >= (unsigned)shmemi_L.npes)
		shmemi_fatal(op, "PE %d does not exist (the job has %d PEs, 0 to %d)", pe, shmemi_L.npes,
			     shmemi_L.npes - 1);
	/* A call of no elements may pass a null pointer: OpenSHMEM's table of
	 * undefined behaviour has "len is 0, pointer is null: supported". The
	 * caller copies nothing (shmemi_memcpy). */
	if (n == 0 && p == NULL)
		return NULL;
	uint64_t off;
	switch (shmemi_locate(p, n, &off)) {
	case 1:
		if (pe == shmemi_L.me)
			return shmemi_L.base + shmemi_L.part_off + (uint64_t)pe * shmemi_L.part_stride + off;
		return shmemi_L.wbase + shmemi_L.part_off + (uint64_t)pe * shmemi_L.part_stride + off;
	case 2: {
		char *r = shmemi_static_addr(shmemi_L.static_lo + off, n, pe);
		if (r == NULL && shmemi_go_pe(pe))
			shmemi_fatal(op,
				     "%zu bytes at %p are static data of this C program, and PE %d runs a Go program: static "
				     "data are symmetric among the job's C PEs only (allocate the object with shmem_malloc "
				     "to reach it from Go PEs)",
				     n, p, pe);
		if (r == NULL)
			shmemi_fatal(op, "%zu bytes at %p are static data, which PE %d cannot reach: %s", n, p,
				     shmemi_L.me, shmemi_L.static_why ? shmemi_L.static_why : "unknown reason");
		return r;
	}
	}
	if (n > shmemi_L.heap_size && shmemi_locate(p, 1, &off))
		shmemi_fatal(op, "%zu bytes at %p run past the end of the symmetric object's memory "
				 "(symmetric heap of %llu bytes, static data of %llu bytes)",
			     n, p, (unsigned long long)shmemi_L.heap_size, (unsigned long long)shmemi_L.static_size);
	shmemi_fatal(op,
		     "%zu bytes at %p are not symmetric: neither in the symmetric heap nor in the program's "
		     "static data (allocate them with shmem_malloc, or make them global or static variables)",
		     n, p);
}

