/* t_any.c - the _any forms return every satisfying index in turn:
 * OpenSHMEM asks that "a series of calls ... must eventually return i"
 * for each index i that satisfies. Over N elements that all satisfy, N
 * calls of shmem_test_any (wait_until_any, their _vector forms, the
 * generic name) return each index once; masked elements never; two
 * arrays tested in turn each go round their own indices. The _some forms
 * return every satisfying index in each call. */
#include "check.h"

#define N 8

static int flags[N], other[N];
static long lflags[N];

/* EVERY_INDEX_ONCE: N calls return each index once. */
#define EVERY_INDEX_ONCE(what, call)                                                     \
	do {                                                                             \
		int seen_[N] = {0};                                                      \
		for (int k_ = 0; k_ < N; k_++) {                                         \
			size_t i_ = (call);                                              \
			CHECK(i_ < N, "%s returned %zu", what, i_);                      \
			if (i_ < N)                                                      \
				seen_[i_]++;                                             \
		}                                                                        \
		for (int i_ = 0; i_ < N; i_++)                                           \
			CHECK(seen_[i_] == 1, "%s returned index %d %d times in %d calls", \
			      what, i_, seen_[i_], N);                                   \
	} while (0)

int main(void)
{
	shmem_init();
	int ones[N];
	for (int i = 0; i < N; i++) {
		flags[i] = other[i] = 1;
		lflags[i] = 1;
		ones[i] = 1;
	}

	EVERY_INDEX_ONCE("shmem_int_test_any", shmem_int_test_any(flags, N, NULL, SHMEM_CMP_EQ, 1));
	EVERY_INDEX_ONCE("shmem_int_wait_until_any", shmem_int_wait_until_any(flags, N, NULL, SHMEM_CMP_EQ, 1));
	EVERY_INDEX_ONCE("shmem_int_test_any_vector", shmem_int_test_any_vector(flags, N, NULL, SHMEM_CMP_EQ, ones));
	EVERY_INDEX_ONCE("shmem_int_wait_until_any_vector",
			 shmem_int_wait_until_any_vector(flags, N, NULL, SHMEM_CMP_EQ, ones));
	EVERY_INDEX_ONCE("generic shmem_test_any", shmem_test_any(lflags, N, NULL, SHMEM_CMP_NE, 0L));

	/* Two arrays in turn: each goes round its own indices. */
	{
		int seen[2][N] = {{0}};
		for (int k = 0; k < N; k++) {
			size_t a = shmem_int_test_any(flags, N, NULL, SHMEM_CMP_EQ, 1);
			size_t b = shmem_int_test_any(other, N, NULL, SHMEM_CMP_EQ, 1);
			if (a < N)
				seen[0][a]++;
			if (b < N)
				seen[1][b]++;
		}
		for (int i = 0; i < N; i++)
			CHECK(seen[0][i] == 1 && seen[1][i] == 1, "two arrays in turn: index %d came %d and %d times",
			      i, seen[0][i], seen[1][i]);
	}

	/* A mask: the even indices only, each once in N/2 calls. */
	{
		int status[N], seen[N] = {0};
		for (int i = 0; i < N; i++)
			status[i] = i % 2;
		for (int k = 0; k < N / 2; k++) {
			size_t i = shmem_int_test_any(flags, N, status, SHMEM_CMP_EQ, 1);
			CHECK(i < N && i % 2 == 0, "masked test_any returned %zu", i);
			if (i < N)
				seen[i]++;
		}
		for (int i = 0; i < N; i += 2)
			CHECK(seen[i] == 1, "masked test_any: index %d came %d times", i, seen[i]);
	}

	/* Fewer satisfying: index 2 and 5 only, in turn. */
	{
		int some[N] = {0};
		static int few[N];
		for (int i = 0; i < N; i++)
			few[i] = (i == 2 || i == 5);
		for (int k = 0; k < 4; k++) {
			size_t i = shmem_int_test_any(few, N, NULL, SHMEM_CMP_EQ, 1);
			CHECK(i == 2 || i == 5, "test_any over {2, 5} returned %zu", i);
			if (i < N)
				some[i]++;
		}
		CHECK(some[2] == 2 && some[5] == 2, "test_any over {2, 5}: %d and %d times in 4 calls", some[2],
		      some[5]);
	}

	/* _some: every satisfying index in one call. */
	{
		size_t idx[N];
		int seen[N] = {0};
		size_t c = shmem_int_test_some(flags, N, idx, NULL, SHMEM_CMP_EQ, 1);
		CHECK(c == N, "test_some found %zu of %d", c, N);
		for (size_t k = 0; k < c && k < N; k++)
			if (idx[k] < N)
				seen[idx[k]]++;
		c = shmem_int_wait_until_some_vector(flags, N, idx, NULL, SHMEM_CMP_EQ, ones);
		CHECK(c == N, "wait_until_some_vector found %zu of %d", c, N);
		for (size_t k = 0; k < c && k < N; k++)
			if (idx[k] < N)
				seen[idx[k]]++;
		for (int i = 0; i < N; i++)
			CHECK(seen[i] == 2, "the _some forms: index %d came %d times in 2 calls", i, seen[i]);
	}
	DONE("t_any");
}
