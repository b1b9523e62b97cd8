/* check.h - the C tests' checks: CHECK counts a failure and prints it;
 * DONE ends the program with status 1 when any check failed on this PE. */
#ifndef CHECK_H
#define CHECK_H
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* MAX_PES: the largest job the tests are written for (a segment holds
 * at most 512 PEs): arrays with an element per PE have this many. */
#define MAX_PES 512

static int check_failures;

#define CHECK(cond, ...)                                                                    \
	do {                                                                                \
		if (!(cond)) {                                                              \
			check_failures++;                                                   \
			fprintf(stderr, "FAIL %s:%d PE %d: %s: ", __FILE__, __LINE__,       \
				shmem_my_pe(), #cond);                                      \
			fprintf(stderr, __VA_ARGS__);                                       \
			fprintf(stderr, "\n");                                              \
		}                                                                           \
	} while (0)

/* DONE: every PE reports; the job fails if any PE failed a check. */
#define DONE(name)                                                                          \
	do {                                                                                \
		static int fails_all_;                                                      \
		shmem_barrier_all();                                                        \
		shmem_int_atomic_add(&fails_all_, check_failures, 0);                       \
		shmem_barrier_all();                                                        \
		if (shmem_my_pe() == 0)                                                     \
			printf("%s: %d PEs: %s\n", name, shmem_n_pes(),                      \
			       fails_all_ ? "FAILED" : "ok");                               \
		int bad_ = check_failures || (shmem_my_pe() == 0 && fails_all_);            \
		shmem_finalize();                                                           \
		return bad_ ? 1 : 0;                                                        \
	} while (0)
#endif
