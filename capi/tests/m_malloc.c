/* m_malloc.c - the shared malloc (capi/smalloc.c): run.sh's malloc group
 * runs it with SYMHEAP_SHARED_MALLOC set, or linked with symcc
 * --shared-malloc.
 *
 *   m_malloc          plain malloc shared between PEs, threads, realloc,
 *                     the aligned forms, malloc before main, free of
 *                     another PE's blocks, the format agreed with the
 *                     runtime's (alloc/small)
 *   m_malloc full     fills the arena: with SYMHEAP_SHARED_MALLOC=strict
 *                     malloc returns NULL (ENOMEM); otherwise blocks come
 *                     from the system allocator and are counted; with
 *                     a file name, the PEs wait for it before freeing
 *   m_malloc off      the switch is off: blocks are glibc's, not shared
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "check.h"
#include "../shmemi_formats.h"

/* Whether p lies in the segment's partitions, where the local shared
 * heaps are (each partition: a symmetric heap, then a shared heap):
 * shmem_ptr answers for symmetric objects only, so the test compares
 * with a symmetric object's places. */
static long *sym_anchor;

static int in_segment(const void *p)
{
	/* The partitions are contiguous from PE 0's: PE 0's copy of
	 * the anchor and the last PE's bound them (within a partition's
	 * stride). */
	char *lo = shmem_ptr(sym_anchor, 0), *hi = shmem_ptr(sym_anchor, shmem_n_pes() - 1);
	if (lo == NULL || hi == NULL)
		return 0;
	ptrdiff_t stride = shmem_n_pes() > 1 ? (hi - lo) / (shmem_n_pes() - 1) : (ptrdiff_t)1 << 30;
	return (char *)p >= lo - stride && (char *)p < hi + 2 * stride;
}

/* Allocated before main, before shmem_init: glibc's, freed after. */
static char *early;
__attribute__((constructor)) static void before_main(void)
{
	early = malloc(100);
	if (early)
		strcpy(early, "before main");
}

#define BIG (1 << 20)
struct big {
	uint64_t words[BIG / 8];
};

static long passed; /* a pointer passed between PEs, as a 64-bit word */

static void *worker(void *arg)
{
	long id = (long)arg;
	void *keep[256];
	int bad = 0;
	for (int round = 0; round < 200; round++) {
		for (int i = 0; i < 256; i++) {
			size_t n = 16 + (size_t)((i * 37 + round + id) % 1024);
			keep[i] = malloc(n);
			if (!keep[i] || !in_segment(keep[i]))
				bad++;
			else
				memset(keep[i], (int)id, n);
		}
		for (int i = 0; i < 256; i++) {
			unsigned char *c = keep[i];
			if (c && c[0] != (unsigned char)id)
				bad++;
			free(keep[i]);
		}
	}
	return (void *)(long)bad;
}

/* Blocks one thread allocates and another frees (the remote-free stacks
 * between threads of one PE). */
static void *cross_ptrs[4096];
static void *cross_free(void *arg)
{
	(void)arg;
	for (int i = 0; i < 4096; i++)
		free(cross_ptrs[i]);
	return NULL;
}

static void test_shared(void)
{
	int me = shmem_my_pe(), npes = shmem_n_pes();
	CHECK(early != NULL && strcmp(early, "before main") == 0, "a block of before main: %s", early ? early : "NULL");
	CHECK(!in_segment(early), "a block of before main lies in the segment");
	free(early); /* glibc's, recognised by its address */

	/* PE 0 fills a 1 MiB struct and passes its address; PE 1 reads it
	 * in place and frees it. */
	if (me == 0) {
		struct big *b = malloc(sizeof *b);
		CHECK(b != NULL && in_segment(b), "1 MiB malloc %p not in the segment", (void *)b);
		for (size_t i = 0; i < BIG / 8; i++)
			b->words[i] = i * 2654435761u;
		shmem_long_p(&passed, (long)(uintptr_t)b, 1 % npes);
		shmem_quiet();
	}
	shmem_barrier_all();
	if (me == 1 % npes) {
		struct big *b = (struct big *)(uintptr_t)passed;
		size_t bad = 0;
		for (size_t i = 0; i < BIG / 8; i++)
			bad += b->words[i] != i * 2654435761u;
		CHECK(bad == 0, "%zu words of PE 0's block read wrong in place", bad);
		CHECK(malloc_usable_size(b) >= sizeof *b, "usable size %zu of another PE's block", malloc_usable_size(b));
		free(b); /* into PE 0's arena */
	}
	shmem_barrier_all();

	/* Small blocks across PEs: every PE allocates, its right neighbour
	 * frees (the span format's remote frees). */
	static long ring[64];
	char *mine[64];
	for (int i = 0; i < 64; i++) {
		mine[i] = malloc(16 + 16 * (size_t)i);
		CHECK(mine[i] && in_segment(mine[i]), "small block %d", i);
		memset(mine[i], me + 1, 16 + 16 * (size_t)i);
		shmem_long_p(&ring[i], (long)(uintptr_t)mine[i], (me + 1) % npes);
	}
	shmem_barrier_all();
	for (int i = 0; i < 64; i++) {
		unsigned char *c = (unsigned char *)(uintptr_t)ring[i];
		int from = (me + npes - 1) % npes;
		CHECK(c[0] == from + 1 && c[15 + 16 * i] == from + 1, "block %d of PE %d reads %d", i, from, c[0]);
		free(c);
	}
	shmem_barrier_all();
	/* The freed slots come back to their owner. */
	for (int i = 0; i < 64; i++) {
		mine[i] = malloc(16 + 16 * (size_t)i);
		CHECK(mine[i] != NULL, "again %d", i);
	}
	for (int i = 0; i < 64; i++)
		free(mine[i]);

	/* Threads: alloc/free in 4 threads at once; blocks freed by another
	 * thread. */
	pthread_t th[4];
	for (long i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, worker, (void *)(i + 1));
	for (int i = 0; i < 4; i++) {
		void *r;
		pthread_join(th[i], &r);
		CHECK(r == NULL, "thread %d: %ld bad blocks", i, (long)r);
	}
	for (int i = 0; i < 4096; i++)
		cross_ptrs[i] = malloc(24 + (size_t)(i % 200));
	pthread_create(&th[0], NULL, cross_free, NULL);
	pthread_join(th[0], NULL);
	for (int i = 0; i < 4096; i++) {
		cross_ptrs[i] = malloc(24 + (size_t)(i % 200));
		CHECK(cross_ptrs[i] && in_segment(cross_ptrs[i]), "after cross-thread frees %d", i);
	}
	for (int i = 0; i < 4096; i++)
		free(cross_ptrs[i]);

	/* realloc growth keeps the contents, from small to large. */
	unsigned char *r = NULL;
	size_t have = 0;
	for (size_t n = 8; n <= (size_t)1 << 20; n = n * 3 / 2 + 8) {
		r = realloc(r, n);
		CHECK(r != NULL && in_segment(r), "realloc to %zu", n);
		if (!r)
			break;
		size_t bad = 0;
		for (size_t i = 0; i < have; i++)
			bad += r[i] != (unsigned char)(i * 7);
		CHECK(bad == 0, "realloc to %zu lost %zu bytes", n, bad);
		for (size_t i = have; i < n; i++)
			r[i] = (unsigned char)(i * 7);
		have = n;
		CHECK(malloc_usable_size(r) >= n, "usable %zu < %zu", malloc_usable_size(r), n);
	}
	r = realloc(r, 10); /* shrink */
	CHECK(r != NULL && r[9] == 9 * 7, "realloc shrink");
	CHECK(realloc(r, 0) == NULL, "realloc to 0 frees");

	/* calloc zeroes reused memory. */
	for (int i = 0; i < 4; i++) {
		unsigned char *c = malloc(200);
		memset(c, 0xff, 200);
		free(c);
		c = calloc(25, 8);
		int nz = 0;
		for (int k = 0; k < 200; k++)
			nz += c[k] != 0;
		CHECK(nz == 0, "calloc: %d bytes not zero", nz);
		free(c);
	}
	volatile size_t huge = SIZE_MAX / 2;
	CHECK(calloc(huge, 4) == NULL, "calloc overflow");

	/* Aligned forms. */
	size_t aligns[] = {16, 32, 64, 256, 1024, 4096, 16384, 65536};
	for (size_t k = 0; k < sizeof aligns / sizeof aligns[0]; k++) {
		size_t a = aligns[k];
		size_t sizes[] = {1, 24, 100, 3000, 5000, 70000};
		for (size_t j = 0; j < 6; j++) {
			void *p = NULL;
			int rc = posix_memalign(&p, a, sizes[j]);
			CHECK(rc == 0 && p && (uintptr_t)p % a == 0 && in_segment(p), "posix_memalign(%zu, %zu): %d %p", a,
			      sizes[j], rc, p);
			if (p) {
				memset(p, 1, sizes[j]);
				CHECK(malloc_usable_size(p) >= sizes[j], "usable of aligned %zu", a);
			}
			void *q = aligned_alloc(a, sizes[j]);
			void *m = memalign(a, sizes[j]);
			CHECK(q && (uintptr_t)q % a == 0 && m && (uintptr_t)m % a == 0, "aligned_alloc/memalign %zu", a);
			free(p);
			free(q);
			free(m);
		}
	}
	void *v = valloc(10);
	CHECK(v && (uintptr_t)v % 4096 == 0, "valloc");
	free(v);
	void *bad = NULL;
	CHECK(posix_memalign(&bad, 24, 10) == EINVAL, "posix_memalign of a bad alignment");
	free(malloc(0));
	shmem_barrier_all();
}

/* The layout the C library reads is the runtime's: the arena's header
 * and a span of this PE's shared heap, checked against the generated
 * format. */
static void test_format(void)
{
	char *p = malloc(40);
	/* A small block's span header (struct shmemi_small_span, from
	 * the Go type) lies below the slot, in the same 32 KiB span, on a
	 * 64-byte colour of the span's first page: its class word says
	 * SPAN and the 48-byte class, its owner word a handle. */
	uintptr_t page = (uintptr_t)p & ~(uintptr_t)((1 << SHMEMI_SMALL_PAGE_SHIFT) - 1);
	int found = 0;
	for (int k = 0; k < 1 << (SHMEMI_SMALL_SPAN_SHIFT - SHMEMI_SMALL_PAGE_SHIFT) && !found; k++) {
		uintptr_t pg = page - ((uintptr_t)k << SHMEMI_SMALL_PAGE_SHIFT);
		for (uintptr_t s = pg; s < pg + 16 * SHMEMI_SMALL_COLOUR_STEP && s < (uintptr_t)p; s += SHMEMI_SMALL_COLOUR_STEP) {
			struct shmemi_small_span *sp = (struct shmemi_small_span *)s;
			if ((sp->class & ~(uint64_t)0xffffffff) == SHMEMI_SMALL_SPAN_MAGIC && (sp->class & 0xff) == 2 /* the 48-byte class */ &&
			    sp->used >= 1 && sp->owner >> 32 != 0) {
				found = 1;
				break;
			}
		}
	}
	CHECK(found, "no span header of the 48-byte class below %p", (void *)p);
	free(p);
}

static void test_full(const char *hold)
{
	const char *mode = getenv("SYMHEAP_SHARED_MALLOC");
	int strict = mode && strcmp(mode, "strict") == 0;
	void *blocks[4096];
	int n = 0, outside = 0, nulls = 0;
	for (; n < 4096; n++) {
		blocks[n] = malloc(64 << 10);
		if (blocks[n] == NULL) {
			nulls++;
			break;
		}
		if (!in_segment(blocks[n])) {
			outside++;
			n++;
			break;
		}
	}
	if (strict) {
		CHECK(nulls == 1 && errno == ENOMEM, "strict: malloc did not fail (%d blocks)", n);
	} else {
		CHECK(outside == 1, "the full arena's fallback: %d blocks, none outside the segment", n);
	}
	/* With a file name: wait (30 s at most) until it exists, while
	 * symheap stat looks at the fallbacks counted. */
	shmem_barrier_all();
	for (int i = 0; hold != NULL && i < 3000 && access(hold, F_OK) != 0; i++)
		usleep(10000);
	for (int i = 0; i < n; i++)
		free(blocks[i]);
	/* Room again after the frees. */
	void *p = malloc(64 << 10);
	CHECK(p && in_segment(p), "no room after freeing a full arena");
	free(p);
	shmem_barrier_all();
}

static void test_off(void)
{
	void *p = malloc(100);
	CHECK(p && !in_segment(p), "malloc with the switch off lies in the segment");
	free(p);
}

int main(int argc, char **argv)
{
	shmem_init();
	sym_anchor = shmem_malloc(sizeof(long));
	if (argc > 1 && strcmp(argv[1], "full") == 0) {
		test_full(argc > 2 ? argv[2] : NULL);
		DONE("m_malloc full");
	}
	if (argc > 1 && strcmp(argv[1], "off") == 0) {
		test_off();
		DONE("m_malloc off");
	}
	test_shared();
	test_format();
	/* stdio's buffer lives in the shared heap: printing after
	 * shmem_finalize (in DONE) still works. */
	DONE("m_malloc");
}
