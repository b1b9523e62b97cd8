/* t_coll.c - teams (world, shared, split strided and 2-D, translate,
 * config, sync, destroy, contexts on teams), team collectives (broadcast,
 * collect, fcollect, alltoall, alltoalls, reductions of several types),
 * and the deprecated active-set routines with pSync. */
#include <complex.h>
#include <unistd.h>
#include "check.h"

static long pSync[2][SHMEM_REDUCE_SYNC_SIZE];
static long pSyncB[SHMEM_BARRIER_SYNC_SIZE];
static long pWrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE + 16];
static long lsrc[2 * MAX_PES], ldst[2 * MAX_PES];
static double dsrc[4], ddst[4];
static long double ldsrc[2], lddst[2];
static double _Complex csrc[2], cdst[2];
static int isrc[MAX_PES], idst[8 * MAX_PES];
/* Reductions above 512 bytes: in shares of whole lines, a reduce-scatter
 * and an allgather in one pass (coll.c, reduce_shares). 1003 elements:
 * the last share is short and not a whole line. */
#define BIGN 1003
static long bsrc[BIGN], bdst[BIGN], bWrk[BIGN / 2 + 1];
static double dbsrc[BIGN], dbdst[BIGN];
/* Broadcasts of 57 to 512 bytes, which go down a tree of scratch buffers
 * above 4 PEs (shmemi_tree.h), and their neighbours' sizes. */
static unsigned char tsrc[520], tdst[520];
static uint64_t tsrc64[65], tdst64[65];

int main(void)
{
	int provided = -1;
	CHECK(shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided) == 0, "init_thread");
	CHECK(provided == SHMEM_THREAD_MULTIPLE, "provided %d", provided);
	int me = shmem_my_pe(), n = shmem_n_pes();
	for (int j = 0; j < 2; j++)
		for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++)
			pSync[j][i] = SHMEM_SYNC_VALUE;
	for (int i = 0; i < SHMEM_BARRIER_SYNC_SIZE; i++)
		pSyncB[i] = SHMEM_SYNC_VALUE;

	/* The predefined teams. */
	CHECK(shmem_team_my_pe(SHMEM_TEAM_WORLD) == me, "world rank");
	CHECK(shmem_team_n_pes(SHMEM_TEAM_WORLD) == n, "world size");
	/* The shared team: the PEs shmem_ptr reaches, every PE on one node;
	 * in a job on several nodes (nodes), this node's, and the routines
	 * that run over shared memory only are left out. */
	int nodes = shmem_team_n_pes(SHMEM_TEAM_SHARED) < n;
	for (int p = 0; p < n; p++)
		CHECK((shmem_team_translate_pe(SHMEM_TEAM_WORLD, p, SHMEM_TEAM_SHARED) >= 0) == (shmem_ptr(pSyncB, p) != NULL),
		      "PE %d: in the shared team %d, shmem_ptr %p", p,
		      shmem_team_translate_pe(SHMEM_TEAM_WORLD, p, SHMEM_TEAM_SHARED), shmem_ptr(pSyncB, p));
	if (!nodes) {
		CHECK(shmem_team_n_pes(SHMEM_TEAM_SHARED) == n, "shared team size");
		CHECK(shmem_team_translate_pe(SHMEM_TEAM_WORLD, n - 1, SHMEM_TEAM_SHARED) == n - 1, "translate");
	}
	shmem_team_config_t cfg = {0};
	CHECK(shmem_team_get_config(SHMEM_TEAM_WORLD, SHMEM_TEAM_NUM_CONTEXTS, &cfg) == 0, "get_config");

	/* Team reductions on the world: sum, max, min, prod, and/or/xor. */
	for (int i = 0; i < 16; i++)
		lsrc[i] = me + i;
	shmem_long_sum_reduce(SHMEM_TEAM_WORLD, ldst, lsrc, 16);
	for (int i = 0; i < 16; i++)
		CHECK(ldst[i] == (long)n * (n - 1) / 2 + (long)n * i, "sum[%d] = %ld", i, ldst[i]);
	shmem_max_reduce(SHMEM_TEAM_WORLD, ldst, lsrc, 16); /* generic */
	CHECK(ldst[0] == n - 1 && ldst[15] == n + 14, "max %ld %ld", ldst[0], ldst[15]);
	shmem_long_min_reduce(SHMEM_TEAM_WORLD, ldst, lsrc, 2);
	CHECK(ldst[0] == 0 && ldst[1] == 1, "min %ld %ld", ldst[0], ldst[1]);
	/* Bit me % 64: beyond 64 PEs several PEs set one bit, and the xor
	 * keeps the bits an odd number of PEs set. */
	lsrc[0] = (long)(1UL << me % 64);
	unsigned long wor = 0, wxor = 0;
	for (int p = 0; p < n; p++) {
		wor |= 1UL << p % 64;
		wxor ^= 1UL << p % 64;
	}
	shmem_int64_or_reduce(SHMEM_TEAM_WORLD, ldst, lsrc, 1);
	CHECK(ldst[0] == (long)wor, "or %lx", ldst[0]);
	shmem_int64_xor_reduce(SHMEM_TEAM_WORLD, ldst, lsrc, 1);
	CHECK(ldst[0] == (long)wxor, "xor %lx", ldst[0]);
	lsrc[0] = ~0L;
	lsrc[1] = me < 20 ? me + 1 : 1; /* 20! fits a long */
	shmem_int64_and_reduce(SHMEM_TEAM_WORLD, ldst, lsrc, 1);
	CHECK(ldst[0] == ~0L, "and %lx", ldst[0]);
	shmem_long_prod_reduce(SHMEM_TEAM_WORLD, ldst, lsrc + 1, 1);
	long fact = 1;
	for (int p = 1; p <= n && p <= 20; p++)
		fact *= p;
	CHECK(ldst[0] == fact, "prod %ld, want %ld", ldst[0], fact);
	dsrc[0] = 0.5 * me;
	shmem_double_sum_reduce(SHMEM_TEAM_WORLD, ddst, dsrc, 1);
	CHECK(ddst[0] == 0.25 * n * (n - 1), "double sum %g", ddst[0]);
	ldsrc[0] = me;
	shmem_longdouble_max_reduce(SHMEM_TEAM_WORLD, lddst, ldsrc, 1);
	CHECK(lddst[0] == n - 1, "long double max");
	csrc[0] = me + 1.0 * I;
	shmem_complexd_sum_reduce(SHMEM_TEAM_WORLD, cdst, csrc, 1);
	CHECK(creal(cdst[0]) == n * (n - 1) / 2 && cimag(cdst[0]) == n, "complex sum");
	/* In place: dest == source. */
	lsrc[0] = me;
	shmem_long_sum_reduce(SHMEM_TEAM_WORLD, lsrc, lsrc, 1);
	CHECK(lsrc[0] == (long)n * (n - 1) / 2, "in-place sum %ld", lsrc[0]);

	/* Broadcast, collect, fcollect, alltoall(s) on the world. */
	for (int i = 0; i < 8; i++)
		isrc[i] = me * 10 + i;
	memset(idst, 0, sizeof idst);
	shmem_int_broadcast(SHMEM_TEAM_WORLD, idst, isrc, 4, n - 1);
	for (int i = 0; i < 4; i++)
		CHECK(idst[i] == (n - 1) * 10 + i, "broadcast[%d] = %d", i, idst[i]);
	shmem_int_fcollect(SHMEM_TEAM_WORLD, idst, isrc, 2);
	for (int p = 0; p < n; p++)
		CHECK(idst[2 * p] == p * 10 && idst[2 * p + 1] == p * 10 + 1, "fcollect at %d", p);
	/* collect: PE p contributes p%8+1 elements. */
	shmem_collect(SHMEM_TEAM_WORLD, idst, isrc, (size_t)me % 8 + 1); /* generic */
	int off = 0;
	for (int p = 0; p < n; p++)
		for (int i = 0; i <= p % 8; i++, off++)
			CHECK(idst[off] == p * 10 + i, "collect idst[%d] = %d", off, idst[off]);
	/* alltoall: block j of PE p's source goes to block p of PE j. */
	for (int j = 0; j < n; j++)
		isrc[j] = me * 10 + j;
	shmem_int_alltoall(SHMEM_TEAM_WORLD, idst, isrc, 1);
	for (int p = 0; p < n; p++)
		CHECK(idst[p] == p * 10 + me, "alltoall[%d] = %d", p, idst[p]);
	shmem_int_alltoalls(SHMEM_TEAM_WORLD, idst, isrc, 2, 1, 1);
	for (int p = 0; p < n; p++)
		CHECK(idst[2 * p] == p * 10 + me, "alltoalls[%d] = %d", 2 * p, idst[2 * p]);
	shmem_sync_all();

	/* A strided split: the even PEs. */
	shmem_team_t even;
	int size = (n + 1) / 2;
	CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, size, NULL, 0, &even) == 0, "split");
	if (me % 2 == 0) {
		CHECK(even != SHMEM_TEAM_INVALID, "even PE not in the even team");
		CHECK(shmem_team_my_pe(even) == me / 2 && shmem_team_n_pes(even) == size, "even rank");
		CHECK(shmem_team_translate_pe(even, size - 1, SHMEM_TEAM_WORLD) == 2 * (size - 1), "translate");
		lsrc[0] = me;
		shmem_long_sum_reduce(even, ldst, lsrc, 1);
		CHECK(ldst[0] == (long)size * (size - 1), "even sum %ld", ldst[0]);
		shmem_ctx_t ctx;
		CHECK(shmem_team_create_ctx(even, 0, &ctx) == 0, "team ctx");
		shmem_team_t t2;
		shmem_ctx_get_team(ctx, &t2);
		CHECK(t2 == even, "ctx team");
		/* A context's PE numbers are its team's: rank me/2 + 1 of the
		 * even team is world PE me + 2. */
		int peer = (shmem_team_my_pe(even) + 1) % size;
		shmem_ctx_long_p(ctx, &ldst[1], 77 + me, peer);
		shmem_ctx_quiet(ctx);
		shmem_team_sync(even);
		int from = shmem_team_translate_pe(even, (shmem_team_my_pe(even) + size - 1) % size, SHMEM_TEAM_WORLD);
		CHECK(ldst[1] == 77 + from, "ctx put in team: %ld, want %d (from team rank %d's put)", ldst[1], 77 + from,
		      (shmem_team_my_pe(even) + size - 1) % size);
		CHECK(shmem_ctx_long_g(ctx, &ldst[1], peer) == 77 + me, "ctx get in team");
		shmem_team_sync(even);
		shmem_ctx_destroy(ctx);
		CHECK((shmem_team_ptr(even, ldst, 0) != NULL) == (shmem_ptr(ldst, 0) != NULL), "team_ptr");
		CHECK(nodes || shmem_team_ptr(even, ldst, 0) != NULL, "team_ptr");
		shmem_team_destroy(even);
	} else {
		CHECK(even == SHMEM_TEAM_INVALID, "odd PE in the even team");
	}
	shmem_barrier_all();

	/* 2-D split: rows of 2, or of n/32 beyond 64 PEs (a split makes a
	 * team per row and per column, and the job has 64 team ids). */
	shmem_team_t xt, yt;
	int xr = n > 64 ? n / 32 : 2;
	CHECK(shmem_team_split_2d(SHMEM_TEAM_WORLD, xr, NULL, 0, &xt, NULL, 0, &yt) == 0, "split_2d");
	CHECK(xt != SHMEM_TEAM_INVALID && yt != SHMEM_TEAM_INVALID, "2-D teams");
	CHECK(shmem_team_my_pe(xt) == me % xr, "x rank %d", shmem_team_my_pe(xt));
	CHECK(shmem_team_my_pe(yt) == me / xr, "y rank %d", shmem_team_my_pe(yt));
	CHECK(shmem_team_n_pes(yt) == (n - me % xr + xr - 1) / xr, "y size %d", shmem_team_n_pes(yt));
	shmem_team_sync(xt);
	shmem_team_destroy(xt);
	shmem_team_destroy(yt);
	shmem_barrier_all();

	/* Deprecated active-set routines: barrier, to_all, broadcast64,
	 * collect/fcollect/alltoall 32 and 64, alternating pSync. */
	shmem_barrier(0, 0, n, pSyncB);
	for (int r = 0; r < 4; r++) {
		lsrc[0] = me + r;
		shmem_long_sum_to_all(ldst, lsrc, 1, 0, 0, n, pWrk, pSync[r & 1]);
		CHECK(ldst[0] == (long)n * (n - 1) / 2 + (long)n * r, "sum_to_all round %d: %ld", r, ldst[0]);
	}
	dsrc[0] = me;
	shmem_double_max_to_all(ddst, dsrc, 1, 0, 0, n, (double *)pWrk, pSync[0]);
	CHECK(ddst[0] == n - 1, "max_to_all %g", ddst[0]);
	shmem_barrier_all();
	ldst[0] = -1;
	lsrc[0] = 1000 + me;
	shmem_broadcast64(ldst, lsrc, 1, 0, 0, 0, n, pSync[1]);
	if (me != 0)
		CHECK(ldst[0] == 1000, "broadcast64 %ld", ldst[0]);
	else
		CHECK(ldst[0] == -1, "broadcast64 wrote the root's dest");
	shmem_barrier_all();
	isrc[0] = me;
	shmem_fcollect32(idst, isrc, 1, 0, 0, n, pSync[0]);
	for (int p = 0; p < n; p++)
		CHECK(idst[p] == p, "fcollect32 %d", idst[p]);
	shmem_barrier_all();
	lsrc[0] = me;
	lsrc[1] = me;
	shmem_collect64(ldst, lsrc, (size_t)(me % 2) + 1, 0, 0, n, pSync[1]);
	off = 0;
	for (int p = 0; p < n; p++)
		for (int i = 0; i <= p % 2; i++, off++)
			CHECK(ldst[off] == p, "collect64 ldst[%d] = %ld", off, ldst[off]);
	shmem_barrier_all();
	for (int j = 0; j < n; j++)
		isrc[j] = me * 10 + j;
	shmem_alltoall32(idst, isrc, 1, 0, 0, n, pSync[0]);
	for (int p = 0; p < n; p++)
		CHECK(idst[p] == p * 10 + me, "alltoall32 %d", idst[p]);
	/* Many broadcasts back to back, rotating roots: the handshake's
	 * tickets must never let a member read a source from another round. */
	for (int it = 0; it < 300; it++) {
		int root = it % n;
		lsrc[0] = (long)it * 100 + me;
		shmem_broadcast64(ldst, lsrc, 1, root, 0, 0, n, pSync[it & 1]);
		if (me != root)
			CHECK(ldst[0] == (long)it * 100 + root, "broadcast64 round %d: %ld", it, ldst[0]);
		shmem_long_broadcast(SHMEM_TEAM_WORLD, &ldst[1], lsrc, 1, root);
		CHECK(ldst[1] == (long)it * 100 + root, "team broadcast round %d: %ld", it, ldst[1]);
	}
	/* Broadcasts of 57 to 512 bytes (above 4 PEs: the tree), back to
	 * back, the root and the size changing every call, between sizes that
	 * take other paths (8, 513). The root rewrites its source at once,
	 * and PEs dawdle in turn: a member must have read its parent's buffer
	 * before it arrives, and a buffer must not be written again before
	 * the children of the tree that last wrote it (another root) have
	 * read it. The world team's form, then the active set of every PE
	 * (whose root's dest stays as it was). */
	static const size_t tsizes[] = {57, 64, 100, 255, 256, 511, 512, 8, 513, 200, 120, 448};
	for (int it = 0; it < 600; it++) {
		int root = (it * 7 + it / 5) % n;
		size_t nb = tsizes[it % 12];
		if (it % 23 == 0 && me == (it / 23) % n)
			usleep(3000);
		for (size_t i = 0; i < nb; i++)
			tsrc[i] = (unsigned char)(it * 31 + i * 7 + me);
		memset(tdst, 0xee, nb + 1);
		shmem_broadcastmem(SHMEM_TEAM_WORLD, tdst, tsrc, nb, root);
		memset(tsrc, 0x55, nb); /* the root's source changes at once */
		for (size_t i = 0; i < nb; i++)
			CHECK(tdst[i] == (unsigned char)(it * 31 + i * 7 + root), "tree broadcast round %d (%zu B from %d) [%zu]: %d",
			      it, nb, root, i, tdst[i]);
		CHECK(tdst[nb] == 0xee, "tree broadcast round %d (%zu B) wrote past its end", it, nb);
		if (me == (it * 5) % n && it % 7 == 3)
			usleep(2000);
	}
	shmem_barrier_all();
	for (int it = 0; it < 300; it++) {
		int root = (it * 3 + it / 4) % n;
		size_t ne = 8 + (size_t)(it * 13) % 57; /* 64 to 512 bytes */
		if (it % 29 == 0 && me == (it / 29) % n)
			usleep(3000);
		for (size_t i = 0; i < ne; i++)
			tsrc64[i] = (uint64_t)it << 32 | (uint64_t)i << 16 | (uint64_t)me;
		for (size_t i = 0; i <= ne; i++)
			tdst64[i] = 7;
		shmem_broadcast64(tdst64, tsrc64, ne, root, 0, 0, n, pSync[it & 1]);
		for (size_t i = 0; i < ne; i++)
			CHECK(tdst64[i] == (me == root ? 7 : ((uint64_t)it << 32 | (uint64_t)i << 16 | (uint64_t)root)),
			      "tree broadcast64 round %d (%zu elements from %d) [%zu]: %#lx", it, ne, root, i,
			      (unsigned long)tdst64[i]);
		CHECK(tdst64[ne] == 7, "tree broadcast64 round %d wrote past its end", it);
	}
	shmem_barrier_all();
	/* Fcollects of up to 512 bytes a PE over the world (the team form and
	 * the active set of every PE, one count) go through scratch buffers
	 * with one sync (coll.c, scratch_fcollect), back to back, between
	 * sizes that take the other path (513, 520) and tree broadcasts. Each
	 * PE rewrites its source at once and PEs dawdle in turn: a buffer must
	 * not be written again while a PE still reads the call that filled it,
	 * nor a source read after its owner returned. */
	{
		static const size_t fsizes[] = {8, 1, 64, 512, 100, 513, 256, 3, 520, 448, 504, 16};
		unsigned char *fdst = shmem_malloc(520 * (size_t)n + 1);
		CHECK(fdst != NULL, "shmem_malloc of fcollect's dest");
		for (int it = 0; it < 600; it++) {
			size_t nb = fsizes[it % 12];
			if (it % 19 == 0 && me == (it / 19) % n)
				usleep(2000);
			for (size_t i = 0; i < nb; i++)
				tsrc[i] = (unsigned char)(it * 29 + i * 5 + me);
			memset(fdst, 0xee, nb * (size_t)n + 1);
			if (it % 3 == 2 && nb % 8 == 0)
				shmem_fcollect64(fdst, tsrc, nb / 8, 0, 0, n, pSync[it & 1]);
			else
				shmem_fcollectmem(SHMEM_TEAM_WORLD, fdst, tsrc, nb);
			memset(tsrc, 0x55, nb); /* the source changes at once */
			for (int p = 0; p < n; p++)
				for (size_t i = 0; i < nb; i++)
					CHECK(fdst[(size_t)p * nb + i] == (unsigned char)(it * 29 + i * 5 + p),
					      "fcollect round %d (%zu B) block %d [%zu]: %d", it, nb, p, i,
					      fdst[(size_t)p * nb + i]);
			CHECK(fdst[nb * (size_t)n] == 0xee, "fcollect round %d (%zu B) wrote past its end", it, nb);
			if (it % 5 == 4) {
				int root = it % n;
				for (size_t i = 0; i < 200; i++)
					tsrc[i] = (unsigned char)(it + i + me);
				shmem_broadcastmem(SHMEM_TEAM_WORLD, tdst, tsrc, 200, root);
				for (size_t i = 0; i < 200; i++)
					CHECK(tdst[i] == (unsigned char)(it + i + root), "broadcast between fcollects round %d [%zu]",
					      it, i);
			}
			if (me == (it * 3) % n && it % 7 == 5)
				usleep(1000);
		}
		shmem_free(fdst);
	}
	shmem_barrier_all();
	/* Small broadcasts and reductions go through post lines: a root runs
	 * up to 32 calls ahead of the slowest PE and then reuses its lines.
	 * The last PE dawdles now and then, the root rewrites its source at
	 * once: every PE must still get every round's value. */
	for (int it = 0; it < 200; it++) {
		if (me == n - 1 && (it == 5 || it == 70 || it == 140))
			usleep(20000);
		long v[7];
		for (int i = 0; i < 7; i++)
			v[i] = (long)it * 1000 + i;
		for (int i = 0; i < 7; i++)
			lsrc[i] = v[i];
		shmem_long_broadcast(SHMEM_TEAM_WORLD, ldst, lsrc, 7, 0);
		for (int i = 0; i < 7; i++)
			lsrc[i] = -1; /* the root's source changes at once */
		for (int i = 0; i < 7; i++)
			CHECK(ldst[i] == v[i], "post broadcast round %d [%d]: %ld", it, i, ldst[i]);
	}
	shmem_barrier_all();
	for (int it = 0; it < 200; it++) {
		if (me == n - 1 && (it == 5 || it == 70 || it == 140))
			usleep(20000);
		lsrc[0] = (long)it + me;
		shmem_long_sum_reduce(SHMEM_TEAM_WORLD, ldst, lsrc, 1);
		CHECK(ldst[0] == (long)n * it + (long)n * (n - 1) / 2, "post reduce round %d: %ld", it, ldst[0]);
	}
	shmem_barrier_all();
	/* Large reductions: team, in place, active set, floats. */
	for (int it = 0; it < 3; it++) {
		for (int i = 0; i < BIGN; i++) {
			bsrc[i] = (long)me * i + it;
			dbsrc[i] = me + i;
		}
		long want_base = (long)n * (n - 1) / 2;
		shmem_long_sum_reduce(SHMEM_TEAM_WORLD, bdst, bsrc, BIGN);
		for (int i = 0; i < BIGN; i++)
			CHECK(bdst[i] == want_base * i + (long)n * it, "big sum round %d [%d]: %ld", it, i, bdst[i]);
		shmem_long_max_reduce(SHMEM_TEAM_WORLD, bsrc, bsrc, BIGN); /* in place */
		for (int i = 0; i < BIGN; i++)
			CHECK(bsrc[i] == (long)(n - 1) * i + it, "big in-place max round %d [%d]: %ld", it, i, bsrc[i]);
		shmem_double_sum_reduce(SHMEM_TEAM_WORLD, dbdst, dbsrc, BIGN);
		for (int i = 0; i < BIGN; i++)
			CHECK(dbdst[i] == (double)want_base + (double)n * i, "big double sum [%d]: %g", i, dbdst[i]);
		for (int i = 0; i < BIGN; i++)
			bsrc[i] = me + i;
		shmem_barrier_all();
		shmem_long_sum_to_all(bdst, bsrc, BIGN, 0, 0, n, bWrk, pSync[it & 1]);
		for (int i = 0; i < BIGN; i++)
			CHECK(bdst[i] == want_base + (long)n * i, "big sum_to_all [%d]: %ld", i, bdst[i]);
		shmem_barrier_all();
	}
	/* An active set of stride 2: PEs 0, 2, ... */
	shmem_barrier_all();
	if (me % 2 == 0 && !nodes) {
		for (int i = 0; i < BIGN; i++)
			bsrc[i] = i;
		shmem_long_sum_to_all(bdst, bsrc, BIGN, 0, 1, (n + 1) / 2, bWrk, pSync[0]);
		for (int i = 0; i < BIGN; i++)
			CHECK(bdst[i] == (long)i * ((n + 1) / 2), "big strided set sum [%d]: %ld", i, bdst[i]);
	}
	shmem_barrier_all();
	if (me % 2 == 0 && !nodes) {
		lsrc[0] = 1;
		shmem_long_sum_to_all(ldst, lsrc, 1, 0, 1, (n + 1) / 2, pWrk, pSync[1]);
		CHECK(ldst[0] == (n + 1) / 2, "strided set sum %ld", ldst[0]);
	}
	shmem_barrier_all();
	for (int j = 0; j < 2; j++)
		for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++)
			CHECK(pSync[j][i] == SHMEM_SYNC_VALUE, "pSync[%d][%d] not restored: %ld", j, i, pSync[j][i]);
	DONE("t_coll");
}
