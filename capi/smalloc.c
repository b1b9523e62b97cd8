//go:build symheap_capi

/*
 * smalloc.c - shared malloc: a C program's malloc, free, calloc, realloc,
 * posix_memalign, aligned_alloc, memalign, valloc, pvalloc and
 * malloc_usable_size served from its PE's part of the node's local
 * shared heap (HMPI's shared-memory heap), so that any PE of the node can
 * read, write and free a block through the pointer malloc returned.
 *
 * Switched on by SYMHEAP_SHARED_MALLOC=1 (or =strict), or by linking
 * with `symcc --shared-malloc`, which defines symheap_shared_malloc in the
 * program; read at shmem_init. Off, every call goes to glibc's own entry
 * (__libc_malloc, ...) after one relaxed load.
 *
 * # Formats
 *
 * None of its own: the front end of the Go runtime's shared heap
 * (alloc/small) lays out spans, their bitmaps and remote-free stacks,
 * and the span table; this file keeps those formats exactly
 * (shmemi_formats.h, generated from the Go types). Its pages come from
 * one block of the Go pool that the runtime takes for it at shmem_init,
 * the arena (alloc/small's foreign.go: header, page map, runs of pages),
 * because malloc may not call into Go (it runs inside the Go runtime's
 * own cgo calls, on threads Go does not know, and before Go exists).
 *
 * # Layers
 *
 *	thread cache   one per thread (struct tcache, process memory): an
 *	               owner word of the span format (this process's handle
 *	               id << 32 | the cache's number + 1) and, per size
 *	               class, the current span and the list of its spans
 *	               (linked by the spans' link word). Alloc and free of its
 *	               own spans' slots take no lock and no atomic
 *	               read-modify-write (the A bit is a release store)
 *	spans          taken from the arena 8 pages at a time (the batch
 *	               refill), formatted as Go's, published in the span
 *	               table; slots freed by any other thread, PE or Go
 *	               handle go on the span's remote-free stack, which the
 *	               owner takes whole when its free list runs dry
 *	arena          runs of pages (spans, blocks above SMALL_MAX, large
 *	               alignments) under a process mutex; other PEs free a
 *	               large block by pushing it on the arena's stack
 *
 * # Paths
 *
 *	malloc    1. off: glibc. 2. small: the thread's current span of the
 *	          class: pop its free list (written out inline). 3. slow: the
 *	          span's stack, its bump, another span of the cache, a new
 *	          span, a reclaim of the cache's empty spans. 4. large: pages
 *	          of the arena. 5. full: glibc, counted (CMallocFallbacks,
 *	          symheap stat) and said once on stderr; SYMHEAP_SHARED_
 *	          MALLOC=strict returns NULL with ENOMEM instead
 *	free      1. outside the segment: glibc, through the memory hooks
 *	          (hooks.c records the release). 2. PE q's shared heap: its
 *	          span table; a slot of this thread's span goes on its free
 *	          list, any other slot on its span's stack (after the A and R
 *	          checks of the format: double frees are refused); a run of
 *	          this PE's arena back into the page map, of another PE's on
 *	          that arena's stack; any other block of the heap is the Go
 *	          runtime's (SharedAlloc): freed through it
 *
 * Blocks allocated before shmem_init come from glibc and stay there:
 * free recognises them by address. A free of a shared block is not a
 * release of memory to the system (the segment stays mapped), so the
 * memory hooks record nothing for it; the blocks glibc serves still go
 * through them.
 *
 * A thread's cache outlives it: at its exit (a pthread key's destructor)
 * the cache goes on a list that the next new thread takes, spans and
 * owner word included. After fork the child leaves the parent's spans
 * alone: it allocates from glibc, and frees of shared blocks do nothing.
 * After shmem_finalize the PE's shared heap is replaced by a private copy
 * at the same address (blocks still in use, such as stdio's buffers,
 * stay valid); malloc then serves from glibc.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shmem_internal.h"
#include "shmemi_go.h"
#include "smalloc.h"

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_memalign(size_t align, size_t n);
extern void shmemi_hooks_free(void *p);            /* hooks.c: glibc's free, recorded */
extern void *shmemi_hooks_realloc(void *p, size_t n); /* hooks.c: glibc's realloc, recorded */

#define TLS __attribute__((tls_model("initial-exec")))
#define PAGE ((uint64_t)1 << SHMEMI_SMALL_PAGE_SHIFT)
#define SPAN ((uint64_t)1 << SHMEMI_SMALL_SPAN_SHIFT)
#define SPAN_PAGES (SPAN / PAGE)
#define NC SHMEMI_SMALL_NCLASSES
#define LIKELY SHMEMI_LIKELY
#define UNLIKELY SHMEMI_UNLIKELY

struct cls {
	uint64_t size, nslots, nwords, slots, inv, colours;
};

/* What one PE's shared heap looks like here: found on its first use. */
struct heapview {
	char *base;                       /* the PE's shared heap */
	struct shmemi_small_header *hdr;  /* its front end; NULL not yet found */
	uint64_t *table;                  /* its span table */
	char *arena;                      /* its C arena (NULL: none) */
};

struct tcache {
	uint64_t owner;
	uint64_t cur[NC];  /* the current span of the class: offset + 1 */
	uint64_t list[NC]; /* the cache's spans of the class: offset + 1, linked by link */
	struct tcache *next;
};

int shmemi_smalloc_state SHMEMI_HIDDEN;
uintptr_t shmemi_smalloc_lo SHMEMI_HIDDEN, shmemi_smalloc_len SHMEMI_HIDDEN;
static int me; /* shmemi_L.me */

static struct cls cl[NC];
static uint8_t class_of[SHMEMI_SMALL_MAX / 16 + 1];
static char *heap;                      /* this PE's shared heap */
static struct shmemi_small_header *hdr; /* its front end */
static uint64_t *table;                 /* its span table */
static struct shmemi_small_arena *arena;
static uint64_t *pmap; /* the arena's page map */
static uint64_t arena_off, arena_pages;
static uint64_t *fallbacks;
static uint64_t handle; /* this process's handle id (owner words) */
static int strict, warned, forked;
static struct shmemi_smalloc_info info;
static struct heapview *views; /* by PE */
static pthread_mutex_t arena_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t tc_mu = PTHREAD_MUTEX_INITIALIZER;
static struct tcache *tc_spare; /* caches of threads that ended */
static char *tc_pool;           /* fresh caches, carved from mmap'd pages */
static size_t tc_left;
static uint64_t tc_count;
static pthread_key_t tc_key;

static __thread struct tcache *tc TLS;
static __thread int tc_dead TLS; /* the thread's cache was given up (its exit) */

static size_t (*libc_usable)(void *);

/* symcc --shared-malloc defines it in the program (cmd/symcc: the
 * linker's --defsym): only its address is looked at. */
extern char symheap_shared_malloc[] __attribute__((weak));

__attribute__((constructor)) static void smalloc_resolve(void)
{
	libc_usable = (size_t (*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
}

size_t shmemi_libc_usable(void *p)
{
	if (p == NULL)
		return 0;
	if (UNLIKELY(libc_usable == NULL))
		smalloc_resolve();
	return libc_usable ? libc_usable(p) : 0;
}

static void say(const char *msg)
{
	ssize_t r = write(2, msg, strlen(msg));
	(void)r;
}

__attribute__((noreturn, cold)) static void bad_free(const char *op, void *p, const char *why)
{
	char m[256];
	snprintf(m, sizeof m, "symheap: PE %d: %s(%p): %s\n", shmemi_L.me, op, p, why);
	say(m);
	abort();
}

/* ---- spans (the format of alloc/small) ---- */

static inline struct shmemi_small_span *span_at(char *base, uint64_t s)
{
	return (struct shmemi_small_span *)(base + s);
}

static inline uint64_t *a_word(char *base, uint64_t s, uint64_t w)
{
	return (uint64_t *)(base + s + SHMEMI_SMALL_SPAN_FIXED + 8 * w);
}

static inline uint64_t *r_word(char *base, uint64_t s, const struct cls *ci, uint64_t w)
{
	return (uint64_t *)(base + s + SHMEMI_SMALL_SPAN_FIXED + 8 * ci->nwords + 8 * w);
}

static inline uint64_t *slot_link(char *base, uint64_t s, const struct cls *ci, uint64_t slot)
{
	return (uint64_t *)(base + s + ci->slots + slot * ci->size);
}

/* collect moves span s's remotely freed slots to its free list (owner). */
static int collect(uint64_t s, const struct cls *ci)
{
	struct shmemi_small_span *sp = span_at(heap, s);
	uint64_t top = __atomic_exchange_n(&sp->stack, 0, __ATOMIC_ACQUIRE); /* pairs with the pushes' CAS */
	int got = 0;
	for (uint64_t n = 0; top != 0 && n < ci->nslots; n++) {
		uint64_t slot = top - 1;
		if (slot >= sp->bump)
			break; /* a corrupted link: the rest stays unreachable */
		uint64_t next = *slot_link(heap, s, ci, slot);
		uint64_t w = slot / 64, bit = (uint64_t)1 << (slot % 64);
		uint64_t *a = a_word(heap, s, w);
		uint64_t av = __atomic_load_n(a, __ATOMIC_RELAXED);
		if (av & bit) {
			__atomic_store_n(a, av & ~bit, __ATOMIC_RELEASE); /* A before R: from here frees of it are refused */
			*slot_link(heap, s, ci, slot) = sp->free;
			sp->free = slot + 1;
			sp->used--;
			got = 1;
		}
		__atomic_and_fetch(r_word(heap, s, ci, w), ~bit, __ATOMIC_RELEASE);
		top = next;
	}
	return got;
}

/* take hands out a slot of span s (owner): its free list, its stack,
 * then its bump. */
static void *take(uint64_t s, const struct cls *ci)
{
	struct shmemi_small_span *sp = span_at(heap, s);
	uint64_t slot;
	for (;;) {
		uint64_t f = sp->free;
		if (f != 0) {
			slot = f - 1;
			if (f > ci->nslots ||
			    (__atomic_load_n(a_word(heap, s, slot / 64), __ATOMIC_RELAXED) >> (slot % 64) & 1)) {
				sp->free = 0; /* a write after free broke the list: drop it, as Go's take */
				continue;
			}
			sp->free = *slot_link(heap, s, ci, slot);
			break;
		}
		if (__atomic_load_n(&sp->stack, __ATOMIC_RELAXED) != 0 && collect(s, ci))
			continue;
		if (sp->bump < ci->nslots) {
			slot = sp->bump++;
			break;
		}
		return NULL;
	}
	uint64_t *a = a_word(heap, s, slot / 64);
	__atomic_store_n(a, __atomic_load_n(a, __ATOMIC_RELAXED) | (uint64_t)1 << (slot % 64),
			 __ATOMIC_RELEASE); /* a freer handed the block sees it live */
	sp->used++;
	sp->allocs++;
	return heap + s + ci->slots + slot * ci->size;
}

/* ---- the arena's pages (alloc/small, foreign.go) ---- */

static void set_run(uint64_t i, uint64_t n, uint64_t used)
{
	__atomic_store_n(&pmap[i], n << 2 | SHMEMI_SMALL_PAGE_HEAD | used, __ATOMIC_RELEASE);
	if (n > 1)
		__atomic_store_n(&pmap[i + n - 1], n << 2 | used, __ATOMIC_RELEASE);
}

/* run_free gives back the run at page i (arena_mu held), merging it with
 * free neighbours. */
static void run_free(uint64_t i)
{
	uint64_t n = pmap[i] >> 2;
	if (i > arena->first && !(pmap[i - 1] & SHMEMI_SMALL_PAGE_USED)) {
		uint64_t m = pmap[i - 1] >> 2;
		pmap[i - 1] = 0;
		pmap[i] = 0;
		i -= m;
		n += m;
	}
	uint64_t j = i + n;
	if (j < arena_pages && !(pmap[j] & SHMEMI_SMALL_PAGE_USED)) {
		uint64_t m = pmap[j] >> 2;
		pmap[j - 1] = 0;
		pmap[j] = 0;
		n += m;
	}
	set_run(i, n, 0);
}

/* take_stack gives back the runs other PEs freed (arena_mu held). */
static void take_stack(void)
{
	uint64_t top = __atomic_exchange_n(&arena->stack, 0, __ATOMIC_ACQUIRE); /* pairs with the pushes' CAS */
	while (top != 0) {
		uint64_t i = top - 1;
		if (i < arena->first || i >= arena_pages ||
		    (pmap[i] & (SHMEMI_SMALL_PAGE_HEAD | SHMEMI_SMALL_PAGE_USED)) !=
			    (SHMEMI_SMALL_PAGE_HEAD | SHMEMI_SMALL_PAGE_USED))
			break; /* a corrupted link */
		top = *(uint64_t *)((char *)arena + i * PAGE);
		run_free(i);
	}
}

/* pages_take returns the page index of a run of n pages whose address is
 * aligned to align bytes, or 0 (arena_mu held). First fit. */
static uint64_t pages_take(uint64_t n, uint64_t align)
{
	if (__atomic_load_n(&arena->stack, __ATOMIC_RELAXED) != 0)
		take_stack();
	uintptr_t base = (uintptr_t)arena;
	for (uint64_t i = arena->first; i < arena_pages;) {
		uint64_t w = pmap[i], m = w >> 2;
		if (m == 0)
			return 0; /* a corrupted map */
		if (!(w & SHMEMI_SMALL_PAGE_USED)) {
			uintptr_t a = base + i * PAGE;
			uint64_t lead = ((a + align - 1) & ~(uintptr_t)(align - 1)) - a;
			uint64_t k = lead / PAGE;
			if (k + n <= m) {
				if (k > 0) { /* the pages before the aligned start stay free */
					pmap[i] = 0;
					if (m > 1)
						pmap[i + m - 1] = 0;
					set_run(i, k, 0);
					i += k;
					m -= k;
				} else {
					pmap[i] = 0;
					if (m > 1)
						pmap[i + m - 1] = 0;
				}
				set_run(i, n, SHMEMI_SMALL_PAGE_USED);
				if (m > n)
					set_run(i + n, m - n, 0);
				return i;
			}
		}
		i += m;
	}
	return 0;
}

/* ---- thread caches ---- */

static void tc_exit(void *p)
{
	struct tcache *t = p;
	tc = NULL;
	tc_dead = 1;
	pthread_mutex_lock(&tc_mu);
	t->next = tc_spare;
	tc_spare = t;
	pthread_mutex_unlock(&tc_mu);
}

static struct tcache *tc_new(void)
{
	if (tc_dead || forked)
		return NULL;
	pthread_mutex_lock(&tc_mu);
	struct tcache *t = tc_spare;
	if (t != NULL) {
		tc_spare = t->next;
	} else {
		if (tc_left < sizeof *t) {
			void *m = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (m == MAP_FAILED) {
				pthread_mutex_unlock(&tc_mu);
				return NULL;
			}
			tc_pool = m;
			tc_left = 1 << 16;
		}
		t = (struct tcache *)tc_pool;
		tc_pool += (sizeof *t + 63) & ~(size_t)63;
		tc_left -= (sizeof *t + 63) & ~(size_t)63;
		memset(t, 0, sizeof *t);
		t->owner = handle << 32 | (++tc_count);
	}
	pthread_mutex_unlock(&tc_mu);
	tc = t; /* before setspecific, which may allocate */
	pthread_setspecific(tc_key, t);
	return t;
}

/* ---- allocation ---- */

static void count_fallback(void)
{
	__atomic_fetch_add(fallbacks, 1, __ATOMIC_RELAXED); /* a statistic; symheap stat reads it */
	if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED)) {
		char m[256];
		snprintf(m, sizeof m,
			 "symheap: PE %d: shared malloc: the arena (%llu bytes) is full: further blocks come from "
			 "the system allocator, private to this PE (raise SYMHEAP_SHARED_SIZE or "
			 "SYMHEAP_SHARED_MALLOC_SIZE)\n",
			 shmemi_L.me, (unsigned long long)info.arena_size);
		say(m);
	}
}

static void *full(size_t n, size_t align)
{
	if (strict) {
		errno = ENOMEM;
		return NULL;
	}
	count_fallback();
	return align > 16 ? __libc_memalign(align, n) : __libc_malloc(n);
}

/* new_span takes a span of class c for cache t from the arena. */
static uint64_t new_span(struct tcache *t, int c)
{
	const struct cls *ci = &cl[c];
	pthread_mutex_lock(&arena_mu);
	uint64_t i = pages_take(SPAN_PAGES, PAGE);
	pthread_mutex_unlock(&arena_mu);
	if (i == 0)
		return 0;
	uint64_t base = arena_off + i * PAGE;
	uint64_t n = __atomic_fetch_add(&hdr->spans_taken, 1, __ATOMIC_RELAXED);
	uint64_t s = base + n % ci->colours * SHMEMI_SMALL_COLOUR_STEP;
	struct shmemi_small_span *sp = span_at(heap, s);
	sp->free = sp->bump = sp->used = sp->allocs = 0;
	__atomic_store_n(&sp->stack, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&sp->rfrees, 0, __ATOMIC_RELAXED);
	memset(a_word(heap, s, 0), 0, 16 * ci->nwords);
	__atomic_store_n(&sp->use, SPAN, __ATOMIC_RELAXED);
	__atomic_store_n(&sp->class, SHMEMI_SMALL_SPAN_MAGIC | (uint64_t)c, __ATOMIC_RELAXED);
	__atomic_store_n(&sp->owner, t->owner, __ATOMIC_RELAXED);
	sp->link = t->list[c];
	t->list[c] = s + 1;
	__atomic_fetch_add(&arena->spans, 1, __ATOMIC_RELAXED);
	for (uint64_t p = base / PAGE; p < (base + SPAN) / PAGE; p++)
		__atomic_store_n(&table[p], s << 8 | (uint64_t)(c + 1), __ATOMIC_RELEASE); /* publishes the span */
	return s;
}

/* reclaim gives back cache t's spans that are empty (after collecting
 * their stacks), but its current ones; it reports whether it gave any. */
static int reclaim(struct tcache *t)
{
	int any = 0;
	for (int c = 0; c < NC; c++) {
		const struct cls *ci = &cl[c];
		uint64_t *prev = &t->list[c];
		while (*prev != 0) {
			uint64_t s = *prev - 1;
			struct shmemi_small_span *sp = span_at(heap, s);
			if (__atomic_load_n(&sp->stack, __ATOMIC_RELAXED) != 0)
				collect(s, ci);
			if (sp->used != 0 || __atomic_load_n(&sp->stack, __ATOMIC_ACQUIRE) != 0 || t->cur[c] == s + 1) {
				prev = &sp->link;
				continue;
			}
			*prev = sp->link;
			uint64_t base = s & ~(PAGE - 1);
			for (uint64_t p = base / PAGE; p < (base + SPAN) / PAGE; p++)
				__atomic_store_n(&table[p], 0, __ATOMIC_RELEASE); /* frees of it are refused from here */
			__atomic_fetch_add(&hdr->ret_allocs, sp->allocs, __ATOMIC_RELAXED);
			__atomic_fetch_add(&hdr->ret_frees, sp->allocs, __ATOMIC_RELAXED);
			__atomic_store_n(&sp->class, 0, __ATOMIC_RELAXED);
			__atomic_fetch_add(&hdr->spans_given, 1, __ATOMIC_RELAXED);
			__atomic_fetch_add(&arena->spans_back, 1, __ATOMIC_RELAXED);
			pthread_mutex_lock(&arena_mu);
			run_free((base - arena_off) / PAGE);
			pthread_mutex_unlock(&arena_mu);
			any = 1;
		}
	}
	return any;
}

/* reclaim_all gives back the empty spans of cache t and of the caches
 * of threads that ended (no thread uses those meanwhile: tc_mu). */
static int reclaim_all(struct tcache *t)
{
	int any = t != NULL && reclaim(t);
	pthread_mutex_lock(&tc_mu);
	for (struct tcache *x = tc_spare; x != NULL; x = x->next) {
		for (int c = 0; c < NC; c++)
			x->cur[c] = 0; /* its current spans may go too */
		any |= reclaim(x);
	}
	pthread_mutex_unlock(&tc_mu);
	return any;
}

static void *alloc_small_slow(struct tcache *t, int c)
{
	const struct cls *ci = &cl[c];
	void *p;
	if (t->cur[c] != 0 && (p = take(t->cur[c] - 1, ci)) != NULL)
		return p;
	for (uint64_t s = t->list[c]; s != 0; s = span_at(heap, s - 1)->link) {
		if ((p = take(s - 1, ci)) != NULL) {
			t->cur[c] = s;
			return p;
		}
	}
	uint64_t s = new_span(t, c);
	if (s == 0 && reclaim_all(t))
		s = new_span(t, c);
	if (s == 0)
		return NULL;
	t->cur[c] = s + 1;
	return take(s, ci);
}

static void *alloc_pages(size_t n, size_t align)
{
	if (n > arena_pages * PAGE)
		return NULL;
	uint64_t np = (n + PAGE - 1) / PAGE;
	if (np == 0)
		np = 1;
	pthread_mutex_lock(&arena_mu);
	uint64_t i = pages_take(np, align < PAGE ? PAGE : align);
	pthread_mutex_unlock(&arena_mu);
	if (i == 0 && reclaim_all(tc)) {
		pthread_mutex_lock(&arena_mu);
		i = pages_take(np, align < PAGE ? PAGE : align);
		pthread_mutex_unlock(&arena_mu);
	}
	if (i == 0)
		return NULL;
	__atomic_fetch_add(&arena->large, 1, __ATOMIC_RELAXED);
	return (char *)arena + i * PAGE;
}

/* sm_alloc is malloc's and memalign's path past the inline one. */
static void *sm_alloc(size_t n, size_t align)
{
	struct tcache *t = tc;
	if (t == NULL && (t = tc_new()) == NULL)
		return align > 16 ? __libc_memalign(align, n) : __libc_malloc(n);
	void *p = NULL;
	if (align <= 16 && n <= SHMEMI_SMALL_MAX) {
		p = alloc_small_slow(t, class_of[(n + 15) >> 4]);
	} else if (align <= PAGE && n + align - 16 <= SHMEMI_SMALL_MAX) {
		/* A slot with room to align inside it: slots are 16-byte
		 * aligned; free and malloc_usable_size take a pointer inside
		 * a slot for the slot (see free). */
		char *q = alloc_small_slow(t, class_of[(n + align - 16 + 15) >> 4]);
		if (q != NULL)
			p = (char *)(((uintptr_t)q + align - 1) & ~(uintptr_t)(align - 1));
	} else {
		p = alloc_pages(n, align);
	}
	return p != NULL ? p : full(n, align);
}

static inline void *sm_malloc(size_t n)
{
	struct tcache *t = tc;
	if (LIKELY(t != NULL && n <= SHMEMI_SMALL_MAX)) {
		unsigned c = class_of[(n + 15) >> 4];
		uint64_t s = t->cur[c];
		if (LIKELY(s != 0)) {
			/* take's first case, written out. */
			const struct cls *ci = &cl[c];
			struct shmemi_small_span *sp = span_at(heap, --s);
			uint64_t f = sp->free;
			if (LIKELY(f != 0)) {
				uint64_t slot = f - 1;
				char *b = heap + s + ci->slots + slot * ci->size;
				uint64_t next = *(uint64_t *)b;
				uint64_t *a = a_word(heap, s, slot / 64);
				uint64_t av = __atomic_load_n(a, __ATOMIC_RELAXED), bit = (uint64_t)1 << (slot % 64);
				if (LIKELY(next <= ci->nslots && !(av & bit))) {
					sp->free = next;
					__atomic_store_n(a, av | bit, __ATOMIC_RELEASE); /* a freer handed the block sees it live */
					sp->used++;
					sp->allocs++;
					return b;
				}
			}
		}
	}
	return sm_alloc(n, 16);
}

/* ---- free ---- */

/* view returns PE q's shared heap as seen here, finding its front end and
 * arena on first use; NULL if it has no front end yet. */
static struct heapview *view(int q)
{
	struct heapview *v = &views[q];
	if (__atomic_load_n(&v->hdr, __ATOMIC_ACQUIRE) != NULL)
		return v;
	uint64_t fw = __atomic_load_n((uint64_t *)(shmemi_L.cb_base + (uint64_t)q * shmemi_L.cb_stride + info.front_word),
				      __ATOMIC_ACQUIRE); /* PE q stores it before its Init barrier */
	if (fw == 0)
		return NULL;
	v->base = shmemi_L.base + shmemi_L.part_off + (uint64_t)q * shmemi_L.part_stride + info.shared_off;
	struct shmemi_small_header *h = (struct shmemi_small_header *)(v->base + fw - 1);
	if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != SHMEMI_SMALL_MAGIC)
		return NULL;
	v->table = (uint64_t *)((char *)h + SHMEMI_SMALL_HDR_FIXED);
	__atomic_store_n(&v->hdr, h, __ATOMIC_RELEASE);
	return v;
}

/* arena_of returns PE q's arena if off lies in it. */
static struct shmemi_small_arena *arena_of(struct heapview *v, uint64_t off, uint64_t *page)
{
	uint64_t a = __atomic_load_n(&v->hdr->foreign, __ATOMIC_ACQUIRE); /* pairs with SetForeign */
	if (a == 0 || off < a - 1)
		return NULL;
	struct shmemi_small_arena *ar = (struct shmemi_small_arena *)(v->base + a - 1);
	if (__atomic_load_n(&ar->magic, __ATOMIC_ACQUIRE) != SHMEMI_SMALL_ARENA_MAGIC || off - (a - 1) >= ar->pages * PAGE)
		return NULL;
	*page = (off - (a - 1)) / PAGE;
	return ar;
}

static void free_remote_slot(void *p, char *base, uint64_t s, const struct cls *ci, uint64_t slot)
{
	uint64_t w = slot / 64, bit = (uint64_t)1 << (slot % 64);
	if (!(__atomic_load_n(a_word(base, s, w), __ATOMIC_ACQUIRE) & bit)) /* pairs with the owner's release */
		bad_free("free", p, "not an allocated block (a double free, or a pointer malloc did not return)");
	if (__atomic_fetch_or(r_word(base, s, ci, w), bit, __ATOMIC_ACQ_REL) & bit) /* the one claim of the free */
		bad_free("free", p, "already freed by another thread or PE (a double free)");
	struct shmemi_small_span *sp = span_at(base, s);
	__atomic_fetch_add(&sp->rfrees, 1, __ATOMIC_RELAXED);
	uint64_t *link = slot_link(base, s, ci, slot);
	uint64_t top = __atomic_load_n(&sp->stack, __ATOMIC_RELAXED);
	do
		*link = top;
	while (!__atomic_compare_exchange_n(&sp->stack, &top, slot + 1, 1, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED)); /* release: the link, to the owner's exchange */
}

/* go_free frees a block of the Go runtime's pool through it. */
__attribute__((noinline)) static void go_free(void *p)
{
	char err[1024];
	if (symheapc_go_shared_free(p, err, sizeof err) != 0) {
		say(err);
		say(" (in free)\n");
		abort();
	}
}

static void free_slow(void *p);

/* shmemi_smalloc_free: the common case written out (a slot of one of
 * this thread's spans, nothing on the span's stack), else free_slow. */
void shmemi_smalloc_free(void *p)
{
	uint64_t off = (uintptr_t)p - (uintptr_t)heap;
	struct tcache *t = tc;
	if (LIKELY(off < info.shared_size && t != NULL && shmemi_smalloc_state != 3 && !forked)) {
		uint64_t e = __atomic_load_n(&table[off / PAGE], __ATOMIC_ACQUIRE); /* pairs with the publishing store */
		if (LIKELY(e != 0)) {
			uint64_t s = e >> 8;
			const struct cls *ci = &cl[(e & 0xff) - 1];
			uint64_t rel = off - s;
			uint64_t slot = (rel - ci->slots) * ci->inv >> 32;
			struct shmemi_small_span *sp = span_at(heap, s);
			if (LIKELY(rel >= ci->slots && slot < ci->nslots &&
				   __atomic_load_n(&sp->owner, __ATOMIC_RELAXED) == t->owner &&
				   __atomic_load_n(&sp->stack, __ATOMIC_RELAXED) == 0)) {
				uint64_t *a = a_word(heap, s, slot / 64);
				uint64_t av = __atomic_load_n(a, __ATOMIC_RELAXED), bit = (uint64_t)1 << (slot % 64);
				if (LIKELY(av & bit)) {
					__atomic_store_n(a, av & ~bit, __ATOMIC_RELEASE);
					*slot_link(heap, s, ci, slot) = sp->free;
					sp->free = slot + 1;
					sp->used--;
					return;
				}
			}
		}
	}
	free_slow(p);
}

__attribute__((noinline)) static void free_slow(void *p)
{
	if (UNLIKELY(forked || shmemi_smalloc_state == 3))
		return; /* the parent's heap, not the child's to change; or the heap is moving (finalize) */
	int q;
	uint64_t off;
	if (LIKELY((uintptr_t)p - (uintptr_t)heap < info.shared_size)) {
		q = me;
		off = (uintptr_t)p - (uintptr_t)heap;
	} else {
		uintptr_t r = (uintptr_t)p - ((uintptr_t)shmemi_L.base + shmemi_L.part_off);
		q = (int)(r / shmemi_L.part_stride);
		off = r - (uint64_t)q * shmemi_L.part_stride - info.shared_off;
		if (q >= shmemi_L.npes || off >= info.shared_size) {
			if (shmemi_smalloc_state == 2)
				return; /* after finalize: nothing of the segment is freed */
			bad_free("free", p, "a pointer into the symmetric segment but not into a local shared heap (free "
					    "symmetric objects with shmem_free)");
		}
		if (shmemi_smalloc_state == 2)
			return; /* another PE's block, after finalize */
	}
	char *base;
	uint64_t *tab;
	struct heapview *v = NULL;
	if (q == me) {
		base = heap;
		tab = table;
	} else {
		if ((v = view(q)) == NULL)
			bad_free("free", p, "in a PE's shared heap that has no front end");
		base = v->base;
		tab = v->table;
	}
	uint64_t e = __atomic_load_n(&tab[off / PAGE], __ATOMIC_ACQUIRE); /* pairs with the publishing store */
	if (LIKELY(e != 0)) {
		uint64_t s = e >> 8;
		const struct cls *ci = &cl[(e & 0xff) - 1];
		uint64_t rel = off - s;
		if (UNLIKELY(rel < ci->slots))
			bad_free("free", p, "inside a span's header");
		uint64_t slot = (rel - ci->slots) * ci->inv >> 32; /* a pointer inside a slot frees the slot (memalign) */
		if (UNLIKELY(slot >= ci->nslots))
			bad_free("free", p, "beyond a span's slots");
		struct tcache *t = tc;
		struct shmemi_small_span *sp = span_at(base, s);
		uint64_t w = slot / 64, bit = (uint64_t)1 << (slot % 64);
		if (LIKELY(t != NULL && q == me && __atomic_load_n(&sp->owner, __ATOMIC_RELAXED) == t->owner)) {
			uint64_t *a = a_word(base, s, w);
			uint64_t av = __atomic_load_n(a, __ATOMIC_RELAXED);
			if (UNLIKELY(!(av & bit) || (__atomic_load_n(&sp->stack, __ATOMIC_RELAXED) != 0 &&
						     (__atomic_load_n(r_word(base, s, ci, w), __ATOMIC_RELAXED) & bit))))
				bad_free("free", p, "not an allocated block (a double free, or a pointer malloc did not return)");
			__atomic_store_n(a, av & ~bit, __ATOMIC_RELEASE);
			*slot_link(base, s, ci, slot) = sp->free;
			sp->free = slot + 1;
			sp->used--;
			return;
		}
		free_remote_slot(p, base, s, ci, slot);
		return;
	}
	uint64_t page;
	struct shmemi_small_arena *ar;
	if (q == shmemi_L.me) {
		ar = off - arena_off < arena_pages * PAGE ? arena : NULL;
		page = (off - arena_off) / PAGE;
	} else {
		ar = arena_of(v, off, &page);
	}
	if (ar != NULL) {
		uint64_t *map = (uint64_t *)((char *)ar + SHMEMI_SMALL_ARENA_FIXED);
		if (((uintptr_t)p & (PAGE - 1)) != 0 || page < ar->first ||
		    (__atomic_load_n(&map[page], __ATOMIC_ACQUIRE) & (SHMEMI_SMALL_PAGE_HEAD | SHMEMI_SMALL_PAGE_USED)) !=
			    (SHMEMI_SMALL_PAGE_HEAD | SHMEMI_SMALL_PAGE_USED))
			bad_free("free", p, "not an allocated block of the shared heap (a double free?)");
		if (ar == arena && !forked) {
			pthread_mutex_lock(&arena_mu);
			run_free(page);
			pthread_mutex_unlock(&arena_mu);
			return;
		}
		__atomic_fetch_add(&ar->rfrees, 1, __ATOMIC_RELAXED);
		uint64_t *link = (uint64_t *)p;
		uint64_t top = __atomic_load_n(&ar->stack, __ATOMIC_RELAXED);
		do
			*link = top;
		while (!__atomic_compare_exchange_n(&ar->stack, &top, page + 1, 1, __ATOMIC_RELEASE,
						    __ATOMIC_RELAXED)); /* release: the link, to the owner's exchange */
		return;
	}
	/* A block of the Go runtime's pool (SharedAlloc): freed through it. */
	if (shmemi_smalloc_state == 2)
		return;
	go_free(p);
}

/* usable returns the bytes from p to the end of its block (0: not one
 * the shared malloc knows). */
static size_t usable(void *p)
{
	uintptr_t r = (uintptr_t)p - ((uintptr_t)shmemi_L.base + shmemi_L.part_off);
	int q = (int)(r / shmemi_L.part_stride);
	uint64_t off = r - (uint64_t)q * shmemi_L.part_stride - info.shared_off;
	if (q >= shmemi_L.npes || off >= info.shared_size)
		return 0;
	struct heapview self = {heap, hdr, table, (char *)arena}, *v = &self;
	if (q != shmemi_L.me && (v = view(q)) == NULL)
		return 0;
	uint64_t e = __atomic_load_n(&v->table[off / PAGE], __ATOMIC_ACQUIRE);
	if (e != 0) {
		const struct cls *ci = &cl[(e & 0xff) - 1];
		uint64_t rel = off - (e >> 8);
		if (rel < ci->slots)
			return 0;
		uint64_t slot = (rel - ci->slots) * ci->inv >> 32;
		return slot < ci->nslots ? ci->slots + (slot + 1) * ci->size - rel : 0;
	}
	uint64_t page;
	struct shmemi_small_arena *ar = arena_of(v, off, &page);
	if (ar == NULL)
		return 0;
	uint64_t w = __atomic_load_n((uint64_t *)((char *)ar + SHMEMI_SMALL_ARENA_FIXED) + page, __ATOMIC_ACQUIRE);
	return (w & SHMEMI_SMALL_PAGE_HEAD) ? (w >> 2) * PAGE - ((uintptr_t)p & (PAGE - 1)) : 0;
}

void *shmemi_smalloc_realloc(void *p, size_t n)
{
	size_t old = usable(p);
	if (n <= old && n >= old / 4)
		return p;
	void *q = malloc(n);
	if (q == NULL)
		return NULL;
	memcpy(q, p, old < n ? old : n);
	free(p);
	return q;
}

/* ---- the entry points ---- */

static inline int on(void)
{
	return __atomic_load_n(&shmemi_smalloc_state, __ATOMIC_RELAXED) == 1;
}

/* lib_base is the base of libsymheap.so as mapped here, where this file
 * is in the shared library (0 when it is linked into the program). In
 * strict mode a full arena fails the program's malloc, not the Go
 * runtime's own (runtime/cgo starts its threads with malloc and ends the
 * process when it fails): a NULL for a caller in libsymheap.so becomes a
 * counted fallback. The program's and the runtime's calls cannot be told
 * apart where both are in one executable (symcc --symheap-static). */
static uintptr_t lib_base;

static void find_lib(void)
{
	Dl_info d;
	if (dladdr((void *)find_lib, &d) && d.dli_fname != NULL && strstr(d.dli_fname, ".so") != NULL)
		lib_base = (uintptr_t)d.dli_fbase;
}

/* runtime_call: in strict mode, whether ra (a caller's return address)
 * is in libsymheap.so, the Go runtime's own allocation, or in the
 * dynamic loader, which allocates a new thread's TLS (pthread_create,
 * when the runtime starts a thread): neither is the program's. */
static int runtime_call(void *ra)
{
	Dl_info d;
	if (!dladdr(ra, &d))
		return 0;
	if (lib_base != 0 && (uintptr_t)d.dli_fbase == lib_base)
		return 1;
	return d.dli_fname != NULL && strstr(d.dli_fname, "/ld-linux") != NULL;
}

/* strict_fallback is a block of n bytes from glibc for the runtime when a
 * strict full arena returned NULL (counted, as in full). */
static void *strict_fallback(size_t n)
{
	count_fallback();
	return __libc_malloc(n);
}

/* strict_fallback_calloc is strict_fallback for calloc. */
static void *strict_fallback_calloc(size_t n, size_t m)
{
	count_fallback();
	return __libc_calloc(n, m);
}

void *malloc(size_t n)
{
	if (UNLIKELY(!on()))
		return __libc_malloc(n);
	void *p = sm_malloc(n);
	if (UNLIKELY(p == NULL) && strict && runtime_call(__builtin_return_address(0)))
		return strict_fallback(n);
	return p;
}

void *calloc(size_t n, size_t m)
{
	size_t b;
	if (UNLIKELY(!on()))
		return __libc_calloc(n, m);
	if (__builtin_mul_overflow(n, m, &b)) {
		errno = ENOMEM;
		return NULL;
	}
	void *p = sm_malloc(b);
	if (p != NULL)
		memset(p, 0, b);
	else if (strict && runtime_call(__builtin_return_address(0)))
		p = strict_fallback_calloc(n, m);
	return p;
}

static void *sm_memalign(size_t align, size_t n)
{
	if (!on())
		return __libc_memalign(align, n);
	if (align <= 16)
		return sm_malloc(n);
	if (n > SIZE_MAX / 2 || align > SIZE_MAX / 2) {
		errno = ENOMEM;
		return NULL;
	}
	return sm_alloc(n, align);
}

static int pow2(size_t a)
{
	return a != 0 && (a & (a - 1)) == 0;
}

int posix_memalign(void **out, size_t align, size_t n)
{
	if (!pow2(align) || align % sizeof(void *) != 0)
		return EINVAL;
	int e = errno;
	void *p = sm_memalign(align, n);
	if (p == NULL)
		return ENOMEM;
	errno = e;
	*out = p;
	return 0;
}

void *aligned_alloc(size_t align, size_t n)
{
	if (!pow2(align)) {
		errno = EINVAL;
		return NULL;
	}
	return sm_memalign(align, n);
}

void *memalign(size_t align, size_t n)
{
	if (!pow2(align)) { /* glibc rounds it up; so do we */
		size_t a = 16;
		while (a < align && a < SIZE_MAX / 2)
			a <<= 1;
		align = a;
	}
	return sm_memalign(align, n);
}

void *valloc(size_t n)
{
	return sm_memalign(PAGE, n);
}

void *pvalloc(size_t n)
{
	if (n > SIZE_MAX - PAGE) {
		errno = ENOMEM;
		return NULL;
	}
	return sm_memalign(PAGE, (n + PAGE - 1) & ~(size_t)(PAGE - 1));
}

size_t malloc_usable_size(void *p)
{
	if (shmemi_smalloc_has(p))
		return shmemi_smalloc_state == 3 ? 0 : usable(p); /* 3: the heap may be unmapped (finalize) */
	return shmemi_libc_usable(p);
}

/* ---- start and end ---- */

static void after_fork(void)
{
	forked = 1;
	shmemi_smalloc_state = shmemi_smalloc_state ? 2 : 0;
}

static int wanted(void)
{
	const char *e = getenv("SYMHEAP_SHARED_MALLOC");
	if (e != NULL && *e != 0) {
		strict = strcmp(e, "strict") == 0;
		if (strict)
			find_lib();
		return strcmp(e, "0") != 0 && strcmp(e, "off") != 0;
	}
	return symheap_shared_malloc != NULL;
}

static uint64_t parse_size(const char *s, uint64_t dflt)
{
	if (s == NULL || *s == 0)
		return dflt;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	switch (*end) {
	case 'k': case 'K': v <<= 10; break;
	case 'm': case 'M': v <<= 20; break;
	case 'g': case 'G': v <<= 30; break;
	}
	return v;
}

void shmemi_smalloc_init(void)
{
	if (!wanted())
		return;
	if (!shmemi_L.same_address)
		say("symheap: shared malloc: the segment is not at the same address in every PE: blocks are "
		    "shared, but a pointer is valid only in the PE that has it\n");
	/* The default arena: three quarters of the local shared heap (the
	 * runtime's own SharedAlloc keeps the rest). */
	char err[2048];
	uint64_t want = parse_size(getenv("SYMHEAP_SHARED_MALLOC_SIZE"), 0);
	if (symheapc_go_smalloc(&info, want, err, sizeof err) != 0) {
		shmemi_go_error("shmem_init (shared malloc)", err);
		exit(1);
	}
	for (int c = 0; c < NC; c++) {
		cl[c] = (struct cls){info.classes[c][0], info.classes[c][1], info.classes[c][2],
				     info.classes[c][3], info.classes[c][4], info.classes[c][5]};
	}
	for (unsigned i = 0, c = 0; i < sizeof class_of; i++) {
		while (cl[c].size < (uint64_t)i * 16)
			c++;
		class_of[i] = (uint8_t)c;
	}
	views = mmap(NULL, ((size_t)shmemi_L.npes * sizeof *views + PAGE - 1) & ~(PAGE - 1), PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (views == MAP_FAILED)
		shmemi_fatal("shmem_init", "shared malloc: no memory for %d heap views", shmemi_L.npes);
	heap = shmemi_L.base + shmemi_L.part_off + (uint64_t)shmemi_L.me * shmemi_L.part_stride + info.shared_off;
	struct heapview *v = view(shmemi_L.me);
	if (v == NULL)
		shmemi_fatal("shmem_init", "shared malloc: this PE's shared heap has no front end");
	hdr = v->hdr;
	table = v->table;
	arena_off = info.arena;
	arena = (struct shmemi_small_arena *)(heap + arena_off);
	arena_pages = arena->pages;
	pmap = (uint64_t *)((char *)arena + SHMEMI_SMALL_ARENA_FIXED);
	fallbacks = info.fallbacks;
	handle = __atomic_add_fetch(&hdr->handles, 1, __ATOMIC_RELAXED);
	me = shmemi_L.me;
	pthread_key_create(&tc_key, tc_exit);
	pthread_atfork(NULL, NULL, after_fork);
	shmemi_smalloc_lo = (uintptr_t)shmemi_L.base;
	shmemi_smalloc_len = shmemi_L.part_off + (uint64_t)shmemi_L.npes * shmemi_L.part_stride;
	__atomic_store_n(&shmemi_smalloc_state, 1, __ATOMIC_SEQ_CST);
}

/*
 * shmemi_smalloc_finalize runs before (before = 1) and after the
 * runtime's Close, which unmaps the segment. Blocks of this PE that the
 * program still uses (stdio's buffers, say) must stay valid: its shared
 * heap is copied aside before and mapped back, privately, at the same
 * address after. Meanwhile (state 3) malloc serves from glibc and frees
 * of shared blocks do nothing (the runtime's Close may allocate, on its
 * own threads: no lock of this file is held across it). If the address
 * range was taken in between, shared blocks are left alone from then on
 * and a live one would fault: said on stderr.
 */
static void *saved;

void shmemi_smalloc_finalize(int before)
{
	size_t n = info.shared_size;
	if (before) {
		if (shmemi_smalloc_state != 1 || forked)
			return;
		__atomic_store_n(&shmemi_smalloc_state, 3, __ATOMIC_SEQ_CST);
		saved = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (saved == MAP_FAILED)
			saved = NULL;
		else
			memcpy(saved, heap, n);
		return;
	}
	if (shmemi_smalloc_state != 3)
		return;
	void *m = MAP_FAILED;
	if (saved) {
		m = mmap(heap, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (m != MAP_FAILED && m != heap) {
			munmap(m, n);
			m = MAP_FAILED;
		}
		if (m != MAP_FAILED)
			memcpy(heap, saved, n);
		munmap(saved, n);
	}
	if (m == MAP_FAILED) {
		say("symheap: shared malloc: could not keep this PE's shared heap after shmem_finalize: blocks "
		    "malloc returned before it are no longer valid\n");
		return; /* state 3 stays: shared blocks are left alone */
	}
	/* Only this PE's heap is mapped now: frees of its blocks keep
	 * working, any other block of the segment is left alone. */
	shmemi_smalloc_lo = (uintptr_t)heap;
	shmemi_smalloc_len = n;
	__atomic_store_n(&shmemi_smalloc_state, 2, __ATOMIC_SEQ_CST);
}
