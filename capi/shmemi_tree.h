//go:build symheap_capi

/*
 * shmemi_tree.h - the broadcast of SHMEMI_POST_DATA+1 to SHMEMI_SCRATCH_SIZE
 * bytes over more than SHMEMI_POST_FLAT PEs: the Go runtime's treeBcast
 * (internal/team, collective.go), step for step, on blocks of its format
 * (struct shmemi_scratch_head: a team slot's arrived word and scratch
 * buffers, generated into shmemi_formats.h). coll.c runs it for the
 * world (broadcast); capi/tests/x_tree.c runs the same steps with a
 * thread per PE, for the line-count model (SHMEMI_LINECOUNT).
 *
 * In the tree's numbering v = (rank - root) mod n, member v's parent is v
 * minus its lowest set bit, its children v+1, v+2, v+4, ... below that
 * bit (every power of two for the root). Call k, the group's k-th tree
 * broadcast from 0, uses buffer k%2 of every member and is every member's
 * arrival k+1:
 *
 *   1. reuse: this PE last wrote buffer k%2 in call k-2, for the children
 *      it had in that call's tree, whose root may not be this call's: it
 *      waits until each of them has arrived k-1 times, done with it;
 *   2. a member other than the root waits for its parent's arrival k+1,
 *      after which the parent's buffer k%2 holds the data; the root has
 *      them in its source;
 *   3. a member with children copies the data into its buffer k%2,
 *      arrives (k+1), then copies them into dest; a leaf copies the
 *      parent's buffer into dest before it arrives, since its arrival
 *      tells the parent that it may write the buffer again (step 1 of
 *      call k+2).
 *
 * A member reads one parent's arrival line and buffer, and, before it
 * reuses a buffer, the arrival lines of at most ⌈log₂ n⌉ children of an
 * earlier call (none it has seen arrive that far already); the data reach
 * the last member after ⌈log₂ n⌉ transfers, where the root's source was
 * read by n-1 members after a barrier.
 *
 * An arrival is a seq-cst store of the count (after the buffer's data),
 * then a load of sleepers and a FUTEX_WAKE if any, as the runtime's
 * arrive: a waiter that announced itself in sleepers before testing the
 * count cannot be missed (so waiters need no fence). The includer defines
 * shmemi_tree_block (sleep until *word reaches want) and
 * shmemi_tree_wake.
 */
#ifndef SHMEMI_TREE_H
#define SHMEMI_TREE_H

#include <stdint.h>
#include <string.h>

#include "shmemi_formats.h"

/* The line-count model of a PE's tree broadcasts (SHMEMI_LINECOUNT), as
 * the runtime's (internal/team, linecount_on.go): sync lines are arrival
 * lines, data lines the buffer's. A PE's depth starts at 0 in each call;
 * its arrival line carries it (in the line's unused inlined bytes of the
 * call's parity, stored before the arrival, and safe from the parent's
 * later calls as its buffer of that parity is); reading the parent's
 * arrival makes it the parent's plus one. The reuse waits of step 1 read
 * lines of an earlier call: they count as reads, not on this call's
 * path. */
struct shmemi_tree_counts {
	uint64_t calls;
	uint64_t sync_writes, sync_reads, reuse_reads; /* arrival lines: own, the parent's, earlier children's */
	uint64_t data_writes, data_reads;              /* buffer lines written for children, read of the parent */
	uint64_t bytes;                                /* bytes copied */
	uint32_t depth, max_depth;                     /* this call's critical path at this PE, the largest */
};

/* struct shmemi_tree is one PE's state of a group's tree broadcasts. */
struct shmemi_tree {
	int rank, n;                         /* this PE's rank in the group, the group's size */
	struct shmemi_scratch_head **block;  /* every member's block, by rank */
	uint32_t *seen;                      /* by rank: arrivals the member is known to have made */
	uint32_t calls;                      /* tree broadcasts made: call k uses buffer k%2 */
	int kids_root[2];                    /* per own buffer: the root of the call that last wrote it, -1: none */
#ifdef SHMEMI_LINECOUNT
	struct shmemi_tree_counts lc;
#endif
};

/* shmemi_tree_dawdle(t): a test's delay between the steps (x_tree.c
 * yields there now and then, so that the orderings the steps guard
 * against get their chance); nothing in the library. */
#ifndef shmemi_tree_dawdle
#define shmemi_tree_dawdle(t) ((void)0)
#endif

static void shmemi_tree_block(uint32_t *word, uint32_t *sleepers, uint32_t want, const char *op);
static void shmemi_tree_wake(uint32_t *word);

/* shmemi_tree_reached compares counts across the wrap. */
static inline int shmemi_tree_reached(uint32_t v, uint32_t want)
{
	return (int32_t)(v - want) >= 0;
}

/* shmemi_tree_wait waits until member j has arrived want times; it
 * reports whether it read j's line (a count it had not seen). */
static inline int shmemi_tree_wait(struct shmemi_tree *t, int j, uint32_t want, const char *op)
{
	if (shmemi_tree_reached(t->seen[j], want))
		return 0;
	struct shmemi_scratch_head *b = t->block[j];
	/* seq-cst; pairs with j's store in shmemi_tree_arrive, after which
	 * its buffer's data are visible here. */
	uint32_t v = __atomic_load_n(&b->arrived, __ATOMIC_SEQ_CST);
	if (!shmemi_tree_reached(v, want)) {
		shmemi_tree_block(&b->arrived, &b->sleepers, want, op);
		v = __atomic_load_n(&b->arrived, __ATOMIC_SEQ_CST);
	}
	t->seen[j] = v;
	return 1;
}

/* shmemi_tree_arrive publishes this PE's arrival a. */
static inline void shmemi_tree_arrive(struct shmemi_tree *t, uint32_t a)
{
	struct shmemi_scratch_head *b = t->block[t->rank];
#ifdef SHMEMI_LINECOUNT
	t->lc.sync_writes++;
	memcpy(b->inlined[(a - 1) & 1], &t->lc.depth, sizeof t->lc.depth); /* before the store that publishes it */
#endif
	/* seq-cst: after the buffer's data; pairs with the loads of
	 * shmemi_tree_wait. The sleepers load after it cannot miss a waiter
	 * that incremented sleepers before testing the count. */
	__atomic_store_n(&b->arrived, a, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&b->sleepers, __ATOMIC_SEQ_CST) != 0)
		shmemi_tree_wake(&b->arrived);
}

/* shmemi_tree_copy copies nb bytes; counted in the model. */
static inline void shmemi_tree_copy(struct shmemi_tree *t, void *d, const void *s, size_t nb)
{
	memmove(d, s, nb);
#ifdef SHMEMI_LINECOUNT
	t->lc.bytes += nb;
#else
	(void)t;
#endif
}

/* shmemi_tree_bcast is one tree broadcast of nb bytes (SHMEMI_POST_DATA <
 * nb <= SHMEMI_SCRATCH_SIZE) from root's src into dest on every member;
 * the root writes its own dest only when self (the team form). */
static inline void shmemi_tree_bcast(struct shmemi_tree *t, void *dest, const void *src, size_t nb, int root,
				     int self, const char *op)
{
	int n = t->n, me = t->rank;
	uint32_t k = t->calls++;
	int v = (me - root + n) % n, low = v & -v, kids = 0;
	for (int c = 1; v + c < n && (v == 0 || c < low); c <<= 1)
		kids++;
#ifdef SHMEMI_LINECOUNT
	t->lc.calls++;
	t->lc.depth = 0;
	size_t lines = (nb + 63) / 64;
#endif
	/* Step 1: the children of the tree that last wrote buffer k%2. */
	int old = t->kids_root[k & 1];
	if (old >= 0) {
		int w = (me - old + n) % n, wl = w & -w;
		for (int c = 1; w + c < n && (w == 0 || c < wl); c <<= 1) {
			int read = shmemi_tree_wait(t, (w + c + old) % n, k - 1, op);
#ifdef SHMEMI_LINECOUNT
			t->lc.reuse_reads += (uint64_t)read;
#else
			(void)read;
#endif
		}
	}
	shmemi_tree_dawdle(t);
	t->kids_root[k & 1] = root;
	unsigned char *mine = t->block[me]->scratch[k & 1];
	const void *from = src;
	/* Step 2. */
	if (v != 0) {
		int p = (v - low + root) % n;
		int read = shmemi_tree_wait(t, p, k + 1, op);
		from = t->block[p]->scratch[k & 1];
		shmemi_tree_dawdle(t);
#ifdef SHMEMI_LINECOUNT
		uint32_t d;
		memcpy(&d, t->block[p]->inlined[k & 1], sizeof d);
		t->lc.sync_reads += (uint64_t)read;
		t->lc.data_reads += lines;
		t->lc.depth = d + 1 > t->lc.depth ? d + 1 : t->lc.depth;
#else
		(void)read;
#endif
	}
	/* Step 3. */
	if (kids == 0) {
		shmemi_tree_copy(t, dest, from, nb);
		shmemi_tree_arrive(t, k + 1);
		shmemi_tree_dawdle(t);
	} else {
		shmemi_tree_copy(t, mine, from, nb);
#ifdef SHMEMI_LINECOUNT
		t->lc.data_writes += lines;
#endif
		shmemi_tree_arrive(t, k + 1);
		if (v != 0)
			shmemi_tree_copy(t, dest, mine, nb);
		else if (self && dest != src)
			shmemi_tree_copy(t, dest, src, nb);
	}
#ifdef SHMEMI_LINECOUNT
	t->lc.max_depth = t->lc.depth > t->lc.max_depth ? t->lc.depth : t->lc.max_depth;
#endif
}

#endif
