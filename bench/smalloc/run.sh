#!/usr/bin/env bash
# bench/smalloc/run.sh BIN [ROUNDS] [ITERS] - docs/bench/shared-malloc.md's
# table: bench/smalloc/smalloc.c built with BIN/symcc, run in alternating
# rounds under glibc, jemalloc and mimalloc (LD_PRELOAD of Debian's
# libjemalloc2 and libmimalloc2.0, installed with apt-get when missing)
# and symheap's shared malloc (SYMHEAP_SHARED_MALLOC=1, a lone PE).
# Prints two markdown tables: per test, each allocator's median ns per
# malloc/free pair, its spread (min-max over the rounds, in % of the
# median) and its ratio to glibc's median; then the best round of each
# (the least disturbed by other load) and its ratio to glibc's best.
set -euo pipefail
BIN=${1:?usage: run.sh BIN [ROUNDS] [ITERS]}
ROUNDS=${2:-9}
ITERS=${3:-1000000}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LIBDIR=/usr/lib/x86_64-linux-gnu
JE=$LIBDIR/libjemalloc.so.2
MI=$LIBDIR/libmimalloc.so.2
if [ ! -e "$JE" ] || [ ! -e "$MI" ]; then
	apt-get install -y libjemalloc2 libmimalloc2.0 >/dev/null
fi
OUT=$(mktemp -d "${TMPDIR:-/tmp}/smalloc-bench.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
"$BIN/symcc" -std=gnu11 -O2 -pthread -o "$OUT/smalloc" "$HERE/smalloc.c"
export SYMHEAP_SHARED_SIZE=64m
for r in $(seq "$ROUNDS"); do
	for a in glibc jemalloc mimalloc symheap; do
		case $a in
		glibc) env=() ;;
		jemalloc) env=(LD_PRELOAD="$JE") ;;
		mimalloc) env=(LD_PRELOAD="$MI") ;;
		symheap) env=(SYMHEAP_SHARED_MALLOC=1) ;;
		esac
		env "${env[@]}" "$OUT/smalloc" "$ITERS" | sed "s/^/$a /" >>"$OUT/raw"
	done
done
awk -v rounds="$ROUNDS" '
function median(a, n,   i, j, t) {
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
}
{ k = $2 " " $3; v[$1, k, ++n[$1, k]] = $4; if (!(k in seen)) { seen[k] = 1; order[++nk] = k } }
END {
	split("glibc jemalloc mimalloc symheap", al, " ")
	printf "| test | threads |"
	for (i = 1; i <= 4; i++) printf " %s ns (spread) | ×glibc |", al[i]
	printf "\n|---|---|"
	for (i = 1; i <= 4; i++) printf "---|---|"
	printf "\n"
	for (t = 1; t <= nk; t++) {
		k = order[t]; split(k, kk, " ")
		printf "| %s | %s |", kk[1], kk[2]
		for (i = 1; i <= 4; i++) {
			m = n[al[i], k]; lo = 1e18; hi = 0
			for (j = 1; j <= m; j++) { x[j] = v[al[i], k, j]; if (x[j] < lo) lo = x[j]; if (x[j] > hi) hi = x[j] }
			md = median(x, m); med[i] = md; best[t, i] = lo
			printf " %.1f (%.0f%%) | %.2f |", md, 100 * (hi - lo) / md, md / med[1]
		}
		printf "\n"
	}
	printf "\nBest round:\n\n| test | threads |"
	for (i = 1; i <= 4; i++) printf " %s ns | ×glibc |", al[i]
	printf "\n|---|---|"
	for (i = 1; i <= 4; i++) printf "---|---|"
	printf "\n"
	for (t = 1; t <= nk; t++) {
		split(order[t], kk, " ")
		printf "| %s | %s |", kk[1], kk[2]
		for (i = 1; i <= 4; i++) printf " %.1f | %.2f |", best[t, i], best[t, i] / best[t, 1]
		printf "\n"
	}
}' "$OUT/raw"
