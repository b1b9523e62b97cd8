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
	CHECK(major == 1 && minor == 5, "version %d.%d", major, minor);
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
