//go:build symheap_capi

/* smalloc.h - the C library's shared malloc (smalloc.c) as the rest of
 * the library sees it: hooks.c's free and realloc hand it the blocks of
 * the segment, core.c starts and ends it, export_unsafe.go fills its
 * description. */
#ifndef SHMEMI_SMALLOC_H
#define SHMEMI_SMALLOC_H
#include <stddef.h>
#include <stdint.h>

#include "shmemi_formats.h"

/* What the runtime tells the shared malloc at shmem_init
 * (cabi.SharedMallocArena). */
struct shmemi_smalloc_info {
	uint64_t shared_off, shared_size; /* PE p's shared heap: its partition + shared_off */
	uint64_t front_word;              /* from a PE's control block: its front end's header offset + 1 */
	uint64_t arena, arena_size;       /* this PE's arena, in its shared heap */
	uint64_t *fallbacks;              /* this PE's core.Stats.CMallocFallbacks */
	uint64_t classes[SHMEMI_SMALL_NCLASSES][6]; /* small.ClassTable: size, nslots, nwords, slots, inv, colours */
	int nclasses;
};

/* 1 while malloc serves from the shared heap (after shmem_init, when
 * switched on), 2 after shmem_finalize (the heap is a private copy). */
#define SHMEMI_HIDDEN __attribute__((visibility("hidden"))) /* no GOT load on the paths of every call */
extern int shmemi_smalloc_state SHMEMI_HIDDEN;
/* The segment's range as mapped here: the blocks free must look at. */
extern uintptr_t shmemi_smalloc_lo SHMEMI_HIDDEN, shmemi_smalloc_len SHMEMI_HIDDEN;

void shmemi_smalloc_init(void);     /* core.c, after the runtime's Init */
void shmemi_smalloc_finalize(int before); /* core.c, around the runtime's Close */
void shmemi_smalloc_free(void *p) SHMEMI_HIDDEN; /* a block in [lo, lo+len) */
void *shmemi_smalloc_realloc(void *p, size_t n);
size_t shmemi_libc_usable(void *p); /* glibc's malloc_usable_size */

static inline int shmemi_smalloc_has(const void *p)
{
	return __atomic_load_n(&shmemi_smalloc_state, __ATOMIC_RELAXED) != 0 &&
	       (uintptr_t)p - shmemi_smalloc_lo < shmemi_smalloc_len;
}
#endif
