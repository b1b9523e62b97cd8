/*
 * smalloc.c - malloc/free speed of the allocator the process has: glibc,
 * an LD_PRELOADed one (jemalloc, mimalloc), or symheap's shared malloc
 * (SYMHEAP_SHARED_MALLOC=1: capi/smalloc.c). run.sh runs it in
 * alternating rounds and writes docs/bench/shared-malloc.md's table.
 *
 *   smalloc [ITERS]   prints one line a test: TEST THREADS NS-PER-PAIR
 *
 * Tests (sizes 16 to 1024 bytes, in a fixed pseudo-random order):
 *   pair    malloc then free of one block, again and again (one thread)
 *   batch   malloc 256 blocks, then free them, again and again
 *   batchT  batch in T threads at once (T = 2, 4): each thread's own
 *           blocks; ns per pair per thread, wall clock
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <shmem.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NSIZES 4096
static size_t sizes[NSIZES];
static long iters = 2000000;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static void pairs(long n)
{
	for (long i = 0; i < n; i++) {
		char *p = malloc(sizes[i & (NSIZES - 1)]);
		*(volatile char *)p = 1;
		free(p);
	}
}

static void *batch(void *arg)
{
	long n = (long)arg;
	void *keep[256];
	for (long i = 0; i < n; i += 256) {
		for (int k = 0; k < 256; k++) {
			keep[k] = malloc(sizes[(i + k) & (NSIZES - 1)]);
			*(volatile char *)keep[k] = 1;
		}
		for (int k = 0; k < 256; k++)
			free(keep[k]);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	shmem_init();
	if (argc > 1)
		iters = atol(argv[1]);
	uint64_t x = 88172645463325252ull;
	for (int i = 0; i < NSIZES; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		sizes[i] = 16 + x % (1024 - 16 + 1);
	}
	pairs(iters / 10); /* warm up: spans, caches */
	batch((void *)(iters / 10));
	double t = now();
	pairs(iters);
	printf("pair 1 %.2f\n", (now() - t) / iters);
	t = now();
	batch((void *)iters);
	printf("batch 1 %.2f\n", (now() - t) / iters);
	for (int nt = 2; nt <= 4; nt *= 2) {
		pthread_t th[4];
		t = now();
		for (int i = 0; i < nt; i++)
			pthread_create(&th[i], NULL, batch, (void *)iters);
		for (int i = 0; i < nt; i++)
			pthread_join(th[i], NULL);
		printf("batch %d %.2f\n", nt, (now() - t) / iters);
	}
	shmem_finalize();
	return 0;
}
