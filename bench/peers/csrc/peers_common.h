//go:build ignore

/*
 * peers_common.h - helpers shared by the peer benchmark harnesses in this
 * directory (osh_bench.c, mpi_bench.c, memcpy_bench.c, cacheline_pingpong.c).
 *
 * (The "//go:build ignore" line above is a plain C99 comment to the C
 * compiler; it keeps the go command from taking these files for cgo sources
 * should they ever sit beside Go files.  They live in csrc/, not in the
 * directory of package peers, because a Go package may not hold C files
 * unless it uses cgo.)
 *
 * Output format of every harness (parsed by bench/peers/parse.go):
 *
 *   # <free text>                       comment, ignored
 *   # unit <metric> <unit> [text...]    the unit of <metric>'s values
 *   # npes <n>                          number of processes of the job
 *   <harness> <metric> <size-bytes> <value>
 *
 * One measurement per line, fields separated by single spaces, sizes in
 * bytes, values as decimal numbers.  "MB/s" means 10^6 bytes per second.
 *
 * Command line shared by the harnesses (each uses the options it needs):
 *
 *   HARNESS [options] TEST...         TEST "all" runs every test
 *   -s SIZES   "A:B" = A, then powers of two from max(A,1) up to B
 *              (0:8 = 0 1 2 4 8); or a list "8,1024,65536"; K/M/G suffixes
 *   -i N       most timed iterations per repetition (small sizes)
 *   -m N       fewest timed iterations per repetition
 *   -w N       most warm-up iterations (scaled down for large sizes)
 *   -r N       repetitions; the best repetition is reported
 *   -W N       window (messages in flight) for bandwidth / rate tests
 *   -t SEC     time budget per size, all repetitions together (the
 *              iteration count is derived from the timed warm-up)
 *   -b N       tail mode, for the harnesses that have it: the timed calls
 *              run in batches of N, each batch timed on its own, and the
 *              50th and 99th percentiles of the batches' means per call
 *              are reported (metrics <test>_p50 and <test>_p99) instead
 *              of the best repetition's mean
 */
#ifndef PEERS_COMMON_H
#define PEERS_COMMON_H

#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PEERS_MAX_SIZES 64

struct peers_opts {
	long sizes[PEERS_MAX_SIZES];
	int nsizes;     /* 0: each test's default list */
	long iters;     /* most timed iterations per repetition */
	long min_iters; /* fewest timed iterations per repetition */
	long warmup;    /* most warm-up iterations */
	int reps;       /* repetitions, best reported */
	long window;    /* messages in flight */
	double budget;  /* seconds per size, all repetitions */
	long batch;     /* tail mode: calls per timed batch; 0: off */
	char **tests;   /* test names from the command line */
	int ntests;
};

static inline double peers_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void peers_die(const char *prog, const char *msg, const char *arg)
{
	fprintf(stderr, "%s: %s%s%s\n", prog, msg, arg ? ": " : "", arg ? arg : "");
	exit(2);
}

/* peers_parse_size parses "4096", "4k", "4K", "1M", "1g" (powers of 1024). */
static inline long peers_parse_size(const char *prog, const char *s)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || v < 0)
		peers_die(prog, "bad size", s);
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	}
	if (*end != '\0')
		peers_die(prog, "bad size", s);
	return v;
}

static inline long peers_parse_long(const char *prog, const char *s, long min)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end != '\0' || v < min)
		peers_die(prog, "bad number", s);
	return v;
}

/* peers_parse_sizes fills o->sizes from "A:B" or "a,b,c". */
static inline void peers_parse_sizes(const char *prog, struct peers_opts *o, const char *arg)
{
	char buf[512];
	if (strlen(arg) >= sizeof buf)
		peers_die(prog, "size list too long", arg);
	strcpy(buf, arg);
	o->nsizes = 0;
	char *colon = strchr(buf, ':');
	if (colon) {
		*colon = '\0';
		long lo = peers_parse_size(prog, buf), hi = peers_parse_size(prog, colon + 1);
		if (hi < lo)
			peers_die(prog, "size range upside down", arg);
		if (lo == 0)
			o->sizes[o->nsizes++] = 0;
		for (long s = lo ? lo : 1; s <= hi && o->nsizes < PEERS_MAX_SIZES; s *= 2)
			o->sizes[o->nsizes++] = s;
		return;
	}
	for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
		if (o->nsizes == PEERS_MAX_SIZES)
			peers_die(prog, "too many sizes", arg);
		o->sizes[o->nsizes++] = peers_parse_size(prog, tok);
	}
	if (o->nsizes == 0)
		peers_die(prog, "empty size list", arg);
}

static inline void peers_usage(const char *prog, const char *tests)
{
	fprintf(stderr,
		"usage: %s [-s A:B|a,b,c] [-i iters] [-m min-iters] [-w warmup] [-r reps]\n"
		"       [-W window] [-t seconds-per-size] [-b batch] TEST...\n"
		"tests: %s all\n", prog, tests);
	exit(2);
}

/* peers_parse_args reads the common options; the remaining words are tests. */
static inline void peers_parse_args(struct peers_opts *o, int argc, char **argv, const char *tests)
{
	const char *prog = argv[0];
	int opt;
	while ((opt = getopt(argc, argv, "s:i:m:w:r:W:t:b:h")) != -1) {
		switch (opt) {
		case 's': peers_parse_sizes(prog, o, optarg); break;
		case 'i': o->iters = peers_parse_long(prog, optarg, 1); break;
		case 'm': o->min_iters = peers_parse_long(prog, optarg, 1); break;
		case 'w': o->warmup = peers_parse_long(prog, optarg, 0); break;
		case 'r': o->reps = (int)peers_parse_long(prog, optarg, 1); break;
		case 'W': o->window = peers_parse_long(prog, optarg, 1); break;
		case 'b': o->batch = peers_parse_long(prog, optarg, 1); break;
		case 't': {
			char *end;
			o->budget = strtod(optarg, &end);
			if (end == optarg || *end != '\0' || !(o->budget > 0))
				peers_die(prog, "bad time budget", optarg);
			break;
		}
		default: peers_usage(prog, tests);
		}
	}
	if (o->min_iters > o->iters)
		o->min_iters = o->iters;
	o->tests = argv + optind;
	o->ntests = argc - optind;
	if (o->ntests == 0)
		peers_usage(prog, tests);
	/* Reject unknown test names before any process starts measuring. */
	for (int i = 0; i < o->ntests; i++) {
		const char *t = o->tests[i];
		size_t n = strlen(t);
		int ok = strcmp(t, "all") == 0;
		for (const char *p = tests; !ok && (p = strstr(p, t)) != NULL; p += n)
			ok = (p == tests || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0');
		if (!ok) {
			fprintf(stderr, "%s: unknown test %s\n", prog, t);
			peers_usage(prog, tests);
		}
	}
}

/* peers_selected reports whether test name was asked for (or "all"). */
static inline int peers_selected(const struct peers_opts *o, const char *name)
{
	for (int i = 0; i < o->ntests; i++)
		if (strcmp(o->tests[i], "all") == 0 || strcmp(o->tests[i], name) == 0)
			return 1;
	return 0;
}

/*
 * peers_warmup_count: warm-up iterations for one size, so that warm-up moves
 * at most about 64 MiB (at least one iteration).  bytes_per_iter may be 0.
 */
static inline long peers_warmup_count(const struct peers_opts *o, long bytes_per_iter)
{
	long n = o->warmup;
	if (bytes_per_iter > 0 && n > (64L << 20) / bytes_per_iter)
		n = (64L << 20) / bytes_per_iter;
	return n < 1 ? 1 : n;
}

/*
 * peers_timed_count: timed iterations per repetition, from the seconds one
 * warm-up iteration took, so that all repetitions fit the time budget.
 */
static inline long peers_timed_count(const struct peers_opts *o, double per_iter)
{
	double n = o->iters;
	if (per_iter > 0) {
		double fit = o->budget / o->reps / per_iter;
		if (fit < n)
			n = fit;
	}
	if (n < o->min_iters)
		n = o->min_iters;
	return (long)n;
}

/*
 * Tail mode (-b): a sample is one batch of o->batch calls timed on its own,
 * as its mean seconds per call.  A point takes as many samples as the
 * timed calls of all repetitions make (peers_timed_count times o->reps),
 * at least PEERS_MIN_BATCHES, so that the 99th percentile is not the
 * largest sample.
 */
#define PEERS_MIN_BATCHES 200

static inline long peers_batch_count(const struct peers_opts *o, double per_iter)
{
	long n = peers_timed_count(o, per_iter) * o->reps / o->batch;
	return n < PEERS_MIN_BATCHES ? PEERS_MIN_BATCHES : n;
}

static inline int peers_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/*
 * peers_percentile sorts v[0..n) and returns its p-th percentile (p in 1..100)
 * by nearest rank: the smallest sample with at least p% of the
 * samples at or below it.
 */
static inline double peers_percentile(double *v, long n, int p)
{
	qsort(v, (size_t)n, sizeof v[0], peers_cmp_double);
	long k = ((long)p * n + 99) / 100;
	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return v[k - 1];
}

/* peers_unit prints the unit header of a metric once. */
static inline void peers_unit(const char *metric, const char *unit, const char *what)
{
	printf("# unit %s %s %s\n", metric, unit, what);
	fflush(stdout);
}

static inline void peers_result(const char *harness, const char *metric, long size, double value)
{
	printf("%s %s %ld %.4f\n", harness, metric, size, value);
	fflush(stdout);
}

static inline void *peers_alloc(const char *prog, size_t n)
{
	void *p = NULL;
	if (n == 0)
		n = 64;
	if (posix_memalign(&p, 4096, n) != 0)
		peers_die(prog, "out of memory", NULL);
	memset(p, 0x5a, n); /* touch every page before timing */
	return p;
}

#endif
