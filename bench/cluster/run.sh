#!/usr/bin/env bash
# bench/cluster/run.sh [ROUNDS] - symheap across two fake hosts (one PE
# per host, UCX over TCP) beside Open MPI's OpenSHMEM and MPI on the same
# fake hosts and transport, and ucx_perftest (the transport's floor),
# alternating harnesses within each round. Prints every measurement
# ("<harness> <metric> <size> <value>"), then per figure the median, min
# and max over the rounds and symheap's ratio to each peer.
set -euo pipefail
ROUNDS=${1:-5}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=$ROOT/.bin
mkdir -p "$BIN"
cd "$ROOT"
bash bench/peers/build.sh "$ROOT/bench/peers/bin" >/dev/null
go build -tags ucx -o "$BIN/cluster-bench" ./bench/cluster
go build -o "$BIN/fakehosts" ./internal/cluster/cmd/fakehosts
P=$ROOT/bench/peers/bin
FH=("$BIN/fakehosts" -hosts 2 -per-host 1 -q=false)
export UCX_TLS=tcp,self
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT

perftest() { # test size iterations -> "ucx <metric> <size> <value>"
	local t=$1 s=$2 n=$3 out
	ucx_perftest -t "$t" -s "$s" -n "$n" >/dev/null 2>&1 &
	local srv=$!
	sleep 0.3
	out=$(ucx_perftest 127.0.0.1 -t "$t" -s "$s" -n "$n" 2>/dev/null | awk '/^Final:/{print}')
	wait $srv || true
	case $t in
	# Final: iterations, latency 50%ile avg overall (us), bandwidth avg overall (MB/s), ...
	# The overall average ($5), as the harnesses' figures are (the
	# loop's time over its calls), not the median ($3).
	ucp_put_lat) echo "$out" | awk -v s="$s" '{print "ucx put_lat " s " " 2*$5}' ;; # one-way -> round trip, as put+quiet
	ucp_put_bw) echo "$out" | awk -v s="$s" '{print "ucx put_bw " s " " $7*1.048576}' ;; # MiB/s -> MB/s
	ucp_fadd) echo "$out" | awk -v s="$s" '{print "ucx fadd_lat " s " " $5}' ;;  # a round trip, as fetch-add
	tag_lat) echo "$out" | awk -v s="$s" '{print "ucx pingpong_lat " s " " $5}' ;; # one way: half a round trip
	esac
}

# MPI's own TCP transport (fakehosts' default: pml ob1, btl tcp), and
# MPI over UCX's TCP transport (Open MPI leaves TCP to ob1 unless
# pml_ucx_tls and pml_ucx_devices say otherwise).
MPIUCX=(-mpi=--mca -mpi=pml -mpi=ucx -mpi=--mca -mpi=pml_ucx_tls -mpi=any -mpi=--mca -mpi=pml_ucx_devices -mpi=any)
for r in $(seq "$ROUNDS"); do
	echo "# round $r, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
	"${FH[@]}" -x SHMEM_SYMMETRIC_SIZE=96m "$BIN/cluster-bench" -r 3 2>/dev/null | grep '^sym ' || true
	# The same without UCX's peer error handling (SYMHEAP_UCX_PEER_ERRORS=0).
	"${FH[@]}" -x SHMEM_SYMMETRIC_SIZE=96m -x SYMHEAP_UCX_PEER_ERRORS=0 "$BIN/cluster-bench" -r 3 2>/dev/null | grep '^sym ' | sed 's/^sym /symnp /' || true
	"${FH[@]}" -mpi=--mca -mpi=opal_common_ucx_opal_mem_hooks -mpi=0 -x SHMEM_SYMMETRIC_SIZE=96m \
		"$P/osh_bench" -r 3 -s 8 put_lat get_lat fadd_lat barrier_lat malloc_lat 2>/dev/null | grep '^osh ' || true
	"${FH[@]}" -mpi=--mca -mpi=opal_common_ucx_opal_mem_hooks -mpi=0 -x SHMEM_SYMMETRIC_SIZE=96m \
		"$P/osh_bench" -r 3 -s 8388608 put_bw 2>/dev/null | grep '^osh ' || true
	"${FH[@]}" "$P/mpi_bench" -r 3 -s 8 pingpong_lat barrier_lat 2>/dev/null | grep '^mpi ' || true
	"${FH[@]}" "$P/mpi_bench" -r 3 -s 1048576 stream_bw 2>/dev/null | grep '^mpi ' || true
	"${FH[@]}" "${MPIUCX[@]}" "$P/mpi_bench" -r 3 -s 8 pingpong_lat barrier_lat 2>/dev/null | grep '^mpi ' | sed 's/^mpi /mpiu /' || true
	"${FH[@]}" "${MPIUCX[@]}" "$P/mpi_bench" -r 3 -s 1048576 stream_bw 2>/dev/null | grep '^mpi ' | sed 's/^mpi /mpiu /' || true
	perftest ucp_put_lat 8 20000 || true
	perftest ucp_put_bw 8388608 200 || true
	perftest ucp_fadd 8 20000 || true
	perftest tag_lat 8 20000 || true
done | tee "$raw"

echo
echo "# median (min..max) over $ROUNDS rounds; CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), model $(grep -m1 '^model\s' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), $(nproc) cores; load now $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# sym: symheap; symnp: symheap with SYMHEAP_UCX_PEER_ERRORS=0; osh: OSHMEM (UCX); mpi: MPI over its own TCP transport (ob1); mpiu: MPI over UCX; ucx: ucx_perftest"
awk '
{ k=$2" "$3; v[$1" "k]=v[$1" "k]" "$4; keys[k]=1 }
# sorted splits s into a, in increasing order, and returns the count.
function sorted(s, a,   n, i, j, t) {
	n=split(s, a, " "); for (i=1;i<=n;i++) for (j=i+1;j<=n;j++) if (a[j]<a[i]) {t=a[i];a[i]=a[j];a[j]=t}
	return n
}
function median(s,   a, n) { n=sorted(s, a); if (n==0) return -1; return (n%2) ? a[(n+1)/2] : (a[n/2]+a[n/2+1])/2 }
function stats(s,   a, n) { n=sorted(s, a); if (n==0) return "-"; return sprintf("%.2f (%.2f..%.2f)", median(s), a[1], a[n]) }
function ratio(a, b) { return (a>0&&b>0)?sprintf("%.2f",a/b):"-" }
END {
	printf "%-18s %-26s %-26s %-26s %-26s %-26s %-26s %s\n", "figure", "sym", "symnp", "osh", "mpi", "mpiu", "ucx", "sym/osh sym/mpi sym/mpiu sym/ucx symnp/mpi symnp/mpiu"
	for (k in keys) {
		s=median(v["sym "k]); n=median(v["symnp "k]); o=median(v["osh "k]); p=median(v["mpi "k]); q=median(v["mpiu "k]); u=median(v["ucx "k])
		printf "%-18s %-26s %-26s %-26s %-26s %-26s %-26s %s %s %s %s %s %s\n", k, stats(v["sym "k]), stats(v["symnp "k]), stats(v["osh "k]), stats(v["mpi "k]), stats(v["mpiu "k]), stats(v["ucx "k]), ratio(s,o), ratio(s,p), ratio(s,q), ratio(s,u), ratio(n,p), ratio(n,q)
	}
}' "$raw" | sort
