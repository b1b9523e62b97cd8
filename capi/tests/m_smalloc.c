/*
 * m_smalloc.c - the C half of a job of one Go and one C PE that free each
 * other's shared blocks (capi/tests/mixed/smallocpe is the Go half: read
 * the two side by side). Run by capi/tests/mixed (TestSharedMalloc) with
 * SYMHEAP_SHARED_MALLOC=1: this PE's malloc is the shared malloc
 * (capi/smalloc.c). The Go PE's small block is freed by the span format's
 * remote free, its large one through the runtime; the Go PE frees this
 * PE's small block on its span's stack and its large one on the arena's
 * stack, from which this PE takes it back.
 */
#include <shmem.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { GO_SMALL = 100, GO_LARGE = 100000, C_SMALL = 48, C_LARGE = 2000000 };

static int me;

#define WANT(cond, ...)                                                          \
	do {                                                                     \
		if (!(cond)) {                                                   \
			fprintf(stderr, "m_smalloc: PE %d (c): ", me);           \
			fprintf(stderr, __VA_ARGS__);                            \
			fprintf(stderr, "\n");                                   \
			shmem_global_exit(1);                                    \
		}                                                                \
	} while (0)

int main(void)
{
	shmem_init();
	me = shmem_my_pe();
	WANT(shmem_n_pes() == 2, "run with one Go PE (%d PEs)", shmem_n_pes());
	int other = 1 - me;
	long *words = shmem_malloc(8 * sizeof(long)); /* the Go PE's Malloc[int64](pe, 8) */
	WANT(words != NULL, "shmem_malloc");
	unsigned char *s = malloc(C_SMALL), *l = malloc(C_LARGE);
	WANT(s && l, "malloc");
	memset(s, 0xC1, C_SMALL);
	memset(l, 0xC2, C_LARGE);
	shmem_long_p(&words[2], (long)(uintptr_t)s, other);
	shmem_long_p(&words[3], (long)(uintptr_t)l, other);
	shmem_barrier_all();
	unsigned char *gs = (unsigned char *)(uintptr_t)words[0], *gl = (unsigned char *)(uintptr_t)words[1];
	for (int i = 0; i < GO_SMALL; i++)
		WANT(gs[i] == 0xA1, "the Go PE's small block: byte %d is %#x", i, gs[i]);
	for (int i = 0; i < GO_LARGE; i++)
		WANT(gl[i] == 0xA2, "the Go PE's large block: byte %d is %#x", i, gl[i]);
	free(gs);
	free(gl);
	shmem_barrier_all();
	/* The Go PE freed this PE's large block onto the arena's stack: the
	 * next block taken from the arena finds its pages free again (first
	 * fit). Spans (8 pages each) may be taken first and land on the run's
	 * first pages: a thread's first block of a size class takes one, and
	 * the Go runtime starts threads when it likes (more on a busy machine);
	 * two are taken here on a quiet one. So the freed block is large (488
	 * pages) and the block asked for here half of it: it lies inside the
	 * freed run unless 30 spans came first. */
	unsigned char *l2 = malloc(C_LARGE / 2);
	WANT(l2 >= l && l2 + C_LARGE / 2 <= l + C_LARGE,
	     "the large block the Go PE freed was not reused (%p, then %p)", (void *)l, (void *)l2);
	free(l2);
	printf("m_smalloc: PE %d (c): read and freed the Go PE's SharedAlloc blocks; reused the block it freed\n", me);
	shmem_free(words);
	shmem_finalize();
	return 0;
}
