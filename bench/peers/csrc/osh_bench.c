//go:build ignore

/*
 * osh_bench.c - OpenSHMEM peer benchmarks (Open MPI 4.1 OSHMEM, OpenSHMEM 1.4).
 *
 * Build:  oshcc -O2 -o osh_bench osh_bench.c          (bench/peers/build.sh)
 * Run:    oshrun --allow-run-as-root --oversubscribe -np 2 \
 *             --mca opal_common_ucx_opal_mem_hooks 0 \
 *             --mca pml ob1 --mca btl self,vader \
 *             ./osh_bench [options] TEST...
 *
 * Why those flags (Debian 12, openmpi 4.1.4, libucx0 1.13.1, no HCA):
 *   --allow-run-as-root           the launcher refuses root without it
 *                                 (or OMPI_ALLOW_RUN_AS_ROOT=1 and
 *                                 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1).
 *   --oversubscribe               more PEs than cores (-np 4, 8 on 2 cores).
 *   opal_common_ucx_opal_mem_hooks 0
 *                                 without it every job dies with SIGSEGV in
 *                                 shmem_finalize(): spml/ucx registers an
 *                                 OPAL memory-release hook, is dlclose()d
 *                                 during oshmem finalize without removing
 *                                 it, and osc/rdma's free() inside
 *                                 ompi_mpi_finalize() then calls the
 *                                 dangling hook.  (--mca osc ^rdma avoids it
 *                                 too; the parameter has the synonym
 *                                 spml_ucx_opal_mem_hooks.)
 *   --mca pml ob1 --mca btl self,vader
 *                                 OSHMEM's MPI layer on shared memory only;
 *                                 skips probing UCX/openib/ofi (which find
 *                                 no device and end with the same choice)
 *                                 and halves start-up time.
 * The one-sided path is spml/ucx, which is the only spml in Debian's build;
 * with no InfiniBand device UCX picks its shared-memory transports
 * (UCX_LOG_LEVEL=info shows "rma(sysv/memory posix/memory)
 * amo(sysv/memory posix/memory)").  No UCX_* variable is needed.
 * Collectives (shmem_barrier_all, shmem_broadcast64, shmem_long_sum_to_all)
 * are served by the scoll/mpi component, i.e. by Open MPI's MPI collectives
 * over ob1/vader (--mca scoll_mpi_verbose 100 prints "RUNNING MPI BCAST");
 * scoll/basic (pSync-based puts) is only its fallback.
 * Open MPI 4.1 implements OpenSHMEM 1.4: there is no team API (1.5 teams
 * arrive in Open MPI 5), so collectives use the active-set routines
 * (shmem_broadcast64, shmem_long_sum_to_all) with pSync/pWrk arrays.
 *
 * Tests (sizes in bytes; value units in the "# unit" header lines):
 *   put_lat     PE 0: shmem_putmem(size) to PE 1 + shmem_quiet, per-op us
 *   get_lat     PE 0: shmem_getmem(size) from PE 1, per-op us
 *   put_bw      PE 0: window of shmem_putmem_nbi to PE 1 then shmem_quiet,
 *               MB/s (10^6 bytes per second)
 *   put_rate    as put_bw, messages per second (default size 8)
 *   fadd_lat    PE 0: shmem_long_atomic_fetch_add on PE 1's int64, us
 *   barrier_lat all PEs: shmem_barrier_all, us per call
 *   bcast_lat   all PEs: shmem_broadcast64 from PE 0, size/8 elements, us
 *   reduce_lat  all PEs: shmem_long_sum_to_all of size/8 int64, us
 *   fcollect_lat all PEs: shmem_fcollect64 of size/8 int64 from each PE, us
 *   malloc_lat  all PEs: shmem_malloc(size) + shmem_free pair, us
 * Point-to-point tests use PEs 0 and 1; the others wait in a barrier.
 * Collective figures are the slowest PE's mean time per call.  Each figure is
 * the best of -r repetitions; each repetition's iteration count comes from the
 * timed warm-up and the -t budget (bounded by -i and -m).  With -b N (tail
 * mode) the collectives report instead the 50th and 99th percentiles of
 * batches of N calls (N rounded up to even), each batch timed on its own,
 * as <test>_p50 and <test>_p99 (see peers_common.h); the point-to-point
 * tests ignore -b.
 */
#include "peers_common.h"

#include <shmem.h>

#define HARNESS "osh"
static const char *const TESTS =
	"put_lat get_lat put_bw put_rate fadd_lat barrier_lat bcast_lat reduce_lat fcollect_lat malloc_lat";

static int me, npes;
static const char *prog = "osh_bench";

/* Synchronisation arrays for the 1.4 collectives: symmetric (static data). */
#define PSYNC_MAX2(a, b) ((a) > (b) ? (a) : (b))
static long psync_coll[2][PSYNC_MAX2(PSYNC_MAX2(SHMEM_REDUCE_SYNC_SIZE, SHMEM_BCAST_SYNC_SIZE),
				     SHMEM_COLLECT_SYNC_SIZE)];
static long psync_agree[SHMEM_REDUCE_SYNC_SIZE];
static double agree_src, agree_dst;
static double agree_wrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE];
static long fadd_target;

/* agree_max returns the largest v over all PEs, on every PE. */
static double agree_max(double v)
{
	agree_src = v;
	shmem_barrier_all(); /* psync_agree is free again on every PE */
	shmem_double_max_to_all(&agree_dst, &agree_src, 1, 0, 0, npes, agree_wrk, psync_agree);
	return agree_dst;
}

static void *sym_alloc(size_t n)
{
	void *p = shmem_malloc(n ? n : 64);
	if (p == NULL) {
		fprintf(stderr, "%s: shmem_malloc(%zu) failed (raise SHMEM_SYMMETRIC_SIZE)\n", prog, n);
		shmem_global_exit(1);
	}
	memset(p, 0x5a, n ? n : 64);
	return p;
}

static long max_size(const struct peers_opts *o, long dflt)
{
	long m = dflt;
	for (int i = 0; i < o->nsizes; i++)
		if (o->sizes[i] > m)
			m = o->sizes[i];
	return m;
}

/* Sizes of one test: -s if given, else the test's default list. */
static int test_sizes(const struct peers_opts *o, const long *dflt, int ndflt, const long **out)
{
	if (o->nsizes > 0) {
		*out = o->sizes;
		return o->nsizes;
	}
	*out = dflt;
	return ndflt;
}

enum p2p_kind { P2P_PUT, P2P_GET, P2P_PUT_WINDOW, P2P_FADD };

/* p2p_loop runs n iterations of one point-to-point pattern on PE 0. */
static void p2p_loop(enum p2p_kind k, long n, char *remote, char *local, long size, long window)
{
	switch (k) {
	case P2P_PUT:
		for (long i = 0; i < n; i++) {
			shmem_putmem(remote, local, (size_t)size, 1);
			shmem_quiet();
		}
		break;
	case P2P_GET:
		for (long i = 0; i < n; i++)
			shmem_getmem(local, remote, (size_t)size, 1);
		break;
	case P2P_PUT_WINDOW:
		for (long i = 0; i < n; i++) {
			for (long j = 0; j < window; j++)
				shmem_putmem_nbi(remote, local, (size_t)size, 1);
			shmem_quiet();
		}
		break;
	case P2P_FADD:
		for (long i = 0; i < n; i++)
			(void)shmem_long_atomic_fetch_add(&fadd_target, 1, 1);
		break;
	}
}

/*
 * p2p_measure times pattern k for one size on PE 0 (the other PEs only take
 * part in the closing barrier) and returns the best mean seconds per
 * iteration over the repetitions.  Only PE 0 needs the iteration count.
 */
static double p2p_measure(const struct peers_opts *o, enum p2p_kind k, char *remote, char *local,
			  long size, long window)
{
	double best = 0;
	if (me == 0) {
		long per_iter_bytes = size * (k == P2P_PUT_WINDOW ? window : 1);
		long w = peers_warmup_count(o, per_iter_bytes);
		double t0 = peers_now();
		p2p_loop(k, w, remote, local, size, window);
		long n = peers_timed_count(o, (peers_now() - t0) / w);
		for (int r = 0; r < o->reps; r++) {
			t0 = peers_now();
			p2p_loop(k, n, remote, local, size, window);
			double t = (peers_now() - t0) / n;
			if (r == 0 || t < best)
				best = t;
		}
	}
	shmem_barrier_all();
	return best;
}

/* Window for bandwidth tests: at most 64 MiB in flight, at least one put. */
static long bw_window(const struct peers_opts *o, long size)
{
	long w = o->window;
	if (size > 0 && w > (64L << 20) / size)
		w = (64L << 20) / size;
	return w < 1 ? 1 : w;
}

static void run_p2p(const struct peers_opts *o, char *remote, char *local)
{
	static const long lat_sizes[] = {8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192,
					 16384, 32768, 65536, 131072, 262144, 524288, 1048576,
					 2097152, 4194304};
	const int nlat = (int)(sizeof lat_sizes / sizeof lat_sizes[0]);
	static const long rate_sizes[] = {8};
	const long *sz;
	int ns;

	if (npes < 2) {
		if (me == 0)
			printf("# point-to-point tests need 2 PEs, skipped\n");
		return;
	}
	if (peers_selected(o, "put_lat")) {
		if (me == 0)
			peers_unit("put_lat", "us", "shmem_putmem+shmem_quiet to PE 1, per op");
		ns = test_sizes(o, lat_sizes, nlat, &sz);
		for (int i = 0; i < ns; i++) {
			double t = p2p_measure(o, P2P_PUT, remote, local, sz[i], 1);
			if (me == 0)
				peers_result(HARNESS, "put_lat", sz[i], t * 1e6);
		}
	}
	if (peers_selected(o, "get_lat")) {
		if (me == 0)
			peers_unit("get_lat", "us", "shmem_getmem from PE 1, per op");
		ns = test_sizes(o, lat_sizes, nlat, &sz);
		for (int i = 0; i < ns; i++) {
			double t = p2p_measure(o, P2P_GET, remote, local, sz[i], 1);
			if (me == 0)
				peers_result(HARNESS, "get_lat", sz[i], t * 1e6);
		}
	}
	if (peers_selected(o, "put_bw")) {
		if (me == 0)
			peers_unit("put_bw", "MB/s", "window of shmem_putmem_nbi to PE 1 then shmem_quiet, 10^6 B/s");
		ns = test_sizes(o, lat_sizes, nlat, &sz);
		for (int i = 0; i < ns; i++) {
			if (sz[i] == 0)
				continue;
			long w = bw_window(o, sz[i]);
			double t = p2p_measure(o, P2P_PUT_WINDOW, remote, local, sz[i], w);
			if (me == 0)
				peers_result(HARNESS, "put_bw", sz[i], (double)sz[i] * w / t / 1e6);
		}
	}
	if (peers_selected(o, "put_rate")) {
		if (me == 0)
			peers_unit("put_rate", "msg/s", "window of shmem_putmem_nbi to PE 1 then shmem_quiet");
		ns = test_sizes(o, rate_sizes, 1, &sz);
		for (int i = 0; i < ns; i++) {
			long w = bw_window(o, sz[i]);
			double t = p2p_measure(o, P2P_PUT_WINDOW, remote, local, sz[i], w);
			if (me == 0)
				peers_result(HARNESS, "put_rate", sz[i], (double)w / t);
		}
	}
	if (peers_selected(o, "fadd_lat")) {
		if (me == 0)
			peers_unit("fadd_lat", "us", "shmem_long_atomic_fetch_add on PE 1, per op");
		double t = p2p_measure(o, P2P_FADD, remote, local, 8, 1);
		if (me == 0)
			peers_result(HARNESS, "fadd_lat", 8, t * 1e6);
	}
}

enum coll_kind { COLL_BARRIER, COLL_BCAST, COLL_REDUCE, COLL_FCOLLECT, COLL_MALLOC };

/*
 * coll_loop runs n calls of one collective.  Consecutive calls alternate
 * between two pSync (and pWrk) arrays, the usual way to let a call start
 * before every PE has left the previous one.
 */
static void coll_loop(enum coll_kind k, long n, long *dst, long *src, long nelem, long *wrk[2],
		      long size)
{
	switch (k) {
	case COLL_BARRIER:
		for (long i = 0; i < n; i++)
			shmem_barrier_all();
		break;
	case COLL_BCAST:
		for (long i = 0; i < n; i++)
			shmem_broadcast64(dst, src, (size_t)nelem, 0, 0, 0, npes, psync_coll[i & 1]);
		break;
	case COLL_REDUCE:
		for (long i = 0; i < n; i++)
			shmem_long_sum_to_all(dst, src, (int)nelem, 0, 0, npes, wrk[i & 1],
					      psync_coll[i & 1]);
		break;
	case COLL_FCOLLECT:
		for (long i = 0; i < n; i++)
			shmem_fcollect64(dst, src, (size_t)nelem, 0, 0, npes, psync_coll[i & 1]);
		break;
	case COLL_MALLOC:
		for (long i = 0; i < n; i++) {
			void *p = shmem_malloc((size_t)size);
			if (p == NULL) {
				fprintf(stderr, "%s: shmem_malloc(%ld) failed\n", prog, size);
				shmem_global_exit(1);
			}
			shmem_free(p);
		}
		break;
	}
}

/*
 * coll_measure measures one collective at one size.  Its figure, in *fig:
 * the best over repetitions of the slowest PE's mean; with -b (tail mode)
 * fig[0] and fig[1] are the 50th and 99th percentiles of the batches'
 * means per call (peers_common.h), each the largest over PEs.
 */
static void coll_measure(const struct peers_opts *o, enum coll_kind k, long size, double fig[2])
{
	long nelem = (size + 7) / 8;
	long *dst = NULL, *src = NULL, *wrk[2] = {NULL, NULL};
	if (k == COLL_BCAST || k == COLL_REDUCE || k == COLL_FCOLLECT) {
		if (nelem < 1)
			nelem = 1;
		/* fcollect: dst holds nelem from every PE. */
		dst = sym_alloc((size_t)nelem * 8 * (k == COLL_FCOLLECT ? npes : 1));
		src = sym_alloc((size_t)nelem * 8);
		for (long i = 0; i < nelem; i++)
			src[i] = 1;
		long nw = nelem / 2 + 1;
		if (nw < SHMEM_REDUCE_MIN_WRKDATA_SIZE)
			nw = SHMEM_REDUCE_MIN_WRKDATA_SIZE;
		wrk[0] = sym_alloc((size_t)nw * 8);
		wrk[1] = sym_alloc((size_t)nw * 8);
	}
	shmem_barrier_all();

	long w = peers_warmup_count(o, k == COLL_MALLOC ? 0 : nelem * 8);
	/* An even warm-up count keeps the pSync alternation in step. */
	if (w & 1)
		w++;
	double t0 = peers_now();
	coll_loop(k, w, dst, src, nelem, wrk, size);
	double per = agree_max((peers_now() - t0) / w);
	if (o->batch > 0) {
		/* Tail mode: an even batch keeps the alternation in step too. */
		long b = o->batch + (o->batch & 1);
		long nb = peers_batch_count(o, per);
		double *v = malloc((size_t)nb * sizeof *v);
		if (v == NULL) {
			fprintf(stderr, "%s: out of memory for %ld samples\n", prog, nb);
			shmem_global_exit(1);
		}
		shmem_barrier_all();
		for (long i = 0; i < nb; i++) {
			t0 = peers_now();
			coll_loop(k, b, dst, src, nelem, wrk, size);
			v[i] = (peers_now() - t0) / b;
		}
		double p50 = peers_percentile(v, nb, 50), p99 = peers_percentile(v, nb, 99);
		free(v);
		fig[0] = agree_max(p50);
		fig[1] = agree_max(p99);
	} else {
		long n = peers_timed_count(o, per);
		if (n & 1)
			n++;
		double best = 0;
		for (int r = 0; r < o->reps; r++) {
			shmem_barrier_all();
			t0 = peers_now();
			coll_loop(k, n, dst, src, nelem, wrk, size);
			double t = agree_max((peers_now() - t0) / n);
			if (r == 0 || t < best)
				best = t;
		}
		fig[0] = best;
	}
	if (k == COLL_REDUCE && dst[0] != npes) {
		fprintf(stderr, "%s: reduce gave %ld, want %d\n", prog, dst[0], npes);
		shmem_global_exit(1);
	}
	if (k == COLL_FCOLLECT && dst[nelem * (npes - 1)] != 1) {
		fprintf(stderr, "%s: fcollect gave %ld from the last PE, want 1\n", prog, dst[nelem * (npes - 1)]);
		shmem_global_exit(1);
	}
	shmem_barrier_all();
	if (dst) {
		shmem_free(wrk[1]);
		shmem_free(wrk[0]);
		shmem_free(src);
		shmem_free(dst);
	}
}

/*
 * coll_unit prints the unit lines of a collective's metric: the mean, or
 * in tail mode its _p50 and _p99.
 */
static void coll_unit(const struct peers_opts *o, const char *metric, const char *what)
{
	char name[64], text[256];
	if (me != 0)
		return;
	if (o->batch == 0) {
		peers_unit(metric, "us", what);
		return;
	}
	snprintf(name, sizeof name, "%s_p50", metric);
	snprintf(text, sizeof text, "%s, 50th percentile of batches of %ld calls (mean per call), slowest PE's", what, o->batch + (o->batch & 1));
	peers_unit(name, "us", text);
	snprintf(name, sizeof name, "%s_p99", metric);
	snprintf(text, sizeof text, "%s, 99th percentile of batches of %ld calls (mean per call), slowest PE's", what, o->batch + (o->batch & 1));
	peers_unit(name, "us", text);
}

/* coll_result measures and prints one collective's figure at one size. */
static void coll_result(const struct peers_opts *o, const char *metric, enum coll_kind k, long size, long shown)
{
	double fig[2] = {0, 0};
	char name[64];
	coll_measure(o, k, size, fig);
	if (me != 0)
		return;
	if (o->batch == 0) {
		peers_result(HARNESS, metric, shown, fig[0] * 1e6);
		return;
	}
	snprintf(name, sizeof name, "%s_p50", metric);
	peers_result(HARNESS, name, shown, fig[0] * 1e6);
	snprintf(name, sizeof name, "%s_p99", metric);
	peers_result(HARNESS, name, shown, fig[1] * 1e6);
}

/* vec_bytes: the bytes a vector collective moves for a requested size. */
static long vec_bytes(long size)
{
	long nelem = (size + 7) / 8;
	return (nelem < 1 ? 1 : nelem) * 8;
}

/*
 * vec_size_new: whether sz[i] asks for a vector not measured before in this
 * list (0 and sizes that round up to an earlier size are skipped).
 */
static int vec_size_new(const long *sz, int i)
{
	if (sz[i] <= 0)
		return 0;
	for (int j = 0; j < i; j++)
		if (sz[j] > 0 && vec_bytes(sz[j]) == vec_bytes(sz[i]))
			return 0;
	return 1;
}

static void run_coll(const struct peers_opts *o)
{
	static const long vec_sizes[] = {8, 8192}; /* 1 and 1024 int64 */
	static const long malloc_sizes[] = {64, 1048576};
	const long *sz;
	int ns;

	if (peers_selected(o, "barrier_lat")) {
		coll_unit(o, "barrier_lat", "shmem_barrier_all, slowest PE's mean per call");
		coll_result(o, "barrier_lat", COLL_BARRIER, 0, 0);
	}
	if (peers_selected(o, "bcast_lat")) {
		coll_unit(o, "bcast_lat", "shmem_broadcast64 from PE 0 of size/8 elements");
		ns = test_sizes(o, vec_sizes, 2, &sz);
		for (int i = 0; i < ns; i++)
			if (vec_size_new(sz, i))
				coll_result(o, "bcast_lat", COLL_BCAST, sz[i], vec_bytes(sz[i]));
	}
	if (peers_selected(o, "reduce_lat")) {
		coll_unit(o, "reduce_lat", "shmem_long_sum_to_all of size/8 int64");
		ns = test_sizes(o, vec_sizes, 2, &sz);
		for (int i = 0; i < ns; i++)
			if (vec_size_new(sz, i))
				coll_result(o, "reduce_lat", COLL_REDUCE, sz[i], vec_bytes(sz[i]));
	}
	if (peers_selected(o, "fcollect_lat")) {
		coll_unit(o, "fcollect_lat", "shmem_fcollect64 of size/8 int64 from each PE");
		ns = test_sizes(o, vec_sizes, 2, &sz);
		for (int i = 0; i < ns; i++)
			if (vec_size_new(sz, i))
				coll_result(o, "fcollect_lat", COLL_FCOLLECT, sz[i], vec_bytes(sz[i]));
	}
	if (peers_selected(o, "malloc_lat")) {
		coll_unit(o, "malloc_lat", "shmem_malloc+shmem_free pair (collective)");
		ns = test_sizes(o, malloc_sizes, 2, &sz);
		for (int i = 0; i < ns; i++)
			if (sz[i] != 0) /* shmem_malloc(0) may return NULL */
				coll_result(o, "malloc_lat", COLL_MALLOC, sz[i], sz[i]);
	}
}

int main(int argc, char **argv)
{
	struct peers_opts o = {
		.iters = 10000, .min_iters = 10, .warmup = 1000, .reps = 3,
		.window = 64, .budget = 0.1,
	};
	prog = argv[0];
	peers_parse_args(&o, argc, argv, TESTS);

	shmem_init();
	me = shmem_my_pe();
	npes = shmem_n_pes();
	for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++)
		psync_agree[i] = SHMEM_SYNC_VALUE;
	for (int j = 0; j < 2; j++)
		for (size_t i = 0; i < sizeof psync_coll[j] / sizeof psync_coll[j][0]; i++)
			psync_coll[j][i] = SHMEM_SYNC_VALUE;

	int major = 0, minor = 0;
	shmem_info_get_version(&major, &minor);
	if (me == 0) {
#if defined(OSHMEM_MAJOR_VERSION)
		printf("# osh_bench: Open MPI OSHMEM %d.%d.%d, OpenSHMEM %d.%d\n", OSHMEM_MAJOR_VERSION,
		       OSHMEM_MINOR_VERSION, OSHMEM_RELEASE_VERSION, major, minor);
#elif defined(SYMHEAP_MAJOR_VERSION)
		printf("# osh_bench: symheap %d.%d.%d, OpenSHMEM %d.%d\n", SYMHEAP_MAJOR_VERSION,
		       SYMHEAP_MINOR_VERSION, SYMHEAP_RELEASE_VERSION, major, minor);
#else
		printf("# osh_bench: %s, OpenSHMEM %d.%d\n", SHMEM_VENDOR_STRING, major, minor);
#endif
		printf("# npes %d\n", npes);
		printf("# <harness> <metric> <size-bytes> <value>\n");
		fflush(stdout);
	}

	long big = max_size(&o, 4L << 20);
	char *remote = sym_alloc((size_t)big);
	char *local = sym_alloc((size_t)big);
	shmem_barrier_all();

	run_p2p(&o, remote, local);
	run_coll(&o);

	shmem_barrier_all();
	shmem_free(local);
	shmem_free(remote);
	shmem_finalize();
	return 0;
}
