#!/usr/bin/env bash
# scripts/load.sh [N] [-- COMMAND [ARGS...]] - competing load for tests.
#
# Starts N busy processes per CPU (default 2: a load of about 2 x the
# CPUs on top of whatever runs already), prints their pids (on stderr, so
# that COMMAND's output stays its own), and stops them when it exits: at
# the end of COMMAND when one is given (the exit status is COMMAND's),
# else on Ctrl-C, SIGTERM or SIGHUP. The busy processes are plain shell
# loops at the script's own priority, as the tests they compete with. If
# the script itself is killed with SIGKILL, each loop still ends within
# about half a second of CPU, once it finds the script's process gone.
#
# make test-loaded runs make test under it (2 per CPU). Any check can run
# under load directly:
#
#   bash scripts/load.sh 5 -- make test                  load ~10 on 2 CPUs
#   bash scripts/load.sh 5 -- go test -run TestPESuite .
#   bash scripts/load.sh 5 -- make chaos CHAOS_RUNS=50
#   bash scripts/load.sh 3 &  ...  kill %1                load in the background
set -euo pipefail

per=2
if [ $# -gt 0 ] && [ "$1" != -- ]; then
	per=$1
	shift
fi
case $per in
'' | *[!0-9]*) echo "usage: $0 [N] [-- COMMAND [ARGS...]]  (N: busy processes per CPU)" >&2; exit 2 ;;
esac
if [ $# -gt 0 ]; then
	[ "$1" = -- ] || { echo "usage: $0 [N] [-- COMMAND [ARGS...]]" >&2; exit 2; }
	shift
fi

cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc)
n=$((per * cpus))
me=$$
pids=()

stop() {
	trap - EXIT INT TERM HUP
	if [ ${#pids[@]} -gt 0 ]; then
		kill "${pids[@]}" 2>/dev/null || true
		wait "${pids[@]}" 2>/dev/null || true
		echo "load.sh: stopped ${#pids[@]} busy processes" >&2
	fi
}
trap stop EXIT
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM
trap 'stop; exit 129' HUP

for ((i = 0; i < n; i++)); do
	# A tight loop that checks every 2^17 turns (about half a second of
	# CPU) whether this script still runs (kill -0), so that it does not
	# outlive a SIGKILLed parent by more than that.
	bash -c 'trap "exit 0" TERM; while kill -0 '"$me"' 2>/dev/null; do for ((j = 0; j < 131072; j++)); do :; done; done' &
	pids+=($!)
done
echo "load.sh: $n busy processes ($per per CPU, $cpus CPUs): pids ${pids[*]}" >&2

if [ $# -gt 0 ]; then
	set +e
	"$@"
	st=$?
	set -e
	exit $st
fi
# No command: hold the load until a signal (taken between two sleeps).
while :; do
	sleep 1
done
