/* t_bounds.c [CASE...] - the bounds of the fast path (shmem_internal.h,
 * shmemi_addr): every PE bound and every size bound of put, get, the AMOs,
 * put-with-signal and the waits, on the symmetric heap and on the
 * program's static data.
 *
 *   t_bounds                 the edges that are valid, on every PE and
 *                            towards every PE: the last byte and the last
 *                            word of the heap and of the static data,
 *                            ranges that end exactly there, PEs 0 and
 *                            npes-1 (CHECKs; the job fails if one does).
 *   t_bounds pe OP PE        PE 0 calls OP towards PE -1, n or n+1 (PE is
 *                            "-1", "n" or "n+1"; n is the job's size);
 *                            the job must end with "PE X does not exist".
 *   t_bounds size OP WHERE   PE 0 calls OP on WHERE: heap-past (the first
 *                            byte after its symmetric heap), heap-straddle
 *                            (16 bytes from 8 before its end), static-past,
 *                            static-straddle (the same at the end of the
 *                            static data); the job must end with an error
 *                            naming OP.
 *
 * run.sh runs the error cases and checks their status and message (as for
 * t_err). The heap's end is SHMEM_SYMMETRIC_SIZE (256 MiB when unset, a
 * page multiple) from shmemx_heap_base; the static data end where the
 * executable's writable segment ends, rounded up to a page (static.c).
 * The valid edges are read, then written with the value read, so that
 * whatever lies there (the allocator's own words at the heap's end)
 * keeps its value.
 */
#define _GNU_SOURCE
#include <link.h>
#include <shmemx.h>
#include <stdint.h>
#include <unistd.h>

#include "check.h"

/* Static data, at the start of the window; s_sig is a put-with-signal's
 * signal word there. */
static long s_var[8];
static uint64_t s_sig;

static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

/* heap_size is the symmetric heap's size per PE, as the runtime takes it
 * from SHMEM_SYMMETRIC_SIZE (k, m, g, t suffixes), rounded up to a page. */
static size_t heap_size(void)
{
	unsigned long long v = 256ull << 20;
	const char *e = getenv("SHMEM_SYMMETRIC_SIZE");
	if (e && *e) {
		char *end;
		v = strtoull(e, &end, 10);
		switch (*end) {
		case 'k': case 'K': v <<= 10; break;
		case 'm': case 'M': v <<= 20; break;
		case 'g': case 'G': v <<= 30; break;
		case 't': case 'T': v <<= 40; break;
		}
	}
	size_t p = page_size();
	return (size_t)(v + p - 1) / p * p;
}

/* heap_end is the first byte after this PE's symmetric heap. */
static char *heap_end(void) { return (char *)shmemx_heap_base(shmem_my_pe()) + heap_size(); }

static int find_data_end(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_W)) {
			uintptr_t p = page_size();
			*(uintptr_t *)arg = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + p - 1) & ~(p - 1);
			break;
		}
	}
	return 1; /* the first object is the executable */
}

/* static_end is the first byte after the program's static data. */
static char *static_end(void)
{
	uintptr_t end = 0;
	dl_iterate_phdr(find_data_end, &end);
	return (char *)end;
}

/* target parses "-1", "n", "n+1". */
static int target(const char *s, int n)
{
	if (strcmp(s, "n") == 0)
		return n;
	if (strcmp(s, "n+1") == 0)
		return n + 1;
	return atoi(s);
}

/* edges_of checks every valid edge of the region that ends at end, on PE
 * pe: its last byte, its last word, the 64 bytes that end it. */
static void edges_of(const char *what, char *end, int pe)
{
	char b;
	shmem_getmem(&b, end - 1, 1, pe);
	shmem_putmem(end - 1, &b, 1, pe);
	long *w = (long *)(end - sizeof(long));
	long v = shmem_long_g(w, pe);
	shmem_long_p(w, v, pe);
	CHECK(shmem_long_atomic_fetch(w, pe) == v, "%s: last word of PE %d changed", what, pe);
	CHECK(shmem_long_atomic_fetch_add(w, 0, pe) == v, "%s: fetch_add 0 on PE %d's last word", what, pe);
	CHECK(shmem_long_atomic_compare_swap(w, v + 1, v + 2, pe) == v, "%s: compare_swap on PE %d's last word", what,
	      pe);
	char buf[64];
	shmem_getmem(buf, end - sizeof buf, sizeof buf, pe);
	shmem_putmem(end - sizeof buf, buf, sizeof buf, pe);
	long lv[2];
	shmem_long_get(lv, (long *)(end - sizeof lv), 2, pe);
	shmem_long_put((long *)(end - sizeof lv), lv, 2, pe);
	shmem_long_iget(lv, (long *)(end - 3 * sizeof(long)), 1, 2, 2, pe); /* the words 3 and 1 before the end */
	shmem_long_iput((long *)(end - 3 * sizeof(long)), lv, 2, 1, 2, pe);
	shmem_quiet();
	CHECK(shmem_ptr(end - 1, pe) != NULL, "%s: shmem_ptr of PE %d's last byte is NULL", what, pe);
	CHECK(shmem_ptr(end, pe) == NULL, "%s: shmem_ptr of the byte after PE %d's end is not NULL", what, pe);
}

/* valid runs every valid edge. */
static int valid(void)
{
	int me = shmem_my_pe(), n = shmem_n_pes();
	long *h = shmem_malloc(64);
	CHECK(h != NULL, "shmem_malloc(64) failed");
	shmem_barrier_all();
	/* Every PE towards every PE, at once: each only writes back what
	 * it read, and nothing else writes these bytes. */
	for (int pe = 0; pe < n; pe++) {
		edges_of("heap", heap_end(), pe);
		edges_of("static data", static_end(), pe);
		CHECK(shmem_ptr(h, pe) != NULL, "shmem_ptr(h, %d) is NULL", pe);
	}
	CHECK(shmem_ptr(h, -1) == NULL && shmem_ptr(h, n) == NULL && shmem_ptr(h, n + 1) == NULL,
	      "shmem_ptr for PE -1, %d or %d is not NULL", n, n + 1);
	/* A put with signal whose data end at the heap's end and whose
	 * signal is the static data's last word, on the last PE. */
	uint64_t *sig = (uint64_t *)(static_end() - sizeof(uint64_t));
	shmem_barrier_all();
	if (me == 0) {
		char last[8];
		shmem_getmem(last, heap_end() - 8, 8, n - 1);
		shmem_putmem_signal(heap_end() - 8, last, 8, sig, 0, SHMEM_SIGNAL_ADD, n - 1);
	}
	/* The waits on the last words: their conditions hold already. */
	long *w = (long *)(heap_end() - sizeof(long));
	shmem_long_wait_until(w, SHMEM_CMP_EQ, *w);
	CHECK(shmem_long_test(w, SHMEM_CMP_EQ, *w), "test on the heap's last word");
	long *w2 = (long *)(heap_end() - 2 * sizeof(long));
	shmem_long_wait_until_all(w2, 2, NULL, SHMEM_CMP_GE, w2[0] < w2[1] ? w2[0] : w2[1]);
	long *sw = (long *)(static_end() - sizeof(long));
	shmem_long_wait_until(sw, SHMEM_CMP_EQ, *sw);
	shmem_uint64_wait_until(sig, SHMEM_CMP_EQ, *sig);
	shmem_barrier_all();
	shmem_free(h);
	DONE("t_bounds");
}

/* pe_case: PE 0 calls op towards pe, which does not exist. */
static void pe_case(const char *op, int pe, long *h)
{
	long src[8] = {1, 2, 3, 4, 5, 6, 7, 8}, dst[8];
	uint64_t *hsig = (uint64_t *)(h + 8);
	if (strcmp(op, "p") == 0)
		shmem_long_p(h, 1, pe);
	else if (strcmp(op, "putmem") == 0)
		shmem_putmem(h, src, sizeof src, pe);
	else if (strcmp(op, "nbi") == 0)
		shmem_putmem_nbi(h, src, 8, pe);
	else if (strcmp(op, "iput") == 0)
		shmem_long_iput(h, src, 2, 1, 2, pe);
	else if (strcmp(op, "g") == 0)
		dst[0] = shmem_long_g(h, pe);
	else if (strcmp(op, "getmem") == 0)
		shmem_getmem(dst, h, sizeof dst, pe);
	else if (strcmp(op, "iget") == 0)
		shmem_long_iget(dst, h, 1, 2, 2, pe);
	else if (strcmp(op, "fadd") == 0)
		dst[0] = shmem_long_atomic_fetch_add(h, 1, pe);
	else if (strcmp(op, "fetch") == 0)
		dst[0] = shmem_long_atomic_fetch(h, pe);
	else if (strcmp(op, "cswap") == 0)
		dst[0] = shmem_long_atomic_compare_swap(h, 0, 1, pe);
	else if (strcmp(op, "set") == 0)
		shmem_long_atomic_set(h, 1, pe);
	else if (strcmp(op, "signal") == 0)
		shmem_putmem_signal(h, src, 8, hsig, 1, SHMEM_SIGNAL_SET, pe);
	else if (strcmp(op, "static-p") == 0)
		shmem_long_p(&s_var[0], 1, pe);
	else if (strcmp(op, "static-g") == 0)
		dst[0] = shmem_long_g(&s_var[0], pe);
	else if (strcmp(op, "static-fadd") == 0)
		dst[0] = shmem_long_atomic_fetch_add(&s_var[0], 1, pe);
	else if (strcmp(op, "static-signal") == 0)
		shmem_putmem_signal(&s_var[0], src, 8, &s_sig, 1, SHMEM_SIGNAL_SET, pe);
	else {
		fprintf(stderr, "t_bounds: unknown pe case %s\n", op);
		exit(2);
	}
	(void)dst;
}

/* size_case: PE 0 calls op at the edge where, towards PE 1 (its own
 * variable for the waits). */
static void size_case(const char *op, const char *where)
{
	char *end;
	if (strncmp(where, "heap-", 5) == 0)
		end = heap_end();
	else if (strncmp(where, "static-", 7) == 0)
		end = static_end();
	else {
		fprintf(stderr, "t_bounds: unknown place %s\n", where);
		exit(2);
	}
	int past = strstr(where, "-past") != NULL;
	/* past: the first byte after the end (a word there for the AMOs
	 * and waits); straddle: 16 bytes from 8 before the end. */
	char *p = past ? end : end - 8;
	size_t n = past ? 1 : 16;
	long src[4] = {0}, dst[4];
	uint64_t *sig = (uint64_t *)(heap_end() - 16); /* a valid signal word */
	if (strcmp(op, "p") == 0)
		shmem_long_p((long *)p, 1, 1); /* 8 bytes */
	else if (strcmp(op, "putmem") == 0)
		shmem_putmem(p, src, n, 1);
	else if (strcmp(op, "put") == 0)
		shmem_long_put((long *)p, src, past ? 1 : 2, 1);
	else if (strcmp(op, "iput") == 0)
		shmem_long_iput((long *)(p - 8), src, 2, 1, 2, 1); /* the words at p-8 and p+8 */
	else if (strcmp(op, "getmem") == 0)
		shmem_getmem(dst, p, n, 1);
	else if (strcmp(op, "get") == 0)
		shmem_long_get(dst, (long *)p, past ? 1 : 2, 1);
	else if (strcmp(op, "iget") == 0)
		shmem_long_iget(dst, (long *)(p - 8), 1, 2, 2, 1);
	else if (strcmp(op, "fadd") == 0)
		dst[0] = shmem_long_atomic_fetch_add((long *)p, 1, 1);
	else if (strcmp(op, "signal") == 0)
		shmem_putmem_signal(p, src, n, sig, 1, SHMEM_SIGNAL_SET, 1);
	else if (strcmp(op, "wait") == 0)
		shmem_long_wait_until((long *)p, SHMEM_CMP_EQ, 0);
	else if (strcmp(op, "waitall") == 0)
		shmem_long_wait_until_all((long *)p, n / sizeof(long) + past, NULL, SHMEM_CMP_GE, 0);
	else {
		fprintf(stderr, "t_bounds: unknown size case %s\n", op);
		exit(2);
	}
	(void)dst;
}

int main(int argc, char **argv)
{
	shmem_init();
	if (argc < 2)
		return valid();
	const char *kind = argv[1];
	int me = shmem_my_pe(), n = shmem_n_pes();
	long *h = shmem_malloc(16 * sizeof(long));
	shmem_barrier_all();
	if (me == 0) {
		if (strcmp(kind, "pe") == 0 && argc == 4)
			pe_case(argv[2], target(argv[3], n), h);
		else if (strcmp(kind, "size") == 0 && argc == 4)
			size_case(argv[2], argv[3]);
		else {
			fprintf(stderr, "usage: t_bounds [pe OP -1|n|n+1 | size OP WHERE]\n");
			exit(2);
		}
		/* Not reached when the bound holds: the call ends the job. */
		printf("t_bounds %s %s %s: the call returned\n", kind, argv[2], argv[3]);
		fflush(stdout);
	}
	shmem_barrier_all();
	shmem_free(h);
	shmem_finalize();
	return 0;
}
