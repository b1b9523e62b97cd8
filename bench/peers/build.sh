#!/usr/bin/env bash
# bench/peers/build.sh [OUTDIR] - build the peer benchmark harnesses.
#
#   osh_bench           OpenSHMEM (Open MPI 4.1 OSHMEM), built with oshcc
#   osh_bench_symheap   the same source on symheap's C library, built with
#                       symcc (when symcc is in PATH: make build puts it in .bin)
#   mpi_bench           MPI (Open MPI 4.1), built with mpicc
#   memcpy_bench        glibc memcpy bandwidth, gcc
#   cacheline_pingpong  one cache line bounced between two cores, gcc
#
# OUTDIR defaults to bench/peers/bin (ignored by git).  The script is
# idempotent: a binary is rebuilt only when it is missing or older than its
# source, peers_common.h or this script.  Builds into one OUTDIR are
# serialised with flock.
#
# Missing tools are installed from Debian's packages when we are root (or
# have password-less sudo): gcc, then openmpi-bin + libopenmpi-dev (which
# bring oshcc, oshrun, mpicc, mpirun, libucx0 and libpmix2).  apt-get update
# runs only if the first install attempt fails.  Set PEERS_NO_INSTALL=1 to
# never install.  Whatever cannot be had is named in the error and the
# script exits 1 after building the harnesses that need only gcc.
#
# Running the harnesses on Debian 12 (openmpi 4.1.4, UCX 1.13, no HCA):
#   oshrun --allow-run-as-root --oversubscribe -np N \
#       --mca opal_common_ucx_opal_mem_hooks 0 --mca pml ob1 --mca btl self,vader \
#       OUTDIR/osh_bench TEST...
#   mpirun --allow-run-as-root --oversubscribe -np N \
#       --mca pml ob1 --mca btl self,vader OUTDIR/mpi_bench TEST...
# (opal_common_ucx_opal_mem_hooks 0 is required: without it every OSHMEM job
# dies with SIGSEGV inside shmem_finalize; see osh_bench.c.)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The C sources live in csrc/: a Go package directory may not hold C files
# unless it uses cgo.
SRC=$HERE/csrc
OUT=${1:-$HERE/bin}
APT_TIMEOUT=${PEERS_APT_TIMEOUT:-900}

die() {
	echo "build.sh: $*" >&2
	exit 1
}

mkdir -p "$OUT" || die "cannot create output directory $OUT"
OUT=$(cd "$OUT" && pwd)

# One build at a time per OUTDIR (go test and symheap bench may race).
if command -v flock >/dev/null 2>&1; then
	exec 9>"$OUT/.build.lock"
	flock -w 600 9 || die "timed out waiting for another build in $OUT (lock $OUT/.build.lock)"
fi

as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		sudo -n "$@"
	else
		return 126
	fi
}

# apt_install PKG... installs with a time limit; apt-get update only after a
# first failure.  Output goes to a log that is shown on failure.
apt_install() {
	[ "${PEERS_NO_INSTALL:-0}" = 1 ] && return 1
	command -v apt-get >/dev/null 2>&1 || return 1
	local log
	log=$(mktemp "${TMPDIR:-/tmp}/peers-apt.XXXXXX")
	local apt=(env DEBIAN_FRONTEND=noninteractive timeout "$APT_TIMEOUT"
		apt-get -o DPkg::Lock::Timeout=120 -y -q)
	echo "build.sh: installing $* (log: $log)" >&2
	if as_root "${apt[@]}" install "$@" >"$log" 2>&1; then
		rm -f "$log"
		return 0
	fi
	echo "build.sh: apt-get install $* failed; running apt-get update and retrying" >&2
	if as_root "${apt[@]}" update >>"$log" 2>&1 &&
		as_root "${apt[@]}" install "$@" >>"$log" 2>&1; then
		rm -f "$log"
		return 0
	fi
	tail -n 15 "$log" >&2
	return 1
}

missing=()

if ! command -v gcc >/dev/null 2>&1; then
	apt_install gcc libc6-dev || true
	command -v gcc >/dev/null 2>&1 ||
		die "gcc not found and could not be installed (Debian package: gcc)"
fi

have_openmpi() {
	command -v oshcc >/dev/null 2>&1 && command -v mpicc >/dev/null 2>&1 &&
		command -v oshrun >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1
}
if ! have_openmpi; then
	apt_install openmpi-bin libopenmpi-dev || true
fi
for c in oshcc oshrun mpicc mpirun; do
	command -v "$c" >/dev/null 2>&1 || missing+=("$c")
done

# build NAME SOURCE COMPILER [FLAGS...]: compile SRC/SOURCE into OUT/NAME when
# it is out of date, replacing the binary atomically.
build() {
	local name=$1 src=$2 cc=$3
	shift 3
	local bin=$OUT/$name
	if [ -x "$bin" ] && [ "$bin" -nt "$SRC/$src" ] && [ "$bin" -nt "$SRC/peers_common.h" ] &&
		[ "$bin" -nt "$HERE/build.sh" ]; then
		return 0
	fi
	echo "build.sh: $cc -o $bin $src" >&2
	"$cc" -std=gnu11 -O2 -Wall -o "$bin.tmp.$$" "$SRC/$src" "$@" ||
		{ rm -f "$bin.tmp.$$"; die "compiling $src with $cc failed"; }
	mv -f "$bin.tmp.$$" "$bin"
}

build memcpy_bench memcpy_bench.c gcc
build cacheline_pingpong cacheline_pingpong.c gcc -pthread

if command -v oshcc >/dev/null 2>&1; then
	build osh_bench osh_bench.c oshcc
fi
if command -v mpicc >/dev/null 2>&1; then
	build mpi_bench mpi_bench.c mpicc
fi
# symcc links against the libsymheap beside it (an rpath to its directory):
# rebuild whenever symcc is newer than the binary (a new make build) or is
# another tree's symcc than the one that built it (the stamp beside it), so
# that the binary never runs a library of another checkout.
if command -v symcc >/dev/null 2>&1; then
	symcc_path=$(readlink -f "$(command -v symcc)")
	stamp=$OUT/osh_bench_symheap.symcc
	if [ -x "$OUT/osh_bench_symheap" ] && { [ "$symcc_path" -nt "$OUT/osh_bench_symheap" ] ||
		[ "$(cat "$stamp" 2>/dev/null)" != "$symcc_path" ]; }; then
		rm -f "$OUT/osh_bench_symheap"
	fi
	build osh_bench_symheap osh_bench.c symcc
	printf '%s\n' "$symcc_path" >"$stamp.tmp.$$" && mv -f "$stamp.tmp.$$" "$stamp"
fi

if [ ${#missing[@]} -gt 0 ]; then
	die "missing ${missing[*]} (Debian packages openmpi-bin libopenmpi-dev); built only memcpy_bench and cacheline_pingpong in $OUT"
fi
exit 0
