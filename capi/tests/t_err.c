/* t_err.c CASE - one misuse per run; run.sh checks the exit status and
 * the message. */
#include <shmem.h>
#include <shmemx.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

static long x;
static long lock;

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "";
	if (strcmp(c, "noinit") == 0) {
		shmem_long_p(&x, 1, 0);
		return 0;
	}
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	long local = 0;
	if (strcmp(c, "pe") == 0 && me == 0)
		shmem_long_p(&x, 1, n + 5);
	if (strcmp(c, "ctxpe") == 0) {
		/* A context of a team of one: its only PE is rank 0. */
		shmem_team_t t;
		shmem_ctx_t ctx;
		shmem_team_split_strided(SHMEM_TEAM_WORLD, me, 1, 1, NULL, 0, &t);
		shmem_team_create_ctx(t, 0, &ctx);
		if (me == 0)
			shmem_ctx_long_p(ctx, &x, 1, 1);
	}
	if (strcmp(c, "notsym") == 0 && me == 0)
		shmem_long_put(&local, &local, 1, 1);
	if (strcmp(c, "align") == 0 && me == 0)
		shmem_int_atomic_add((int *)((char *)&x + 1), 1, 1);
	if (strcmp(c, "clearlock") == 0 && me == 0)
		shmem_clear_lock(&lock);
	if (strcmp(c, "relock") == 0 && me == 0) {
		shmem_set_lock(&lock);
		shmem_set_lock(&lock);
	}
	if (strcmp(c, "regput") == 0 && me == 0) {
		/* a registration given back twice */
		shmemx_reg_t r;
		if (shmemx_reg_get(&x, sizeof x, &r) == 0) {
			shmemx_reg_put(r);
			shmemx_reg_put(r);
		}
	}
	if (strcmp(c, "regoff") == 0 && me == 0) {
		/* the monitor off: no cache (shmemx_reg_get says why, returns 1) */
		shmemx_reg_t r;
		if (shmemx_reg_get(&x, sizeof x, &r) != 0)
			shmem_global_exit(4);
	}
	if (strcmp(c, "cmp") == 0 && me == 0)
		shmem_long_wait_until(&x, 42, 0);
	if (strcmp(c, "toobig") == 0) {
		char *h = shmem_malloc(64);
		if (me == 0) {
			size_t n = (size_t)64 << 20; /* beyond the 32 MiB heap */
			shmem_putmem(h, malloc(n), n, 1);
		}
	}
	if (strcmp(c, "doublefree") == 0) {
		/* The second free finds the block in the cache of freed blocks. */
		char *h = shmem_malloc(64);
		shmem_free(h);
		shmem_free(h);
	}
	if (strcmp(c, "diverge") == 0) {
		/* Every PE frees a different block (the C library's own exchange). */
		char *a = shmem_malloc(64), *b = shmem_malloc(64);
		shmem_free(me == 0 ? a : b);
	}
	if (strcmp(c, "bcastsize") == 0 || strcmp(c, "reducesize") == 0 || strcmp(c, "fcollectsize") == 0 ||
	    strcmp(c, "alltoallsize") == 0 || strcmp(c, "teamalltoallsize") == 0) {
		/* PE 1 passes 1000 elements where the others pass 1: the calls
		 * take different paths and would wait for each other for ever,
		 * or meet the next call's steps, or (an alltoall, a 2-PE
		 * fcollect) take the same steps and copy each other's bytes as
		 * if they agreed. teamalltoallsize: on a team split from the
		 * world (every PE, reversed), whose syncs are the runtime's. */
		size_t k = me == 1 ? 1000 : 1;
		long *s = shmem_calloc(1000, sizeof(long)), *d = shmem_calloc(1000 * (size_t)n, sizeof(long));
		shmem_team_t team = SHMEM_TEAM_WORLD;
		if (c[0] == 't' && shmem_team_split_strided(SHMEM_TEAM_WORLD, n - 1, -1, n, NULL, 0, &team) != 0)
			shmem_global_exit(2);
		if (c[0] == 'b')
			shmem_long_broadcast(team, d, s, k, 0);
		else if (c[0] == 'r')
			shmem_long_sum_reduce(team, d, s, k);
		else if (c[0] == 'a' || c[0] == 't')
			shmem_long_alltoall(team, d, s, k);
		else
			shmem_long_fcollect(team, d, s, k);
	}
	if (strcmp(c, "mallocbarrier") == 0 && me == 0) {
		/* PE 0 alone allocates; the others go on to the barrier below. */
		(void)shmem_malloc(64);
	}
	if (strcmp(c, "gexit") == 0) {
		/* Buffered stdout (a pipe) must reach the launcher. */
		printf("PE %d: flushed before the exit\n", me);
		shmem_barrier_all(); /* every PE has printed */
		if (me == 1)
			shmem_global_exit(3);
		shmem_barrier_all();
		sleep(10);
	}
	if (strcmp(c, "gexit0") == 0 && me == n - 1)
		shmem_global_exit(0);
	if (strcmp(c, "reinit") == 0) {
		/* OpenSHMEM 1.6 allows it; symheap says it does not. */
		shmem_finalize();
		shmem_init();
		return 0;
	}
	if (strcmp(c, "nofinalize") == 0)
		return 0; /* exits without shmem_finalize: left at exit */
	shmem_barrier_all();
	shmem_finalize();
	return 0;
}
