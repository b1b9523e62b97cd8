/*
 * m_mixed.c - the C half of the conformance pair of a job of Go and C PEs
 * (examples/mixed is the Go half, which makes the same calls in the same
 * order: read the two side by side). Run by capi/tests/mixed:
 *
 *   shrun -n 2 ./examples/mixed : -n 2 ./m_mixed
 *
 * With the argument "static" or "collect" it checks two refusals of the
 * library in a job with Go PEs: a put into a Go PE's copy of a static
 * variable (a C program's static data are symmetric among its C PEs only),
 * and shmem_collect (which the Go runtime has not) on the world team. Both
 * end the job with status 1 and a message saying so.
 */
#include <shmem.h>
#include <shmemx.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LANG_GO = 1, LANG_C = 2 };

static int me, n;
static long *lang; /* every PE's language, by rank */
static long static_word;

#define WANT(what, got, exp)                                                                                  \
	do {                                                                                                  \
		if ((got) != (exp)) {                                                                         \
			fprintf(stderr, "m_mixed: PE %d (c): %s: got %lld, want %lld\n", me, what, (long long)(got), \
				(long long)(exp));                                                            \
			shmem_global_exit(1);                                                                 \
		}                                                                                             \
	} while (0)

static void *must(void *p)
{
	if (p == NULL) {
		fprintf(stderr, "m_mixed: PE %d (c): a collective allocation failed\n", me);
		shmem_global_exit(1);
	}
	return p;
}

static int first(long l)
{
	for (int q = 0; q < n; q++)
		if (lang[q] == l)
			return q;
	return -1;
}

/* refusal is the job of the refusals: each PE's language in a symmetric
 * word, a barrier, then the bad call (the Go half waits in a second
 * barrier, which the job never completes). */
static void refusal(const char *what)
{
	long *mine = must(shmem_malloc(sizeof(long)));
	*mine = LANG_C;
	shmem_barrier_all();
	int g = -1;
	for (int q = 0; q < n && g < 0; q++)
		if (shmem_long_g(mine, q) != LANG_C)
			g = q;
	if (g >= 0 && strcmp(what, "static") == 0)
		shmem_long_p(&static_word, 1, g); /* the library ends the job here */
	else if (g >= 0)
		shmem_long_collect(SHMEM_TEAM_WORLD, mine, mine, 1); /* and here, before it looks at the arrays */
	fprintf(stderr, "m_mixed: PE %d (c): the library took the bad call\n", me);
	shmem_global_exit(1);
}

int main(int argc, char **argv)
{
	shmem_init();
	me = shmem_my_pe();
	n = shmem_n_pes();
	char what[128];

	if (argc > 1)
		refusal(argv[1]);

	/* 1. Every PE's language, by fcollect. */
	lang = must(shmem_malloc(sizeof(long) * (size_t)n));
	long *mine = must(shmem_malloc(sizeof(long)));
	*mine = LANG_C;
	shmem_long_fcollect(SHMEM_TEAM_WORLD, lang, mine, 1);
	int gopes = 0;
	for (int q = 0; q < n; q++)
		gopes += lang[q] == LANG_GO;

	/* 2. Symmetric offsets. */
	long *slots = must(shmem_calloc((size_t)n, sizeof(long)));
	for (int q = 0; q < n; q++)
		shmem_long_p(&slots[me], 1000 + me, q);
	shmem_barrier_all();
	for (int q = 0; q < n; q++)
		WANT("slot after the puts", slots[q], 1000 + q);

	/* 3-6. The world's collectives at each path's size. */
	enum { BIG = 20000 };
	long *src = must(shmem_malloc(sizeof(long) * BIG * (size_t)n));
	long *dst = must(shmem_malloc(sizeof(long) * BIG * (size_t)n));
	int ks[] = {3, 40, BIG};
	for (int ki = 0; ki < 3; ki++) {
		int k = ks[ki];
		int roots[] = {0, n - 1};
		for (int ri = 0; ri < 2; ri++) {
			int root = roots[ri];
			for (int i = 0; i < k; i++)
				src[i] = (long)root * 1000000 + k * 10 + i;
			shmem_long_broadcast(SHMEM_TEAM_WORLD, dst, src, (size_t)k, root);
			for (int i = 0; i < k; i++) {
				snprintf(what, sizeof what, "broadcast of %d from %d, [%d]", k, root, i);
				WANT(what, dst[i], (long)root * 1000000 + k * 10 + i);
			}
		}
		for (int i = 0; i < k; i++)
			src[i] = me * 7 + i;
		shmem_long_sum_reduce(SHMEM_TEAM_WORLD, dst, src, (size_t)k);
		for (int i = 0; i < k; i++) {
			snprintf(what, sizeof what, "sum of %d, [%d]", k, i);
			WANT(what, dst[i], 7L * n * (n - 1) / 2 + (long)n * i);
		}
	}
	double *fsrc = must(shmem_malloc(sizeof(double) * 40)), *fdst = must(shmem_malloc(sizeof(double) * 40));
	for (int i = 0; i < 40; i++)
		fsrc[i] = me + i / 2.0;
	shmem_double_max_reduce(SHMEM_TEAM_WORLD, fdst, fsrc, 40);
	for (int i = 0; i < 40; i++)
		WANT("max of doubles (twice)", 2 * fdst[i], 2 * (n - 1 + i / 2.0));
	int fk[] = {2, 3000};
	for (int ki = 0; ki < 2; ki++) {
		int k = fk[ki];
		for (int i = 0; i < k; i++)
			src[i] = (long)me * 100000 + i;
		shmem_long_fcollect(SHMEM_TEAM_WORLD, dst, src, (size_t)k);
		for (int q = 0; q < n; q++)
			for (int i = 0; i < k; i++) {
				snprintf(what, sizeof what, "fcollect of %d, PE %d's [%d]", k, q, i);
				WANT(what, dst[q * k + i], (long)q * 100000 + i);
			}
	}
	int ak[] = {1, 2000};
	for (int ki = 0; ki < 2; ki++) {
		int k = ak[ki];
		for (int j = 0; j < n; j++)
			for (int i = 0; i < k; i++)
				src[j * k + i] = (long)me * 1000000 + j * 1000 + i;
		shmem_long_alltoall(SHMEM_TEAM_WORLD, dst, src, (size_t)k);
		for (int j = 0; j < n; j++)
			for (int i = 0; i < k; i++) {
				snprintf(what, sizeof what, "alltoall of %d, from PE %d [%d]", k, j, i);
				WANT(what, dst[j * k + i], (long)j * 1000000 + me * 1000 + i);
			}
	}

	/* 7. A split team: the even ranks. */
	int size = (n + 1) / 2;
	shmem_team_t t;
	if (shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, size, NULL, 0, &t) != 0) {
		fprintf(stderr, "m_mixed: PE %d (c): the split failed\n", me);
		shmem_global_exit(1);
	}
	if (t != SHMEM_TEAM_INVALID) {
		int sk[] = {1, 100};
		for (int ki = 0; ki < 2; ki++) {
			int k = sk[ki];
			for (int i = 0; i < k; i++)
				src[i] = me + i;
			shmem_long_sum_reduce(t, dst, src, (size_t)k);
			for (int i = 0; i < k; i++) {
				snprintf(what, sizeof what, "split team's sum of %d, [%d]", k, i);
				WANT(what, dst[i], (long)size * (size - 1) + (long)size * i);
			}
		}
		int root = shmem_team_n_pes(t) - 1;
		for (int i = 0; i < 40; i++)
			src[i] = me * 10 + i;
		shmem_long_broadcast(t, dst, src, 40, root);
		WANT("split team's broadcast", dst[39], 2L * root * 10 + 39);
		shmem_team_sync(t);
		shmem_team_destroy(t);
	}

	/* 8. Atomics. */
	long *ctr = must(shmem_calloc(3, sizeof(long)));
	shmem_barrier_all();
	enum { ROUNDS = 50 };
	for (int r = 0; r < ROUNDS; r++)
		for (int q = 0; q < n; q++)
			(void)shmem_long_atomic_fetch_add(&ctr[0], 1, q);
	if (shmem_long_atomic_compare_swap(&ctr[1], 0, me + 1, 0) == 0)
		shmem_long_atomic_add(&ctr[2], 1, 0);
	shmem_barrier_all();
	WANT("counter after every PE's adds", ctr[0], (long)n * ROUNDS);
	WANT("compare-and-swap winners", shmem_long_atomic_fetch(&ctr[2], 0), 1);

	/* 9. A distributed lock. */
	long *lock = must(shmem_calloc(1, sizeof(long)));
	long *shared = must(shmem_calloc(1, sizeof(long)));
	enum { TURNS = 30 };
	for (int r = 0; r < TURNS; r++) {
		shmem_set_lock(lock);
		long v = shmem_long_g(shared, 0);
		shmem_long_p(shared, v + 1, 0);
		shmem_quiet();
		shmem_clear_lock(lock);
	}
	shmem_barrier_all();
	WANT("the locked counter", shmem_long_g(shared, 0), (long)n * TURNS);

	/* 10. Wait-until and signal around the ring. */
	long *flag = must(shmem_calloc(1, sizeof(long)));
	long *data = must(shmem_calloc(2, sizeof(long)));
	int right = (me + 1) % n, left = (me + n - 1) % n;
	for (long r = 0; r < 20; r++) {
		long d[2] = {r, me};
		shmem_long_put(data, d, 2, right);
		shmem_fence();
		shmem_long_atomic_set(flag, r + 1, right);
		shmem_long_wait_until(flag, SHMEM_CMP_GE, r + 1);
		WANT("ring data[0]", data[0], r);
		WANT("ring data[1]", data[1], left);
		shmem_barrier_all();
	}

	/* 11. The first Go PE's shared block, read and written in place by
	 * the first C PE. */
	long *addr = must(shmem_calloc(1, sizeof(long)));
	int shared_checked = 0;
	shmem_barrier_all();
	if (me == first(LANG_C) && *addr != 0) {
		long *blk = (long *)(uintptr_t)*addr;
		for (int i = 0; i < 1024; i++)
			WANT("the Go PE's shared block", blk[i], 3L * i);
		blk[1023] = -7;
		shared_checked = 1;
	}
	shmem_barrier_all();
	if (me == first(LANG_C) && !shared_checked && first(LANG_GO) >= 0 && shmemx_same_address()) {
		fprintf(stderr, "m_mixed: PE %d (c): no shared block came from the Go PE\n", me);
		shmem_global_exit(1);
	}

	/* 12. Every block back, in the Go half's order. */
	long *blocks[] = {addr, data, flag, shared, lock, ctr, dst, src, slots, mine, lang};
	for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++)
		shmem_free(blocks[i]);
	shmem_free(fdst);
	shmem_free(fsrc);
	shmem_barrier_all();
	printf("PE %d (c): mixed conformance passed (%d PEs: %d Go, %d C)%s\n", me, n, gopes, n - gopes,
	       shared_checked ? ", read the Go PE's shared block" : "");
	shmem_finalize();
	return 0;
}
