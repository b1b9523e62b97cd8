/* n_lat.c - the latency of a C PE to a PE of its node and to one of
 * another node (docs/multinode.md, "C programs"): an 8-byte put + quiet,
 * get (of the heap and of static data) and fetch-add from PE 0 to PE 1
 * and to PE n/2, ITERS times each (argument 1, 20000 by default), after
 * a tenth as many to warm up. Not a test (it measures time): run by hand,
 *
 *	symcc -O2 -o lat capi/tests/n_lat.c && shrun --nodes 2 -n 2 ./lat
 */
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long sx; /* static data: symmetric too */

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void measure(long *x, int t, int iters)
{
	long v = 0;
	for (int i = 0; i < iters / 10; i++) {
		shmem_long_p(x, i, t);
		shmem_quiet();
		v += shmem_long_g(x, t);
	}
	double t0 = now_us();
	for (int i = 0; i < iters; i++) {
		shmem_long_p(x, i, t);
		shmem_quiet();
	}
	double t1 = now_us();
	for (int i = 0; i < iters; i++)
		v += shmem_long_g(x, t);
	double t2 = now_us();
	for (int i = 0; i < iters; i++)
		v += shmem_long_g(&sx, t);
	double t3 = now_us();
	for (int i = 0; i < iters; i++)
		v += shmem_long_atomic_fetch_add(x, 1, t);
	double t4 = now_us();
	printf("PE 0 -> PE %d (%s node): put 8 B + quiet %.3f us, get 8 B %.3f us (static data %.3f us), "
	       "fetch-add %.3f us (%d each; %ld)\n",
	       t, shmem_ptr(x, t) == NULL ? "another" : "the same", (t1 - t0) / iters, (t2 - t1) / iters,
	       (t3 - t2) / iters, (t4 - t3) / iters, iters, v & 1);
}

int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 20000;
	shmem_init();
	int n = shmem_n_pes();
	long *x = shmem_calloc(1, sizeof(long));
	shmem_barrier_all();
	if (shmem_my_pe() == 0 && iters > 0) {
		if (n > 2)
			measure(x, 1, iters);
		if (n > 1)
			measure(x, n / 2, iters);
	}
	shmem_barrier_all();
	shmem_free(x);
	shmem_finalize();
	return 0;
}
