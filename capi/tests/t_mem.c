/* t_mem.c - memory management and query, through the deprecated names
 * for set-up (start_pes, _my_pe, _num_pes, shmalloc, shfree, shrealloc,
 * shmemalign) as well as the 1.5 ones. */
#include <stdint.h>
#include "check.h"

int main(void)
{
	start_pes(0);
	int me = _my_pe(), n = _num_pes();
	CHECK(me == shmem_my_pe() && n == shmem_n_pes(), "_my_pe/_num_pes");
	int major, minor;
	char name[SHMEM_MAX_NAME_LEN];
	shmem_info_get_version(&major, &minor);
	shmem_info_get_name(name);
	CHECK(major == 1 && minor == 6, "version %d.%d", major, minor);
	CHECK(strcmp(name, "symheap") == 0, "name %s", name);
	int level;
	shmem_query_thread(&level);
	CHECK(level == SHMEM_THREAD_SINGLE, "start_pes thread level %d", level);
	for (int p = 0; p < n; p++)
		CHECK(shmem_pe_accessible(p), "PE %d not accessible", p);
	CHECK(!shmem_pe_accessible(n), "PE %d accessible", n);

	/* malloc, calloc, align, hints; the same offset on every PE. */
	char *a = shmem_malloc(100);
	long *c = shmem_calloc(32, sizeof(long));
	void *al = shmem_align(4096, 10);
	long *hint = shmem_malloc_with_hints(8, SHMEM_MALLOC_ATOMICS_REMOTE);
	CHECK(a && c && al && hint, "allocations failed");
	CHECK(((uintptr_t)al & 4095) == 0, "shmem_align gave %p", al);
	CHECK(((uintptr_t)hint & 63) == 0, "atomics hint not on a cache line: %p", (void *)hint);
	for (int i = 0; i < 32; i++)
		CHECK(c[i] == 0, "calloc c[%d] = %ld", i, c[i]);
	CHECK(shmem_malloc(0) == NULL, "malloc(0) is not NULL");
	CHECK(shmem_addr_accessible(a, (me + 1) % n), "heap not accessible");
	/* realloc keeps the contents. */
	for (int i = 0; i < 100; i++)
		a[i] = (char)i;
	a = shmem_realloc(a, 1 << 16);
	CHECK(a != NULL, "realloc failed");
	for (int i = 0; a && i < 100; i++)
		CHECK(a[i] == (char)i, "realloc lost a[%d]", i);
	/* Puts into the reallocated block reach the neighbour's copy. */
	shmem_putmem(a + 60000, "hello", 6, (me + 1) % n);
	shmem_barrier_all();
	CHECK(strcmp(a + 60000, "hello") == 0, "put into realloc'd block");
	/* Too large: NULL (and a message on stderr). */
	CHECK(shmem_malloc((size_t)1 << 46) == NULL, "a 64 TiB malloc succeeded");
	shmem_free(hint);
	shmem_free(al);
	shmem_free(c);
	shmem_free(a);
	shmem_free(NULL);

	/* Freed blocks come back from the cache of freed blocks
	 * (symalloc.c): still symmetric (a put reaches the neighbour's
	 * copy), zeroed for calloc, the same block for the same size. */
	for (int r = 0; r < 50; r++) {
		size_t sz = r % 2 ? 64 : 1 << 20;
		char *b = shmem_malloc(sz);
		CHECK(b != NULL, "malloc %zu round %d", sz, r);
		if (b == NULL)
			break;
		memset(b, 0x5a, sz);
		shmem_barrier_all(); /* every PE's memset is done before the puts */
		long v = (long)r * 1000 + me;
		shmem_long_p((long *)(b + sz - 8), v, (me + 1) % n);
		shmem_barrier_all();
		CHECK(*(long *)(b + sz - 8) == (long)r * 1000 + (me + n - 1) % n, "put into a reused block, round %d", r);
		shmem_free(b);
		long *z = shmem_calloc(sz / sizeof(long), sizeof(long));
		CHECK(z != NULL, "calloc %zu round %d", sz, r);
		for (size_t i = 0; z != NULL && i < sz / sizeof(long); i += 97)
			CHECK(z[i] == 0, "calloc from the cache: z[%zu] = %#lx", i, (unsigned long)z[i]);
		char *again = NULL;
		if (z != NULL) {
			shmem_free(z);
			again = shmem_malloc(sz);
			CHECK(again == (char *)z, "the same size gave %p, not the freed %p", (void *)again, (void *)z);
			shmem_free(again);
		}
	}
	/* More blocks than the cache holds, freed in another order. */
	char *many[40];
	for (int i = 0; i < 40; i++) {
		many[i] = shmem_malloc(48 + 16 * (size_t)(i % 5));
		CHECK(many[i] != NULL, "many[%d]", i);
		if (many[i] != NULL)
			memset(many[i], i, 48);
	}
	for (int i = 0; i < 40; i++)
		if (many[i] != NULL && i % 3 != 0)
			shmem_free(many[i]);
	for (int i = 0; i < 40; i++)
		if (many[i] != NULL && i % 3 == 0) {
			CHECK(many[i][47] == (char)i, "many[%d] overwritten", i);
			shmem_free(many[i]);
		}

	/* The deprecated allocation names. */
	long *s = shmalloc(16 * sizeof(long));
	CHECK(s != NULL, "shmalloc");
	s[0] = me;
	s = shrealloc(s, 32 * sizeof(long));
	CHECK(s && s[0] == me, "shrealloc");
	double *d = shmemalign(256, 8 * sizeof(double));
	CHECK(d && ((uintptr_t)d & 255) == 0, "shmemalign");
	shfree(d);
	shfree(s);
	DONE("t_mem");
}
