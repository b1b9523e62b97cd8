/* n_refuse.c - what the C library does not run across nodes is refused
 * with one message (run.sh's nodes group): an active set of PEs 0, 2, ...
 * on a job of several nodes, whose barrier works over the node's shared
 * memory only. On one node it passes. */
#include <stdio.h>
#include <shmem.h>

static long pSync[SHMEM_BARRIER_SYNC_SIZE];

int main(void)
{
	for (int i = 0; i < SHMEM_BARRIER_SYNC_SIZE; i++)
		pSync[i] = SHMEM_SYNC_VALUE;
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	shmem_barrier_all();
	if (me % 2 == 0)
		shmem_barrier(0, 1, (n + 1) / 2, pSync);
	shmem_barrier_all();
	if (me == 0)
		printf("n_refuse: %d PEs: the strided active set ran\n", n);
	shmem_finalize();
	return 0;
}
