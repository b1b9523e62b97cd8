/*
 * x_tree.c - the C library's tree broadcast (capi/shmemi_tree.h, which
 * coll.c runs for the world's broadcasts of 57 to 512 bytes above 4 PEs)
 * with a thread per PE over blocks in this process's memory, in the
 * line-count build (SHMEMI_LINECOUNT): the C side of
 * capi/tests/xlang's TestLineCountTreeC, as internal/team's
 * TestLineCountPostReduce runs the Go code with a goroutine per member.
 *
 * Usage: x_tree CALLS N...
 * For each N, every PE makes CALLS broadcasts back to back, the root and
 * the size (57 to 512 bytes) changing every call, some PEs yielding now
 * and then, and checks every byte it gets (exit 1 at the first wrong
 * one). Then a line per N, the largest per-call figures over every PE
 * and call:
 *   N calls sync_writes sync_reads reuse_reads data_reads bytes path
 * (lines, except bytes; path: the critical path in line transfers) and
 * "sum N" with the totals over PEs and calls of the same figures.
 */
#define SHMEMI_LINECOUNT 1
/* Yield at a step now and then (every 7th step a thread passes). */
static __thread unsigned dawdles;
#define shmemi_tree_dawdle(t)                   \
	do {                                    \
		(void)(t);                      \
		if (++dawdles % 7 == 0)         \
			sched_yield();          \
	} while (0)
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "shmemi_tree.h"

static void shmemi_tree_block(uint32_t *word, uint32_t *sleepers, uint32_t want, const char *op)
{
	(void)sleepers;
	(void)op;
	while (!shmemi_tree_reached(__atomic_load_n(word, __ATOMIC_SEQ_CST), want))
		sched_yield();
}

static void shmemi_tree_wake(uint32_t *word)
{
	(void)word; /* waiters do not sleep here */
}

static const size_t sizes[] = {57, 64, 100, 255, 256, 511, 512, 200, 120, 448, 384, 65};
#define NSIZES (sizeof sizes / sizeof sizes[0])

struct pe {
	struct shmemi_tree t;
	int calls;
	struct shmemi_tree_counts max; /* per call */
	int bad;
	pthread_t th;
};

static unsigned char pattern(int call, size_t i, int pe)
{
	return (unsigned char)(call * 31 + (int)i * 7 + pe * 13);
}

static void *run(void *arg)
{
	struct pe *p = arg;
	struct shmemi_tree *t = &p->t;
	unsigned char src[SHMEMI_SCRATCH_SIZE], dst[SHMEMI_SCRATCH_SIZE + 1];
	for (int c = 0; c < p->calls; c++) { /* on after a wrong byte: the others wait for this PE */
		int root = (c * 7 + c / 3) % t->n;
		size_t nb = sizes[c % NSIZES];
		for (size_t i = 0; i < nb; i++)
			src[i] = pattern(c, i, t->rank);
		memset(dst, 0xee, sizeof dst);
		/* Dawdle now and then, a different PE each time, so that
		 * members run ahead of others by a call or two. */
		if ((c * 5 + t->rank) % 11 == 0)
			for (int y = 0; y < 3; y++)
				sched_yield();
		struct shmemi_tree_counts b = t->lc;
		shmemi_tree_bcast(t, dst, src, nb, root, 1, "x_tree");
		struct shmemi_tree_counts a = t->lc;
		memset(src, 0x55, nb); /* the root's source changes at once */
		for (size_t i = 0; i < nb; i++)
			if (dst[i] != pattern(c, i, root)) {
				fprintf(stderr, "x_tree: N=%d PE %d call %d (%zu B from %d): byte %zu is %d, want %d\n", t->n,
					t->rank, c, nb, root, i, dst[i], pattern(c, i, root));
				p->bad = 1;
				break; /* this call's other bytes */
			}
		if (dst[nb] != 0xee) {
			fprintf(stderr, "x_tree: N=%d PE %d call %d: wrote past %zu bytes\n", t->n, t->rank, c, nb);
			p->bad = 1;
		}
#define MAXOF(f)                                                 \
	do {                                                     \
		if (a.f - b.f > p->max.f)                        \
			p->max.f = a.f - b.f;                    \
	} while (0)
		MAXOF(sync_writes);
		MAXOF(sync_reads);
		MAXOF(reuse_reads);
		MAXOF(data_reads);
		MAXOF(bytes);
#undef MAXOF
	}
	return NULL;
}

static int one(int n, int calls)
{
	struct shmemi_scratch_head *blocks = aligned_alloc(64, sizeof *blocks * (size_t)n);
	struct shmemi_scratch_head **by = malloc(sizeof *by * (size_t)n);
	struct pe *pes = calloc((size_t)n, sizeof *pes);
	if (blocks == NULL || by == NULL || pes == NULL) {
		fprintf(stderr, "x_tree: out of memory\n");
		exit(2);
	}
	memset(blocks, 0, sizeof *blocks * (size_t)n);
	for (int i = 0; i < n; i++)
		by[i] = &blocks[i];
	for (int i = 0; i < n; i++) {
		pes[i].t = (struct shmemi_tree){.rank = i, .n = n, .block = by, .kids_root = {-1, -1}};
		pes[i].t.seen = calloc((size_t)n, sizeof(uint32_t));
		pes[i].calls = calls;
		if (pthread_create(&pes[i].th, NULL, run, &pes[i]) != 0) {
			fprintf(stderr, "x_tree: pthread_create failed at N=%d\n", n);
			exit(2);
		}
	}
	int bad = 0;
	struct shmemi_tree_counts m = {0}, s = {0};
	for (int i = 0; i < n; i++) {
		pthread_join(pes[i].th, NULL);
		bad |= pes[i].bad;
		struct shmemi_tree_counts *c = &pes[i].t.lc, *x = &pes[i].max;
#define UP(f, v)                   \
	do {                       \
		if ((v) > m.f)     \
			m.f = (v); \
	} while (0)
		UP(calls, c->calls);
		UP(sync_writes, x->sync_writes);
		UP(sync_reads, x->sync_reads);
		UP(reuse_reads, x->reuse_reads);
		UP(data_reads, x->data_reads);
		UP(bytes, x->bytes);
		UP(max_depth, c->max_depth);
#undef UP
		s.calls += c->calls;
		s.sync_writes += c->sync_writes;
		s.sync_reads += c->sync_reads;
		s.reuse_reads += c->reuse_reads;
		s.data_reads += c->data_reads;
		s.bytes += c->bytes;
		free(pes[i].t.seen);
	}
	printf("%d %lu %lu %lu %lu %lu %lu %u\n", n, (unsigned long)m.calls, (unsigned long)m.sync_writes,
	       (unsigned long)m.sync_reads, (unsigned long)m.reuse_reads, (unsigned long)m.data_reads,
	       (unsigned long)m.bytes, m.max_depth);
	printf("sum %d %lu %lu %lu %lu %lu %lu\n", n, (unsigned long)s.calls, (unsigned long)s.sync_writes,
	       (unsigned long)s.sync_reads, (unsigned long)s.reuse_reads, (unsigned long)s.data_reads,
	       (unsigned long)s.bytes);
	fflush(stdout);
	free(blocks);
	free(by);
	free(pes);
	return bad;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: x_tree CALLS N...\n");
		return 2;
	}
	int calls = atoi(argv[1]);
	for (int i = 2; i < argc; i++)
		if (one(atoi(argv[i]), calls))
			return 1;
	return 0;
}
