//go:build ignore

/*
 * mpi_bench.c - MPI peer benchmarks (Open MPI 4.1, Debian's openmpi-bin).
 *
 * Build:  mpicc -O2 -o mpi_bench mpi_bench.c          (bench/peers/build.sh)
 * Run:    mpirun --allow-run-as-root --oversubscribe -np 2 \
 *             --mca pml ob1 --mca btl self,vader ./mpi_bench [options] TEST...
 *
 * --mca pml ob1 --mca btl self,vader: shared memory only (vader uses CMA,
 * process_vm_readv/writev, for single-copy large messages; it works here as
 * root).  Without them Open MPI probes UCX, openib and ofi, finds no network
 * device and ends with the same ob1/vader choice, only slower to start.
 *
 * Tests (sizes in bytes; value units in the "# unit" header lines):
 *   pingpong_lat   ranks 0 and 1: MPI_Send/MPI_Recv ping-pong, half round
 *                  trip in us (sizes 0, 1, 2, 4, ... 64 MiB)
 *   stream_bw      rank 0 posts a window of MPI_Isend, rank 1 a window of
 *                  MPI_Irecv, both wait, rank 1 acknowledges with a 4-byte
 *                  message; MB/s (10^6 bytes per second), sizes 1 B..64 MiB
 *   stream_rate    the same loop as stream_bw, reported as messages per
 *                  second (the window over the time per window), sizes
 *                  1 B..256 B: the small-message rate
 *   barrier_lat    all ranks: MPI_Barrier, us per call
 *   bcast_lat      all ranks: MPI_Bcast of size/8 int64 from rank 0, us
 *   allreduce_lat  all ranks: MPI_Allreduce sum of size/8 int64, us
 * Collective figures are the slowest rank's mean time per call.  Each figure
 * is the best of -r repetitions; each repetition's iteration count comes
 * from the timed warm-up and the -t budget (bounded by -i and -m), and rank 0
 * shares it with everyone.
 */
#include "peers_common.h"

#include <mpi.h>

#define HARNESS "mpi"
static const char *const TESTS = "pingpong_lat stream_bw stream_rate barrier_lat bcast_lat allreduce_lat";
#define TAG_DATA 1
#define TAG_ACK 2

static int me, np;
static const char *prog = "mpi_bench";

/* agree_max returns the largest v over all ranks, on every rank. */
static double agree_max(double v)
{
	double m;
	MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	return m;
}

/* agree_count gives every rank rank 0's iteration count. */
static long agree_count(long n)
{
	MPI_Bcast(&n, 1, MPI_LONG, 0, MPI_COMM_WORLD);
	return n;
}

static long max_size(const struct peers_opts *o, long dflt)
{
	long m = dflt;
	for (int i = 0; i < o->nsizes; i++)
		if (o->sizes[i] > m)
			m = o->sizes[i];
	return m;
}

static int default_sizes(long *out, long first, long last)
{
	int n = 0;
	if (first == 0)
		out[n++] = 0;
	for (long s = first ? first : 1; s <= last; s *= 2)
		out[n++] = s;
	return n;
}

static void pingpong_loop(long n, char *sbuf, char *rbuf, long size)
{
	for (long i = 0; i < n; i++) {
		if (me == 0) {
			MPI_Send(sbuf, (int)size, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD);
			MPI_Recv(rbuf, (int)size, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else if (me == 1) {
			MPI_Recv(rbuf, (int)size, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Send(sbuf, (int)size, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD);
		}
	}
}

static void stream_loop(long n, char *sbuf, char *rbuf, long size, long window, MPI_Request *req)
{
	int ack = 0;
	for (long i = 0; i < n; i++) {
		if (me == 0) {
			for (long j = 0; j < window; j++)
				MPI_Isend(sbuf, (int)size, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD, &req[j]);
			MPI_Waitall((int)window, req, MPI_STATUSES_IGNORE);
			MPI_Recv(&ack, 1, MPI_INT, 1, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else if (me == 1) {
			for (long j = 0; j < window; j++)
				MPI_Irecv(rbuf, (int)size, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, &req[j]);
			MPI_Waitall((int)window, req, MPI_STATUSES_IGNORE);
			MPI_Send(&ack, 1, MPI_INT, 0, TAG_ACK, MPI_COMM_WORLD);
		}
	}
}

/*
 * p2p_measure times ping-pong (window == 0) or streaming for one size and
 * returns rank 0's best mean seconds per iteration.  All ranks take part in
 * agreeing on the count; ranks above 1 then wait in the closing barrier.
 */
static double p2p_measure(const struct peers_opts *o, char *sbuf, char *rbuf, long size, long window,
			  MPI_Request *req)
{
	long per_iter_bytes = size * (window ? window : 2);
	long w = peers_warmup_count(o, per_iter_bytes);
	MPI_Barrier(MPI_COMM_WORLD);
	double t0 = peers_now();
	if (window)
		stream_loop(w, sbuf, rbuf, size, window, req);
	else
		pingpong_loop(w, sbuf, rbuf, size);
	long n = agree_count(peers_timed_count(o, (peers_now() - t0) / w));
	double best = 0;
	for (int r = 0; r < o->reps; r++) {
		MPI_Barrier(MPI_COMM_WORLD);
		t0 = peers_now();
		if (window)
			stream_loop(n, sbuf, rbuf, size, window, req);
		else
			pingpong_loop(n, sbuf, rbuf, size);
		double t = (peers_now() - t0) / n;
		if (r == 0 || t < best)
			best = t;
	}
	MPI_Barrier(MPI_COMM_WORLD);
	return best;
}

static void run_p2p(const struct peers_opts *o, char *sbuf, char *rbuf, MPI_Request *req)
{
	long dflt[PEERS_MAX_SIZES];
	const long *sz;
	int ns;

	if (np < 2) {
		if (me == 0)
			printf("# point-to-point tests need 2 ranks, skipped\n");
		return;
	}
	if (peers_selected(o, "pingpong_lat")) {
		if (me == 0)
			peers_unit("pingpong_lat", "us", "MPI_Send/MPI_Recv ping-pong, half round trip");
		ns = o->nsizes ? o->nsizes : default_sizes(dflt, 0, 64L << 20);
		sz = o->nsizes ? o->sizes : dflt;
		for (int i = 0; i < ns; i++) {
			double t = p2p_measure(o, sbuf, rbuf, sz[i], 0, req);
			if (me == 0)
				peers_result(HARNESS, "pingpong_lat", sz[i], t / 2 * 1e6);
		}
	}
	for (int rate = 0; rate < 2; rate++) {
		const char *metric = rate ? "stream_rate" : "stream_bw";
		if (!peers_selected(o, metric))
			continue;
		if (me == 0) {
			if (rate)
				peers_unit(metric, "msg/s", "window of MPI_Isend/MPI_Irecv + ack, messages per second");
			else
				peers_unit(metric, "MB/s", "window of MPI_Isend/MPI_Irecv + ack, 10^6 B/s");
		}
		ns = o->nsizes ? o->nsizes : default_sizes(dflt, 1, rate ? 256 : 64L << 20);
		sz = o->nsizes ? o->sizes : dflt;
		for (int i = 0; i < ns; i++) {
			if (sz[i] == 0)
				continue;
			long w = o->window;
			if (w > (64L << 20) / sz[i])
				w = (64L << 20) / sz[i];
			if (w < 1)
				w = 1;
			double t = p2p_measure(o, sbuf, rbuf, sz[i], w, req);
			if (me == 0)
				peers_result(HARNESS, metric, sz[i], rate ? w / t : (double)sz[i] * w / t / 1e6);
		}
	}
}

enum coll_kind { COLL_BARRIER, COLL_BCAST, COLL_ALLREDUCE };

static void coll_loop(enum coll_kind k, long n, int64_t *a, int64_t *b, int nelem)
{
	switch (k) {
	case COLL_BARRIER:
		for (long i = 0; i < n; i++)
			MPI_Barrier(MPI_COMM_WORLD);
		break;
	case COLL_BCAST:
		for (long i = 0; i < n; i++)
			MPI_Bcast(a, nelem, MPI_INT64_T, 0, MPI_COMM_WORLD);
		break;
	case COLL_ALLREDUCE:
		for (long i = 0; i < n; i++)
			MPI_Allreduce(a, b, nelem, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
		break;
	}
}

static double coll_measure(const struct peers_opts *o, enum coll_kind k, int nelem)
{
	int64_t *a = peers_alloc(prog, (size_t)nelem * 8 + 8);
	int64_t *b = peers_alloc(prog, (size_t)nelem * 8 + 8);
	for (int i = 0; i < nelem; i++)
		a[i] = 1;
	long w = peers_warmup_count(o, (long)nelem * 8);
	MPI_Barrier(MPI_COMM_WORLD);
	double t0 = peers_now();
	coll_loop(k, w, a, b, nelem);
	long n = peers_timed_count(o, agree_max((peers_now() - t0) / w));
	double best = 0;
	for (int r = 0; r < o->reps; r++) {
		MPI_Barrier(MPI_COMM_WORLD);
		t0 = peers_now();
		coll_loop(k, n, a, b, nelem);
		double t = agree_max((peers_now() - t0) / n);
		if (r == 0 || t < best)
			best = t;
	}
	if (k == COLL_ALLREDUCE && b[0] != np) {
		fprintf(stderr, "%s: allreduce gave %lld, want %d\n", prog, (long long)b[0], np);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	free(b);
	free(a);
	return best;
}

/*
 * vec_size_new: whether sz[i] asks for a vector of int64 not measured before
 * in this list (0 and sizes that round up to an earlier size are skipped).
 */
static int vec_size_new(const long *sz, int i)
{
	if (sz[i] <= 0)
		return 0;
	for (int j = 0; j < i; j++)
		if (sz[j] > 0 && (sz[j] + 7) / 8 == (sz[i] + 7) / 8)
			return 0;
	return 1;
}

static void run_coll(const struct peers_opts *o)
{
	static const long vec_sizes[] = {8, 8192}; /* 1 and 1024 int64 */
	const long *sz = o->nsizes ? o->sizes : vec_sizes;
	int ns = o->nsizes ? o->nsizes : 2;

	if (peers_selected(o, "barrier_lat")) {
		if (me == 0)
			peers_unit("barrier_lat", "us", "MPI_Barrier, slowest rank's mean per call");
		double t = coll_measure(o, COLL_BARRIER, 0);
		if (me == 0)
			peers_result(HARNESS, "barrier_lat", 0, t * 1e6);
	}
	if (peers_selected(o, "bcast_lat")) {
		if (me == 0)
			peers_unit("bcast_lat", "us", "MPI_Bcast of size/8 int64 from rank 0");
		for (int i = 0; i < ns; i++) {
			if (!vec_size_new(sz, i))
				continue;
			int nelem = (int)((sz[i] + 7) / 8);
			double t = coll_measure(o, COLL_BCAST, nelem);
			if (me == 0)
				peers_result(HARNESS, "bcast_lat", (long)nelem * 8, t * 1e6);
		}
	}
	if (peers_selected(o, "allreduce_lat")) {
		if (me == 0)
			peers_unit("allreduce_lat", "us", "MPI_Allreduce sum of size/8 int64");
		for (int i = 0; i < ns; i++) {
			if (!vec_size_new(sz, i))
				continue;
			int nelem = (int)((sz[i] + 7) / 8);
			double t = coll_measure(o, COLL_ALLREDUCE, nelem);
			if (me == 0)
				peers_result(HARNESS, "allreduce_lat", (long)nelem * 8, t * 1e6);
		}
	}
}

int main(int argc, char **argv)
{
	struct peers_opts o = {
		.iters = 10000, .min_iters = 5, .warmup = 1000, .reps = 3,
		.window = 64, .budget = 0.1,
	};
	prog = argv[0];
	peers_parse_args(&o, argc, argv, TESTS);

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &me);
	MPI_Comm_size(MPI_COMM_WORLD, &np);
	for (int i = 0; i < o.nsizes; i++)
		if (o.sizes[i] > INT32_MAX) {
			if (me == 0)
				fprintf(stderr, "%s: size %ld is over 2 GiB - 1\n", prog, o.sizes[i]);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}

	if (me == 0) {
		char lib[MPI_MAX_LIBRARY_VERSION_STRING];
		int len = 0;
		MPI_Get_library_version(lib, &len);
		char *nl = strchr(lib, '\n');
		if (nl)
			*nl = '\0';
		printf("# mpi_bench: %s\n", lib);
		printf("# npes %d\n", np);
		printf("# <harness> <metric> <size-bytes> <value>\n");
		fflush(stdout);
	}

	long big = max_size(&o, 64L << 20);
	char *sbuf = peers_alloc(prog, (size_t)big);
	char *rbuf = peers_alloc(prog, (size_t)big);
	MPI_Request *req = malloc(sizeof(MPI_Request) * (size_t)o.window);
	if (req == NULL)
		peers_die(prog, "out of memory", NULL);

	run_p2p(&o, sbuf, rbuf, req);
	run_coll(&o);

	free(req);
	free(rbuf);
	free(sbuf);
	MPI_Finalize();
	return 0;
}
