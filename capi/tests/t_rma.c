/* t_rma.c - RMA: typed, sized and mem puts and gets, p/g, nbi, strided and
 * blocked-strided, put with signal, contexts and the C11 generic names,
 * on the symmetric heap and on static data. */
#include "check.h"

static long sdata[64];        /* .bss */
static int idata[8] = {1, 2}; /* .data */
static double dstat[4];
static uint64_t sig;

int main(void)
{
	shmem_init();
	int me = shmem_my_pe(), n = shmem_n_pes();
	int right = (me + 1) % n, left = (me + n - 1) % n;

	/* Typed put/get on the heap. */
	long *h = shmem_malloc(64 * sizeof(long));
	CHECK(h != NULL, "shmem_malloc returned NULL");
	long src[64];
	for (int i = 0; i < 64; i++)
		src[i] = me * 1000 + i;
	shmem_long_put(h, src, 64, right);
	shmem_barrier_all();
	for (int i = 0; i < 64; i++)
		CHECK(h[i] == left * 1000 + i, "h[%d] = %ld, want %d", i, h[i], left * 1000 + i);
	long got[64];
	shmem_long_get(got, h, 64, right);
	for (int i = 0; i < 64; i++)
		CHECK(got[i] == me * 1000 + i, "get[%d] = %ld", i, got[i]);
	shmem_barrier_all();

	/* Puts into static data: .bss and .data of the right neighbour. */
	shmem_long_put(&sdata[8], src, 8, right);
	shmem_int_p(&idata[2], 40 + me, right);
	shmem_double_p(&dstat[1], 0.5 * me, right);
	shmem_barrier_all();
	for (int i = 0; i < 8; i++)
		CHECK(sdata[8 + i] == left * 1000 + i, "sdata[%d] = %ld", 8 + i, sdata[8 + i]);
	CHECK(idata[0] == 1 && idata[1] == 2, "initialised .data lost: %d %d", idata[0], idata[1]);
	CHECK(idata[2] == 40 + left, "idata[2] = %d", idata[2]);
	CHECK(dstat[1] == 0.5 * left, "dstat[1] = %g", dstat[1]);
	CHECK(shmem_int_g(&idata[1], right) == 2, "g of static .data");
	CHECK(shmem_addr_accessible(&sdata[3], right), "static data not accessible");
	CHECK(!shmem_addr_accessible(&got[0], right), "a stack address is accessible");
	shmem_barrier_all();

	/* Sized and mem forms, nbi, quiet. */
	char *b = shmem_calloc(256, 1);
	unsigned char bytes[256];
	for (int i = 0; i < 256; i++)
		bytes[i] = (unsigned char)(i ^ me);
	shmem_putmem(b, bytes, 16, right);
	shmem_put32(b + 16, bytes + 16, 4, right);
	shmem_put64_nbi(b + 32, bytes + 32, 2, right);
	shmem_put128(b + 48, bytes + 48, 1, right);
	shmem_putmem_nbi(b + 64, bytes + 64, 64, right);
	shmem_quiet();
	shmem_barrier_all();
	for (int i = 0; i < 128; i++)
		CHECK((unsigned char)b[i] == (unsigned char)(i ^ left), "b[%d] = %d", i, b[i]);
	unsigned char gb[128];
	shmem_getmem_nbi(gb, b, 64, right);
	shmem_get16(gb + 64, b + 64, 32, right);
	shmem_quiet();
	for (int i = 0; i < 128; i++)
		CHECK(gb[i] == (unsigned char)(i ^ me), "gb[%d] = %d", i, gb[i]);
	shmem_barrier_all();

	/* Strided: every other element, and blocks of 3 every 4. */
	int *s = shmem_calloc(64, sizeof(int));
	int isrc[64];
	for (int i = 0; i < 64; i++)
		isrc[i] = me * 100 + i;
	shmem_int_iput(s, isrc, 2, 1, 10, right);
	shmem_barrier_all();
	for (int i = 0; i < 10; i++)
		CHECK(s[2 * i] == left * 100 + i && s[2 * i + 1] == 0, "iput s[%d] = %d", 2 * i, s[2 * i]);
	int ig[10];
	shmem_int_iget(ig, s, 1, 2, 10, right);
	for (int i = 0; i < 10; i++)
		CHECK(ig[i] == me * 100 + i, "iget %d = %d", i, ig[i]);
	shmem_barrier_all();
	memset(s, 0, 64 * sizeof(int));
	shmem_barrier_all();
	shmem_int_ibput(s, isrc, 4, 3, 3, 5, right); /* 5 blocks of 3: dst every 4, src every 3 */
	shmem_barrier_all();
	for (int blk = 0; blk < 5; blk++)
		for (int j = 0; j < 3; j++)
			CHECK(s[blk * 4 + j] == left * 100 + blk * 3 + j, "ibput s[%d] = %d", blk * 4 + j,
			      s[blk * 4 + j]);
	int ibg[15];
	shmem_int_ibget(ibg, s, 3, 4, 3, 5, right);
	for (int i = 0; i < 15; i++)
		CHECK(ibg[i] == me * 100 + i, "ibget %d = %d", i, ibg[i]);
	shmem_barrier_all();

	/* Contexts and the generic names. */
	shmem_ctx_t ctx;
	CHECK(shmem_ctx_create(SHMEM_CTX_PRIVATE, &ctx) == 0, "ctx_create");
	shmem_team_t t;
	CHECK(shmem_ctx_get_team(ctx, &t) == 0 && t == SHMEM_TEAM_WORLD, "ctx team");
	shmem_ctx_long_put(ctx, h, src, 4, right);
	shmem_put(ctx, h + 4, src + 4, 4, right);   /* generic with a context */
	shmem_put(&sdata[20], src, 2, right);        /* generic, static */
	shmem_p(&idata[3], 7 + me, right);
	shmem_ctx_quiet(ctx);
	shmem_ctx_fence(ctx);
	shmem_barrier_all();
	for (int i = 0; i < 8; i++)
		CHECK(h[i] == left * 1000 + i, "ctx put h[%d] = %ld", i, h[i]);
	CHECK(sdata[20] == left * 1000 && sdata[21] == left * 1000 + 1, "generic static put");
	CHECK(idata[3] == 7 + left, "generic p");
	CHECK(shmem_g(&idata[3], right) == 7 + me, "generic g");
	shmem_ctx_destroy(ctx);
	shmem_barrier_all();

	/* Put with signal: data, then the signal, seen in that order. */
	double payload[4] = {me, me + 0.25, me + 0.5, me + 0.75};
	shmem_double_put_signal(dstat, payload, 4, &sig, 1, SHMEM_SIGNAL_ADD, right);
	uint64_t sv = shmem_signal_wait_until(&sig, SHMEM_CMP_GE, 1);
	CHECK(sv == 1, "signal %llu", (unsigned long long)sv);
	for (int i = 0; i < 4; i++)
		CHECK(dstat[i] == left + 0.25 * i, "signalled data %d = %g", i, dstat[i]);
	CHECK(shmem_signal_fetch(&sig) == 1, "signal_fetch");
	shmem_barrier_all();
	shmem_putmem_signal_nbi(b, bytes, 8, &sig, 5, SHMEM_SIGNAL_SET, right);
	shmem_quiet();
	shmem_signal_wait_until(&sig, SHMEM_CMP_EQ, 5);
	CHECK((unsigned char)b[7] == (unsigned char)(7 ^ left), "putmem_signal data");

	/* shmem_ptr: direct loads of the neighbour's copy. */
	/* The PEs of SHMEM_TEAM_SHARED have one; one on another node none. */
	long *rp = shmem_ptr(h, right);
	long *sp = shmem_ptr(&sdata[8], right);
	if (shmem_team_translate_pe(SHMEM_TEAM_WORLD, right, SHMEM_TEAM_SHARED) >= 0) {
		CHECK(rp != NULL && rp[0] == me * 1000, "shmem_ptr load: %ld", rp ? rp[0] : -1);
		CHECK(sp != NULL && sp[0] == me * 1000, "shmem_ptr on static data");
	} else {
		CHECK(rp == NULL && sp == NULL, "shmem_ptr to PE %d, on another node, is not NULL", right);
	}
	CHECK(shmem_ptr(got, right) == NULL, "shmem_ptr of a stack address");

	shmem_barrier_all();
	shmem_free(s);
	shmem_free(b);
	shmem_free(h);
	DONE("t_rma");
}
