//go:build symheap_capi

/*
 * far.c - operations on PEs of other nodes, in a job on several nodes
 * (docs/multinode.md).
 *
 * A PE on another node has no partition in this node's segment: the
 * fast path (shmem_internal.h) tests shmemi_goes_far(pe) first and sends
 * the operation here. Each one locates its symmetric side in this PE's
 * own memory by offset, which names the same object on every PE:
 *
 *   1. the symmetric heap: region 0 of the transport
 *      (transport.RegionHeap), the offset in the heap;
 *   2. the program's static data (static.c): region 2
 *      (transport.RegionStatic), the offset from its start; every PE runs
 *      the same executable, so the offsets agree (shmem_init checks the
 *      size on the node, the transport checks every access's range);
 *
 * then calls the runtime's multi-node layer (export_unsafe.go, through
 * cabi.Remote: internal/far over the transport Go programs use, TCP in
 * every build, UCX in the ucx build). Puts return when their source may
 * be reused (nbi: at the next quiet) and are complete at the target at
 * quiet, which calls shmemi_far_quiet; the target's transport performs
 * them and wakes its sleepers, so waits need nothing more. Any error
 * (a lost PE, a bad range) ends the job with the runtime's message.
 */
#include <stdio.h>

#include "shmem_internal.h"
#include "shmemi_go.h"

/* where returns the region and offset of the n bytes at p, a symmetric
 * address of this PE; anything else ends the job with addr.c's message. */
static int where(const void *p, size_t n, int pe, uint64_t *off, const char *op)
{
	switch (shmemi_locate(p, n, off)) {
	case 1:
		return SHMEMI_REGION_HEAP;
	case 2:
		if (shmemi_L.static_why != NULL)
			shmemi_fatal(op, "%zu bytes at %p are static data, which PE %d on another node cannot reach: %s",
				     n, p, pe, shmemi_L.static_why);
		return SHMEMI_REGION_STATIC;
	}
	(void)shmemi_addr_slow(p, n, pe, op); /* says why, and ends the job */
	shmemi_fatal(op, "%zu bytes at %p are not symmetric", n, p);
}

/* Set after a put or a non-fetching AMO is posted (so that a quiet of
 * another thread that clears it first leaves it set for the next), and
 * cleared by the quiet that flushes: a quiet with nothing posted to
 * another node (a put to this node's PEs, then quiet) skips the flush. */
int shmemi_far_posted;

static void far_failed(const char *op, const char *err)
{
	shmemi_go_error(op, err);
	symheapc_go_global_exit(1);
	__builtin_unreachable();
}

void shmemi_far_put(void *dst, const void *src, size_t n, int pe, int nbi, const char *op)
{
	char err[1024];
	if (n == 0)
		return; /* dst and src may be NULL */
	uint64_t off;
	int r = where(dst, n, pe, &off, op);
	if (symheapc_go_far_put(r, pe, off, (void *)src, n, nbi, err, sizeof err) != 0)
		far_failed(op, err);
	__atomic_store_n(&shmemi_far_posted, 1, __ATOMIC_RELAXED);
	shmemi_bump(shmemi_L.stat_puts);
}

void shmemi_far_get(void *dst, const void *src, size_t n, int pe, const char *op)
{
	char err[1024];
	if (n == 0)
		return;
	uint64_t off;
	int r = where(src, n, pe, &off, op);
	shmemi_pay();
	if (symheapc_go_far_get(r, dst, pe, off, n, err, sizeof err) != 0)
		far_failed(op, err);
	shmemi_bump(shmemi_L.stat_gets);
}

uint64_t shmemi_far_amo(int amo, const void *p, size_t size, int pe, uint64_t v, uint64_t cmp, const char *op)
{
	char err[1024];
	if (((uintptr_t)p & (size - 1)) != 0)
		shmemi_fatal(op, "the variable at %p is not aligned to its size (%zu bytes)", p, size);
	if (size != 4 && size != 8)
		shmemi_fatal(op, "an atomic of %zu bytes on PE %d on another node: the transport's atomics are of 4 "
				 "and 8 bytes",
			     size, pe);
	uint64_t off, old = 0;
	int r = where(p, size, pe, &off, op);
	shmemi_pay();
	if (symheapc_go_far_amo(r, amo, pe, off, (int)size, v, cmp, &old, err, sizeof err) != 0)
		far_failed(op, err);
	if (amo >= SHMEMI_AMO_ADD || amo == SHMEMI_AMO_SET) /* complete at the next flush */
		__atomic_store_n(&shmemi_far_posted, 1, __ATOMIC_RELAXED);
	shmemi_bump(shmemi_L.stat_atomics);
	return old;
}

void shmemi_far_quiet(void)
{
	char err[1024];
	__atomic_store_n(&shmemi_far_posted, 0, __ATOMIC_RELAXED);
	if (symheapc_go_far_quiet(err, sizeof err) != 0)
		far_failed("shmem_quiet", err);
}

/* shmemi_far_strided: nblocks blocks of bsize elements of size bytes,
 * strides in elements between the blocks' starts (iput and iget: blocks
 * of one element); a transfer per block. */
void shmemi_far_strided(void *dst, const void *src, ptrdiff_t dst_stride, ptrdiff_t src_stride, size_t nblocks,
			size_t bsize, size_t size, int pe, int put, const char *op)
{
	size_t b = bsize * size;
	/* The whole span first, so that a range error names the call's. */
	if (put)
		(void)where(dst, ((nblocks - 1) * (size_t)dst_stride + bsize) * size, pe, &(uint64_t){0}, op);
	else
		(void)where(src, ((nblocks - 1) * (size_t)src_stride + bsize) * size, pe, &(uint64_t){0}, op);
	for (size_t i = 0; i < nblocks; i++) {
		char *d = (char *)dst + i * (size_t)dst_stride * size;
		const char *s = (const char *)src + i * (size_t)src_stride * size;
		if (put)
			shmemi_far_put(d, s, b, pe, 0, op);
		else
			shmemi_far_get(d, s, b, pe, op);
	}
}

/* Put with signal to another node: the data, then the transport's fence
 * (the signal is not seen before the data), then the signal's AMO. */
void shmemi_far_put_signal(void *dst, const void *src, size_t n, uint64_t *sig_addr, uint64_t signal, int sig_op,
			   int pe, const char *op)
{
	char err[1024];
	if (sig_op != SHMEM_SIGNAL_SET && sig_op != SHMEM_SIGNAL_ADD)
		shmemi_fatal(op, "sig_op %d is neither SHMEM_SIGNAL_SET nor SHMEM_SIGNAL_ADD", sig_op);
	if (n > 0) {
		shmemi_far_put(dst, src, n, pe, 0, op);
		if (symheapc_go_far_fence(err, sizeof err) != 0)
			far_failed(op, err);
	}
	(void)shmemi_far_amo(sig_op == SHMEM_SIGNAL_SET ? SHMEMI_AMO_SET : SHMEMI_AMO_ADD, sig_addr, sizeof(uint64_t),
			     pe, signal, 0, op);
}

void shmemi_far_refuse(const char *op)
{
	shmemi_fatal(op, "the job spans several nodes, and this routine runs over the node's shared memory only: "
			 "across nodes the active-set routines take the set of every PE, and collect a team of "
			 "every PE (docs/c.md, \"Across nodes\")");
}
