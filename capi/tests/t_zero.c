/* t_zero.c - calls of no elements with null pointers, which OpenSHMEM
 * 1.5 supports ("len is 0, pointer is null: supported", its table of
 * undefined behaviour): every routine that takes a pointer and a count,
 * RMA (typed, sized, mem, _nbi, strided, blocked, with a context), put
 * with signal (the signal still goes), the team collectives over the
 * world and over a split team, the active-set collectives, and the
 * point-to-point waits on empty sets. The collectives still synchronise:
 * a value put before one is seen after it. */
#include "check.h"

static long flag;
static uint64_t sig;
static long psync[8][SHMEM_SYNC_SIZE];
static long lwrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE];
static int iwrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE];

/* the collectives of one team, none of whose members has anything. */
static void team_colls(shmem_team_t t)
{
	CHECK(shmem_long_broadcast(t, NULL, NULL, 0, 0) == 0, "broadcast");
	CHECK(shmem_broadcastmem(t, NULL, NULL, 0, 0) == 0, "broadcastmem");
	CHECK(shmem_broadcast(t, (long *)NULL, (long *)NULL, 0, 0) == 0, "generic broadcast");
	CHECK(shmem_long_collect(t, NULL, NULL, 0) == 0, "collect");
	CHECK(shmem_collectmem(t, NULL, NULL, 0) == 0, "collectmem");
	CHECK(shmem_long_fcollect(t, NULL, NULL, 0) == 0, "fcollect");
	CHECK(shmem_fcollectmem(t, NULL, NULL, 0) == 0, "fcollectmem");
	CHECK(shmem_long_alltoall(t, NULL, NULL, 0) == 0, "alltoall");
	CHECK(shmem_alltoallmem(t, NULL, NULL, 0) == 0, "alltoallmem");
	CHECK(shmem_long_alltoalls(t, NULL, NULL, 1, 1, 0) == 0, "alltoalls");
	CHECK(shmem_alltoallsmem(t, NULL, NULL, 1, 1, 0) == 0, "alltoallsmem");
	CHECK(shmem_long_sum_reduce(t, NULL, NULL, 0) == 0, "sum_reduce");
	CHECK(shmem_long_max_reduce(t, NULL, NULL, 0) == 0, "max_reduce");
	CHECK(shmem_ulong_and_reduce(t, NULL, NULL, 0) == 0, "and_reduce");
	CHECK(shmem_double_prod_reduce(t, NULL, NULL, 0) == 0, "prod_reduce");
	CHECK(shmem_sum_reduce(t, (int *)NULL, (int *)NULL, 0) == 0, "generic sum_reduce");
}

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	int right = (me + 1) % n;
	for (int i = 0; i < 8; i++)
		for (int j = 0; j < SHMEM_SYNC_SIZE; j++)
			psync[i][j] = SHMEM_SYNC_VALUE;
	shmem_barrier_all();

	/* RMA. */
	shmem_putmem(NULL, NULL, 0, right);
	shmem_getmem(NULL, NULL, 0, right);
	shmem_putmem_nbi(NULL, NULL, 0, right);
	shmem_getmem_nbi(NULL, NULL, 0, right);
	shmem_ctx_putmem(SHMEM_CTX_DEFAULT, NULL, NULL, 0, right);
	shmem_ctx_getmem_nbi(SHMEM_CTX_DEFAULT, NULL, NULL, 0, right);
	shmem_long_put(NULL, NULL, 0, right);
	shmem_long_get(NULL, NULL, 0, right);
	shmem_long_put_nbi(NULL, NULL, 0, right);
	shmem_long_get_nbi(NULL, NULL, 0, right);
	shmem_double_put(NULL, NULL, 0, right);
	shmem_put((long *)NULL, (long *)NULL, 0, right);
	shmem_get(SHMEM_CTX_DEFAULT, (int *)NULL, (int *)NULL, 0, right);
	shmem_put64(NULL, NULL, 0, right);
	shmem_get32(NULL, NULL, 0, right);
	shmem_put128_nbi(NULL, NULL, 0, right);
	shmem_long_iput(NULL, NULL, 1, 1, 0, right);
	shmem_long_iget(NULL, NULL, 1, 1, 0, right);
	shmem_iput64(NULL, NULL, 1, 1, 0, right);
	shmem_iget16(NULL, NULL, 1, 1, 0, right);
	shmem_long_ibput(NULL, NULL, 1, 1, 1, 0, right);
	shmem_long_ibget(NULL, NULL, 1, 1, 1, 0, right);

	/* Put with signal: no data, and the signal. */
	shmem_long_put_signal(NULL, NULL, 0, &sig, 1, SHMEM_SIGNAL_ADD, right);
	shmem_putmem_signal_nbi(NULL, NULL, 0, &sig, 1, SHMEM_SIGNAL_ADD, right);
	shmem_quiet();
	CHECK(shmem_signal_wait_until(&sig, SHMEM_CMP_EQ, 2) == 2, "the signals of empty puts");

	/* Waits on empty sets. */
	shmem_long_wait_until_all(NULL, 0, NULL, SHMEM_CMP_EQ, 0);
	shmem_long_wait_until_all_vector(NULL, 0, NULL, SHMEM_CMP_EQ, NULL);
	CHECK(shmem_long_wait_until_any(NULL, 0, NULL, SHMEM_CMP_EQ, 0) == SIZE_MAX, "wait_until_any");
	CHECK(shmem_long_wait_until_some(NULL, 0, NULL, NULL, SHMEM_CMP_EQ, 0) == 0, "wait_until_some");
	CHECK(shmem_long_test_all(NULL, 0, NULL, SHMEM_CMP_EQ, 0) == 1, "test_all");
	CHECK(shmem_long_test_any_vector(NULL, 0, NULL, SHMEM_CMP_EQ, NULL) == SIZE_MAX, "test_any_vector");
	CHECK(shmem_long_test_some_vector(NULL, 0, NULL, NULL, SHMEM_CMP_EQ, NULL) == 0, "test_some_vector");

	/* Team collectives over the world (through the post lines and the
	 * broadcast's tickets) and over a split team (two syncs). Each
	 * still synchronises: the flag the left neighbour put before the
	 * call is there after it. */
	shmem_barrier_all();
	flag = 0;
	shmem_barrier_all();
	shmem_long_p(&flag, 1, right);
	team_colls(SHMEM_TEAM_WORLD);
	CHECK(shmem_long_g(&flag, me) == 1, "the world's collectives of nothing did not synchronise");
	shmem_team_t half;
	int rc = shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, NULL, 0, &half);
	CHECK(rc == 0, "split_strided: %d", rc);
	if (half != SHMEM_TEAM_INVALID) {
		team_colls(half);
		shmem_team_destroy(half);
	}

	/* The active-set collectives of OpenSHMEM 1.4. */
	shmem_barrier_all();
	shmem_broadcast64(NULL, NULL, 0, 0, 0, 0, n, psync[0]);
	shmem_collect32(NULL, NULL, 0, 0, 0, n, psync[1]);
	shmem_fcollect64(NULL, NULL, 0, 0, 0, n, psync[2]);
	shmem_alltoall64(NULL, NULL, 0, 0, 0, n, psync[3]);
	shmem_alltoalls32(NULL, NULL, 1, 1, 0, 0, 0, n, psync[4]);
	shmem_long_sum_to_all(NULL, NULL, 0, 0, 0, n, lwrk, psync[5]);
	shmem_int_xor_to_all(NULL, NULL, 0, 0, 0, n, iwrk, psync[6]);
	DONE("t_zero");
}
