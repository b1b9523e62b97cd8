/* t_place.c - a PE whose waits find their peer running on its own core
 * moves onto a core of its own (shmsync, "Placement"; capi/wait.c).
 *
 * Usage: t_place TRIALS ROUNDS, on 2 PEs of a machine of 2 CPUs or more.
 * PE 0 is bound to the first CPU it may run on for the whole test (it is
 * at home: its index names that CPU). In each trial PE 1 is bound to the
 * same CPU for a barrier, then may run on every CPU again, and the kernel
 * leaves it where it is; then ROUNDS round trips of a put and a
 * wait_until between the two, each a hand-over while they share the CPU,
 * PE 1 noting after each whether it runs on the CPU its index names (the
 * second allowed one). It must have got there in every trial: within a
 * few round trips (microseconds) by moving itself, where the kernel's
 * balancer, which parts them too, takes a tick or more (without the move
 * PE 1 got there in none of 10 trials of ROUNDS 200).
 *
 * A busy machine switches the move off: once half of a process's last
 * yields lasted (another process kept the core), its waits sleep at once
 * for a while instead of yielding, and no yield hands the core to the
 * peer. A trial in which that happened (shmemx_wait_stats: lasted grew)
 * and PE 1 did not get there proves nothing either way: it is run again,
 * up to BUSY_TRIALS times in all; past that the test prints "skip: the
 * machine is busy" and passes. Prints "skip" and passes on a machine of
 * one CPU. */
#define _GNU_SOURCE
#include "check.h"
#include <sched.h>
#include <shmemx.h>
#include <stdlib.h>
#include <unistd.h>

enum { BUSY_TRIALS = 100 };

static long ping, pong, again;

/* nth returns the i-th CPU of set, or -1. */
static int nth(cpu_set_t *set, int i)
{
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, set) && i-- == 0)
			return c;
	return -1;
}

int main(int argc, char **argv)
{
	long trials = argc > 1 ? atol(argv[1]) : 10, rounds = argc > 2 ? atol(argv[2]) : 200;
	shmem_init();
	int me = shmem_my_pe();
	CHECK(shmem_n_pes() == 2, "t_place runs on 2 PEs, not %d", shmem_n_pes());
	cpu_set_t all, one;
	CHECK(sched_getaffinity(0, sizeof all, &all) == 0, "sched_getaffinity");
	int first = nth(&all, 0), second = nth(&all, 1);
	if (second < 0) {
		if (me == 0)
			printf("skip: one CPU\n");
		DONE("t_place");
	}
	CPU_ZERO(&one);
	CPU_SET(first, &one);
	if (me == 0)
		CHECK(sched_setaffinity(0, sizeof one, &one) == 0, "sched_setaffinity");
	long seq = 0, busy = 0;
	for (long t = 0; t < trials;) {
		shmemx_wait_stats_t st0, st1;
		if (me == 1) {
			usleep(2000); /* a PE moves itself at most once a millisecond */
			CHECK(sched_setaffinity(0, sizeof one, &one) == 0, "sched_setaffinity");
		}
		shmem_barrier_all();
		/* No sleep from here: a woken PE goes where the kernel finds an
		 * idle CPU. */
		if (me == 1) {
			CHECK(sched_setaffinity(0, sizeof all, &all) == 0, "sched_setaffinity (all)");
			shmemx_wait_stats(&st0);
		}
		int seen = 0, at = -1;
		for (long i = 0; i < rounds; i++) {
			seq++;
			if (me == 0) {
				shmem_long_p(&ping, seq, 1);
				shmem_long_wait_until(&pong, SHMEM_CMP_EQ, seq);
			} else {
				shmem_long_wait_until(&ping, SHMEM_CMP_EQ, seq);
				shmem_long_p(&pong, seq, 0);
				if (!seen && sched_getcpu() == second)
					seen = 1, at = (int)i;
			}
		}
		if (me == 1) {
			shmemx_wait_stats(&st1);
			long lasted = (long)(st1.lasted - st0.lasted), moves = (long)(st1.moves - st0.moves);
			if (getenv("T_PLACE_DEBUG"))
				printf("trial %ld: on CPU %d after %d round trips (moves %ld, waits that stopped yielding %ld)\n",
				       t, second, at, moves, lasted);
			long redo = !seen && lasted > 0;
			if (!redo)
				CHECK(seen,
				      "trial %ld: PE 1 never ran on CPU %d in %ld round trips beside PE 0 on CPU %d "
				      "(it moved itself %ld times; its waits made %llu yields and %llu sleeps)",
				      t, second, rounds, first, moves, (unsigned long long)(st1.yields - st0.yields),
				      (unsigned long long)(st1.sleeps - st0.sleeps));
			shmem_long_p(&again, redo, 0);
			again = redo;
		}
		shmem_barrier_all(); /* PE 0 has again */
		if (!again) {
			t++;
			continue;
		}
		if (++busy == BUSY_TRIALS) {
			if (me == 0)
				printf("skip: the machine is busy (in %d trials the waits stopped yielding, and PE 1 "
				       "stayed on PE 0's CPU)\n",
				       BUSY_TRIALS);
			break;
		}
	}
	DONE("t_place");
}
