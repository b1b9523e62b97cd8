//go:build ignore

/*
 * cacheline_pingpong.c - one cache line bounced between two cores: the floor
 * for any shared-memory message latency on this machine.
 *
 * Build:  gcc -O2 -pthread -o cacheline_pingpong cacheline_pingpong.c
 * Run:    ./cacheline_pingpong [options] TEST...      (no launcher)
 *
 * Tests (size = 64, the bytes of the line; values in ns):
 *   thread_lat  two threads of one process
 *   proc_lat    two processes over a MAP_SHARED anonymous mapping (fork), as
 *               PEs are separate processes
 * The pinger stores an odd number into the line and spins until the ponger
 * has stored the next even one; a round trip moves the line there and back,
 * and the figure is half a round trip.  The two sides are pinned to the
 * first two CPUs this process may use and spin with the pause instruction;
 * with one CPU they yield instead and the figure is a scheduler round trip.
 * -i/-m/-w/-r/-t count round trips.
 */
#include "peers_common.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#define HARNESS "cacheline"
static const char *const TESTS = "thread_lat proc_lat";
static const char *prog = "cacheline_pingpong";

#define STOP (-1L)

/* The bounced word, alone in its 64-byte line (and page for the mapping). */
struct line {
	_Alignas(64) _Atomic long v;
	char pad[64 - sizeof(long)];
};

static int ncpu;    /* CPUs this process may run on */
static int cpus[2]; /* the first two of them: the pinger's and the ponger's */

static inline void relax(void)
{
	if (ncpu < 2)
		sched_yield();
	else
		__builtin_ia32_pause();
}

/* find_cpus fills ncpu and cpus from this process's affinity mask. */
static void find_cpus(void)
{
	cpu_set_t set;
	ncpu = 0;
	if (sched_getaffinity(0, sizeof set, &set) != 0) {
		ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
		cpus[0] = 0;
		cpus[1] = 1;
		return;
	}
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set)) {
			if (ncpu < 2)
				cpus[ncpu] = c;
			ncpu++;
		}
}

/* pin puts the calling thread on cpus[side] (best effort). */
static void pin(int side)
{
	if (ncpu < 2)
		return;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpus[side], &set);
	(void)sched_setaffinity(0, sizeof set, &set);
}

/* ponger answers every odd value with the next even one until STOP. */
static void ponger(struct line *l)
{
	pin(1);
	long want = 1;
	for (;;) {
		long x;
		/* acquire: pairs with the pinger's release store of want */
		while ((x = atomic_load_explicit(&l->v, memory_order_acquire)) != want) {
			if (x == STOP)
				return;
			relax();
		}
		/* release: the pinger's acquire load sees it */
		atomic_store_explicit(&l->v, want + 1, memory_order_release);
		want += 2;
	}
}

static void *ponger_thread(void *arg)
{
	ponger(arg);
	return NULL;
}

/* pinger_loop does n round trips, continuing the sequence in *seq. */
static void pinger_loop(struct line *l, long n, long *seq)
{
	long s = *seq;
	for (long i = 0; i < n; i++) {
		atomic_store_explicit(&l->v, s + 1, memory_order_release);
		while (atomic_load_explicit(&l->v, memory_order_acquire) != s + 2)
			relax();
		s += 2;
	}
	*seq = s;
}

/* pinger times round trips and returns the best half round trip in ns. */
static double pinger(const struct peers_opts *o, struct line *l)
{
	pin(0);
	long seq = 0;
	long w = peers_warmup_count(o, 0);
	double t0 = peers_now();
	pinger_loop(l, w, &seq);
	long n = peers_timed_count(o, (peers_now() - t0) / w);
	double best = 0;
	for (int r = 0; r < o->reps; r++) {
		t0 = peers_now();
		pinger_loop(l, n, &seq);
		double t = (peers_now() - t0) / n;
		if (r == 0 || t < best)
			best = t;
	}
	atomic_store_explicit(&l->v, STOP, memory_order_release);
	return best / 2 * 1e9;
}

static double run_threads(const struct peers_opts *o)
{
	static struct line l;
	atomic_store(&l.v, 0);
	pthread_t th;
	if (pthread_create(&th, NULL, ponger_thread, &l) != 0)
		peers_die(prog, "pthread_create failed", NULL);
	double ns = pinger(o, &l);
	pthread_join(th, NULL);
	return ns;
}

static double run_procs(const struct peers_opts *o)
{
	struct line *l = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (l == MAP_FAILED)
		peers_die(prog, "mmap failed", strerror(errno));
	atomic_store(&l->v, 0);
	fflush(stdout);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0)
		peers_die(prog, "fork failed", strerror(errno));
	if (pid == 0) {
		/* Die with the parent, so a killed benchmark leaves no spinner. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		ponger(l);
		_exit(0);
	}
	double ns = pinger(o, l);
	int status = 0;
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		peers_die(prog, "ponger process failed", NULL);
	munmap(l, 4096);
	return ns;
}

int main(int argc, char **argv)
{
	struct peers_opts o = {
		.iters = 1000000, .min_iters = 1000, .warmup = 10000, .reps = 3,
		.window = 1, .budget = 0.2,
	};
	prog = argv[0];
	peers_parse_args(&o, argc, argv, TESTS);
	find_cpus();

	if (ncpu < 2)
		printf("# cacheline_pingpong: 1 usable CPU: the sides yield, figures are scheduler round trips\n");
	else
		printf("# cacheline_pingpong: %d usable CPUs, sides pinned to CPUs %d and %d\n", ncpu,
		       cpus[0], cpus[1]);
	printf("# npes 2\n");
	printf("# <harness> <metric> <size-bytes> <value>\n");
	if (peers_selected(&o, "thread_lat")) {
		peers_unit("thread_lat", "ns", "cache line ping-pong between two threads, half round trip");
		peers_result(HARNESS, "thread_lat", 64, run_threads(&o));
	}
	if (peers_selected(&o, "proc_lat")) {
		peers_unit("proc_lat", "ns", "cache line ping-pong between two processes, half round trip");
		peers_result(HARNESS, "proc_lat", 64, run_procs(&o));
	}
	return 0;
}
