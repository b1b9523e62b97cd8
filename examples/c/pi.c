//go:build ignore

/*
 * pi.c - the C example (make demo-c): every PE integrates its share of
 * 4/(1+x^2) over [0, 1], the PEs add their shares with a reduction, count
 * the work done with an atomic on PE 0's static counter, and gather each
 * PE's share into PE 0's heap block with puts.
 *
 *   .bin/symcc -O2 -o pi_c examples/c/pi.c
 *   .bin/shrun -n 4 ./pi_c
 *
 * Like every C program, it runs on one node: the C library reaches only
 * the PEs of its node, and shmem_init refuses a job that a launcher
 * (mpirun, srun) spreads over several.
 */
#include <shmem.h>
#include <shmemx.h>
#include <stdio.h>

#define STEPS 10000000L

static long steps_done;    /* static data: the target of PE's atomics */
static double part, total; /* static data: the reduction's source and result */

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();

	/* Each PE's share, in its copy of a heap block on PE 0. */
	double *shares = shmem_calloc((size_t)n, sizeof(double));

	double h = 1.0 / STEPS, sum = 0;
	long mine = 0;
	for (long i = me; i < STEPS; i += n, mine++) {
		double x = h * ((double)i + 0.5);
		sum += 4.0 / (1.0 + x * x);
	}
	part = sum * h;

	shmem_long_atomic_add(&steps_done, mine, 0);    /* an AMO on static data */
	shmem_double_put(&shares[me], &part, 1, 0);     /* a put into the heap */
	shmem_double_sum_reduce(SHMEM_TEAM_WORLD, &total, &part, 1);
	shmem_barrier_all();

	if (me == 0) {
		for (int p = 0; p < n; p++)
			printf("PE %d computed %.12f\n", p, shares[p]);
		printf("pi ~ %.12f from %ld steps on %d PEs (%s mapping)\n", total, steps_done, n,
		       shmemx_same_address() ? "same-address" : "offset");
	}
	shmem_free(shares);
	shmem_finalize();
	return steps_done == STEPS || me != 0 ? 0 : 1;
}
