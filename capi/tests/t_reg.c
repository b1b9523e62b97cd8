/* t_reg.c - the registration cache of a C program (shmemx_reg_*): a
 * registration dies with its memory, whichever way the memory goes and
 * whichever PE lets it go. Run with SYMHEAP_LEAVE_PINNED=yes (run.sh's
 * reg group). */
#define _GNU_SOURCE
#include <shmem.h>
#include <shmemx.h>
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>

#include "check.h"

/* reg registers n bytes at p, or counts a failure. */
static shmemx_reg_t reg(void *p, size_t n)
{
	shmemx_reg_t r = 0;
	CHECK(shmemx_reg_get(p, n, &r) == 0, "shmemx_reg_get(%p, %zu) failed", p, n);
	return r;
}

/* fill touches every page, so that the memory is there to pin. */
static void fill(void *p, size_t n)
{
	memset(p, 0x5a, n);
}

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), npes = shmem_n_pes();
	const size_t big = 1 << 20, small = 64 << 10;

	/* A buffer nobody releases: its registration stays valid through
	 * all the releases below (the cache drops only what was released;
	 * its entries are whole pages, so keep has pages of its own). */
	char *keep = aligned_alloc(4096, small);
	fill(keep, small);
	shmemx_reg_t rkeep = reg(keep, small);

	/* On the owner: free of a large block (glibc unmaps it) and of a
	 * small one (it stays in glibc's heap: the hook's FREE event). */
	char *p = malloc(big);
	fill(p, big);
	shmemx_reg_t r = reg(p, big);
	CHECK(shmemx_reg_valid(r) == 1, "a registration of live memory is invalid");
	free(p);
	CHECK(shmemx_reg_valid(r) == 0, "the registration of a freed 1 MiB block is still valid");
	shmemx_reg_put(r);

	p = malloc(small);
	fill(p, small);
	r = reg(p, small);
	free(p);
	CHECK(shmemx_reg_valid(r) == 0, "the registration of a freed 64 KiB block is still valid");
	shmemx_reg_put(r);

	/* realloc that moves the block (a block after it stops it growing
	 * in place) releases the old one. */
	p = malloc(small);
	char *after = malloc(small);
	fill(p, small);
	r = reg(p, small);
	uintptr_t was = (uintptr_t)p;
	char *q = realloc(p, 4 * big);
	CHECK(q != NULL && (uintptr_t)q != was, "realloc did not move the block (%#lx, after %p, now %p)",
	      (unsigned long)was, (void *)after, (void *)q);
	CHECK(shmemx_reg_valid(r) == 0, "the registration of a block realloc moved is still valid");
	shmemx_reg_put(r);
	free(q);
	free(after);

	/* munmap, and madvise(MADV_DONTNEED) of part of a mapping. */
	char *m = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(m != MAP_FAILED, "mmap failed");
	fill(m, big);
	r = reg(m, big);
	shmemx_reg_t r2 = reg(m + big / 2, big / 4);
	/* Pinned (mlocked) pages refuse MADV_DONTNEED with EINVAL; the
	 * hook reports the range before the call either way. */
	int rc = madvise(m + big / 2, 4096, MADV_DONTNEED);
	CHECK(rc == 0 || errno == EINVAL, "madvise failed: %s", strerror(errno));
	CHECK(shmemx_reg_valid(r2) == 0, "a registration of pages dropped by madvise is still valid");
	CHECK(munmap(m, big) == 0, "munmap failed");
	CHECK(shmemx_reg_valid(r) == 0, "the registration of an unmapped range is still valid");
	shmemx_reg_put(r);
	shmemx_reg_put(r2);

	/* On another PE: each PE registers its right neighbour's copy of a
	 * symmetric block (through shmem_ptr) and its own; shmem_free by
	 * every PE releases both. (An aligned block: shmem_free gives it
	 * back to the allocator at once, where it reports the release; a
	 * plain block of a size malloc may ask again waits in the PE's cache
	 * of freed blocks, still allocated, until the next allocation call.) */
	char *x = shmem_align(4096, big);
	fill(x, big);
	shmem_barrier_all();
	char *theirs = shmem_ptr(x, (me + 1) % npes);
	CHECK(theirs != NULL, "no direct view of PE %d's copy", (me + 1) % npes);
	shmemx_reg_t rmine = reg(x, big), rtheirs = theirs ? reg(theirs, big) : 0;
	CHECK(shmemx_reg_valid(rtheirs) == 1, "a registration of PE %d's live copy is invalid", (me + 1) % npes);
	shmem_barrier_all();
	shmem_free(x);
	/* shmem_free's barrier is on entry: a PE's copy goes back after it,
	 * perhaps after another PE has returned. Once every PE is past its
	 * shmem_free, every copy's release has been published. */
	shmem_barrier_all();
	CHECK(shmemx_reg_valid(rmine) == 0, "the registration of this PE's freed copy is still valid");
	if (theirs)
		CHECK(shmemx_reg_valid(rtheirs) == 0, "the registration of PE %d's copy is still valid after its shmem_free",
		      (me + 1) % npes);
	shmemx_reg_put(rmine);
	if (theirs)
		shmemx_reg_put(rtheirs);

	CHECK(shmemx_reg_valid(rkeep) == 1, "a registration of memory never released was dropped");
	shmemx_reg_put(rkeep);
	free(keep);
	DONE("t_reg");
}
