// Package peers builds and runs the peer benchmarks: small C harnesses that
// measure what symheap is compared with on this machine, so that
// `symheap bench --peers` and the Go benchmarks can run ours and theirs in
// one run and print ratios.
//
// # Harnesses
//
//	harness    binary              launcher  tests (= metric names)
//	osh        osh_bench           oshrun    put_lat get_lat put_bw put_rate fadd_lat
//	                                         barrier_lat bcast_lat reduce_lat fcollect_lat
//	                                         malloc_lat
//	mpi        mpi_bench           mpirun    pingpong_lat stream_bw stream_rate
//	                                         barrier_lat bcast_lat allreduce_lat
//	memcpy     memcpy_bench        -         memcpy_bw memcpy_shm_bw memcpy_odd_bw
//	                                         memcpy_cold_bw
//	cacheline  cacheline_pingpong  -         thread_lat proc_lat
//
// The C sources live in csrc/ (a Go package directory may not hold C files
// unless it uses cgo: `go build` fails with "C source files not allowed
// when not using cgo") and are embedded in the package with build.sh, so
// [Build] works from any binary: it writes them to OUTDIR/src (only when
// they changed) and runs build.sh, which installs Debian's openmpi-bin and
// libopenmpi-dev when they are missing and compiles what is out of date.
// bench/peers/build.sh can also be run by hand; it builds into
// bench/peers/bin.
//
// # Output
//
// Every harness prints one measurement per line,
//
//	<harness> <metric> <size-bytes> <value>
//
// preceded by comment lines: "# unit <metric> <unit> <what>" gives the unit
// of a metric (us, ns, MB/s = 10^6 bytes per second, msg/s) and
// "# npes <n>" the number of processes. [Parse] reads it into [Result]s and
// ignores lines it does not recognise (UCX and Open MPI write notices to
// stdout). Each figure is the best of several repetitions of a timed loop
// that follows a warm-up; latencies are means per operation within a
// repetition, collective latencies the slowest process's mean.
//
// # Running Open MPI 4.1 here
//
// Debian 12's openmpi 4.1.4 (with UCX 1.13, no InfiniBand device) needs:
//
//	oshrun --allow-run-as-root --oversubscribe -np N \
//	    --mca opal_common_ucx_opal_mem_hooks 0 --mca pml ob1 --mca btl self,vader \
//	    osh_bench TEST...
//	mpirun --allow-run-as-root --oversubscribe -np N \
//	    --mca pml ob1 --mca btl self,vader mpi_bench TEST...
//
// --allow-run-as-root because the launchers refuse root without it;
// --oversubscribe for more processes than cores. opal_common_ucx_opal_mem_hooks
// 0 is required for OSHMEM: without it every job ends with SIGSEGV in
// shmem_finalize, because spml/ucx registers an OPAL memory-release hook, is
// unloaded during finalize without removing it, and osc/rdma's free() in
// ompi_mpi_finalize then calls the dangling hook (--mca osc ^rdma also
// avoids it). pml ob1 with btl self,vader keeps the MPI layer on shared
// memory without probing UCX, openib and ofi for devices that are not there
// (it ends with the same choice, only slower). OSHMEM's one-sided path is
// spml/ucx, which with no HCA uses UCX's sysv/posix shared-memory transports
// for RMA and atomics; no UCX_* variable is needed. OSHMEM's collectives
// (barrier_all, broadcast, reductions) are served by scoll/mpi, that is by
// Open MPI's MPI collectives over ob1/vader. Open MPI 4.1 implements
// OpenSHMEM 1.4, which has no teams: collectives use the active-set calls
// with pSync arrays.
//
// # Processes
//
// [Run] starts the harness (through the launcher for osh and mpi) as the
// leader of a new session, with a hard timeout. Open MPI puts each rank in a
// process group of its own, so on timeout or cancellation Run sends SIGTERM
// to the launcher (which then stops its ranks and removes its shared-memory
// files), waits a few seconds, and then kills with SIGKILL every process
// still in the session. A hung peer therefore cannot hang the caller.
package peers
