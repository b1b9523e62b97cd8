/*
 * malloc_bench: the alloc+free pair workload of alloc/bench_test.go, in C,
 * for whatever malloc the binary is linked with (glibc, jemalloc,
 * mimalloc).
 *
 *   malloc_bench small|large PAIRS WINDOW
 *
 * A window of WINDOW slots is filled with allocations; then each of PAIRS
 * steps draws r from xorshift64 (shifts 13, 7, 17; seed
 * 0x9E3779B97F4A7C15), frees slot (r>>32) % WINDOW and allocates into it
 *
 *   base = lo << (r % 8);  size = base + (r >> 8) % base
 *
 * (lo = 16 for small, 4096 for large) and stores one byte into the block:
 * exactly the sequence the Go benchmark replays. It prints
 * "ns_per_pair N" for the timed steps (the fill is not timed).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static inline uint64_t next(void)
{
	uint64_t v = rng;
	v ^= v << 13;
	v ^= v >> 7;
	v ^= v << 17;
	rng = v;
	return v;
}

static inline size_t size_of(uint64_t r, uint64_t lo)
{
	uint64_t base = lo << (r % 8);
	return (size_t)(base + (r >> 8) % base);
}

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s small|large PAIRS WINDOW\n", argv[0]);
		return 2;
	}
	uint64_t lo;
	if (strcmp(argv[1], "small") == 0)
		lo = 16;
	else if (strcmp(argv[1], "large") == 0)
		lo = 4096;
	else {
		fprintf(stderr, "%s: unknown class %s\n", argv[0], argv[1]);
		return 2;
	}
	long pairs = atol(argv[2]);
	long window = atol(argv[3]);
	if (pairs <= 0 || window <= 0) {
		fprintf(stderr, "%s: bad PAIRS or WINDOW\n", argv[0]);
		return 2;
	}
	volatile unsigned char **slots = calloc((size_t)window, sizeof *slots);
	if (slots == NULL)
		return 1;
	for (long i = 0; i < window; i++) {
		slots[i] = malloc(size_of(next(), lo));
		if (slots[i] == NULL)
			return 1;
		slots[i][0] = 1;
	}
	double start = now_ns();
	for (long i = 0; i < pairs; i++) {
		uint64_t r = next();
		uint64_t s = (r >> 32) % (uint64_t)window;
		free((void *)slots[s]);
		volatile unsigned char *p = malloc(size_of(r, lo));
		if (p == NULL) {
			fprintf(stderr, "%s: malloc failed\n", argv[0]);
			return 1;
		}
		p[0] = (unsigned char)i;
		slots[s] = p;
	}
	double ns = (now_ns() - start) / (double)pairs;
	for (long i = 0; i < window; i++)
		free((void *)slots[i]);
	free(slots);
	printf("ns_per_pair %.3f\n", ns);
	return 0;
}
