//go:build symheap_capi

/*
 * shmem_internal.h - the C library's fast path (libsymheap).
 *
 * # Design
 *
 * The Go runtime (the root package, hosted in this process) joins the job
 * at shmem_init and fills shmemi_L once: where the job's segment is mapped,
 * where each PE's partition and control block lies. What lies where in a
 * control block (the words of the runtime's wake-up protocol, the
 * allocation records, the call words) is the Go runtime's types
 * themselves, laid out in shmemi_formats.h, which capi/gen generates from
 * them. From then on put, get, the AMOs, the
 * waits, fence, quiet and the locks run here, in C, on the same shared
 * words and in the same formats as the Go runtime's own (rma.go, wait.go,
 * lock.go in the root), so a C PE and a Go PE of one job agree:
 *
 *   1. Address translation: an address in this PE's symmetric heap is
 *      base + part_off + me*part_stride + off; PE pe's copy is at
 *      wbase + part_off + pe*part_stride + off (wbase is the writable alias
 *      in protected mode, the main mapping otherwise). Offset-based, so it
 *      holds with or without the same-address mapping. An address in the
 *      program's static data (.data/.bss, see static.c) is lo + off; PE
 *      pe's copy is static_peer[pe] + off.
 *   2. Put: the copy, then the wake-up step of a put: load the target's
 *      sleepers count and, only when non-zero, bump its signal word and
 *      FUTEX_WAKE it. No fence when the process registered for membarrier
 *      (the Go runtime registers it at shmem_init; a waiter's
 *      MEMBARRIER_CMD_GLOBAL_EXPEDITED stands in for the writer's fence);
 *      a full fence before the load otherwise.
 *   3. AMOs: one __atomic builtin, sequentially consistent (a locked
 *      instruction on x86-64: a full fence), then the wake-up step.
 *   4. Quiet and fence: a full fence (mfence on x86-64, which also orders
 *      the non-temporal stores of glibc's large memcpy), then the wake-up
 *      step for every PE when anybody in the job sleeps.
 *   5. Waits: poll, yield, then sleep on this PE's signal word under the
 *      runtime's protocol (announce in the sleepers counts, membarrier,
 *      futex wait in 50 ms slices, check the peers' liveness between
 *      slices through the Go runtime).
 *   6. Locks: the runtime's ticket lock on PE 0's copy of the lock word
 *      (lock.go's format: next<<48 | (holder+1)<<32 | serving).
 *
 * A job on several nodes: PEs of this node are reached as above; a PE
 * on another node has no partition here, and every operation on it goes
 * to the runtime's multi-node layer (far.c: the transport Go programs
 * use, by region and offset), tested first by shmemi_goes_far, one load
 * and compare of a pointer that is NULL when the job is on one node.
 * Quiet and fence complete the transport's operations too; collectives
 * and barriers run the runtime's (coll.c).
 *
 * What calls into Go: shmem_init/finalize, the symmetric allocator (but
 * for shmem_free and cache hits of shmem_malloc: symalloc.c), the
 * split, sync and destroy of split teams, global_exit and the liveness
 * check of a wait that has slept 50 ms. barrier_all and the collectives
 * are C (coll.c).
 */
#ifndef SHMEM_INTERNAL_H
#define SHMEM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "shmem.h"
#include "shmemi_calls.h"
#include "shmemi_formats.h" /* the control block, allocation records, post lines, pSync: from the Go types */

struct shmemi_layout {
	char *base;  /* the segment as mapped here */
	char *wbase; /* where other PEs' heaps are written */
	uint64_t part_off, part_stride, heap_size;
	char *cb_base; /* PE 0's control block (struct shmemi_control, then the layers' areas) */
	uint64_t cb_stride;
	uint64_t *stat_puts, *stat_gets, *stat_atomics;
	int me, npes;
	int mb_ready, same_address, protected_;
	int post_relaxed; /* the world barrier publishes with release stores, its sleepers fence (team.Layer.Relaxed) */
	int polls, yields;
	int64_t yield_ns; /* the yields go on this long at least (shmsync.YieldSpan) */
	int64_t long_yield_ns; /* a yield this long ends the yields: the wait sleeps (shmsync.LongYield) */
	int64_t long_yield_memory_ns; /* and the waits sleep without yielding this long (shmsync.LongYieldMemory) */
	int long_yield_share, long_yield_window; /* once this many of the last (<= 32) yields were long (shmsync.LongYieldShare, LongYieldWindow) */
	int64_t hand_over_ns;   /* a yield this long handed the core over (shmsync, "Placement"; 0: none can) */
	int64_t place_every_ns; /* and the PE moves onto a core of its own at most this often (shmsync.PlaceEvery) */
	int settle;       /* pauses between a pair barrier's publication and its first look (shmsync.SettlePolls) */
	uint64_t calls; /* the call words' area in a control block (internal/calls) */
	uint64_t barrier;   /* the full barrier's area in a control block (internal/team, dissem.go) */
	int barrier_rounds; /* round lines per team id there */
	uint64_t *stat_sym_allocs, *stat_sym_frees;
	int initialized, finalized;
	int thread_level;
	/* The program's static data (static.c). */
	char *static_lo;
	uint64_t static_size;
	char **static_peer;       /* by PE: PE p's static data as mapped here; NULL if not reachable */
	const char *static_why;   /* why static data are not symmetric, or NULL */
	char seg_path[512];
	/* Go and C PEs in one job (docs/c.md): this PE's copy of the C
	 * library's symmetric block (SHMEMI_CBLOCK_SIZE bytes, allocated by
	 * the runtime's Init: the world's post lines, then its scratch), and
	 * the number of Go PEs; each PE's language is its control block's
	 * lang (SHMEMI_LANG_GO, SHMEMI_LANG_C). */
	char *cblock;
	int go_pes;
	/* A job on several nodes (docs/multinode.md): far_pe[p] is 1 for a
	 * PE on another node, which the operations reach through the
	 * runtime's transport (far.c); NULL in a job on one node, so that
	 * the fast path's test is one load and compare (shmemi_goes_far). */
	unsigned char *far_pe;
	int *node_of; /* with far_pe: the node of every PE, numbered from 0 */
};

extern struct shmemi_layout shmemi_L;
/* This PE's last collective allocation phase and call numbers, kept by
 * symalloc.c and by the Go runtime alike (cabi.ShareRecords). */
extern uint64_t shmemi_rec_nums[2];

#define SHMEMI_LIKELY(x) __builtin_expect(!!(x), 1)
#define SHMEMI_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Errors: the message names the call; the job ends (shmemi_fatal). */
void shmemi_fatal(const char *op, const char *fmt, ...)
	__attribute__((noreturn, format(printf, 2, 3), cold));
char *shmemi_addr_slow(const void *p, size_t n, int pe, const char *op);
/* addr.c: the static data's copy of PE pe, or NULL; and where the n bytes
 * at p lie: 1, the heap (*off its offset), 2, static data, 0, neither. */
char *shmemi_static_addr(const void *p, size_t n, int pe);
int shmemi_locate(const void *p, size_t n, uint64_t *off);
void shmemi_need_init(const char *op);
void shmemi_go_error(const char *op, const char *err); /* an error the Go runtime returned, with its call */
void *shmemi_alloc(int kind, size_t size, size_t align, long hints, const char *op); /* symalloc.c */
void shmemi_wake_slow(int pe);
void shmemi_futex_wake(uint32_t *w); /* core.c: FUTEX_WAKE of every sleeper on w */
void shmemi_wake_all(void);
int shmemi_agree(uint64_t seq, const uint64_t *rec, const char *op); /* coll.c: the allocation records' agreement */

/* shmemi_ctl is the fixed part of PE pe's control block (the root's
 * control.go, struct shmemi_control in shmemi_formats.h). */
static inline struct shmemi_control *shmemi_ctl(int pe)
{
	return (struct shmemi_control *)(shmemi_L.cb_base + (uint64_t)pe * shmemi_L.cb_stride);
}

/* shmemi_go_pe reports whether PE pe runs a Go program (a job of Go and
 * C PEs: docs/c.md). Its lang was stored before the runtime's Init
 * barrier and never changes. */
static inline int shmemi_go_pe(int pe)
{
	return shmemi_L.go_pes > 0 && __atomic_load_n(&shmemi_ctl(pe)->lang, __ATOMIC_RELAXED) == SHMEMI_LANG_GO;
}

/* The call words (internal/calls, shmemi_calls.h): each PE publishes the
 * collective call it is in, so that a wait that finds another PE in a
 * different one (the runtime's check, wait.c W6) ends the job with a
 * message naming both calls. Release stores, as the runtime's: the other
 * PEs read the words only after a sleep slice. */
static inline struct shmemi_calls_area *shmemi_call_area(void)
{
	return (struct shmemi_calls_area *)(shmemi_L.cb_base + (uint64_t)shmemi_L.me * shmemi_L.cb_stride +
					    shmemi_L.calls);
}

void shmemi_call_broken(int kind) __attribute__((noreturn, cold)); /* coll.c */

/* shmemi_call_args: the arguments of a call that contributes bytes per
 * member from root (-1: none), for the other PEs' checks
 * (internal/calls, Args and "Arguments"). */
static inline uint64_t shmemi_call_args(uint64_t bytes, int root)
{
	return SHMEMI_CALL_ARGS_SET | (bytes & SHMEMI_CALL_ARGS_BYTES_MASK) << SHMEMI_CALL_ARGS_BYTES_SHIFT |
	       ((uint64_t)(root + 1) & SHMEMI_CALL_ARGS_ROOT_MASK);
}

/* shmemi_call_enter counts and publishes a call of kind on team id, with
 * its arguments (shmemi_call_args; 0: none to compare); after a
 * divergence that the runtime found (SHMEMI_CALL_BROKEN) it ends the job
 * instead, as no collective call can complete. */
static inline void shmemi_call_enter(int kind, int team, uint64_t args)
{
	struct shmemi_calls_area *a = shmemi_call_area();
	if (SHMEMI_UNLIKELY(__atomic_load_n(&a->word, __ATOMIC_RELAXED) & SHMEMI_CALL_BROKEN))
		shmemi_call_broken(kind);
	int t = team & (SHMEMI_CALL_MAX_TEAMS - 1);
	uint64_t *c = &a->counts[t];
	uint64_t n = (__atomic_load_n(c, __ATOMIC_RELAXED) & SHMEMI_CALL_NUM_MASK) + 1; /* only this PE writes it */
	uint64_t w = SHMEMI_CALL_IN_CALL | (uint64_t)kind << SHMEMI_CALL_KIND_SHIFT |
		     (uint64_t)(team & 0xff) << SHMEMI_CALL_TEAM_SHIFT | (n & SHMEMI_CALL_NUM_MASK);
	uint64_t r = n << SHMEMI_CALL_ARGS_NUM_SHIFT | (uint64_t)(kind & 0xff) << SHMEMI_CALL_ARGS_KIND_SHIFT |
		     (args & SHMEMI_CALL_ARGS_MASK);
	__atomic_store_n(&a->args[t * SHMEMI_CALL_ARGS_DEPTH + n % SHMEMI_CALL_ARGS_DEPTH], r, __ATOMIC_RELEASE);
	__atomic_store_n(c, w & ~SHMEMI_CALL_IN_CALL, __ATOMIC_RELEASE);
	__atomic_store_n(&a->word, w, __ATOMIC_RELEASE);
}

/* shmemi_call_record returns this PE's record of its call in progress on
 * team id (internal/calls, Tracker.Record), or 0. */
static inline uint64_t shmemi_call_record(int team)
{
	struct shmemi_calls_area *a = shmemi_call_area();
	uint64_t w = __atomic_load_n(&a->word, __ATOMIC_RELAXED); /* this PE's own */
	uint64_t n = w & SHMEMI_CALL_NUM_MASK;
	if (!(w & SHMEMI_CALL_IN_CALL) || (int)((w >> SHMEMI_CALL_TEAM_SHIFT) & 0xff) != (team & 0xff) ||
	    (int)((w >> SHMEMI_CALL_KIND_SHIFT) & 0xff) == SHMEMI_CALL_CLOSE)
		return 0;
	uint64_t r = __atomic_load_n(&a->args[(team & (SHMEMI_CALL_MAX_TEAMS - 1)) * SHMEMI_CALL_ARGS_DEPTH +
					      n % SHMEMI_CALL_ARGS_DEPTH],
				     __ATOMIC_RELAXED);
	return r >> SHMEMI_CALL_ARGS_NUM_SHIFT == (n & SHMEMI_CALL_ARGS_NUM_MASK) ? r : 0;
}

/* shmemi_call_leave marks this PE between calls again. */
static inline void shmemi_call_leave(void)
{
	uint64_t *w = &shmemi_call_area()->word;
	__atomic_store_n(w, __atomic_load_n(w, __ATOMIC_RELAXED) & ~SHMEMI_CALL_IN_CALL, __ATOMIC_RELEASE);
}

/* PE pe's signal: its futex word and sleepers count (wait.go). */
static inline uint32_t *shmemi_sigword(int pe)
{
	return &shmemi_ctl(pe)->sig.word;
}

static inline uint32_t *shmemi_sigsleepers(int pe)
{
	return &shmemi_ctl(pe)->sig.sleepers;
}

/* The job's count of sleepers, in PE 0's control block. */
static inline uint32_t *shmemi_job_sleeping(void)
{
	return &shmemi_ctl(0)->sleeping;
}

/* shmemi_pause is the CPU's spin-wait hint, once (as the Go runtime's
 * shmsync.Pause): every loop that polls a word another process writes
 * pauses between polls. */
static inline void shmemi_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* shmemi_prefetch_w asks for the line at p exclusive, for a store soon. */
static inline void shmemi_prefetch_w(const void *p)
{
#if defined(__x86_64__)
	__asm__ volatile("prefetchw (%0)" : : "r"(p));
#else
	__builtin_prefetch(p, 1);
#endif
}

/* A full fence: mfence on x86-64 (orders non-temporal stores too). */
static inline void shmemi_full_fence(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* A plain increment of one of this PE's counters (symheap stat), as the
 * Go runtime's core.Bump: only this process writes them. */
static inline void shmemi_bump(uint64_t *c)
{
	if (c)
		(*c)++;
}

/*
 * shmemi_addr returns where this PE reaches PE pe's copy of the n bytes at
 * p, a symmetric address. The common case (p in this PE's own symmetric
 * heap, pe valid) is a subtraction and two compares; everything else
 * (static data, an address in another PE's partition, every error) is
 * shmemi_addr_slow's.
 */
static inline char *shmemi_addr(const void *p, size_t n, int pe, const char *op)
{
	uint64_t off = (uint64_t)((uintptr_t)p - (uintptr_t)shmemi_L.base) - shmemi_L.part_off -
		       (uint64_t)shmemi_L.me * shmemi_L.part_stride; /* wraps when below */
	if (SHMEMI_LIKELY(off < shmemi_L.heap_size && n <= shmemi_L.heap_size - off &&
			  (unsigned)pe < (unsigned)shmemi_L.npes)) {
		if (pe == shmemi_L.me)
			return (char *)p;
		return shmemi_L.wbase + shmemi_L.part_off + (uint64_t)pe * shmemi_L.part_stride + off;
	}
	/* The program's static data: PE pe's window. */
	off = (uint64_t)((uintptr_t)p - (uintptr_t)shmemi_L.static_lo);
	if (off < shmemi_L.static_size && n <= shmemi_L.static_size - off && (unsigned)pe < (unsigned)shmemi_L.npes &&
	    shmemi_L.static_peer != NULL && shmemi_L.static_peer[pe] != NULL)
		return shmemi_L.static_peer[pe] + off;
	return shmemi_addr_slow(p, n, pe, op);
}

/* shmemi_goes_far reports whether pe is a PE on another node (far.c);
 * a PE number out of range is not, and meets the checks of shmemi_addr. */
static inline int shmemi_goes_far(int pe)
{
	return SHMEMI_UNLIKELY(shmemi_L.far_pe != NULL) && (unsigned)pe < (unsigned)shmemi_L.npes &&
	       shmemi_L.far_pe[pe];
}

/* Operations on a PE of another node (far.c), through the runtime's
 * transport: p is a symmetric address of this PE (the heap or static
 * data), located by offset. A put returns when src may be reused (nbi:
 * src is read until the next quiet); the data are complete at quiet. An
 * AMO of size 4 or 8 bytes takes and returns the value's bits. */
enum {
	SHMEMI_AMO_FETCH = 1,
	SHMEMI_AMO_SET,
	SHMEMI_AMO_SWAP,
	SHMEMI_AMO_CSWAP,
	SHMEMI_AMO_FETCH_ADD,
	SHMEMI_AMO_FETCH_AND,
	SHMEMI_AMO_FETCH_OR,
	SHMEMI_AMO_FETCH_XOR,
	SHMEMI_AMO_ADD,
	SHMEMI_AMO_AND,
	SHMEMI_AMO_OR,
	SHMEMI_AMO_XOR,
};
void shmemi_far_put(void *dst, const void *src, size_t n, int pe, int nbi, const char *op);
void shmemi_far_get(void *dst, const void *src, size_t n, int pe, const char *op);
uint64_t shmemi_far_amo(int amo, const void *p, size_t size, int pe, uint64_t v, uint64_t cmp, const char *op);
void shmemi_far_quiet(void);
/* shmemi_far_posted is 1 once a put or a non-fetching AMO to another node
 * may wait for the transport's flush (far.c), until a quiet flushes. */
extern int shmemi_far_posted;
void shmemi_far_strided(void *dst, const void *src, ptrdiff_t dst_stride, ptrdiff_t src_stride, size_t nblocks,
			size_t bsize, size_t size, int pe, int put, const char *op);
void shmemi_far_put_signal(void *dst, const void *src, size_t n, uint64_t *sig_addr, uint64_t signal, int sig_op,
			   int pe, const char *op);
/* A collective routine the C library has only over the node's shared
 * memory, called in a job on several nodes: ends the job, naming op. */
void shmemi_far_refuse(const char *op) __attribute__((noreturn, cold));

/* shmemi_bits: the size bytes of an AMO's value as the transport's word. */
static inline uint64_t shmemi_bits(const void *v, size_t size)
{
	uint64_t b = 0;
	memcpy(&b, v, size);
	return b;
}

/* shmemi_wake: the wake-up step of a put or AMO to pe. Seq-cst load; pairs
 * with a waiter's sleepers increment followed by its membarrier (wait.go). */
static inline void shmemi_wake(int pe)
{
	if (__atomic_load_n(shmemi_sigsleepers(pe), __ATOMIC_SEQ_CST) != 0)
		shmemi_wake_slow(pe);
}

/*
 * Completion: quiet and fence, as the runtime's Quiet (the root's rma.go,
 * "Quiet's fence, owed to the next load"). On x86-64, whose stores become
 * visible in program order, quiet issues SFENCE, which orders the
 * non-temporal stores of glibc's large memcpy before every later store,
 * and owes the full fence (store-to-load order) to this thread's next
 * operation that loads shared memory through the API (get, g, fetch,
 * wait, test), which pays it first (shmemi_pay). AMOs, locks and
 * barriers are full fences themselves. Where the process has no
 * membarrier registration, and on other architectures, quiet executes
 * the full fence at once.
 */
#if defined(__x86_64__)
#define SHMEMI_LAZY_QUIET 1
#else
#define SHMEMI_LAZY_QUIET 0
#endif
extern __thread int shmemi_owed __attribute__((tls_model("initial-exec")));

static inline void shmemi_pay(void)
{
	if (SHMEMI_UNLIKELY(shmemi_owed)) {
		shmemi_owed = 0;
		shmemi_full_fence();
	}
}

static inline void shmemi_quiet(void)
{
	if (SHMEMI_LAZY_QUIET && SHMEMI_LIKELY(shmemi_L.mb_ready)) {
#if defined(__x86_64__)
		__asm__ __volatile__("sfence" ::: "memory");
#endif
		shmemi_owed = 1;
	} else {
		shmemi_full_fence();
	}
	/* Seq-cst load; pairs with a waiter's increment of the job's count
	 * (waiters' membarrier stands in for our fence, as for a put). */
	if (__atomic_load_n(shmemi_job_sleeping(), __ATOMIC_SEQ_CST) != 0)
		shmemi_wake_all();
	if (SHMEMI_UNLIKELY(shmemi_L.far_pe != NULL) && __atomic_load_n(&shmemi_far_posted, __ATOMIC_RELAXED))
		shmemi_far_quiet(); /* the transport's operations, complete at their targets */
}

/* shmemi_copy: two word loads then two word stores for 8 to 16 bytes (the
 * transfers whose latency matters most; as the runtime's core.CopyBytes),
 * memcpy otherwise. */
static inline void shmemi_copy(void *d, const void *s, size_t n)
{
	if (n - 8 <= 8) { /* 8 <= n <= 16 */
		uint64_t a, b;
		memcpy(&a, s, 8);
		memcpy(&b, (const char *)s + n - 8, 8);
		memcpy(d, &a, 8);
		memcpy((char *)d + n - 8, &b, 8);
		return;
	}
	memcpy(d, s, n);
}

/* shmemi_memcpy is memcpy for a length that may be 0 with null pointers,
 * as a call of no elements may pass them (shmemi_addr_slow); memcpy's own
 * pointers must be valid even for 0 bytes (C11 7.24.1). */
static inline void shmemi_memcpy(void *d, const void *s, size_t n)
{
	if (n)
		memcpy(d, s, n);
}

static inline void shmemi_put(void *dst, const void *src, size_t n, int pe, const char *op)
{
	if (shmemi_goes_far(pe)) {
		shmemi_far_put(dst, src, n, pe, 0, op);
		return;
	}
	char *d = shmemi_addr(dst, n, pe, op);
	if (SHMEMI_UNLIKELY(n == 0))
		return; /* dst and src may be NULL: nothing to copy, nobody to wake */
	shmemi_copy(d, src, n);
	shmemi_bump(shmemi_L.stat_puts);
	if (SHMEMI_UNLIKELY(!shmemi_L.mb_ready))
		shmemi_full_fence();
	shmemi_wake(pe);
}

/* An NBI put: the copy; the wake-up step waits for quiet. */
static inline void shmemi_put_nbi(void *dst, const void *src, size_t n, int pe, const char *op)
{
	if (shmemi_goes_far(pe)) {
		shmemi_far_put(dst, src, n, pe, 1, op);
		return;
	}
	char *d = shmemi_addr(dst, n, pe, op);
	if (SHMEMI_UNLIKELY(n == 0))
		return;
	shmemi_copy(d, src, n);
	shmemi_bump(shmemi_L.stat_puts);
}

static inline void shmemi_get(void *dst, const void *src, size_t n, int pe, const char *op)
{
	if (shmemi_goes_far(pe)) {
		shmemi_far_get(dst, src, n, pe, op);
		return;
	}
	const char *s = shmemi_addr(src, n, pe, op);
	if (SHMEMI_UNLIKELY(n == 0))
		return;
	shmemi_pay();
	shmemi_copy(dst, s, n);
	shmemi_bump(shmemi_L.stat_gets);
}

/* Strided put/get of nelems elements of size bytes; strides in elements. */
static inline void shmemi_iput(void *dst, const void *src, ptrdiff_t dst_stride, ptrdiff_t src_stride,
			       size_t nelems, size_t size, int pe, const char *op)
{
	if (nelems == 0) {
		(void)shmemi_addr(dst, 0, pe, op);
		return;
	}
	if (dst_stride < 1 || src_stride < 1)
		shmemi_fatal(op, "strides dst %td and src %td must be at least 1", dst_stride, src_stride);
	if (shmemi_goes_far(pe)) {
		shmemi_far_strided(dst, src, dst_stride, src_stride, nelems, 1, size, pe, 1, op);
		return;
	}
	char *d = shmemi_addr(dst, ((nelems - 1) * (size_t)dst_stride + 1) * size, pe, op);
	const char *s = src;
	for (size_t i = 0; i < nelems; i++)
		memcpy(d + i * (size_t)dst_stride * size, s + i * (size_t)src_stride * size, size);
	shmemi_bump(shmemi_L.stat_puts);
	if (SHMEMI_UNLIKELY(!shmemi_L.mb_ready))
		shmemi_full_fence();
	shmemi_wake(pe);
}

static inline void shmemi_iget(void *dst, const void *src, ptrdiff_t dst_stride, ptrdiff_t src_stride,
			       size_t nelems, size_t size, int pe, const char *op)
{
	if (nelems == 0) {
		(void)shmemi_addr(src, 0, pe, op);
		return;
	}
	if (dst_stride < 1 || src_stride < 1)
		shmemi_fatal(op, "strides dst %td and src %td must be at least 1", dst_stride, src_stride);
	if (shmemi_goes_far(pe)) {
		shmemi_far_strided(dst, src, dst_stride, src_stride, nelems, 1, size, pe, 0, op);
		return;
	}
	const char *s = shmemi_addr(src, ((nelems - 1) * (size_t)src_stride + 1) * size, pe, op);
	char *d = dst;
	shmemi_pay();
	for (size_t i = 0; i < nelems; i++)
		memcpy(d + i * (size_t)dst_stride * size, s + i * (size_t)src_stride * size, size);
	shmemi_bump(shmemi_L.stat_gets);
}

/* Blocked strided: nblocks blocks of bsize elements; strides in elements
 * between the starts of consecutive blocks. */
static inline void shmemi_ibput(void *dst, const void *src, ptrdiff_t dst_stride, ptrdiff_t src_stride,
				size_t bsize, size_t nblocks, size_t size, int pe, const char *op)
{
	if (nblocks == 0 || bsize == 0) {
		(void)shmemi_addr(dst, 0, pe, op);
		return;
	}
	if (dst_stride < (ptrdiff_t)bsize || src_stride < (ptrdiff_t)bsize)
		shmemi_fatal(op, "strides dst %td and src %td must be at least the block size %zu", dst_stride,
			     src_stride, bsize);
	if (shmemi_goes_far(pe)) {
		shmemi_far_strided(dst, src, dst_stride, src_stride, nblocks, bsize, size, pe, 1, op);
		return;
	}
	char *d = shmemi_addr(dst, ((nblocks - 1) * (size_t)dst_stride + bsize) * size, pe, op);
	const char *s = src;
	for (size_t i = 0; i < nblocks; i++)
		memcpy(d + i * (size_t)dst_stride * size, s + i * (size_t)src_stride * size, bsize * size);
	shmemi_bump(shmemi_L.stat_puts);
	if (SHMEMI_UNLIKELY(!shmemi_L.mb_ready))
		shmemi_full_fence();
	shmemi_wake(pe);
}

static inline void shmemi_ibget(void *dst, const void *src, ptrdiff_t dst_stride, ptrdiff_t src_stride,
				size_t bsize, size_t nblocks, size_t size, int pe, const char *op)
{
	if (nblocks == 0 || bsize == 0) {
		(void)shmemi_addr(src, 0, pe, op);
		return;
	}
	if (dst_stride < (ptrdiff_t)bsize || src_stride < (ptrdiff_t)bsize)
		shmemi_fatal(op, "strides dst %td and src %td must be at least the block size %zu", dst_stride,
			     src_stride, bsize);
	if (shmemi_goes_far(pe)) {
		shmemi_far_strided(dst, src, dst_stride, src_stride, nblocks, bsize, size, pe, 0, op);
		return;
	}
	const char *s = shmemi_addr(src, ((nblocks - 1) * (size_t)src_stride + bsize) * size, pe, op);
	char *d = dst;
	shmemi_pay();
	for (size_t i = 0; i < nblocks; i++)
		memcpy(d + i * (size_t)dst_stride * size, s + i * (size_t)src_stride * size, bsize * size);
	shmemi_bump(shmemi_L.stat_gets);
}

/* shmemi_amo_addr: PE pe's copy of the size-byte word at p, which must be
 * symmetric and aligned to its size. */
static inline void *shmemi_amo_addr(const void *p, size_t size, int pe, const char *op)
{
	if (SHMEMI_UNLIKELY(((uintptr_t)p & (size - 1)) != 0))
		shmemi_fatal(op, "the variable at %p is not aligned to its size (%zu bytes)", p, size);
	return shmemi_addr(p, size, pe, op);
}

static inline void shmemi_amo_done(int pe)
{
	shmemi_bump(shmemi_L.stat_atomics);
	shmemi_wake(pe);
}

/* Put with signal: the data, a full fence (the signal must not be seen
 * before the data), the signal update as an AMO, the wake-up step. */
static inline void shmemi_put_signal(void *dst, const void *src, size_t n, uint64_t *sig_addr, uint64_t signal,
				     int sig_op, int pe, const char *op)
{
	if (shmemi_goes_far(pe)) {
		shmemi_far_put_signal(dst, src, n, sig_addr, signal, sig_op, pe, op);
		return;
	}
	char *d = shmemi_addr(dst, n, pe, op);
	uint64_t *s = shmemi_amo_addr(sig_addr, sizeof(uint64_t), pe, op);
	shmemi_memcpy(d, src, n); /* none: the signal still goes */
	shmemi_bump(shmemi_L.stat_puts);
	shmemi_full_fence();
	if (sig_op == SHMEM_SIGNAL_SET)
		__atomic_store_n(s, signal, __ATOMIC_SEQ_CST);
	else if (sig_op == SHMEM_SIGNAL_ADD)
		__atomic_fetch_add(s, signal, __ATOMIC_SEQ_CST);
	else
		shmemi_fatal(op, "sig_op %d is neither SHMEM_SIGNAL_SET nor SHMEM_SIGNAL_ADD", sig_op);
	shmemi_amo_done(pe);
}

/* A signal update without data (shmem_signal_add, shmem_signal_set of
 * OpenSHMEM 1.6): the update of put with signal alone, an AMO on the
 * signal word (seq-cst: a full fence, so that the puts before it are seen
 * first), then the wake-up step. */
static inline void shmemi_signal_update(uint64_t *sig_addr, uint64_t signal, int sig_op, int pe, const char *op)
{
	if (shmemi_goes_far(pe)) {
		shmemi_far_put_signal(NULL, NULL, 0, sig_addr, signal, sig_op, pe, op);
		return;
	}
	uint64_t *s = shmemi_amo_addr(sig_addr, sizeof(uint64_t), pe, op);
	if (sig_op == SHMEM_SIGNAL_SET)
		__atomic_store_n(s, signal, __ATOMIC_SEQ_CST);
	else
		__atomic_fetch_add(s, signal, __ATOMIC_SEQ_CST);
	shmemi_amo_done(pe);
}

/* Waits (wait.c). A comparison on an integer of size 2, 4 or 8 bytes,
 * signed or not. */
struct shmemi_cmp {
	int size, is_signed;
};
int shmemi_holds(const void *p, struct shmemi_cmp t, int cmp, const void *value);
void shmemi_check_cmp(int cmp, const char *op);
void shmemi_wait_until(const void *ivar, struct shmemi_cmp t, int cmp, const void *value, const char *op);
int shmemi_test(const void *ivar, struct shmemi_cmp t, int cmp, const void *value, const char *op);

enum { SHMEMI_ALL, SHMEMI_ANY, SHMEMI_SOME };
/* The _all/_any/_some forms, blocking or not; values is one value
 * (vector == 0) or one per element. */
size_t shmemi_wait_set(const void *ivars, size_t nelems, const int *status, struct shmemi_cmp t, int cmp,
		       const void *values, int vector, int mode, size_t *indices, int block, const char *op);
/* Block until cond(arg) holds: poll, yield, then sleep on PE owner's
 * signal word (shmemi_block), or on word with its sleepers count
 * (shmemi_block_word; fenced when the word's writers publish with plain or
 * release stores, else they make seq-cst RMWs or stores). */
void shmemi_block(int owner, int (*cond)(void *), void *arg, const char *op);
void shmemi_block_word(uint32_t *word, uint32_t *sleepers, int fenced, int (*cond)(void *), void *arg, const char *op);

/* Collectives (coll.c). combine(acc, in, n) folds n elements of in into acc. */
typedef void (*shmemi_combine_fn)(void *acc, const void *in, size_t n);
int shmemi_team_reduce(shmem_team_t team, void *dest, const void *src, size_t n, size_t size,
		       shmemi_combine_fn combine, const char *op);
void shmemi_set_reduce(void *dest, const void *src, size_t n, size_t size, int start, int logstride,
		       int size_, long *pSync, shmemi_combine_fn combine, const char *op);
int shmemi_team_broadcast(shmem_team_t team, void *dest, const void *src, size_t n, int root,
			  const char *op);
int shmemi_team_collect(shmem_team_t team, void *dest, const void *src, size_t n, int fixed, const char *op);
int shmemi_team_alltoalls(shmem_team_t team, void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst,
			  size_t nelems, size_t size, const char *op);
/* The scans of OpenSHMEM 1.6: dest on team rank i gets the combination of
 * the sources of ranks 0 to i (exclusive: 0 to i-1, zero on rank 0). */
int shmemi_team_scan(shmem_team_t team, void *dest, const void *src, size_t n, size_t size,
		     shmemi_combine_fn combine, int exclusive, const char *op);
void shmemi_set_broadcast(void *dest, const void *src, size_t n, int root, int start, int logstride,
			  int size, long *pSync, const char *op);
void shmemi_set_collect(void *dest, const void *src, size_t n, int fixed, int start, int logstride, int size,
			long *pSync, const char *op);
void shmemi_set_alltoalls(void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst, size_t nelems,
			  size_t size, int start, int logstride, int psize, long *pSync, const char *op);

/* Contexts: a context is its team and options; every operation on a
 * context is the same store into coherent memory as without one. */
struct shmemi_ctx {
	shmem_team_t team;
	long options;
	int valid;
	/* Its session (OpenSHMEM 1.6; core.c): hints that change nothing
	 * here, kept so that a start adds to the options of a started
	 * session as the specification says. */
	struct shmemi_session {
		long options;     /* SHMEM_CTX_SESSION_*, or'ed by each start */
		size_t total_ops; /* the hint; SIZE_MAX by default */
		int started;
	} session;
};

static inline void shmemi_ctx_check(shmem_ctx_t ctx, const char *op)
{
	if (SHMEMI_LIKELY(ctx == SHMEM_CTX_DEFAULT))
		return;
	if (SHMEMI_UNLIKELY(ctx == SHMEM_CTX_INVALID || !ctx->valid))
		shmemi_fatal(op, "the context is SHMEM_CTX_INVALID or destroyed (create it with shmem_ctx_create)");
}

/* The descriptor of this PE's static data window, -1 if none (static.c). */
int shmemi_static_fd(void);
/* Closes it, once every PE has left shmem_init (static.c). */
void shmemi_static_close(void);

/* The team's world PE of team rank r (coll.c). */
int shmemi_team_world_pe(shmem_team_t team, int r, const char *op);

/* shmemi_ctx_team_pe is shmemi_ctx_pe's slow case (core.c): the world PE
 * of rank pe of ctx's team; a rank outside the team ends the job. */
int shmemi_ctx_team_pe(shmem_ctx_t ctx, int pe, const char *op);

/* shmemi_ctx_pe checks ctx and returns the world PE of the target pe of
 * an operation on it: OpenSHMEM numbers that PE in the context's team
 * (SHMEM_CTX_DEFAULT's is the world). */
static inline int shmemi_ctx_pe(shmem_ctx_t ctx, int pe, const char *op)
{
	if (SHMEMI_LIKELY(ctx == SHMEM_CTX_DEFAULT))
		return pe;
	shmemi_ctx_check(ctx, op);
	if (ctx->team == SHMEM_TEAM_WORLD)
		return pe;
	return shmemi_ctx_team_pe(ctx, pe, op);
}

#endif
