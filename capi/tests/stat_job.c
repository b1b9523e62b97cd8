/* stat_job.c - a C job that symheap stat looks at (run.sh): every PE does
 * 1000 puts, 1000 gets and 1000 atomics to the next PE, then waits until
 * the file argv[1] exists (or 60 s pass) before it finalizes. */
#include <shmem.h>
#include <stdio.h>
#include <unistd.h>

static long target[3];

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: stat_job FILE\n");
		return 2;
	}
	shmem_init();
	int next = (shmem_my_pe() + 1) % shmem_n_pes();
	for (int i = 0; i < 1000; i++) {
		shmem_long_p(&target[0], i, next);
		(void)shmem_long_g(&target[1], next);
		shmem_long_atomic_inc(&target[2], next);
	}
	shmem_barrier_all();
	for (int i = 0; i < 600 && access(argv[1], F_OK) != 0; i++)
		usleep(100000);
	shmem_finalize();
	return 0;
}
