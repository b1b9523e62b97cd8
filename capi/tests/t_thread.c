/* t_thread.c - SHMEM_THREAD_MULTIPLE: threads of every PE make AMOs, puts,
 * gets and quiets at once, and take a distributed lock in turn. */
#include <pthread.h>
#include "check.h"

#define THREADS 4
#define ITERS 2000

static long counter;          /* PE 0's: every thread of every PE adds to it */
static long slots[THREADS * 8]; /* the right neighbour's: one slot per thread */
static long lock;
static long guarded;

/* lock_rounds: each thread's turns at the lock, 50 up to 16 PEs, then
 * fewer: a ticket lock hands over to one thread among the job's, which
 * on 256 PEs of two cores waits for the scheduler to run it. */
static int lock_rounds(int n) { return n <= 16 ? 50 : n <= 64 ? 12 : 2; }

struct arg {
	int t;
	int fails;
};

static void *work(void *p)
{
	struct arg *a = p;
	int me = shmem_my_pe(), n = shmem_n_pes(), right = (me + 1) % n;
	for (int i = 0; i < ITERS; i++) {
		shmem_long_atomic_inc(&counter, 0);
		long v = (long)me * 1000000 + a->t * ITERS + i;
		shmem_long_p(&slots[a->t], v, right);
		shmem_quiet();
		if (shmem_long_g(&slots[a->t], right) != v)
			a->fails++;
	}
	for (int i = 0; i < lock_rounds(n); i++) {
		shmem_set_lock(&lock);
		long g = shmem_long_g(&guarded, 0);
		shmem_long_p(&guarded, g + 1, 0);
		shmem_clear_lock(&lock);
	}
	return NULL;
}

int main(void)
{
	int provided;
	shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided);
	CHECK(provided == SHMEM_THREAD_MULTIPLE, "provided %d", provided);
	int n = shmem_n_pes();
	pthread_t th[THREADS];
	struct arg args[THREADS];
	for (int t = 0; t < THREADS; t++) {
		args[t] = (struct arg){t, 0};
		pthread_create(&th[t], NULL, work, &args[t]);
	}
	for (int t = 0; t < THREADS; t++) {
		pthread_join(th[t], NULL);
		CHECK(args[t].fails == 0, "thread %d read back %d wrong values", t, args[t].fails);
	}
	shmem_barrier_all();
	if (shmem_my_pe() == 0) {
		CHECK(counter == (long)n * THREADS * ITERS, "counter %ld, want %ld", counter, (long)n * THREADS * ITERS);
		CHECK(guarded == (long)n * THREADS * lock_rounds(n), "guarded %ld, want %ld", guarded,
		      (long)n * THREADS * lock_rounds(n));
	}
	DONE("t_thread");
}
