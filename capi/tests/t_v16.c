/* t_v16.c - what OpenSHMEM 1.6 adds to 1.5, each call checked: the
 * initialisation state and repeated init/finalize, shmem_signal_add and
 * shmem_signal_set (plain, context and C11 context forms, seen through
 * shmem_signal_wait_until and shmem_signal_fetch on the target),
 * shmem_pe_quiet, the sessions, the scans beyond t_tables' rows (a split
 * team, more than the stack buffer, no elements), the sized ibput/ibget,
 * const cmp_values, shmem_team_ptr on SHMEM_TEAM_SHARED and the errata's
 * return values. The typed scans are t_tables' rows. */
#include "check.h"
#include <stdint.h>

#define MAXPE MAX_PES

static uint64_t sig[16];
static long data[64];
static long big_src[1000], big_dst[1000];
static double dsrc[4], ddst[4];

static int me, npes, right, left;

/* A signal update from each PE to its right neighbour, each kind on a
 * word of its own, waited for by the neighbour. */
static void signals(shmem_ctx_t ctx)
{
	for (int i = 0; i < 16; i++)
		sig[i] = 0;
	for (int i = 0; i < 8; i++)
		data[i] = 0;
	shmem_barrier_all();

	shmem_signal_set(&sig[0], 5, right);
	shmem_ctx_signal_set(SHMEM_CTX_DEFAULT, &sig[1], 6, right);
	shmem_signal_set(ctx, &sig[2], 7, right); /* C11: the context form by its plain name */
	shmem_signal_add(&sig[3], 2, right);
	shmem_signal_add(&sig[3], 2, right);
	shmem_ctx_signal_add(ctx, &sig[4], 3, right);
	shmem_signal_add(SHMEM_CTX_DEFAULT, &sig[5], 4, right);
	/* A set after an add on one word: the last update wins. */
	shmem_signal_add(&sig[6], 100, right);
	shmem_signal_set(&sig[6], 9, right);
	/* Data, then a flag: once the flag is seen the data are there. */
	long src[8];
	for (int i = 0; i < 8; i++)
		src[i] = me * 10 + i;
	shmem_long_put_nbi(data, src, 8, right);
	shmem_fence();
	shmem_signal_add(&sig[7], 1, right);
	/* Every PE adds to PE 0's word: a sum of concurrent adds. */
	shmem_signal_add(&sig[8], (uint64_t)me + 1, 0);
	shmem_ctx_signal_add(ctx, &sig[9], 1, 0);

	CHECK(shmem_signal_wait_until(&sig[0], SHMEM_CMP_EQ, 5) == 5, "signal_set");
	CHECK(shmem_signal_wait_until(&sig[1], SHMEM_CMP_EQ, 6) == 6, "ctx_signal_set");
	CHECK(shmem_signal_wait_until(&sig[2], SHMEM_CMP_NE, 0) == 7, "signal_set(ctx)");
	CHECK(shmem_signal_wait_until(&sig[3], SHMEM_CMP_GE, 4) == 4, "signal_add twice");
	CHECK(shmem_signal_wait_until(&sig[4], SHMEM_CMP_EQ, 3) == 3, "ctx_signal_add");
	CHECK(shmem_signal_wait_until(&sig[5], SHMEM_CMP_GT, 3) == 4, "signal_add(ctx)");
	/* The word goes 0, 100, 9 (or 109 with a set that adds): wait past
	 * 0 and past 100. (Waiting for "below 100" alone was met by the 0
	 * before the add arrived.) */
	if (shmem_signal_wait_until(&sig[6], SHMEM_CMP_NE, 0) == 100)
		shmem_signal_wait_until(&sig[6], SHMEM_CMP_NE, 100);
	CHECK(shmem_signal_fetch(&sig[6]) == 9, "signal_set after signal_add: %llu",
	      (unsigned long long)shmem_signal_fetch(&sig[6]));
	shmem_signal_wait_until(&sig[7], SHMEM_CMP_EQ, 1);
	for (int i = 0; i < 8; i++)
		CHECK(data[i] == left * 10 + i, "data before the flag: data[%d] = %ld", i, data[i]);
	if (me == 0) {
		uint64_t want = (uint64_t)npes * (npes + 1) / 2;
		CHECK(shmem_signal_wait_until(&sig[8], SHMEM_CMP_EQ, want) == want, "every PE's add");
		CHECK(shmem_signal_wait_until(&sig[9], SHMEM_CMP_EQ, (uint64_t)npes) == (uint64_t)npes,
		      "every PE's ctx add");
	}
	static const uint64_t want[6] = {5, 6, 7, 4, 3, 4};
	for (int i = 0; i < 6; i++)
		CHECK(shmem_signal_fetch(&sig[i]) == want[i], "signal_fetch %d = %llu", i,
		      (unsigned long long)shmem_signal_fetch(&sig[i]));
	shmem_barrier_all();
}

/* shmem_pe_quiet: the puts to the PEs named complete, then a flag. */
static void pe_quiet(shmem_ctx_t ctx)
{
	for (int i = 0; i < 16; i++)
		sig[i] = 0;
	for (int i = 0; i < 16; i++)
		data[i] = 0;
	shmem_barrier_all();
	long v[4] = {me + 1, me + 2, me + 3, me + 4};
	shmem_long_put_nbi(data, v, 4, right);
	shmem_pe_quiet(&right, 1);
	shmem_signal_set(&sig[0], 1, right);
	shmem_ctx_long_put_nbi(ctx, &data[4], v, 4, right);
	int all[MAXPE];
	for (int p = 0; p < npes; p++)
		all[p] = p;
	shmem_ctx_pe_quiet(ctx, all, (size_t)npes);
	shmem_ctx_signal_set(ctx, &sig[1], 1, right);
	shmem_pe_quiet(NULL, 0);                     /* none: target_pes ignored */
	shmem_ctx_pe_quiet(SHMEM_CTX_INVALID, NULL, 3); /* as ctx_quiet: nothing */
	shmem_ctx_pe_quiet(SHMEM_CTX_DEFAULT, &me, 1);
	shmem_signal_wait_until(&sig[0], SHMEM_CMP_EQ, 1);
	shmem_signal_wait_until(&sig[1], SHMEM_CMP_EQ, 1);
	for (int i = 0; i < 8; i++)
		CHECK(data[i] == left + 1 + i % 4, "pe_quiet: data[%d] = %ld", i, data[i]);
	shmem_barrier_all();
}

/* Sessions: hints; the operations inside give their results. */
static void sessions(shmem_ctx_t ctx)
{
	for (int i = 0; i < 16; i++)
		data[i] = 0;
	shmem_barrier_all();
	shmem_ctx_session_config_t cfg = {.total_ops = 32};
	shmem_ctx_session_start(ctx, SHMEM_CTX_SESSION_BATCH, &cfg, SHMEM_CTX_SESSION_TOTAL_OPS);
	shmem_ctx_session_start(ctx, 0, NULL, 0); /* adds nothing to the started session */
	for (int i = 0; i < 32; i++)
		shmem_ctx_long_atomic_add(ctx, &data[i % 8], 1, right);
	shmem_ctx_session_stop(ctx);
	shmem_ctx_session_stop(ctx); /* stopped already: no effect */
	shmem_ctx_session_start(SHMEM_CTX_DEFAULT, SHMEM_CTX_SESSION_BATCH, NULL, 0);
	for (int i = 0; i < 8; i++)
		shmem_int64_atomic_xor(&data[8 + i], (long)(me + 1) << i, right);
	shmem_ctx_session_stop(SHMEM_CTX_DEFAULT);
	shmem_ctx_session_start(SHMEM_CTX_INVALID, SHMEM_CTX_SESSION_BATCH, NULL, SHMEM_CTX_SESSION_TOTAL_OPS);
	shmem_ctx_session_stop(SHMEM_CTX_INVALID);
	shmem_ctx_quiet(ctx);
	shmem_barrier_all();
	for (int i = 0; i < 8; i++) {
		CHECK(data[i] == 4, "session adds: data[%d] = %ld", i, data[i]);
		CHECK(data[8 + i] == (long)(left + 1) << i, "session xors: data[%d] = %ld", 8 + i, data[8 + i]);
	}
	shmem_barrier_all();
}

/* Scans t_tables does not make: over the even PEs (a split team the odd
 * ones are not in), of more elements than the stack buffer holds, and of
 * none with null pointers. */
static void scans(void)
{
	for (int i = 0; i < 1000; i++)
		big_src[i] = me * 1000 + i;
	CHECK(shmem_long_sum_inscan(SHMEM_TEAM_WORLD, big_dst, big_src, 1000) == 0, "big inscan");
	for (int i = 0; i < 1000; i++) {
		long want = 0;
		for (int p = 0; p <= me; p++)
			want += p * 1000 + i;
		if (big_dst[i] != want) {
			CHECK(big_dst[i] == want, "big inscan[%d] = %ld, want %ld", i, big_dst[i], want);
			break;
		}
	}
	CHECK(shmem_sum_exscan(SHMEM_TEAM_WORLD, big_src, big_src, 1000) == 0, "big exscan in place");
	for (int i = 0; i < 1000; i++) {
		long want = 0;
		for (int p = 0; p < me; p++)
			want += p * 1000 + i;
		if (big_src[i] != want) {
			CHECK(big_src[i] == want, "big exscan[%d] = %ld, want %ld", i, big_src[i], want);
			break;
		}
	}
	shmem_team_t even;
	int size = (npes + 1) / 2;
	CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, size, NULL, 0, &even) == 0, "split");
	if (me % 2 == 0) {
		for (int j = 0; j < 4; j++)
			dsrc[j] = 0.5 * (me + 1) + j;
		CHECK(shmem_double_sum_exscan(even, ddst, dsrc, 4) == 0, "exscan over the even PEs");
		for (int j = 0; j < 4; j++) {
			double want = 0;
			for (int p = 0; p < me; p += 2)
				want += 0.5 * (p + 1) + j;
			CHECK(ddst[j] == want, "even exscan[%d] = %g, want %g", j, ddst[j], want);
		}
		CHECK(shmem_sum_inscan(even, ddst, dsrc, 4) == 0, "inscan over the even PEs");
		for (int j = 0; j < 4; j++) {
			double want = 0;
			for (int p = 0; p <= me; p += 2)
				want += 0.5 * (p + 1) + j;
			CHECK(ddst[j] == want, "even inscan[%d] = %g, want %g", j, ddst[j], want);
		}
		shmem_team_destroy(even);
	}
	CHECK(shmem_int_sum_inscan(SHMEM_TEAM_WORLD, NULL, NULL, 0) == 0, "inscan of none");
	CHECK(shmem_sum_exscan(SHMEM_TEAM_WORLD, (float *)NULL, (const float *)NULL, 0) == 0, "exscan of none");
	shmem_barrier_all();
}

/* The sized blocked-strided routines, each size, plain and context: 3
 * blocks of 2 elements, every 3 at the destination, every 2 at the
 * source (contiguous there). */
#define IB(BITS, T)                                                                                            \
	do {                                                                                                   \
		static T d[9], g[6];                                                                           \
		T s[6];                                                                                        \
		for (int i = 0; i < 9; i++)                                                                    \
			memset(&d[i], 0, sizeof(T));                                                           \
		for (int i = 0; i < 6; i++)                                                                    \
			memset(&s[i], me * 10 + i + 1, sizeof(T));                                             \
		shmem_barrier_all();                                                                           \
		if (ctx_form)                                                                                  \
			shmem_ctx_ibput##BITS(SHMEM_CTX_DEFAULT, d, s, 3, 2, 2, 3, right);                     \
		else                                                                                           \
			shmem_ibput##BITS(d, s, 3, 2, 2, 3, right);                                            \
		shmem_barrier_all();                                                                           \
		for (int b = 0; b < 3; b++)                                                                    \
			for (int j = 0; j < 3; j++) {                                                          \
				unsigned char want = j == 2 ? 0 : (unsigned char)(left * 10 + 2 * b + j + 1);  \
				unsigned char *p = (unsigned char *)&d[3 * b + j];                             \
				for (size_t k = 0; k < sizeof(T); k++)                                         \
					CHECK(p[k] == want, "ibput%d block %d element %d", BITS, b, j);        \
			}                                                                                      \
		if (ctx_form)                                                                                  \
			shmem_ctx_ibget##BITS(SHMEM_CTX_DEFAULT, g, d, 2, 3, 2, 3, right);                     \
		else                                                                                           \
			shmem_ibget##BITS(g, d, 2, 3, 2, 3, right);                                            \
		for (int i = 0; i < 6; i++) {                                                                  \
			unsigned char *p = (unsigned char *)&g[i];                                             \
			for (size_t k = 0; k < sizeof(T); k++)                                                 \
				CHECK(p[k] == (unsigned char)(me * 10 + i + 1), "ibget%d element %d", BITS, i); \
		}                                                                                              \
		shmem_barrier_all();                                                                           \
	} while (0)

struct b16 {
	unsigned char b[16];
};

static void sized_blocks(void)
{
	for (int ctx_form = 0; ctx_form < 2; ctx_form++) {
		IB(8, uint8_t);
		IB(16, uint16_t);
		IB(32, uint32_t);
		IB(64, uint64_t);
		IB(128, struct b16);
	}
}

/* Smaller changes of 1.6: const cmp_values, test_all of an empty set,
 * SHMEM_TEAM_SHARED reaches every PE through shmem_team_ptr, the
 * nonzero returns of the splits of SHMEM_TEAM_INVALID, get_config. */
static void smaller(void)
{
	static long iv[2];
	static const long cv[2] = {3, 4};
	iv[0] = 3;
	iv[1] = 4;
	CHECK(shmem_long_test_all_vector(iv, 2, NULL, SHMEM_CMP_EQ, cv) == 1, "test_all_vector, const values");
	CHECK(shmem_test_any_vector(iv, 2, NULL, SHMEM_CMP_EQ, cv) != SIZE_MAX, "test_any_vector, const values");
	shmem_wait_until_all_vector(iv, 2, NULL, SHMEM_CMP_EQ, cv);
	int skip[2] = {1, 1};
	CHECK(shmem_long_test_all(iv, 0, NULL, SHMEM_CMP_EQ, 0) == 1, "test_all of none");
	CHECK(shmem_long_test_all(iv, 2, skip, SHMEM_CMP_EQ, 0) == 1, "test_all, every element masked");
	CHECK(shmem_test_all_vector(iv, 2, skip, SHMEM_CMP_EQ, cv) == 1, "test_all_vector, every element masked");

	for (int p = 0; p < npes; p++) {
		CHECK(shmem_team_ptr(SHMEM_TEAM_SHARED, data, p) != NULL, "team_ptr(SHARED, PE %d)", p);
		CHECK(shmem_team_ptr(SHMEM_TEAM_WORLD, data, p) == shmem_ptr(data, p), "team_ptr(WORLD, PE %d)", p);
	}
	CHECK(shmem_team_n_pes(SHMEM_TEAM_SHARED) == npes, "SHMEM_TEAM_SHARED has %d PEs",
	      shmem_team_n_pes(SHMEM_TEAM_SHARED));
	CHECK(shmem_team_ptr(SHMEM_TEAM_INVALID, data, 0) == NULL, "team_ptr(INVALID)");
	shmem_team_t t = SHMEM_TEAM_WORLD, x = SHMEM_TEAM_WORLD, y = SHMEM_TEAM_WORLD;
	CHECK(shmem_team_split_strided(SHMEM_TEAM_INVALID, 0, 1, 1, NULL, 0, &t) != 0 && t == SHMEM_TEAM_INVALID,
	      "split_strided of SHMEM_TEAM_INVALID");
	CHECK(shmem_team_split_2d(SHMEM_TEAM_INVALID, 1, NULL, 0, &x, NULL, 0, &y) != 0 &&
		      x == SHMEM_TEAM_INVALID && y == SHMEM_TEAM_INVALID,
	      "split_2d of SHMEM_TEAM_INVALID");
	shmem_team_config_t cfg = {.num_contexts = -1};
	CHECK(shmem_team_get_config(SHMEM_TEAM_WORLD, 0, &cfg) == 0 && cfg.num_contexts == -1,
	      "get_config with mask 0 changes nothing");
	CHECK(shmem_team_get_config(SHMEM_TEAM_WORLD, 0, NULL) == 0, "get_config with mask 0 and a null config");
	int major = 0, minor = 0;
	shmem_info_get_version(&major, &minor);
	CHECK(major == 1 && minor == 6 && SHMEM_MAJOR_VERSION == 1 && SHMEM_MINOR_VERSION == 6, "version %d.%d",
	      major, minor);
	shmem_barrier_all();
}

int main(void)
{
	int flag = -1, level = -1;
	shmem_query_initialized(&flag);
	CHECK(flag == 0, "initialized before shmem_init: %d", flag);
	shmem_query_thread(&level);
	CHECK(level == SHMEM_THREAD_MULTIPLE, "query_thread before shmem_init: %d", level);
	shmem_init();
	shmem_query_initialized(&flag);
	CHECK(flag != 0, "not initialized after shmem_init");
	me = shmem_my_pe();
	npes = shmem_n_pes();
	right = (me + 1) % npes;
	left = (me + npes - 1) % npes;
	if (npes > MAXPE) {
		if (me == 0)
			printf("t_v16: needs at most %d PEs, has %d\n", MAXPE, npes);
		shmem_finalize();
		return 1;
	}

	/* Initialised twice more: two finalizes are barriers only. */
	int provided = -1;
	CHECK(shmem_init_thread(SHMEM_THREAD_SINGLE, &provided) == 0 && provided == SHMEM_THREAD_MULTIPLE,
	      "a second init keeps the thread level: %d", provided);
	shmem_init();
	data[0] = -1;
	shmem_barrier_all();
	shmem_long_p(&data[0], me, right);
	shmem_finalize(); /* a barrier: the p is complete and seen */
	CHECK(data[0] == left, "after a finalize that is not the last: data[0] = %ld", data[0]);
	shmem_finalize();
	shmem_query_initialized(&flag);
	CHECK(flag != 0, "not initialized after two of three finalizes");
	void *blk = shmem_malloc(64);
	CHECK(blk != NULL, "malloc after the inner finalizes");
	shmem_free(blk);

	shmem_ctx_t ctx;
	CHECK(shmem_ctx_create(0, &ctx) == 0, "ctx_create");
	signals(ctx);
	pe_quiet(ctx);
	sessions(ctx);
	shmem_ctx_destroy(ctx);
	scans();
	sized_blocks();
	smaller();

	/* DONE, with a look at the state after the last finalize. */
	static int fails_all;
	shmem_barrier_all();
	shmem_int_atomic_add(&fails_all, check_failures, 0);
	shmem_barrier_all();
	if (me == 0)
		printf("t_v16: %d PEs: %s\n", npes, fails_all ? "FAILED" : "ok");
	int bad = check_failures || (me == 0 && fails_all);
	shmem_finalize();
	shmem_query_initialized(&flag);
	if (flag != 0) {
		fprintf(stderr, "FAIL t_v16 PE %d: initialized after the last finalize\n", me);
		bad = 1;
	}
	shmem_query_thread(&level);
	if (level != SHMEM_THREAD_MULTIPLE) {
		fprintf(stderr, "FAIL t_v16 PE %d: query_thread after the last finalize: %d\n", me, level);
		bad = 1;
	}
	return bad;
}
