//go:build symheap_capi

/*
 * hooks.c - the memory hooks of C programs: release events from free,
 * realloc, munmap, madvise and mremap. free and realloc hand the blocks
 * of the shared malloc (smalloc.c) to it, unrecorded (see free).
 *
 * libsymheap defines these functions itself (capi/libsymheap.map exports
 * them), so that the program's calls, the C library's and the Go
 * runtime's (its cgo mmap glue) reach them before libc's, as Open MPI's
 * patcher intercepted them. Each records the range it is about to
 * release, then does the work through libc's own entry (__libc_free,
 * __libc_realloc) or the system call. Recording is a few stores into a
 * ring of this process; it never calls into Go (the Go runtime unmaps
 * memory through munmap itself, and a hook may run inside malloc, before
 * shmem_init, or on a thread Go does not know). The Go side
 * (export_hooks_unsafe.go) drains the ring into the PE's memory monitor
 * at every Sync, that is before every registration-cache lookup.
 *
 * While nobody listens (no monitor subscriber, or before shmem_init) a
 * hook costs one relaxed load of shmemi_hooks_on.
 *
 * Ring: RING slots, a writer claims slot n with a fetch-add on head,
 * fills it and publishes it with a release store of seq = n + 1; the
 * reader takes slots in order up to head, each once its seq reads n + 1
 * (acquire). A reader that fell more than RING behind, or meets a slot a
 * writer has claimed but not published for long, reports the whole
 * address space released: the cache drops everything, which is always
 * safe.
 *
 * Not seen: memory glibc trims from its heap inside free (the range of
 * the free that made it trimmable was reported before), malloc_trim's
 * madvise of free chunks (the same), and releases by libc's internal
 * calls that do not go through these symbols. A program linked fully
 * statically (-static) gets libc's free and these in one archive member:
 * there the hooks need the linker's --wrap instead.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shmemi_hooks.h"
#include "smalloc.h"

extern void __libc_free(void *p);
extern void *__libc_realloc(void *p, size_t n);

#define RING 1024

struct hook_slot {
	_Atomic uint64_t seq; /* n + 1 once slot n is written */
	uint64_t kind, start, end;
};

_Atomic int shmemi_hooks_on;
static _Atomic uint64_t hook_head;
static struct hook_slot hook_ring[RING];

static void record(int kind, uintptr_t start, uintptr_t end)
{
	if (end <= start)
		return;
	uint64_t n = atomic_fetch_add_explicit(&hook_head, 1, memory_order_acq_rel);
	struct hook_slot *s = &hook_ring[n % RING];
	atomic_store_explicit(&s->seq, 0, memory_order_relaxed);
	s->kind = (uint64_t)kind;
	s->start = start;
	s->end = end;
	atomic_store_explicit(&s->seq, n + 1, memory_order_release); /* pairs with shmemi_hooks_take */
}

static int listening(void)
{
	return atomic_load_explicit(&shmemi_hooks_on, memory_order_relaxed);
}

static uintptr_t page_end(uintptr_t a)
{
	uintptr_t pg = 4096;
	return (a + pg - 1) & ~(pg - 1);
}

/* shmemi_hooks_free is glibc's free, recorded. */
void shmemi_hooks_free(void *p)
{
	if (p != NULL && listening()) {
		uintptr_t a = (uintptr_t)p;
		record(SHMEMI_HOOK_FREE, a, a + malloc_usable_size(p));
	}
	__libc_free(p);
}

/* shmemi_hooks_realloc is glibc's realloc, recorded. */
void *shmemi_hooks_realloc(void *p, size_t n)
{
	if (p == NULL || !listening())
		return __libc_realloc(p, n);
	uintptr_t a = (uintptr_t)p;
	size_t old = malloc_usable_size(p);
	void *q = __libc_realloc(p, n);
	/* The old block is not reused before realloc returns to this
	 * thread's caller, which learns of it only now. */
	if (n == 0 && q == NULL)
		record(SHMEMI_HOOK_FREE, a, a + old);
	else if (q != NULL && q != p)
		record(SHMEMI_HOOK_CHUNK, a, a + old);
	else if (q != NULL && malloc_usable_size(q) < old)
		record(SHMEMI_HOOK_CHUNK, a + malloc_usable_size(q), a + old);
	return q;
}

/*
 * free and realloc first ask the shared malloc (smalloc.c) whether the
 * block is one of the segment's: such a free is no release of memory to
 * the system (the segment stays mapped, its registrations valid), so
 * nothing is recorded for it. Every other block is glibc's (all of them
 * while the shared malloc is off, and the blocks allocated before
 * shmem_init or after the arena filled up while it is on).
 */
/* A shared-malloc block freed stays mapped, but it is a release all the
 * same: a registration of it (shmemx_reg_get, the transport's) must not
 * outlive it, so the hook records it as glibc's are recorded. */
void free(void *p)
{
	if (shmemi_smalloc_has(p)) {
		if (listening()) {
			uintptr_t a = (uintptr_t)p;
			record(SHMEMI_HOOK_FREE, a, a + malloc_usable_size(p));
		}
		shmemi_smalloc_free(p);
	} else {
		shmemi_hooks_free(p);
	}
}

void *realloc(void *p, size_t n)
{
	if (shmemi_smalloc_has(p)) {
		uintptr_t a = (uintptr_t)p;
		size_t old = listening() ? malloc_usable_size(p) : 0;
		if (n == 0) { /* as glibc's: the block is freed */
			if (old)
				record(SHMEMI_HOOK_FREE, a, a + old);
			shmemi_smalloc_free(p);
			return NULL;
		}
		void *q = shmemi_smalloc_realloc(p, n);
		if (old && q != NULL && q != p)
			record(SHMEMI_HOOK_CHUNK, a, a + old);
		return q;
	}
	if (n != 0 && __atomic_load_n(&shmemi_smalloc_state, __ATOMIC_RELAXED) == 1) {
		if (p == NULL)
			return malloc(n);
		/* A block glibc served before shmem_init moves into the
		 * shared heap when it grows or shrinks. */
		void *q = malloc(n);
		if (q == NULL)
			return NULL;
		size_t old = shmemi_libc_usable(p);
		memcpy(q, p, old < n ? old : n);
		shmemi_hooks_free(p);
		return q;
	}
	return shmemi_hooks_realloc(p, n);
}

int munmap(void *addr, size_t n)
{
	if (listening())
		record(SHMEMI_HOOK_UNMAP, (uintptr_t)addr, page_end((uintptr_t)addr + n));
	return (int)syscall(SYS_munmap, addr, n);
}

int madvise(void *addr, size_t n, int advice)
{
	if (listening() && (advice == MADV_DONTNEED || advice == MADV_FREE || advice == MADV_REMOVE))
		record(SHMEMI_HOOK_REMOVE, (uintptr_t)addr, page_end((uintptr_t)addr + n));
	return (int)syscall(SYS_madvise, addr, n, advice);
}

void *mremap(void *old, size_t old_n, size_t new_n, int flags, ...)
{
	void *fixed = NULL;
	if (flags & MREMAP_FIXED) {
		va_list ap;
		va_start(ap, flags);
		fixed = va_arg(ap, void *);
		va_end(ap);
	}
	if (listening()) {
		uintptr_t a = (uintptr_t)old;
		if (flags & (MREMAP_MAYMOVE | MREMAP_FIXED))
			record(SHMEMI_HOOK_UNMAP, a, page_end(a + old_n)); /* may move */
		else if (new_n < old_n)
			record(SHMEMI_HOOK_UNMAP, page_end(a + new_n), page_end(a + old_n));
		if (fixed != NULL)
			record(SHMEMI_HOOK_UNMAP, (uintptr_t)fixed, page_end((uintptr_t)fixed + new_n));
	}
	return (void *)syscall(SYS_mremap, old, old_n, new_n, flags, fixed);
}

void shmemi_hooks_listen(int on)
{
	atomic_store_explicit(&shmemi_hooks_on, on, memory_order_seq_cst);
}

int shmemi_hooks_take(uint64_t *cursor, struct shmemi_hook_event *out, int max, int *lost)
{
	uint64_t head = atomic_load_explicit(&hook_head, memory_order_acquire);
	uint64_t n = *cursor;
	int k = 0;
	*lost = 0;
	if (head - n > RING) {
		*lost = 1;
		n = head - RING;
	}
	for (; n < head && k < max; n++) {
		struct hook_slot *s = &hook_ring[n % RING];
		uint64_t seq;
		int spins = 0;
		/* A writer between its fetch-add and its publication: a few
		 * instructions, unless it was preempted there. */
		while ((seq = atomic_load_explicit(&s->seq, memory_order_acquire)) != n + 1) {
			if (seq > n + 1 || ++spins > 100000) {
				*lost = 1;
				break;
			}
		}
		if (seq != n + 1)
			continue;
		out[k].kind = s->kind;
		out[k].start = s->start;
		out[k].end = s->end;
		if (atomic_load_explicit(&s->seq, memory_order_acquire) != n + 1) {
			*lost = 1; /* overwritten while read */
			continue;
		}
		k++;
	}
	*cursor = n;
	return k;
}
