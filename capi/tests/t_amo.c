/* t_amo.c - every atomic family (standard, extended, bitwise; fetching,
 * non-fetching, _nbi; contexts; generic names; the deprecated names) on
 * heap and static targets. Every PE hits PE 0's variables, so the results
 * are checked against sums over the PEs. */
#include "check.h"

static long scount;
static int sint;
static unsigned long sbits;
static double sdbl;
static long long sll;

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	const int iters = 200;
	long *hcount = shmem_calloc(4, sizeof(long));
	uint64_t *hu = shmem_calloc(4, sizeof(uint64_t));
	int32_t *hi32 = shmem_calloc(4, sizeof(int32_t));
	shmem_barrier_all();

	for (int i = 0; i < iters; i++) {
		shmem_long_atomic_inc(&scount, 0);
		shmem_long_atomic_add(hcount, 2, 0);
		(void)shmem_long_atomic_fetch_inc(&hcount[1], 0);
		(void)shmem_int_atomic_fetch_add(&sint, 3, 0);
		shmem_atomic_add(&sll, 1LL, 0);                /* generic */
		shmem_atomic_inc(SHMEM_CTX_DEFAULT, &hu[0], 0); /* generic, context */
		shmem_int32_atomic_add(&hi32[0], -1, 0);
	}
	/* Compare-and-swap: each PE sets bit me % 64 of a bit set (the
	 * bit is taken by several PEs beyond 64 PEs: the loop still ends). */
	unsigned long old = 0;
	for (;;) {
		unsigned long cur = shmem_ulong_atomic_compare_swap(&sbits, old, old | 1UL << me % 64, 0);
		if (cur == old)
			break;
		old = cur;
	}
	shmem_uint64_atomic_fetch_or(&hu[1], 1ULL << (me % 56 + 8), 0);
	unsigned long wbits = n >= 64 ? ~0UL : (1UL << n) - 1;
	uint64_t wor = (n >= 56 ? (1ULL << 56) - 1 : (1ULL << n) - 1) << 8;
	shmem_barrier_all();
	if (me == 0) {
		CHECK(scount == (long)n * iters, "scount %ld", scount);
		CHECK(hcount[0] == 2L * n * iters, "hcount %ld", hcount[0]);
		CHECK(hcount[1] == (long)n * iters, "fetch_inc count %ld", hcount[1]);
		CHECK(sint == 3 * n * iters, "sint %d", sint);
		CHECK(sll == (long long)n * iters, "sll %lld", sll);
		CHECK(hu[0] == (uint64_t)n * iters, "hu %llu", (unsigned long long)hu[0]);
		CHECK(hi32[0] == -n * iters, "hi32 %d", hi32[0]);
		CHECK(sbits == wbits, "cswap bits %lx", sbits);
		CHECK(hu[1] == wor, "fetch_or bits %llx", (unsigned long long)hu[1]);
	}
	shmem_barrier_all();

	/* Fetch, set, swap on floats and integers, bitwise and/xor. */
	int right = (me + 1) % n;
	shmem_double_atomic_set(&sdbl, 1.5 + me, right);
	shmem_barrier_all();
	int left = (me + n - 1) % n;
	CHECK(sdbl == 1.5 + left, "atomic_set double %g", sdbl);
	CHECK(shmem_double_atomic_fetch(&sdbl, right) == 1.5 + me, "atomic_fetch double");
	shmem_barrier_all();
	double prev = shmem_double_atomic_swap(&sdbl, -1.0, right);
	CHECK(prev == 1.5 + me, "atomic_swap double returned %g", prev);
	shmem_barrier_all();
	CHECK(sdbl == -1.0, "after swap %g", sdbl);
	long sw = shmem_atomic_swap(&hcount[2], (long)me + 10, right); /* generic */
	CHECK(sw == 0, "swap of a fresh long gave %ld", sw);
	shmem_barrier_all();
	CHECK(hcount[2] == left + 10, "swapped %ld", hcount[2]);
	CHECK(shmem_atomic_fetch(&hcount[2], me) == left + 10, "generic fetch");
	shmem_barrier_all();
	hu[2] = 0xff;
	shmem_barrier_all();
	shmem_uint64_atomic_and(&hu[2], 0x0f, right);
	shmem_barrier_all();
	CHECK(hu[2] == 0x0f, "and: %llx", (unsigned long long)hu[2]);
	shmem_barrier_all();
	uint64_t fx = shmem_uint64_atomic_fetch_xor(&hu[2], 0x3, right);
	CHECK(fx == 0x0f, "fetch_xor returned %llx", (unsigned long long)fx);
	shmem_barrier_all();
	CHECK(hu[2] == 0x0c, "xor: %llx", (unsigned long long)hu[2]);
	shmem_uint64_atomic_xor(&hu[2], 0xc, me);
	shmem_uint64_atomic_or(&hu[2], 0x100, me);
	CHECK(shmem_uint64_atomic_fetch_and(&hu[2], 0x100, me) == 0x100, "fetch_and");
	shmem_barrier_all();

	/* _nbi fetching forms: complete at quiet. */
	long f1 = -1, f2 = -1;
	int32_t f3 = -1;
	shmem_long_atomic_fetch_nbi(&f1, &hcount[2], right);
	shmem_long_atomic_fetch_add_nbi(&f2, &hcount[3], 5, right);
	shmem_ctx_int32_atomic_compare_swap_nbi(SHMEM_CTX_DEFAULT, &f3, &hi32[1], 0, 9, right);
	shmem_quiet();
	CHECK(f1 == me + 10, "fetch_nbi %ld", f1);
	CHECK(f2 == 0, "fetch_add_nbi %ld", f2);
	CHECK(f3 == 0, "compare_swap_nbi %d", f3);
	shmem_barrier_all();
	CHECK(hcount[3] == 5 && hi32[1] == 9, "nbi results %ld %d", hcount[3], hi32[1]);
	shmem_barrier_all();

	/* The deprecated names. */
	if (me == 0)
		scount = 0;
	shmem_barrier_all();
	shmem_long_inc(&scount, 0);
	(void)shmem_long_finc(&scount, 0);
	shmem_long_add(&scount, 10, 0);
	(void)shmem_long_fadd(&scount, 100, 0);
	shmem_barrier_all();
	if (me == 0)
		CHECK(scount == 112L * n, "deprecated atomics: %ld", scount);
	shmem_barrier_all();
	CHECK(shmem_long_fetch(&scount, 0) == 112L * n, "shmem_long_fetch");
	shmem_barrier_all();
	if (me == 0) {
		CHECK(shmem_long_cswap(&scount, 112L * n, 1, 0) == 112L * n, "cswap");
		CHECK(shmem_long_swap(&scount, 2, 0) == 1, "swap");
		shmem_long_set(&scount, 3, 0);
		CHECK(scount == 3, "set");
		shmem_double_set(&sdbl, 2.0, 0);
		CHECK(shmem_double_swap(&sdbl, 4.0, 0) == 2.0, "double swap");
		/* The 1.4 generic names. */
		shmem_set(&scount, 5L, 0);
		CHECK(shmem_fetch(&scount, 0) == 5, "generic fetch");
		CHECK(shmem_finc(&scount, 0) == 5 && shmem_fadd(&scount, 2L, 0) == 6, "generic finc/fadd");
		shmem_inc(&scount, 0);
		shmem_add(&scount, 1L, 0);
		CHECK(shmem_cswap(&scount, 10L, 0L, 0) == 10 && shmem_swap(&scount, 1L, 0) == 0, "generic cswap/swap");
	}

	shmem_barrier_all();
	shmem_free(hi32);
	shmem_free(hu);
	shmem_free(hcount);
	DONE("t_amo");
}
