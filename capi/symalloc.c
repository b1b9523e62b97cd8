//go:build symheap_capi

/*
 * symalloc.c - the collective allocation calls: shmem_malloc, calloc,
 * align, malloc_with_hints, realloc and free (and their deprecated names,
 * core.c).
 *
 * # Design
 *
 * The runtime's allocator (Go, the root's symalloc.go) hands out the
 * blocks. Every call exchanges a record per PE through the PEs' control
 * blocks: OpenSHMEM's barrier of the call, and the runtime's check that
 * every PE made the same call and got the same offset. A call from C into
 * Go costs about 50 ns each way on the machines measured, as much as the
 * rest of an allocation, so two cases run here, in C, on the same records
 * and in the same format as the runtime's:
 *
 *   1. shmem_free: the exchange (the barrier on entry), then the block
 *      goes to this PE's cache of freed blocks, or, when the cache cannot
 *      take it, back to the allocator through Go.
 *   2. shmem_malloc and shmem_calloc of a size the cache holds a block
 *      of: the block (zeroed first for calloc), then the exchange, with
 *      its offset.
 *
 * Every PE makes the same calls in the same order, so every PE's cache
 * holds the same blocks, and a block from it has the same offset on every
 * PE; the exchange checks it as it checks every allocation. The cache is
 * given back to the allocator, in one go, at the next call that goes to
 * Go (any other allocation, realloc) and at shmem_finalize: at the same
 * point on every PE, so the heaps stay alike. Until then its blocks count
 * as allocated for symheap stat and the heap checker, and their release
 * is reported when they go back.
 *
 * The cache holds at most SHMEMI_CACHE blocks, of the sizes malloc,
 * calloc or realloc gave them, and at most a sixteenth of the heap in
 * all; a malloc takes a block of exactly its size, the most recently
 * freed first. Aligned blocks and blocks with hints are never cached.
 *
 * # The records
 *
 * As the runtime's (its symalloc.go, "The records"): phase k of this PE's
 * calls writes slot k%2 of its two. Up to SHMEMI_AGREE_FLAT PEs, seq = k
 * is published with a release store after quiet (where the process
 * registered for membarrier, whose waiters fence for the publisher), else
 * a seq-cst one, and every PE reads every other PE's slot. With more, the
 * record goes along the agreement's dissemination rounds (coll.c,
 * shmemi_agree; the runtime's internal/team, agree.go), which say whether
 * every PE's record is alike: ⌈log₂ N⌉ lines written and read per PE and
 * phase. Only when they differ does the runtime read every PE's slot to
 * name them. The calls made here run on one node only (a job on several
 * sends frees to the runtime, so the cache is empty there). The last phase and call numbers are kept in
 * this process (shmemi_rec_nums), where the runtime keeps them too
 * (cabi.ShareRecords), so calls made here and calls made in Go number
 * alike and meet in the same phases of the agreement. Reading them back
 * from this PE's own slots instead cost a cache miss a call (~90 ns).
 *
 * # Validation
 *
 * A table of this PE's live blocks (offset -> size) tells shmem_free a
 * block it may free here; anything else (not symmetric, not a block's
 * start, freed already) goes to Go, which names the error as before.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shmem_internal.h"
#include "shmemi_go.h"

/* The records, their kinds (SHMEMI_ALLOC_CALL_*) and "no offset" are the
 * runtime's (control.go, symalloc.go), in shmemi_formats.h. */
#define NO_OFF SHMEMI_ALLOC_NO_OFF

uint64_t shmemi_rec_nums[2];

/* rec_of is PE pe's record of phase seq: slot seq%2 of its two. */
static struct shmemi_alloc_record *rec_of(int pe, uint64_t seq)
{
	return &shmemi_ctl(pe)->alloc_rec[seq & 1].alloc_record;
}

/* ---- the lock of the calls (SHMEM_THREAD_MULTIPLE) ---- */

static int call_lock;

static void lock_calls(void)
{
	if (shmemi_L.thread_level != SHMEM_THREAD_MULTIPLE)
		return;
	for (int i = 0; __atomic_exchange_n(&call_lock, 1, __ATOMIC_ACQUIRE); i++) {
		shmemi_pause();
		if ((i & 63) == 63)
			sched_yield();
	}
}

static void unlock_calls(void)
{
	if (shmemi_L.thread_level == SHMEM_THREAD_MULTIPLE)
		__atomic_store_n(&call_lock, 0, __ATOMIC_RELEASE);
}

/* ---- the live blocks: open addressing, linear probing ---- */

struct live {
	uint64_t key;  /* offset + 1; 0: empty */
	uint64_t size; /* bytes asked for; LIVE_CACHEABLE set if the cache may take it */
};
#define LIVE_CACHEABLE (1ULL << 63)

static struct live *live_tab;
static uint64_t live_cap, live_n; /* cap: a power of two, or 0 */

/* live_home is key's first slot in a table of cap entries. */
static uint64_t live_home(uint64_t key, uint64_t cap)
{
	return ((key >> 4) * 0x9e3779b97f4a7c15ULL) >> 32 & (cap - 1);
}

static struct live *live_find(uint64_t off)
{
	if (live_cap == 0)
		return NULL;
	for (uint64_t i = live_home(off + 1, live_cap);; i = (i + 1) & (live_cap - 1)) {
		if (live_tab[i].key == off + 1)
			return &live_tab[i];
		if (live_tab[i].key == 0)
			return NULL;
	}
}

static void live_put(struct live *tab, uint64_t cap, uint64_t key, uint64_t size)
{
	uint64_t i = live_home(key, cap);
	while (tab[i].key != 0)
		i = (i + 1) & (cap - 1);
	tab[i].key = key;
	tab[i].size = size;
}

/* live_add records a block. A table that cannot grow ends the job: every
 * PE must take the same paths. */
static void live_add(uint64_t off, uint64_t size, const char *op)
{
	if (2 * (live_n + 1) > live_cap) {
		uint64_t cap = live_cap ? 2 * live_cap : 256;
		struct live *tab = calloc(cap, sizeof *tab);
		if (tab == NULL)
			shmemi_fatal(op, "out of memory for the table of symmetric blocks (%llu blocks)",
				     (unsigned long long)live_n);
		for (uint64_t i = 0; i < live_cap; i++)
			if (live_tab[i].key != 0)
				live_put(tab, cap, live_tab[i].key, live_tab[i].size);
		free(live_tab);
		live_tab = tab;
		live_cap = cap;
	}
	live_put(live_tab, live_cap, off + 1, size);
	live_n++;
}

/* live_remove deletes entry e, shifting back the entries of its run. */
static void live_remove(struct live *e)
{
	uint64_t i = (uint64_t)(e - live_tab), j = i;
	live_tab[i].key = 0;
	live_n--;
	for (;;) {
		j = (j + 1) & (live_cap - 1);
		if (live_tab[j].key == 0)
			return;
		uint64_t k = live_home(live_tab[j].key, live_cap);
		/* Entry j stays if its home k lies cyclically in (i, j]. */
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		live_tab[i] = live_tab[j];
		live_tab[j].key = 0;
		i = j;
	}
}

/* ---- the cache of freed blocks ---- */

#define SHMEMI_CACHE 8

static uint64_t cache_off[SHMEMI_CACHE], cache_size[SHMEMI_CACHE];
static int cache_n;         /* blocks in the cache, the newest last */
static uint64_t cache_bytes; /* their sizes, summed */

static uint64_t cache_limit(void) { return shmemi_L.heap_size / 16; }

/* cache_drop removes the k blocks from position i on, keeping the others
 * in order (cache_bytes is the caller's to update). */
static void cache_drop(int i, int k)
{
	memmove(&cache_off[i], &cache_off[i + k], (size_t)(cache_n - i - k) * sizeof cache_off[0]);
	memmove(&cache_size[i], &cache_size[i + k], (size_t)(cache_n - i - k) * sizeof cache_size[0]);
	cache_n -= k;
}

/* cache_take removes the newest block of exactly size bytes and returns
 * its offset, or NO_OFF. */
static uint64_t cache_take(uint64_t size)
{
	for (int i = cache_n - 1; i >= 0; i--) {
		if (cache_size[i] != size)
			continue;
		uint64_t off = cache_off[i];
		cache_bytes -= size;
		cache_drop(i, 1);
		return off;
	}
	return NO_OFF;
}

static void cache_push(uint64_t off, uint64_t size)
{
	cache_off[cache_n] = off;
	cache_size[cache_n] = size;
	cache_n++;
	cache_bytes += size;
}

/* give_back hands n blocks (freed, exchanged) to the allocator, through
 * Go. A failure means the heap was corrupted: the job ends. */
static void give_back(uint64_t *offs, int n, const char *op)
{
	char err[2048];
	if (n > 0 && symheapc_go_free_exchanged(offs, n, err, sizeof err) != 0) {
		shmemi_go_error(op, err);
		symheapc_go_global_exit(1);
	}
}

/* cache_put takes a freed block, making room by giving back the oldest
 * blocks; a block too large for the cache goes back at once. */
static void cache_put(uint64_t off, uint64_t size, const char *op)
{
	if (size > cache_limit()) {
		give_back(&off, 1, op);
		return;
	}
	int k = 0;
	while (k < cache_n && (cache_n - k >= SHMEMI_CACHE || cache_bytes + size > cache_limit()))
		cache_bytes -= cache_size[k++];
	if (k > 0) {
		give_back(cache_off, k, op);
		cache_drop(0, k);
	}
	cache_push(off, size);
}

/* ---- the exchange ---- */

/* all_arrived: every other PE has published phase *(uint64_t *)arg. */
static int all_arrived(void *arg)
{
	uint64_t seq = *(uint64_t *)arg;
	for (int p = 0; p < shmemi_L.npes; p++)
		/* Acquire; pairs with PE p's publishing store. */
		if (p != shmemi_L.me && __atomic_load_n(&rec_of(p, seq)->seq, __ATOMIC_ACQUIRE) < seq)
			return 0;
	return 1;
}

/* agree is exchange_rec's form for more than SHMEMI_AGREE_FLAT PEs: the
 * record goes along the agreement's rounds, which also say whether every
 * PE's equals it (coll.c, shmemi_agree; the runtime's internal/team,
 * agree.go). The slot is stored for the runtime's message on a
 * difference and the calls' messages, which read it after the agreement:
 * its seq store is relaxed, published by the agreement's first line. */
static int agree(const struct shmemi_alloc_record *mine, struct shmemi_alloc_record *r, int with_out, const char *op,
		 char *err, size_t n)
{
	__atomic_store_n(&r->seq, mine->seq, __ATOMIC_RELAXED);
	uint64_t words[SHMEMI_AGREE_WORDS] = {mine->call, mine->kind, mine->size, mine->align,
					      mine->in,   mine->out,  mine->hints};
	if (shmemi_agree(mine->seq, words, op))
		return 1;
	symheapc_go_diverged(with_out, err, n); /* the runtime's message (symalloc.go, diverged) */
	return 0;
}

/*
 * exchange publishes this PE's record of its next phase (a call of kind,
 * with out its result, or NO_OFF), waits until every PE has published its
 * own, and compares them (out too, when with_out). It returns 1 when they
 * agree; else 0, with the runtime's message in err.
 */
static int exchange_rec(uint64_t kind, uint64_t size, uint64_t align, uint64_t in, uint64_t out, int with_out,
			const char *op, char *err, size_t n);

static int exchange(uint64_t kind, uint64_t size, uint64_t align, uint64_t in, uint64_t out, int with_out,
		    const char *op, char *err, size_t n)
{
	/* The call word (internal/calls): the runtime's checks in the wait
	 * below then find a PE in another collective. */
	int call = kind == SHMEMI_ALLOC_CALL_FREE     ? SHMEMI_CALL_FREE
		   : kind == SHMEMI_ALLOC_CALL_CALLOC ? SHMEMI_CALL_CALLOC
						      : SHMEMI_CALL_MALLOC;
	shmemi_call_enter(call, 0, 0);
	int agree = exchange_rec(kind, size, align, in, out, with_out, op, err, n);
	shmemi_call_leave();
	return agree;
}

/* exchange_rec is exchange's publication, wait and comparison. */
static int exchange_rec(uint64_t kind, uint64_t size, uint64_t align, uint64_t in, uint64_t out, int with_out,
			const char *op, char *err, size_t n)
{
	int me = shmemi_L.me;
	struct shmemi_alloc_record mine = {shmemi_rec_nums[0] + 1, shmemi_rec_nums[1] + 1, kind, size, align, in, out, 0};
	shmemi_rec_nums[0] = mine.seq;
	shmemi_rec_nums[1] = mine.call;
	struct shmemi_alloc_record *r = rec_of(me, mine.seq);
	/* The fields are published by the seq store below; readers load them
	 * after they see seq. */
	__atomic_store_n(&r->call, mine.call, __ATOMIC_RELAXED);
	__atomic_store_n(&r->kind, mine.kind, __ATOMIC_RELAXED);
	__atomic_store_n(&r->size, mine.size, __ATOMIC_RELAXED);
	__atomic_store_n(&r->align, mine.align, __ATOMIC_RELAXED);
	__atomic_store_n(&r->in, mine.in, __ATOMIC_RELAXED);
	__atomic_store_n(&r->out, mine.out, __ATOMIC_RELAXED);
	__atomic_store_n(&r->hints, mine.hints, __ATOMIC_RELAXED);
	if (shmemi_L.npes == 1) {
		__atomic_store_n(&r->seq, mine.seq, __ATOMIC_RELAXED);
		return 1;
	}
	/* The calls made here run on one node only (a job on several sends
	 * frees to the runtime, so the cache is empty there). */
	if (shmemi_L.npes > SHMEMI_AGREE_FLAT)
		return agree(&mine, r, with_out, op, err, n);
	if (shmemi_L.mb_ready) {
		/* The caller quieted (its owed fence or its full one); the
		 * release store publishes the record and every earlier store of
		 * this PE. The wake-up step's load may pass it: waiters that
		 * sleep fence for it (wait.c W2). */
		__atomic_store_n(&r->seq, mine.seq, __ATOMIC_RELEASE);
	} else {
		__atomic_store_n(&r->seq, mine.seq, __ATOMIC_SEQ_CST);
	}
	if (__atomic_load_n(shmemi_job_sleeping(), __ATOMIC_SEQ_CST) != 0)
		shmemi_wake_all();
	/* A few pauses before the first look at the others' records, which
	 * PEs arriving about now are writing (shmsync.SettlePolls). */
	for (int i = 0; i < shmemi_L.settle; i++)
		shmemi_pause();
	if (!all_arrived(&mine.seq))
		shmemi_block(me, all_arrived, &mine.seq, op);
	/* The next phase's slot, for writing: every other PE has read it. */
	shmemi_prefetch_w(rec_of(me, mine.seq + 1));
	int bad = 0;
	for (int p = 0; p < shmemi_L.npes; p++) {
		if (p == me)
			continue;
		const struct shmemi_alloc_record *o = rec_of(p, mine.seq);
		if (o->call != mine.call || o->kind != mine.kind || o->size != mine.size || o->align != mine.align ||
		    o->in != mine.in || o->hints != mine.hints || (with_out && o->out != mine.out)) {
			bad = 1;
			break;
		}
	}
	if (!bad)
		return 1;
	symheapc_go_diverged(with_out, err, n); /* the runtime's message (symalloc.go, diverged) */
	return 0;
}

/* ---- the calls ---- */

static char *my_heap(void)
{
	return shmemi_L.base + shmemi_L.part_off + (uint64_t)shmemi_L.me * shmemi_L.part_stride;
}

/* off_of returns p's offset in this PE's heap, or NO_OFF. */
static uint64_t off_of(const void *p)
{
	uint64_t off = (uint64_t)((uintptr_t)p - (uintptr_t)my_heap());
	return off < shmemi_L.heap_size ? off : NO_OFF;
}

/* remember records a block Go handed out. */
static void remember(void *p, uint64_t size, int cacheable, const char *op)
{
	uint64_t off = off_of(p);
	if (off != NO_OFF)
		live_add(off, size | (cacheable ? LIVE_CACHEABLE : 0), op);
}

/* take_cache empties the cache into the caller's hands (for Go, which
 * gives its blocks back to the allocator first); it returns the count. */
static int take_cache(void)
{
	int n = cache_n;
	cache_n = 0;
	cache_bytes = 0;
	return n;
}

void *shmemi_alloc(int kind, size_t size, size_t align, long hints, const char *op)
{
	char err[2048];
	shmemi_need_init(op);
	shmemi_quiet(); /* every collective allocation completes puts, as in Go */
	if (size == 0)
		return NULL; /* OpenSHMEM: NULL, and no barrier */
	lock_calls();
	if (kind == SHMEMI_GO_MALLOC_PLAIN || kind == SHMEMI_GO_MALLOC_CALLOC) {
		uint64_t off = cache_take(size);
		if (off != NO_OFF) {
			char *p = my_heap() + off;
			if (kind == SHMEMI_GO_MALLOC_CALLOC)
				memset(p, 0, size); /* before the exchange, after which others may put into it */
			uint64_t call = kind == SHMEMI_GO_MALLOC_PLAIN ? SHMEMI_ALLOC_CALL_MALLOC : SHMEMI_ALLOC_CALL_CALLOC;
			if (exchange(call, size, SHMEMI_ALLOC_MIN_ALIGN, NO_OFF, off, 1, op, err, sizeof err)) {
				live_add(off, size | LIVE_CACHEABLE, op);
				shmemi_bump(shmemi_L.stat_sym_allocs);
				unlock_calls();
				return p;
			}
			cache_push(off, size);
			unlock_calls();
			shmemi_go_error(op, err); /* the documented result is NULL */
			return NULL;
		}
	}
	/* Go's allocator, which first takes the cache back. */
	int nc = take_cache();
	void *p = symheapc_go_malloc(kind, size, align, hints, cache_off, nc, err, sizeof err);
	if (p != NULL)
		remember(p, size, kind == SHMEMI_GO_MALLOC_PLAIN || kind == SHMEMI_GO_MALLOC_CALLOC, op);
	unlock_calls();
	if (p == NULL && err[0])
		shmemi_go_error(op, err); /* the documented result is NULL */
	return p;
}

void *shmem_malloc(size_t size)
{
	return shmemi_alloc(SHMEMI_GO_MALLOC_PLAIN, size, 0, 0, "shmem_malloc");
}

void *shmem_calloc(size_t count, size_t size)
{
	if (size != 0 && count > SIZE_MAX / size) {
		fprintf(stderr, "symheap: shmem_calloc(%zu, %zu): the size overflows\n", count, size);
		return NULL;
	}
	return shmemi_alloc(SHMEMI_GO_MALLOC_CALLOC, count * size, 0, 0, "shmem_calloc");
}

void *shmem_align(size_t alignment, size_t size)
{
	return shmemi_alloc(SHMEMI_GO_MALLOC_ALIGN, size, alignment, 0, "shmem_align");
}

void *shmem_malloc_with_hints(size_t size, long hints)
{
	return shmemi_alloc(SHMEMI_GO_MALLOC_HINTS, size, 0, hints, "shmem_malloc_with_hints");
}

void *shmem_realloc(void *ptr, size_t size)
{
	char err[2048];
	shmemi_need_init("shmem_realloc");
	shmemi_quiet();
	lock_calls();
	int nc = take_cache();
	void *p = symheapc_go_realloc(ptr, size, cache_off, nc, err, sizeof err);
	if (p != ptr || size == 0) {
		/* Resized elsewhere, freed (size 0), or kept where it was
		 * after a failure: the table follows what Go did. */
		struct live *e = ptr != NULL && (p != NULL || size == 0) ? live_find(off_of(ptr)) : NULL;
		if (e != NULL)
			live_remove(e);
		if (p != NULL)
			remember(p, size, 1, "shmem_realloc");
	} else if (p != NULL) {
		struct live *e = live_find(off_of(p));
		if (e != NULL)
			e->size = size | LIVE_CACHEABLE;
	}
	unlock_calls();
	if (p == NULL && err[0])
		shmemi_go_error("shmem_realloc", err);
	return p;
}

void shmem_free(void *ptr)
{
	char err[2048];
	shmemi_need_init("shmem_free");
	shmemi_quiet();
	if (ptr == NULL)
		return;
	lock_calls();
	uint64_t off = off_of(ptr);
	struct live *e = off != NO_OFF ? live_find(off) : NULL;
	if (e != NULL && shmemi_L.far_pe != NULL) {
		/* A job on several nodes: the runtime's Free, whose exchange
		 * crosses nodes (this one's records reach only the node). */
		live_remove(e);
		unlock_calls();
		if (symheapc_go_free(ptr, err, sizeof err) != 0) {
			shmemi_go_error("shmem_free", err);
			symheapc_go_global_exit(1);
		}
		return;
	}
	if (e == NULL) {
		/* Not a live block of this PE's calls (perhaps one in the
		 * cache: a double free): the cache goes back, and Go says what
		 * the pointer is. */
		give_back(cache_off, take_cache(), "shmem_free");
		unlock_calls();
		if (symheapc_go_free(ptr, err, sizeof err) != 0) {
			shmemi_go_error("shmem_free", err);
			symheapc_go_global_exit(1);
		}
		return;
	}
	if (!exchange(SHMEMI_ALLOC_CALL_FREE, 0, 0, off, NO_OFF, 0, "shmem_free", err, sizeof err)) {
		unlock_calls();
		shmemi_go_error("shmem_free", err);
		symheapc_go_global_exit(1);
	}
	uint64_t size = e->size;
	live_remove(e);
	shmemi_bump(shmemi_L.stat_sym_frees);
	/* No cache in a job with Go PEs, whose frees go to the allocator at
	 * once: the heaps must stay alike on Go and C PEs. */
	if ((size & LIVE_CACHEABLE) && shmemi_L.go_pes == 0)
		cache_put(off, size & ~LIVE_CACHEABLE, "shmem_free");
	else
		give_back(&off, 1, "shmem_free");
	unlock_calls();
}

/* shmemi_symalloc_finalize gives the cache back (shmem_finalize). */
void shmemi_symalloc_finalize(void)
{
	lock_calls();
	give_back(cache_off, take_cache(), "shmem_finalize");
	free(live_tab);
	live_tab = NULL;
	live_cap = live_n = 0;
	unlock_calls();
}
