//go:build ignore

/*
 * memcpy_bench.c - C memcpy bandwidth, the same-run floor for a put's
 * bandwidth (a put into a shared-memory heap is one memcpy).
 *
 * Build:  gcc -O2 -o memcpy_bench memcpy_bench.c       (bench/peers/build.sh)
 * Run:    ./memcpy_bench [options] TEST...             (one process, no launcher)
 *
 * Tests (sizes in bytes, default 8 B .. 4 MiB by powers of two):
 *   memcpy_bw       memcpy between two private, pre-touched buffers
 *   memcpy_shm_bw   memcpy from a private buffer into a MAP_SHARED mapping of
 *                   a POSIX shared-memory object (what a put into a symmetric
 *                   heap does); the object is unlinked at once
 *   memcpy_odd_bw   memcpy_bw with a destination 8 bytes past a 16-byte
 *                   boundary (what a copy into s[1:] of an int64 slice sees)
 *   memcpy_cold_bw  memcpy between private buffers out of cache: each copy
 *                   takes the next size-byte slice of two pools of
 *                   COLD_POOL bytes (or 4 x size, if larger), so that what
 *                   it reads and writes was last touched a pool ago
 * Values are MB/s = 10^6 bytes copied per second (each byte counted once).
 * memcpy_bw and memcpy_shm_bw copy the same buffers again and again ("warm":
 * sizes that fit the caches measure the caches, as the puts they are
 * compared with do).  cmd/symheap's Go copy test (bench_copy.go) measures
 * Go's copy the same three ways, with the same pool.
 */
#include "peers_common.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define HARNESS "memcpy"
static const char *const TESTS = "memcpy_bw memcpy_shm_bw memcpy_odd_bw memcpy_cold_bw";
static const char *prog = "memcpy_bench";

/* Called through a volatile pointer so the compiler keeps every copy. */
static void *(*volatile copy_fn)(void *, const void *, size_t) = memcpy;

/* The pools of memcpy_cold_bw: larger than this VM's caches (keep equal to
 * coldPool in cmd/symheap/bench_copy.go). */
#define COLD_POOL (256L << 20)

/* The slices of the current cold pools: slot i of nslots. */
static char *cold_dst, *cold_src;
static long cold_slot, cold_nslots;

static void copy_loop(long n, char *dst, const char *src, long size)
{
	for (long i = 0; i < n; i++) {
		copy_fn(dst, src, (size_t)size);
		__asm__ volatile("" ::: "memory");
	}
}

/* cold_loop copies n times, each time the next slice of the pools. */
static void cold_loop(long n, long size)
{
	for (long i = 0; i < n; i++) {
		long off = cold_slot * size;
		copy_fn(cold_dst + off, cold_src + off, (size_t)size);
		__asm__ volatile("" ::: "memory");
		if (++cold_slot == cold_nslots)
			cold_slot = 0;
	}
}

/* measure: dst == NULL measures the cold pools. */
static double measure(const struct peers_opts *o, char *dst, const char *src, long size)
{
	long w = peers_warmup_count(o, size);
	double t0 = peers_now();
	if (dst)
		copy_loop(w, dst, src, size);
	else
		cold_loop(w, size);
	long n = peers_timed_count(o, (peers_now() - t0) / w);
	double best = 0;
	for (int r = 0; r < o->reps; r++) {
		t0 = peers_now();
		if (dst)
			copy_loop(n, dst, src, size);
		else
			cold_loop(n, size);
		double t = (peers_now() - t0) / n;
		if (r == 0 || t < best)
			best = t;
	}
	return (double)size / best / 1e6;
}

static char *shm_buffer(size_t n)
{
	char name[64];
	snprintf(name, sizeof name, "/symheap-peers-memcpy-%d", (int)getpid());
	int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		peers_die(prog, "shm_open failed", strerror(errno));
	shm_unlink(name);
	if (ftruncate(fd, (off_t)n) != 0)
		peers_die(prog, "ftruncate of shared memory failed", strerror(errno));
	char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		peers_die(prog, "mmap of shared memory failed", strerror(errno));
	close(fd);
	memset(p, 0x5a, n); /* allocate and map every page before timing */
	return p;
}

int main(int argc, char **argv)
{
	struct peers_opts o = {
		.iters = 100000, .min_iters = 5, .warmup = 1000, .reps = 3,
		.window = 1, .budget = 0.1,
	};
	prog = argv[0];
	peers_parse_args(&o, argc, argv, TESTS);
	if (o.nsizes == 0)
		peers_parse_sizes(prog, &o, "8:4M");
	long big = 1;
	for (int i = 0; i < o.nsizes; i++)
		if (o.sizes[i] > big)
			big = o.sizes[i];

	printf("# memcpy_bench: glibc memcpy\n");
	printf("# npes 1\n");
	printf("# <harness> <metric> <size-bytes> <value>\n");
	char *src = peers_alloc(prog, (size_t)big);
	if (peers_selected(&o, "memcpy_bw")) {
		peers_unit("memcpy_bw", "MB/s", "memcpy between private buffers, 10^6 B/s");
		char *dst = peers_alloc(prog, (size_t)big);
		for (int i = 0; i < o.nsizes; i++)
			if (o.sizes[i] > 0)
				peers_result(HARNESS, "memcpy_bw", o.sizes[i], measure(&o, dst, src, o.sizes[i]));
		free(dst);
	}
	if (peers_selected(&o, "memcpy_shm_bw")) {
		peers_unit("memcpy_shm_bw", "MB/s", "memcpy into a MAP_SHARED shm mapping, 10^6 B/s");
		char *dst = shm_buffer((size_t)big);
		for (int i = 0; i < o.nsizes; i++)
			if (o.sizes[i] > 0)
				peers_result(HARNESS, "memcpy_shm_bw", o.sizes[i],
					     measure(&o, dst, src, o.sizes[i]));
		munmap(dst, (size_t)big);
	}
	if (peers_selected(&o, "memcpy_odd_bw")) {
		peers_unit("memcpy_odd_bw", "MB/s", "memcpy between private buffers, destination 8 bytes off a 16-byte boundary, 10^6 B/s");
		char *dst = peers_alloc(prog, (size_t)big + 64);
		for (int i = 0; i < o.nsizes; i++)
			if (o.sizes[i] > 0)
				peers_result(HARNESS, "memcpy_odd_bw", o.sizes[i], measure(&o, dst + 8, src, o.sizes[i]));
		free(dst);
	}
	if (peers_selected(&o, "memcpy_cold_bw")) {
		peers_unit("memcpy_cold_bw", "MB/s", "memcpy between private buffers out of cache, 10^6 B/s");
		long pool = COLD_POOL > 4 * big ? COLD_POOL : 4 * big;
		cold_dst = peers_alloc(prog, (size_t)pool);
		cold_src = peers_alloc(prog, (size_t)pool);
		for (int i = 0; i < o.nsizes; i++)
			if (o.sizes[i] > 0) {
				cold_nslots = pool / o.sizes[i];
				cold_slot = 0;
				peers_result(HARNESS, "memcpy_cold_bw", o.sizes[i], measure(&o, NULL, NULL, o.sizes[i]));
			}
		free(cold_dst);
		free(cold_src);
	}
	free(src);
	return 0;
}
