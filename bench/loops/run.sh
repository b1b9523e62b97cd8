#!/bin/sh
# Runs the plain loops of bench/loops as ten 2-PE jobs in a row, then
# once after a message-rate loop in the same job, and prints each
# figure's fastest, median and slowest job and slowest/fastest.
#
#	bench/loops/run.sh [jobs] [calls]
#
# LOOPS_FLAGS adds flags to every job (LOOPS_FLAGS=-spread: a core per PE
# on a busy machine).
set -eu
jobs=${1:-10}
calls=${2:-20000}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd "$root" && go build -o "$bin/loops" ./bench/loops && go build -o "$bin/shrun" ./cmd/shrun)
echo "# bench/loops/run.sh: $jobs jobs of $calls calls each, 2 PEs; $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'); $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)${LOOPS_FLAGS:+; flags $LOOPS_FLAGS}"
out=$bin/out
: >"$out"
i=0
while [ "$i" -lt "$jobs" ]; do
	"$bin/shrun" -n 2 "$bin/loops" -calls "$calls" ${LOOPS_FLAGS:-} | sed 's/^/plain /' >>"$out"
	i=$((i + 1))
done
"$bin/shrun" -n 2 "$bin/loops" -calls "$calls" -after-rate ${LOOPS_FLAGS:-} | sed 's/^/after-rate /' >>"$out"
awk '
$1 == "plain" { v[$2] = v[$2] " " $3; n[$2]++ }
$1 == "after-rate" { a[$2] = $3 }
END {
	printf "%-8s %10s %10s %10s %12s %10s\n", "loop", "fastest", "median", "slowest", "after-rate", "slow/fast"
	for (k in v) {
		m = split(substr(v[k], 2), x, " ")
		for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (x[j] + 0 < x[i] + 0) { t = x[i]; x[i] = x[j]; x[j] = t }
		hi = x[m]; if (a[k] + 0 > hi + 0) hi = a[k]
		printf "%-8s %10.3f %10.3f %10.3f %12.3f %10.2f\n", k, x[1], x[int((m + 1) / 2)], x[m], a[k], hi / x[1]
	}
}' "$out"
echo "# figures in us per call on PE 0; slow/fast includes the after-rate job"
