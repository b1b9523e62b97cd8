/* t_sync.c - point-to-point synchronisation (wait_until, test and their
 * _all/_any/_some and vector forms, the deprecated shmem_wait), signals,
 * distributed locks on static data, and shmem_sync in its two forms. */
#include "check.h"
#include <unistd.h>

static long lock;           /* a lock in .bss */
static long critical;       /* guarded by lock, on PE 0 */
static int flags[MAX_PES];  /* one per PE */
static long token;

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	int right = (me + 1) % n;

	/* A token passed round the ring with puts and wait_until. */
	if (me == 0)
		shmem_long_p(&token, 1, right);
	shmem_long_wait_until(&token, SHMEM_CMP_GE, 1);
	if (me != 0)
		shmem_long_p(&token, token + 1, right);
	else
		CHECK(token == n, "token came back as %ld, want %d", token, n);
	shmem_barrier_all();

	/* wait_until_all / any / some on flags set by every PE. */
	for (int p = 0; p < n; p++)
		shmem_int_atomic_set(&flags[me], 0, p);
	shmem_barrier_all();
	for (int p = 0; p < n; p++)
		shmem_int_p(&flags[me], me + 1, p);
	shmem_int_wait_until_all(flags, (size_t)n, NULL, SHMEM_CMP_NE, 0);
	for (int p = 0; p < n; p++)
		CHECK(flags[p] == p + 1, "flags[%d] = %d", p, flags[p]);
	size_t idx = shmem_int_wait_until_any(flags, (size_t)n, NULL, SHMEM_CMP_GT, 0);
	CHECK(idx < (size_t)n, "wait_until_any gave %zu", idx);
	static size_t ind[MAX_PES];
	size_t cnt = shmem_int_wait_until_some(flags, (size_t)n, ind, NULL, SHMEM_CMP_GE, 1);
	CHECK(cnt == (size_t)n, "wait_until_some found %zu", cnt);
	static int status[MAX_PES];
	status[0] = 1; /* skip element 0 */
	CHECK(shmem_int_test_any(flags, (size_t)n, status, SHMEM_CMP_EQ, 1) == SIZE_MAX,
	      "test_any saw the masked element");
	static int want[MAX_PES];
	for (int p = 0; p < n; p++)
		want[p] = p + 1;
	shmem_int_wait_until_all_vector(flags, (size_t)n, NULL, SHMEM_CMP_EQ, want);
	CHECK(shmem_int_test_all_vector(flags, (size_t)n, NULL, SHMEM_CMP_EQ, want), "test_all_vector");
	CHECK(shmem_int_test_some_vector(flags, (size_t)n, ind, NULL, SHMEM_CMP_EQ, want) == (size_t)n,
	      "test_some_vector");
	CHECK(shmem_int_wait_until_any_vector(flags, (size_t)n, NULL, SHMEM_CMP_EQ, want) < (size_t)n,
	      "wait_until_any_vector");
	CHECK(shmem_int_test(&flags[me], SHMEM_CMP_EQ, me + 1), "test");
	CHECK(!shmem_test(&flags[me], SHMEM_CMP_LT, me + 1), "generic test");
	CHECK(shmem_int_test_all(flags, (size_t)n, NULL, SHMEM_CMP_GT, 0), "test_all");
	CHECK(shmem_int_test_some(flags, (size_t)n, ind, NULL, SHMEM_CMP_GT, n) == 0, "test_some none");
	shmem_int_wait_until_all(flags, 0, NULL, SHMEM_CMP_EQ, 5); /* nothing to wait for: returns */
	shmem_barrier_all();

	/* A wait that must sleep: PE 0 waits, the last PE puts after 100 ms
	 * (the waiter goes through the futex path and is woken by the put). */
	long *hv = shmem_calloc(1, sizeof(long));
	shmem_barrier_all();
	if (me == n - 1) {
		usleep(100000);
		shmem_long_p(hv, 42, 0);
	}
	if (me == 0) {
		shmem_wait_until(hv, SHMEM_CMP_EQ, 42L); /* generic */
		CHECK(*hv == 42, "woken with %ld", *hv);
	}
	shmem_barrier_all();
	/* The deprecated shmem_wait: wait while the value is unchanged. */
	if (me == n - 1) {
		usleep(20000);
		shmem_long_atomic_inc(hv, 0);
	}
	if (me == 0) {
		shmem_long_wait(hv, 42);
		CHECK(*hv == 43, "shmem_long_wait gave %ld", *hv);
		shmem_wait(hv, 42);
	}
	shmem_barrier_all();

	/* Locks on static data: a critical section with a read-modify-write
	 * through get and put that would lose updates without the lock. */
	const int rounds = 50;
	for (int i = 0; i < rounds; i++) {
		shmem_set_lock(&lock);
		long v = shmem_long_g(&critical, 0);
		shmem_long_p(&critical, v + 1, 0);
		shmem_clear_lock(&lock);
	}
	int got = 0;
	for (int i = 0; i < rounds; i++) {
		if (shmem_test_lock(&lock) == 0) {
			long v = shmem_long_g(&critical, 0);
			shmem_long_p(&critical, v + 1, 0);
			shmem_clear_lock(&lock);
			got++;
		}
	}
	shmem_barrier_all();
	long total = 0;
	static long sum_src, sum_dst;
	sum_src = got;
	shmem_long_sum_reduce(SHMEM_TEAM_WORLD, &sum_dst, &sum_src, 1);
	total = sum_dst;
	if (me == 0)
		CHECK(critical == (long)n * rounds + total, "critical %ld, want %ld", critical, (long)n * rounds + total);
	CHECK(shmem_long_g(&lock, 0) == 0, "the lock word is not back to zero: %lx", shmem_long_g(&lock, 0));
	shmem_barrier_all();

	/* Barriers make the puts before them visible, also to a PE that went
	 * to sleep in the barrier (one PE is late in some rounds): each PE
	 * puts the round into its right neighbour's slot, then checks its
	 * own after the barrier. */
	static long ring[2];
	for (int it = 1; it <= 300; it++) {
		if (it % 100 == 7 && me == it / 100 % n)
			usleep(30000);
		shmem_long_p(&ring[it & 1], (long)it * 10 + me, right);
		shmem_barrier_all();
		long want_v = (long)it * 10 + (me + n - 1) % n;
		CHECK(ring[it & 1] == want_v, "barrier round %d: slot %ld, want %ld", it, ring[it & 1], want_v);
	}
	shmem_barrier_all();

	/* shmem_sync in both forms OpenSHMEM 1.5 has: shmem_sync(team) (C11)
	 * and the deprecated shmem_sync(PE_start, logPE_stride, PE_size,
	 * pSync); and the deprecated C function shmem_wait_until on a long.
	 * Each sync orders the put of the round before it (symheap's puts
	 * are complete when they return). */
	static long psync_s[SHMEM_BARRIER_SYNC_SIZE];
	for (int i = 0; i < SHMEM_BARRIER_SYNC_SIZE; i++)
		psync_s[i] = SHMEM_SYNC_VALUE;
	shmem_barrier_all();
	for (int it = 1; it <= 20; it++) {
		shmem_long_p(&ring[it & 1], (long)it * 10 + me, right);
		if (it % 2)
			CHECK(shmem_sync(SHMEM_TEAM_WORLD) == 0, "shmem_sync(SHMEM_TEAM_WORLD)");
		else
			shmem_sync(0, 0, n, psync_s);
		long want_v = (long)it * 10 + (me + n - 1) % n;
		CHECK(ring[it & 1] == want_v, "sync round %d: slot %ld, want %ld", it, ring[it & 1], want_v);
	}
	(shmem_wait_until)(&ring[0], SHMEM_CMP_NE, 0L);
	shmem_barrier_all();
	shmem_free(hv);
	DONE("t_sync");
}
