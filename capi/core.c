//go:build symheap_capi

/*
 * core.c - setup, query, memory management, ordering, locks and errors of
 * libsymheap (the fast path itself is in shmem_internal.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <time.h>

#include "shmem_internal.h"
#include "shmemi_go.h"
#include "smalloc.h"
#include "../include/shmemx.h"

struct shmemi_layout shmemi_L;
__thread int shmemi_owed __attribute__((tls_model("initial-exec")));

/* ---- errors ---- */

static void shmemi_flush(void)
{
	fflush(NULL);
}

void shmemi_flush_stdio(void)
{
	shmemi_flush();
}

void shmemi_fatal(const char *op, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	shmemi_flush();
	if (shmemi_L.initialized && !shmemi_L.finalized)
		fprintf(stderr, "symheap: PE %d: %s: %s\n", shmemi_L.me, op, msg);
	else
		fprintf(stderr, "symheap: %s: %s\n", op, msg);
	fflush(stderr);
	if (shmemi_L.initialized && !shmemi_L.finalized)
		symheapc_go_global_exit(1); /* ends every PE of the job with status 1 */
	_exit(1);
}

/* shmemi_go_error prints an error the Go runtime returned (it says
 * "symheap:" itself) with the call it came from. */
void shmemi_go_error(const char *op, const char *err)
{
	shmemi_flush();
	fprintf(stderr, "%s (in %s)\n", err, op);
	fflush(stderr);
}

void shmemi_need_init(const char *op)
{
	if (SHMEMI_UNLIKELY(!shmemi_L.initialized || shmemi_L.finalized))
		shmemi_fatal(op, "%s", shmemi_L.finalized ? "called after shmem_finalize"
							: "called before shmem_init (call shmem_init first)");
}

/* ---- the wake-up step ---- */

void shmemi_futex_wake(uint32_t *w)
{
	syscall(SYS_futex, w, FUTEX_WAKE, INT_MAX >> 1, NULL, NULL, 0);
}

void shmemi_wake_slow(int pe)
{
	uint32_t *w = shmemi_sigword(pe);
	/* As shmsync.Wake: seq-cst increment, then load the sleepers. */
	__atomic_fetch_add(w, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(shmemi_sigsleepers(pe), __ATOMIC_SEQ_CST) != 0)
		shmemi_futex_wake(w);
}

void shmemi_wake_all(void)
{
	for (int pe = 0; pe < shmemi_L.npes; pe++)
		shmemi_wake(pe);
}

/* ---- setup and query ---- */

int shmemi_static_init(void);     /* static.c */
void shmemi_static_finalize(void); /* static.c */
void shmemi_symalloc_finalize(void); /* symalloc.c */
void shmemi_teams_init(void);     /* coll.c */

/*
 * The initialisation calls made and not yet matched by a shmem_finalize
 * (OpenSHMEM 1.6, shmem_init.tex: init may be called more than once, each
 * call matched by a finalize; only the last finalize finalises). The
 * threads of a PE may make these calls, hence the atomics; the first
 * initialisation and the last finalisation are the program's to order
 * against the others, as the specification asks.
 */
static int shmemi_inits;

static void shmemi_atexit(void)
{
	/* A program that returns from main without shmem_finalize leaves
	 * the job as if it had called it: as if it had made every call
	 * still owed, so this one is the last. */
	if (shmemi_L.initialized && !shmemi_L.finalized) {
		__atomic_store_n(&shmemi_inits, 1, __ATOMIC_SEQ_CST);
		shmem_finalize();
	}
}

static int shmemi_init(int requested, int *provided, const char *op)
{
	if (shmemi_L.finalized)
		shmemi_fatal(op, "called after the last shmem_finalize: symheap joins a process to its job once "
				 "(OpenSHMEM 1.6 allows initialising again after finalising; symheap does not: "
				 "make one more shmem_init before the last shmem_finalize instead)");
	if (shmemi_L.initialized) {
		/* A later call: counted, to be matched by a finalize; the
		 * thread level stays the one the first call set. */
		__atomic_fetch_add(&shmemi_inits, 1, __ATOMIC_SEQ_CST);
		if (provided)
			*provided = shmemi_L.thread_level;
		return 0;
	}
	if (requested < SHMEM_THREAD_SINGLE || requested > SHMEM_THREAD_MULTIPLE)
		shmemi_fatal(op, "thread level %d is none of SHMEM_THREAD_SINGLE, _FUNNELED, _SERIALIZED, _MULTIPLE",
			     requested);
	char err[2048];
	if (symheapc_go_init(&shmemi_L, err, sizeof err) != 0) {
		shmemi_go_error(op, err);
		exit(1);
	}
	shmemi_L.thread_level = requested;
	__atomic_store_n(&shmemi_inits, 1, __ATOMIC_SEQ_CST);
	shmemi_L.initialized = 1;
	shmemi_teams_init();
	if (shmemi_static_init() != 0)
		shmemi_fatal(op, "making static data symmetric failed");
	shmemi_smalloc_init(); /* malloc from the shared heap, when asked for (smalloc.c) */
	atexit(shmemi_atexit);
	const char *dbg = getenv("SYMHEAP_CDEBUG");
	if (dbg && *dbg && strcmp(dbg, "0") != 0)
		fprintf(stderr,
			"symheap: PE %d of %d: segment at %p (%s), heap %llu bytes at stride %llu, membarrier %s, "
			"waits poll %d times then yield %d times and for %lld us (none for %lld ms once %d of the last %d lasted %lld us), pair barrier settles %d pauses, "
			"static data %p +%llu%s%s\n",
			shmemi_L.me, shmemi_L.npes, (void *)shmemi_L.base,
			shmemi_L.same_address ? "same address" : "offset mode",
			(unsigned long long)shmemi_L.heap_size, (unsigned long long)shmemi_L.part_stride,
			shmemi_L.mb_ready ? "registered" : "not registered", shmemi_L.polls, shmemi_L.yields,
			(long long)(shmemi_L.yield_ns / 1000), (long long)(shmemi_L.long_yield_memory_ns / 1000000),
			shmemi_L.long_yield_share, shmemi_L.long_yield_window, (long long)(shmemi_L.long_yield_ns / 1000), shmemi_L.settle,
			(void *)shmemi_L.static_lo, (unsigned long long)shmemi_L.static_size,
			shmemi_L.static_why ? ": not symmetric: " : "", shmemi_L.static_why ? shmemi_L.static_why : "");
	if (provided)
		*provided = requested;
	return 0;
}

void shmem_init(void)
{
	shmemi_init(SHMEM_THREAD_MULTIPLE, NULL, "shmem_init");
}

int shmem_init_thread(int requested, int *provided)
{
	return shmemi_init(requested, provided, "shmem_init_thread");
}

/* shmem_query_thread may be called at any time (OpenSHMEM 1.6): before
 * the first initialisation it answers the level shmem_init grants here,
 * after the last finalisation the level the library had. */
void shmem_query_thread(int *provided)
{
	*provided = shmemi_L.initialized ? shmemi_L.thread_level : SHMEM_THREAD_MULTIPLE;
}

/* shmem_query_initialized (OpenSHMEM 1.6): nonzero between the first
 * initialisation and the finalize that matches the last one; may be
 * called at any time. */
void shmem_query_initialized(int *initialized)
{
	*initialized = shmemi_L.initialized && !shmemi_L.finalized;
}

void shmem_finalize(void)
{
	if (!shmemi_L.initialized || shmemi_L.finalized)
		return;
	/* Not the last: a barrier of every PE, as OpenSHMEM 1.6 asks of
	 * such a call, and nothing is released. */
	if (__atomic_sub_fetch(&shmemi_inits, 1, __ATOMIC_SEQ_CST) > 0) {
		shmem_barrier_all();
		return;
	}
	shmemi_quiet();
	char err[2048];
	shmemi_flush();
	shmemi_static_finalize();
	shmemi_symalloc_finalize();
	shmemi_smalloc_finalize(1);
	int rc = symheapc_go_finalize(err, sizeof err);
	shmemi_smalloc_finalize(0);
	shmemi_static_close(); /* every PE has left shmem_init: none opens it any more */
	shmemi_L.finalized = 1;
	if (rc != 0) {
		shmemi_go_error("shmem_finalize", err);
		_exit(1);
	}
}

void shmem_global_exit(int status)
{
	shmemi_flush();
	if (shmemi_L.initialized && !shmemi_L.finalized)
		symheapc_go_global_exit(status); /* does not return */
	exit(status);
}

int shmem_my_pe(void)
{
	return shmemi_L.initialized ? shmemi_L.me : -1;
}

int shmem_n_pes(void)
{
	return shmemi_L.initialized ? shmemi_L.npes : -1;
}

int shmem_pe_accessible(int pe)
{
	if (!shmemi_L.initialized || shmemi_L.finalized || (unsigned)pe >= (unsigned)shmemi_L.npes)
		return 0;
	return symheapc_go_pe_alive(pe);
}

int shmem_addr_accessible(const void *addr, int pe)
{
	uint64_t off;
	if (!shmem_pe_accessible(pe))
		return 0;
	switch (shmemi_locate(addr, 1, &off)) {
	case 1:
		return 1;
	case 2:
		if (shmemi_goes_far(pe)) /* through the transport (far.c) */
			return shmemi_L.static_why == NULL;
		return shmemi_static_addr(shmemi_L.static_lo + off, 1, pe) != NULL;
	}
	return 0;
}

void *shmem_ptr(const void *dest, int pe)
{
	uint64_t off;
	if (!shmemi_L.initialized || shmemi_L.finalized || (unsigned)pe >= (unsigned)shmemi_L.npes)
		return NULL;
	if (shmemi_goes_far(pe))
		return NULL; /* on another node: no load or store reaches it */
	switch (shmemi_locate(dest, 1, &off)) {
	case 1:
		/* The main mapping: read-only for other PEs in protected mode. */
		return shmemi_L.base + shmemi_L.part_off + (uint64_t)pe * shmemi_L.part_stride + off;
	case 2:
		return shmemi_static_addr(shmemi_L.static_lo + off, 1, pe);
	}
	return NULL;
}

void *shmem_team_ptr(shmem_team_t team, const void *dest, int pe)
{
	if (team == SHMEM_TEAM_INVALID)
		return NULL; /* OpenSHMEM 1.6, shmem_team_ptr.tex */
	int w = shmemi_team_world_pe(team, pe, "shmem_team_ptr");
	return w < 0 ? NULL : shmem_ptr(dest, w);
}

void shmem_info_get_version(int *major, int *minor)
{
	*major = SHMEM_MAJOR_VERSION;
	*minor = SHMEM_MINOR_VERSION;
}

void shmem_info_get_name(char *name)
{
	strncpy(name, SHMEM_VENDOR_STRING, SHMEM_MAX_NAME_LEN - 1);
	name[SHMEM_MAX_NAME_LEN - 1] = 0;
}

/* ---- memory management: symalloc.c ---- */

/* ---- ordering ---- */

void shmem_quiet(void)
{
	shmemi_quiet();
}

void shmem_fence(void)
{
	shmemi_quiet(); /* ordering by completion, as the runtime's Fence */
}

void shmem_ctx_quiet(shmem_ctx_t ctx)
{
	if (ctx != SHMEM_CTX_INVALID)
		shmemi_quiet();
}

void shmem_ctx_fence(shmem_ctx_t ctx)
{
	if (ctx != SHMEM_CTX_INVALID)
		shmemi_quiet();
}

/*
 * shmem_pe_quiet (OpenSHMEM 1.6): completion of the operations to some
 * PEs only. Every put and AMO here is a store into coherent memory that
 * is complete once made; what quiet adds (the fences, waking sleepers) is
 * not per PE, so this is quiet itself, once the PEs are checked, as the
 * specification's note allows ("might be equivalent to shmem_quiet").
 * The PE numbers are the world's, as every context operation's here
 * (docs/c.md).
 */
static void pe_quiet(const int *target_pes, size_t npes, const char *op)
{
	if (npes == 0)
		return; /* target_pes is ignored, and may be NULL */
	shmemi_need_init(op);
	if (target_pes == NULL)
		shmemi_fatal(op, "target_pes is NULL with npes %zu", npes);
	for (size_t i = 0; i < npes; i++)
		if ((unsigned)target_pes[i] >= (unsigned)shmemi_L.npes)
			shmemi_fatal(op, "target_pes[%zu]: PE %d does not exist (the job has %d PEs, 0 to %d)", i,
				     target_pes[i], shmemi_L.npes, shmemi_L.npes - 1);
	shmemi_quiet();
}

void shmem_pe_quiet(const int *target_pes, size_t npes)
{
	pe_quiet(target_pes, npes, "shmem_pe_quiet");
}

void shmem_ctx_pe_quiet(shmem_ctx_t ctx, const int *target_pes, size_t npes)
{
	if (ctx == SHMEM_CTX_INVALID)
		return; /* as shmem_ctx_quiet */
	shmemi_ctx_check(ctx, "shmem_ctx_pe_quiet");
	if (ctx == SHMEM_CTX_DEFAULT || ctx->team == SHMEM_TEAM_WORLD || npes == 0) {
		pe_quiet(target_pes, npes, "shmem_ctx_pe_quiet");
		return;
	}
	/* Numbered in the context's team: each must be one of its ranks. */
	shmemi_need_init("shmem_ctx_pe_quiet");
	if (target_pes == NULL)
		shmemi_fatal("shmem_ctx_pe_quiet", "target_pes is NULL with npes %zu", npes);
	for (size_t i = 0; i < npes; i++)
		shmemi_ctx_team_pe(ctx, target_pes[i], "shmem_ctx_pe_quiet");
	shmemi_quiet();
}

int shmemi_ctx_team_pe(shmem_ctx_t ctx, int pe, const char *op)
{
	int w = shmemi_team_world_pe(ctx->team, pe, op);
	if (w < 0)
		shmemi_fatal(op, "PE %d is not in the context's team of %d PEs (a context's PE numbers are its team's, 0 to %d: "
				 "translate a world PE with shmem_team_translate_pe)",
			     pe, shmem_team_n_pes(ctx->team), shmem_team_n_pes(ctx->team) - 1);
	return w;
}

void shmemi_world_barrier(const char *op); /* coll.c */

void shmem_barrier_all(void)
{
	shmemi_need_init("shmem_barrier_all");
	shmemi_world_barrier("shmem_barrier_all"); /* quiet, then every PE's arrival */
}

void shmem_sync_all(void)
{
	shmemi_need_init("shmem_sync_all");
	shmem_team_sync(SHMEM_TEAM_WORLD);
}

/* ---- distributed locks: lock.go's ticket lock, on PE 0's copy ---- */

#define LOCK_NEXT_SHIFT 48
#define LOCK_HOLDER_SHIFT 32
#define LOCK_FIELD 0xffffULL

static inline uint64_t lock_next(uint64_t w)
{
	return w >> LOCK_NEXT_SHIFT;
}
static inline int lock_holder(uint64_t w)
{
	return (int)((w >> LOCK_HOLDER_SHIFT) & LOCK_FIELD) - 1;
}
static inline uint64_t lock_serving(uint64_t w)
{
	return w & LOCK_FIELD;
}

static uint64_t *lock_word(long *lock, const char *op)
{
	shmemi_need_init(op);
	return shmemi_amo_addr(lock, sizeof(long), 0, op);
}

struct lock_wait {
	uint64_t *w;
	uint64_t ticket;
};

static int lock_served(void *arg)
{
	struct lock_wait *l = arg;
	return lock_serving(__atomic_load_n(l->w, __ATOMIC_SEQ_CST)) == l->ticket;
}

/* The locks this thread holds. The lock word records the holding PE (the
 * runtime's format); under SHMEM_THREAD_MULTIPLE another thread of the PE
 * may ask for the lock and waits its turn like any other PE, so re-taking
 * a lock is told apart by thread here. */
#define SHMEMI_MAX_HELD 64
static __thread long *shmemi_held[SHMEMI_MAX_HELD];
static __thread int shmemi_nheld;

static int held_here(long *lock)
{
	for (int i = 0; i < shmemi_nheld; i++)
		if (shmemi_held[i] == lock)
			return i;
	return -1;
}

static void hold(long *lock, const char *op)
{
	if (shmemi_nheld == SHMEMI_MAX_HELD)
		shmemi_fatal(op, "this thread holds %d locks already (the most one thread may hold at once)",
			     SHMEMI_MAX_HELD);
	shmemi_held[shmemi_nheld++] = lock;
}

/*
 * Locks whose word, on PE 0, lies on another node (as the runtime's
 * lock_far.go): the same ticket lock, its word reached with the
 * transport's atomics, which the target performs with the same locked
 * instructions as its node's CPUs. A waiter cannot sleep on PE 0's
 * futex: it polls the word, backing off from 20 us to 1 ms.
 */
static uint64_t far_lock_amo(int amo, long *lock, uint64_t v, uint64_t cmp, const char *op)
{
	return shmemi_far_amo(amo, lock, sizeof(long), 0, v, cmp, op);
}

static void far_set_lock(long *lock)
{
	const char *op = "shmem_set_lock";
	uint64_t old = far_lock_amo(SHMEMI_AMO_FETCH_ADD, lock, 1ULL << LOCK_NEXT_SHIFT, 0, op);
	uint64_t ticket = lock_next(old);
	long pause = 20000;
	while (lock_serving(old) != ticket) {
		nanosleep(&(struct timespec){0, pause}, NULL);
		pause = pause * 2 > 1000000 ? 1000000 : pause * 2;
		old = far_lock_amo(SHMEMI_AMO_FETCH, lock, 0, 0, op);
	}
	(void)far_lock_amo(SHMEMI_AMO_FETCH_ADD, lock, ((uint64_t)shmemi_L.me + 1) << LOCK_HOLDER_SHIFT, 0, op);
}

static int far_test_lock(long *lock)
{
	const char *op = "shmem_test_lock";
	uint64_t tag = (uint64_t)shmemi_L.me + 1;
	for (;;) {
		uint64_t old = far_lock_amo(SHMEMI_AMO_FETCH, lock, 0, 0, op);
		if (lock_next(old) != lock_serving(old))
			return 1;
		uint64_t nw = (old + (1ULL << LOCK_NEXT_SHIFT)) | tag << LOCK_HOLDER_SHIFT;
		if (far_lock_amo(SHMEMI_AMO_CSWAP, lock, nw, old, op) == old)
			return 0;
	}
}

static void far_clear_lock(long *lock)
{
	const char *op = "shmem_clear_lock";
	for (;;) {
		uint64_t old = far_lock_amo(SHMEMI_AMO_FETCH, lock, 0, 0, op);
		int h = lock_holder(old);
		if (h != shmemi_L.me) {
			if (h >= 0)
				shmemi_fatal(op, "the lock at %p is held by PE %d, not this one (only the holder may clear it)",
					     (void *)lock, h);
			shmemi_fatal(op, "the lock at %p is not held (only the holder may clear a lock)", (void *)lock);
		}
		uint64_t serving = (lock_serving(old) + 1) & LOCK_FIELD;
		uint64_t nw = 0;
		if (serving != lock_next(old))
			nw = lock_next(old) << LOCK_NEXT_SHIFT | serving;
		if (far_lock_amo(SHMEMI_AMO_CSWAP, lock, nw, old, op) == old)
			return;
	}
}

void shmem_set_lock(long *lock)
{
	if (shmemi_goes_far(0)) {
		shmemi_need_init("shmem_set_lock");
		if (held_here(lock) >= 0)
			shmemi_fatal("shmem_set_lock",
				     "the lock at %p is already held by this thread (call shmem_clear_lock first)",
				     (void *)lock);
		far_set_lock(lock);
		hold(lock, "shmem_set_lock");
		return;
	}
	uint64_t *w = lock_word(lock, "shmem_set_lock");
	uint64_t tag = (uint64_t)shmemi_L.me + 1;
	if (held_here(lock) >= 0)
		shmemi_fatal("shmem_set_lock", "the lock at %p is already held by this thread (call shmem_clear_lock first)",
			     (void *)lock);
	/* Take a ticket: seq-cst RMW on PE 0's word. */
	uint64_t old = __atomic_fetch_add(w, 1ULL << LOCK_NEXT_SHIFT, __ATOMIC_SEQ_CST);
	struct lock_wait l = {w, lock_next(old)};
	if (lock_serving(old) != l.ticket)
		shmemi_block(0, lock_served, &l, "shmem_set_lock");
	/* Our turn: holder is zero; only we write it now. */
	__atomic_fetch_add(w, tag << LOCK_HOLDER_SHIFT, __ATOMIC_SEQ_CST);
	shmemi_bump(shmemi_L.stat_atomics);
	hold(lock, "shmem_set_lock");
}

int shmem_test_lock(long *lock)
{
	if (shmemi_goes_far(0)) {
		shmemi_need_init("shmem_test_lock");
		if (far_test_lock(lock) != 0)
			return 1;
		hold(lock, "shmem_test_lock");
		return 0;
	}
	uint64_t *w = lock_word(lock, "shmem_test_lock");
	uint64_t tag = (uint64_t)shmemi_L.me + 1;
	for (;;) {
		uint64_t old = __atomic_load_n(w, __ATOMIC_SEQ_CST);
		if (lock_next(old) != lock_serving(old))
			return 1; /* held, or tickets outstanding */
		uint64_t nw = (old + (1ULL << LOCK_NEXT_SHIFT)) | tag << LOCK_HOLDER_SHIFT;
		if (__atomic_compare_exchange_n(w, &old, nw, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
			shmemi_bump(shmemi_L.stat_atomics);
			hold(lock, "shmem_test_lock");
			return 0;
		}
	}
}

void shmem_clear_lock(long *lock)
{
	if (shmemi_goes_far(0)) {
		shmemi_need_init("shmem_clear_lock");
		int i = held_here(lock);
		if (i < 0)
			shmemi_fatal("shmem_clear_lock", "the lock at %p is not held by this thread (only the thread "
							 "holding a lock may clear it)",
				     (void *)lock);
		shmemi_quiet();
		far_clear_lock(lock);
		shmemi_held[i] = shmemi_held[--shmemi_nheld];
		return;
	}
	uint64_t *w = lock_word(lock, "shmem_clear_lock");
	int i = held_here(lock);
	if (i < 0 && lock_holder(__atomic_load_n(w, __ATOMIC_SEQ_CST)) == shmemi_L.me)
		shmemi_fatal("shmem_clear_lock",
			     "the lock at %p is held by another thread of this PE (only the thread holding a lock may "
			     "clear it)",
			     (void *)lock);
	shmemi_quiet();
	for (;;) {
		uint64_t old = __atomic_load_n(w, __ATOMIC_SEQ_CST);
		int h = lock_holder(old);
		if (h != shmemi_L.me) {
			if (h >= 0)
				shmemi_fatal("shmem_clear_lock",
					     "the lock at %p is held by PE %d, not this one (only the holder may clear it)",
					     (void *)lock, h);
			shmemi_fatal("shmem_clear_lock",
				     "the lock at %p is not held (only the holder may clear a lock)", (void *)lock);
		}
		uint64_t serving = (lock_serving(old) + 1) & LOCK_FIELD;
		uint64_t nw = 0; /* no ticket outstanding: back to the zero lock */
		if (serving != lock_next(old))
			nw = lock_next(old) << LOCK_NEXT_SHIFT | serving;
		if (__atomic_compare_exchange_n(w, &old, nw, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
			break;
	}
	shmemi_held[i] = shmemi_held[--shmemi_nheld];
	shmemi_amo_done(0);
}

/* ---- contexts ---- */

int shmem_team_create_ctx(shmem_team_t team, long options, shmem_ctx_t *ctx)
{
	shmemi_need_init("shmem_team_create_ctx");
	if (team == SHMEM_TEAM_INVALID) {
		*ctx = SHMEM_CTX_INVALID;
		return -1;
	}
	struct shmemi_ctx *c = calloc(1, sizeof *c);
	if (c == NULL) {
		*ctx = SHMEM_CTX_INVALID;
		return -1;
	}
	c->team = team;
	c->options = options;
	c->valid = 1;
	*ctx = c;
	return 0;
}

int shmem_ctx_create(long options, shmem_ctx_t *ctx)
{
	return shmem_team_create_ctx(SHMEM_TEAM_WORLD, options, ctx);
}

void shmem_ctx_destroy(shmem_ctx_t ctx)
{
	if (ctx == SHMEM_CTX_INVALID)
		return;
	if (ctx == SHMEM_CTX_DEFAULT)
		shmemi_fatal("shmem_ctx_destroy", "SHMEM_CTX_DEFAULT cannot be destroyed");
	shmemi_ctx_check(ctx, "shmem_ctx_destroy");
	shmemi_quiet();
	ctx->valid = 0;
	free(ctx);
}

int shmem_ctx_get_team(shmem_ctx_t ctx, shmem_team_t *team)
{
	if (ctx == SHMEM_CTX_INVALID || team == NULL) {
		if (team)
			*team = SHMEM_TEAM_INVALID;
		return -1;
	}
	*team = ctx == SHMEM_CTX_DEFAULT ? SHMEM_TEAM_WORLD : ctx->team;
	return 0;
}

/* ---- sessions (OpenSHMEM 1.6) ---- */

/*
 * A session is a hint that a run of operations on a context may be
 * batched. Here every put and AMO is a store into coherent memory, made
 * when it is called, so there is nothing to batch: start and stop record
 * the session (options or'ed by each start, total_ops replaced when
 * masked in, as the specification says) and change no result, as it
 * requires. SHMEM_CTX_DEFAULT is a constant handle; its session lives
 * here.
 */
static struct shmemi_session shmemi_default_session;

static struct shmemi_session *session_of(shmem_ctx_t ctx, const char *op)
{
	if (ctx == SHMEM_CTX_DEFAULT)
		return &shmemi_default_session;
	shmemi_ctx_check(ctx, op);
	return &ctx->session;
}

void shmem_ctx_session_start(shmem_ctx_t ctx, long options, const shmem_ctx_session_config_t *config,
			     long config_mask)
{
	const char *op = "shmem_ctx_session_start";
	if (ctx == SHMEM_CTX_INVALID)
		return; /* "performs no action and returns immediately" */
	shmemi_need_init(op);
	struct shmemi_session *s = session_of(ctx, op);
	if ((config_mask & SHMEM_CTX_SESSION_TOTAL_OPS) && config == NULL)
		shmemi_fatal(op, "config is NULL, but config_mask asks for its total_ops");
	/* A session already started keeps its options and adds these. */
	if (!__atomic_exchange_n(&s->started, 1, __ATOMIC_SEQ_CST)) {
		__atomic_store_n(&s->options, 0, __ATOMIC_SEQ_CST);
		__atomic_store_n(&s->total_ops, SIZE_MAX, __ATOMIC_SEQ_CST);
	}
	__atomic_fetch_or(&s->options, options, __ATOMIC_SEQ_CST);
	if (config_mask & SHMEM_CTX_SESSION_TOTAL_OPS)
		__atomic_store_n(&s->total_ops, config->total_ops, __ATOMIC_SEQ_CST);
}

void shmem_ctx_session_stop(shmem_ctx_t ctx)
{
	const char *op = "shmem_ctx_session_stop";
	if (ctx == SHMEM_CTX_INVALID)
		return;
	shmemi_need_init(op);
	/* Stopping a stopped session has no effect. */
	__atomic_store_n(&session_of(ctx, op)->started, 0, __ATOMIC_SEQ_CST);
}

/* ---- deprecated names ---- */

void start_pes(int npes)
{
	(void)npes; /* the launcher sets the number of PEs */
	if (shmemi_L.initialized && !shmemi_L.finalized)
		return; /* a later start_pes is a no-op, not an initialisation to match (shmem_init.tex) */
	shmemi_init(SHMEM_THREAD_SINGLE, NULL, "start_pes");
}

int _my_pe(void)
{
	return shmem_my_pe();
}

int _num_pes(void)
{
	return shmem_n_pes();
}

void *shmalloc(size_t size)
{
	return shmemi_alloc(0, size, 0, 0, "shmalloc");
}

void shfree(void *ptr)
{
	shmem_free(ptr);
}

void *shrealloc(void *ptr, size_t size)
{
	return shmem_realloc(ptr, size);
}

void *shmemalign(size_t alignment, size_t size)
{
	return shmemi_alloc(2, size, alignment, 0, "shmemalign");
}

/* The cache routines of OpenSHMEM 1.0 to 1.4 do nothing on cache-coherent
 * machines, as the specification says of them. */
void shmem_clear_cache_inv(void) {}
void shmem_set_cache_inv(void) {}
void shmem_clear_cache_line_inv(void *dest) { (void)dest; }
void shmem_set_cache_line_inv(void *dest) { (void)dest; }
void shmem_udcflush(void) {}
void shmem_udcflush_line(void *dest) { (void)dest; }

/* shmem_pcontrol passes its level to a profiling library, when one is
 * interposed; symheap's own does nothing with it, as the specification
 * allows. */
void shmem_pcontrol(const int level, ...) { (void)level; }

/* ---- extensions (shmemx.h) ---- */

void *shmemx_heap_base(int pe)
{
	if (!shmemi_L.initialized || (unsigned)pe >= (unsigned)shmemi_L.npes)
		return NULL;
	return shmemi_L.base + shmemi_L.part_off + (uint64_t)pe * shmemi_L.part_stride;
}

int shmemx_same_address(void)
{
	return shmemi_L.same_address;
}

/* The registration cache (export_reg_unsafe.go holds the entries). */
int shmemx_reg_get(const void *addr, size_t len, shmemx_reg_t *reg)
{
	char err[512];
	if (reg == NULL)
		shmemi_fatal("shmemx_reg_get", "reg is NULL (pass where to store the registration)");
	if (symheapc_go_reg_get((uintptr_t)addr, len, reg, err, sizeof err) != 0) {
		shmemi_go_error("shmemx_reg_get", err);
		return 1;
	}
	return 0;
}

int shmemx_reg_valid(shmemx_reg_t reg)
{
	int v = symheapc_go_reg_valid(reg);
	if (v < 0)
		shmemi_fatal("shmemx_reg_valid", "registration %llu is not held (get it with shmemx_reg_get; "
						  "after shmemx_reg_put it is gone)", (unsigned long long)reg);
	return v;
}

void shmemx_reg_put(shmemx_reg_t reg)
{
	if (symheapc_go_reg_put(reg) != 0)
		shmemi_fatal("shmemx_reg_put", "registration %llu is not held (get it with shmemx_reg_get; "
						"after shmemx_reg_put it is gone)", (unsigned long long)reg);
}
