//go:build symheap_capi

/*
 * wait.c - point-to-point synchronisation: the waiter's side of the
 * runtime's wake-up protocol (the root's wait.go has it and its proof):
 *
 *   W1 announce: the job's sleeping count (PE 0's block), then the owner's
 *      sleepers count, both seq-cst increments;
 *   W2 membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED), standing in for the
 *      fence that writers registered for it do not make;
 *   W3 load the owner's signal word; W4 test the condition; W5 FUTEX_WAIT
 *      on the word for a 50 ms slice; W6 when a slice runs out, ask the Go
 *      runtime whether every PE is alive;
 *   W7 withdraw the announcement.
 *
 * Before W1 the waiter polls, then yields, as the runtime's pacing says
 * (shmsync.Pace: polls only while every PE has a core).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shmem_internal.h"
#include "shmemi_go.h"
#include "../include/shmemx.h"

#define MEMBARRIER_GLOBAL_EXPEDITED (1 << 1)

/* now_ns is the monotonic clock in nanoseconds (vDSO: no system call). */
static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* block_on: the sleeping wait on word, announced in sleepers (and in the
 * job's count all, when not NULL). membar: writers may have made plain
 * stores without a fence (puts), for which the waiter's membarrier stands
 * in; without it, writers' seq-cst RMWs order their stores themselves. */
/* yield_again: the waits of this process sleep without yielding until
 * then (now_ns), once long_yield_share of the last long_yield_window
 * yields lasted long_yield_ns, the latest among them (shmsync, "A yield
 * that lasts"). last_yields: a bit for each of the process's last yields,
 * the latest lowest, set if it lasted. Relaxed: a lost update costs one
 * more yield, or one yield's record. */
static int64_t yield_again;
static uint32_t last_yields;

/* The counts shmemx_wait_stats reports: yields, futex sleeps, stops of
 * yielding (yield_again set), moves (handed_over). Relaxed adds. */
static uint64_t n_yields, n_sleeps, n_lasted, n_moves;

static void count(uint64_t *n)
{
	__atomic_fetch_add(n, 1, __ATOMIC_RELAXED);
}

void shmemx_wait_stats(shmemx_wait_stats_t *stats)
{
	if (stats == NULL)
		shmemi_fatal("shmemx_wait_stats", "stats is NULL (pass the address of a shmemx_wait_stats_t)");
	stats->yields = __atomic_load_n(&n_yields, __ATOMIC_RELAXED);
	stats->sleeps = __atomic_load_n(&n_sleeps, __ATOMIC_RELAXED);
	stats->lasted = __atomic_load_n(&n_lasted, __ATOMIC_RELAXED);
	stats->moves = __atomic_load_n(&n_moves, __ATOMIC_RELAXED);
}

/* next_place: the PE may move onto a core of its own from then (now_ns),
 * at most every place_every_ns (shmsync, "Placement"); relaxed. */
static int64_t next_place;

/* handed_over: a wait's condition held right after a yield of t ns, from
 * then (now_ns): one that lasted hand_over_ns ran the PE we waited for on
 * our core, while the node has another (shmsync, "Placement"). */
static void handed_over(int64_t t, int64_t then)
{
	if (shmemi_L.hand_over_ns <= 0 || t < shmemi_L.hand_over_ns ||
	    then < __atomic_load_n(&next_place, __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&next_place, then + shmemi_L.place_every_ns, __ATOMIC_RELAXED);
	if (symheapc_go_place())
		count(&n_moves);
}

static void block_on(uint32_t *word, uint32_t *sleepers, uint32_t *all, int membar, int (*cond)(void *),
		     void *arg, const char *op)
{
	for (int i = 0; i < shmemi_L.polls; i++) {
		if (cond(arg))
			return;
		shmemi_pause();
		/* Now and then hand the core over, in case the PE we wait
		 * for is queued behind us on it (the kernel put both on one
		 * core, or others load the machine): a yield with nothing
		 * else to run costs a fraction of a microsecond, so not at
		 * every poll: every 32nd (every 8th cost the 2-PE barrier
		 * about 10%, docs/bench/design-measurements.md). A yield
		 * that ran the PE we wait for moves this one. */
		if ((i & 31) == 31) {
			int64_t t = now_ns();
			sched_yield();
			count(&n_yields);
			if (cond(arg)) {
				int64_t after = now_ns();
				handed_over(after - t, after);
				return;
			}
		}
	}
	/* Yield a count, and with a core per PE for yield_ns at least
	 * (shmsync, "Sleeping costs more than its wake-up"), but sleep
	 * after yields that lasted long_yield_ns: the core went to a
	 * process that keeps it for a slice, and a woken sleeper gets it
	 * back sooner (shmsync, "A yield that lasts"). */
	int64_t until = 0, t = now_ns();
	if (shmemi_L.yield_ns > 0)
		until = t + shmemi_L.yield_ns;
	int may = t >= __atomic_load_n(&yield_again, __ATOMIC_RELAXED);
	int64_t last = 0; /* the last yield, ns */
	for (int i = 0; may && (i < shmemi_L.yields || (until && t < until)); i++) {
		if (cond(arg)) {
			handed_over(last, t);
			return;
		}
		sched_yield();
		count(&n_yields);
		int64_t after = now_ns();
		last = after - t;
		uint32_t lasted = after - t >= shmemi_L.long_yield_ns;
		uint32_t h = (__atomic_load_n(&last_yields, __ATOMIC_RELAXED) << 1 | lasted) &
			     (uint32_t)((1ull << shmemi_L.long_yield_window) - 1);
		__atomic_store_n(&last_yields, h, __ATOMIC_RELAXED);
		if (lasted && __builtin_popcount(h) >= shmemi_L.long_yield_share) {
			__atomic_store_n(&yield_again, after + shmemi_L.long_yield_memory_ns, __ATOMIC_RELAXED);
			count(&n_lasted);
			break;
		}
		t = after;
	}
	if (all)
		__atomic_fetch_add(all, 1, __ATOMIC_SEQ_CST);  /* W1 */
	__atomic_fetch_add(sleepers, 1, __ATOMIC_SEQ_CST); /* W1 */
	long slice_ms = 50;
	if (membar && (!shmemi_L.mb_ready || syscall(SYS_membarrier, MEMBARRIER_GLOBAL_EXPEDITED, 0, 0) != 0)) /* W2 */
		slice_ms = 1; /* writers' fence-free puts are seen within a slice */
	long slept = 0;
	for (;;) {
		uint32_t v = __atomic_load_n(word, __ATOMIC_SEQ_CST); /* W3 */
		if (cond(arg))                                        /* W4 */
			break;
		struct timespec ts = {0, slice_ms * 1000000L};
		count(&n_sleeps);
		long r = syscall(SYS_futex, word, FUTEX_WAIT, v, &ts, NULL, 0); /* W5 */
		if (cond(arg))
			break;
		if (r == 0 || errno != ETIMEDOUT)
			continue;
		if ((slept += slice_ms) < 50)
			continue;
		slept = 0;
		char err[1024];
		if (symheapc_go_check_peers(err, sizeof err) != 0 && !cond(arg)) { /* W6 */
			shmemi_flush_stdio();
			fprintf(stderr, "%s (PE %d waiting in %s)\n", err, shmemi_L.me, op);
			fflush(stderr);
			_exit(1);
		}
	}
	__atomic_fetch_sub(sleepers, 1, __ATOMIC_SEQ_CST); /* W7 */
	if (all)
		__atomic_fetch_sub(all, 1, __ATOMIC_SEQ_CST);
}

void shmemi_block(int owner, int (*cond)(void *), void *arg, const char *op)
{
	block_on(shmemi_sigword(owner), shmemi_sigsleepers(owner), shmemi_job_sleeping(), 1, cond, arg, op);
}

/* shmemi_block_word: fenced when the word's writers publish with plain or
 * release stores (coll.c, post_publish relaxed), else they make seq-cst
 * RMWs or stores. */
void shmemi_block_word(uint32_t *word, uint32_t *sleepers, int fenced, int (*cond)(void *), void *arg, const char *op)
{
	block_on(word, sleepers, NULL, fenced, cond, arg, op);
}

/* ---- comparisons ---- */

void shmemi_check_cmp(int cmp, const char *op)
{
	if (SHMEMI_UNLIKELY(cmp < SHMEM_CMP_EQ || cmp > SHMEM_CMP_LE))
		shmemi_fatal(op, "comparison %d is none of SHMEM_CMP_EQ, _NE, _GT, _GE, _LT, _LE", cmp);
}

/* holds reports whether an order c (negative, zero, positive: x against
 * v) satisfies comparison cmp. */
static int holds(int c, int cmp)
{
	switch (cmp) {
	case SHMEM_CMP_EQ: return c == 0;
	case SHMEM_CMP_NE: return c != 0;
	case SHMEM_CMP_GT: return c > 0;
	case SHMEM_CMP_GE: return c >= 0;
	case SHMEM_CMP_LT: return c < 0;
	case SHMEM_CMP_LE: return c <= 0;
	}
	return 0;
}

static int cmp_signed(int64_t x, int cmp, int64_t v) { return holds((x > v) - (x < v), cmp); }

static int cmp_unsigned(uint64_t x, int cmp, uint64_t v) { return holds((x > v) - (x < v), cmp); }

/* load reads an integer of t.size bytes atomically (seq-cst; pairs with
 * the writer's put or AMO), widened. */
static int64_t load_s(const void *p, int size)
{
	switch (size) {
	case 1: return __atomic_load_n((const int8_t *)p, __ATOMIC_SEQ_CST);
	case 2: return __atomic_load_n((const int16_t *)p, __ATOMIC_SEQ_CST);
	case 4: return __atomic_load_n((const int32_t *)p, __ATOMIC_SEQ_CST);
	}
	return __atomic_load_n((const int64_t *)p, __ATOMIC_SEQ_CST);
}

static uint64_t load_u(const void *p, int size)
{
	switch (size) {
	case 1: return __atomic_load_n((const uint8_t *)p, __ATOMIC_SEQ_CST);
	case 2: return __atomic_load_n((const uint16_t *)p, __ATOMIC_SEQ_CST);
	case 4: return __atomic_load_n((const uint32_t *)p, __ATOMIC_SEQ_CST);
	}
	return __atomic_load_n((const uint64_t *)p, __ATOMIC_SEQ_CST);
}

int shmemi_holds(const void *p, struct shmemi_cmp t, int cmp, const void *value)
{
	shmemi_pay();
	if (t.is_signed)
		return cmp_signed(load_s(p, t.size), cmp, load_s(value, t.size));
	return cmp_unsigned(load_u(p, t.size), cmp, load_u(value, t.size));
}

/* The variable waited on must be this PE's symmetric, aligned. */
static void check_var(const void *ivar, size_t n, struct shmemi_cmp t, const char *op)
{
	if (((uintptr_t)ivar & (uintptr_t)(t.size - 1)) != 0)
		shmemi_fatal(op, "the variable at %p is not aligned to its size (%d bytes)", ivar, t.size);
	(void)shmemi_addr(ivar, n * (size_t)t.size, shmemi_L.me, op);
}

struct one_wait {
	const void *p;
	struct shmemi_cmp t;
	int cmp;
	const void *v;
};

static int one_holds(void *arg)
{
	struct one_wait *w = arg;
	return shmemi_holds(w->p, w->t, w->cmp, w->v);
}

void shmemi_wait_until(const void *ivar, struct shmemi_cmp t, int cmp, const void *value, const char *op)
{
	shmemi_check_cmp(cmp, op);
	check_var(ivar, 1, t, op);
	struct one_wait w = {ivar, t, cmp, value};
	if (one_holds(&w))
		return;
	shmemi_block(shmemi_L.me, one_holds, &w, op);
}

int shmemi_test(const void *ivar, struct shmemi_cmp t, int cmp, const void *value, const char *op)
{
	shmemi_check_cmp(cmp, op);
	check_var(ivar, 1, t, op);
	return shmemi_holds(ivar, t, cmp, value);
}

/* ---- the _all, _any and _some forms ---- */

/*
 * The _any forms return one satisfying index; OpenSHMEM asks that a
 * series of calls eventually return every index that satisfies. A scan
 * from index 0 would return 0 for as long as element 0 holds, so each
 * scan starts one past the index the previous call on the same array
 * returned: over N elements that all hold, N calls return each once.
 * The cursors are per PE (this process), one per array in a small table
 * indexed by the array's address (a collision only moves a start);
 * relaxed atomics, as threads that race on a cursor only move a start
 * too. (SOS starts each scan at a random index instead.)
 */
#define ANY_CURSORS 64

static struct {
	uintptr_t key;
	size_t next;
} any_cursor[ANY_CURSORS];

static unsigned any_slot(const void *ivars)
{
	uintptr_t a = (uintptr_t)ivars;
	return (unsigned)((a >> 3) ^ (a >> 9) ^ (a >> 15)) & (ANY_CURSORS - 1);
}

static size_t any_start(const void *ivars, size_t nelems)
{
	unsigned k = any_slot(ivars);
	if (__atomic_load_n(&any_cursor[k].key, __ATOMIC_RELAXED) != (uintptr_t)ivars)
		return 0;
	return __atomic_load_n(&any_cursor[k].next, __ATOMIC_RELAXED) % nelems;
}

static void any_returned(const void *ivars, size_t idx)
{
	unsigned k = any_slot(ivars);
	__atomic_store_n(&any_cursor[k].key, (uintptr_t)ivars, __ATOMIC_RELAXED);
	__atomic_store_n(&any_cursor[k].next, idx + 1, __ATOMIC_RELAXED);
}

struct set_wait {
	const char *ivars;
	size_t nelems;
	const int *status;
	struct shmemi_cmp t;
	int cmp;
	const char *values;
	int vector, mode;
	size_t *indices;
	size_t found;    /* _any: the index; _some: how many */
	char *done;      /* _all/_some: elements seen satisfied */
	size_t start;    /* _any: the index the scan begins at (any_start) */
};

static int set_holds(void *arg)
{
	struct set_wait *s = arg;
	size_t pending = 0;
	for (size_t k = 0; k < s->nelems; k++) {
		size_t i = s->start + k < s->nelems ? s->start + k : s->start + k - s->nelems;
		if ((s->status && s->status[i]) || (s->done && s->done[i]))
			continue;
		const char *v = s->values + (s->vector ? i * (size_t)s->t.size : 0);
		if (!shmemi_holds(s->ivars + i * (size_t)s->t.size, s->t, s->cmp, v)) {
			pending++;
			continue;
		}
		switch (s->mode) {
		case SHMEMI_ANY:
			s->found = i;
			return 1;
		case SHMEMI_SOME:
			s->indices[s->found++] = i;
			/* fall through */
		case SHMEMI_ALL:
			if (s->done)
				s->done[i] = 1;
		}
	}
	if (s->mode == SHMEMI_SOME)
		return s->found > 0;
	if (s->mode == SHMEMI_ALL)
		return pending == 0;
	return 0;
}

size_t shmemi_wait_set(const void *ivars, size_t nelems, const int *status, struct shmemi_cmp t, int cmp,
		       const void *values, int vector, int mode, size_t *indices, int block, const char *op)
{
	shmemi_check_cmp(cmp, op);
	size_t eligible = 0;
	for (size_t i = 0; i < nelems; i++)
		eligible += !(status && status[i]);
	if (nelems > 0)
		check_var(ivars, nelems, t, op);
	if (eligible == 0) {
		/* Nothing to wait for: _all holds, _any finds none, _some none. */
		if (mode == SHMEMI_ALL)
			return 1;
		return mode == SHMEMI_ANY ? SIZE_MAX : 0;
	}
	if (mode == SHMEMI_SOME && indices == NULL)
		shmemi_fatal(op, "indices is NULL (it must hold nelems entries)");
	struct set_wait s = {ivars, nelems, status, t, cmp, values, vector, mode, indices, 0, NULL, 0};
	if (mode == SHMEMI_ANY) {
		s.start = any_start(ivars, nelems);
	} else {
		s.done = calloc(nelems, 1);
		if (s.done == NULL)
			shmemi_fatal(op, "out of memory for %zu elements", nelems);
	}
	int ok = set_holds(&s);
	if (!ok && block) {
		shmemi_block(shmemi_L.me, set_holds, &s, op);
		ok = 1;
	}
	free(s.done);
	switch (mode) {
	case SHMEMI_ALL:
		return (size_t)ok;
	case SHMEMI_ANY:
		if (!ok)
			return SIZE_MAX;
		any_returned(ivars, s.found);
		return s.found;
	}
	return s.found;
}

/* ---- signals ---- */

uint64_t shmem_signal_fetch(const uint64_t *sig_addr)
{
	const uint64_t *s = shmemi_amo_addr(sig_addr, sizeof(uint64_t), shmemi_L.me, "shmem_signal_fetch");
	shmemi_pay();
	return __atomic_load_n(s, __ATOMIC_SEQ_CST);
}

uint64_t shmem_signal_wait_until(uint64_t *sig_addr, int cmp, uint64_t cmp_value)
{
	struct shmemi_cmp t = {8, 0};
	shmemi_wait_until(sig_addr, t, cmp, &cmp_value, "shmem_signal_wait_until");
	return __atomic_load_n(sig_addr, __ATOMIC_SEQ_CST);
}

/* The deprecated C form of shmem_wait_until on a long (OpenSHMEM 1.5,
 * shmem_wait_until.tex), for programs compiled without C11; in C11
 * shmem.h's generic shmem_wait_until macro stands in front of it. */
#undef shmem_wait_until
void shmem_wait_until(long *ivar, int cmp, long cmp_value)
{
	struct shmemi_cmp t = {sizeof(long), 1};
	shmemi_wait_until(ivar, t, cmp, &cmp_value, "shmem_wait_until");
}
