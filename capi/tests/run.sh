#!/usr/bin/env bash
# capi/tests/run.sh BIN [GROUP...] - the C library's tests (make test-c).
#
# Builds every capi/tests/t_*.c with BIN/symcc, runs each under BIN/shrun
# on 2, 3 and 4 PEs with the default allocator and with buddy, then runs
# t_err's misuse cases and t_bounds' edges and checks their exit status
# and message, and that no job left a segment in /dev/shm. Exits 1 if
# anything failed.
#
# GROUPs pick a part (all of them without): exports, suites (the t_*
# programs on 2-4 PEs and the runtime's modes), errors (t_err), bounds
# (t_bounds: every PE and size bound of the fast path), stat. The Go test
# capi/tests/ctest runs groups by name, for the mutants of
# internal/mutate/mutants.txt.
set -uo pipefail
BIN=${1:?usage: run.sh BIN [GROUP...]}
shift
groups=" $* "
want() { [ "$groups" = "  " ] || [[ $groups == *" $1 "* ]]; }
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=$(mktemp -d "${TMPDIR:-/tmp}/symheap-ctest.XXXXXX")
fail=0
export SHMEM_SYMMETRIC_SIZE=${SHMEM_SYMMETRIC_SIZE:-32m} SYMHEAP_SHARED_SIZE=${SYMHEAP_SHARED_SIZE:-4m}

command -v gcc >/dev/null 2>&1 || command -v cc >/dev/null 2>&1 ||
	{ echo "run.sh: no C compiler (make capi installs gcc as root)" >&2; exit 1; }
[ -x "$BIN/symcc" ] && [ -f "$BIN/libsymheap.so" ] ||
	{ echo "run.sh: $BIN/symcc or $BIN/libsymheap.so missing: run make build" >&2; exit 1; }

# Every job's segment is named after its shrun's pid (symheap-UID-jPID-...):
# those of our jobs must all be gone at the end. Other jobs of this user
# may run meanwhile; their segments are not looked at.
pids=()
leftovers() {
	local p
	for p in "${pids[@]}"; do
		ls /dev/shm 2>/dev/null | grep "^symheap-$(id -u)-j$p-" || true
	done
}
cleanup() {
	local s
	for s in $(leftovers); do rm -f "/dev/shm/$s"; done
	rm -rf "$OUT"
}
trap cleanup EXIT

# The shared library exports exactly the routines the headers declare
# (capi/libsymheap.map): no internal C helper or cgo glue that a
# program's own symbol could clash with or interpose.
ROOT=$(cd "$HERE/../.." && pwd)
if want exports && command -v nm >/dev/null 2>&1; then
	sed -e ':a' -e '/,$/{N;s/\n\s*/ /;ba' -e '}' "$ROOT/include/shmem.h" "$ROOT/include/shmemx.h" |
		grep -E '^[a-z_ A-Z0-9*]+\b_?[a-z_0-9]+\([^;]*\)( __attribute__\(\([a-z]+\)\))?;$' |
		sed -E 's/^[a-z_ A-Z0-9*]*\b(_?[a-z_0-9]+)\(.*$/\1/' | sort -u >"$OUT/declared"
	nm -D --defined-only "$BIN/libsymheap.so" | awk '{print $3}' | sort -u >"$OUT/exported"
	if [ "$(wc -l <"$OUT/declared")" -lt 1000 ]; then
		echo "FAIL exports: found only $(wc -l <"$OUT/declared") prototypes in the headers (the pattern is wrong)"; fail=1
	elif ! diff -q "$OUT/declared" "$OUT/exported" >/dev/null; then
		echo "FAIL exports: libsymheap.so exports other than what the headers declare (< declared only, > exported only):"
		diff "$OUT/declared" "$OUT/exported" | grep '^[<>]' | head -20; fail=1
	else
		echo "ok   exports: $(wc -l <"$OUT/exported") routines, the headers' exactly"
	fi
fi

for src in "$HERE"/t_*.c; do
	t=$(basename "$src" .c)
	case $t in
	t_err) want errors || continue ;;
	t_bounds) want bounds || continue ;;
	*) want suites || continue ;;
	esac
	"$BIN/symcc" -std=gnu11 -O2 -Wall -Werror -pthread -o "$OUT/$t" "$src" || { echo "FAIL build $t"; fail=1; continue; }
done
# The static library too, for one program; and a non-PIE executable
# (gcc's default here is PIE), whose static data lie at the same address
# in every PE and hold copy relocations of libc's data.
if want suites; then
	"$BIN/symcc" --symheap-static -std=gnu11 -O2 -o "$OUT/t_rma_static" "$HERE/t_rma.c" || { echo "FAIL build t_rma_static"; fail=1; }
	"$BIN/symcc" -std=gnu11 -O2 -no-pie -o "$OUT/t_sync_nopie" "$HERE/t_sync.c" || { echo "FAIL build t_sync_nopie"; fail=1; }
fi

# job ENV... -- SHRUN-ARGS...: one job under shrun (its own timeout ends
# it), recording shrun's pid; returns the job's exit status.
job() {
	local env=()
	while [ "$1" != -- ]; do env+=("$1"); shift; done
	shift
	env "${env[@]}" "$BIN/shrun" --timeout 100s "$@" >"$OUT/out" 2>"$OUT/err" &
	local p=$!
	pids+=("$p")
	wait "$p"
}

run() { # run NAME NP ALLOC ARGS...: the job's exit status
	local name=$1 np=$2 alloc=$3
	shift 3
	job SYMHEAP_ALLOCATOR="$alloc" -- -n "$np" "$OUT/$name" "$@"
}

for t in t_rma t_amo t_sync t_coll t_mem t_thread t_zero t_any t_rma_static t_sync_nopie; do
	want suites || break
	[ -x "$OUT/$t" ] || continue
	for alloc in "" buddy; do
		for np in 2 3 4; do
			if run "$t" "$np" "$alloc"; then
				echo "ok   $t -n $np ${alloc:-default}"
			else
				echo "FAIL $t -n $np ${alloc:-default} (status $?)"
				sed 's/^/    /' "$OUT/out" "$OUT/err" | head -20
				fail=1
			fi
		done
	done
done

# The runtime's other modes: offset translation, and protected mode (other
# PEs' heaps read-only but through the write alias).
for mode in SYMHEAP_OFFSET_MODE=1 SYMHEAP_PROTECT=1; do
	want suites || break
	if job "$mode" -- -n 3 "$OUT/t_rma"; then
		echo "ok   t_rma -n 3 $mode"
	else
		echo "FAIL t_rma -n 3 $mode (status $?)"
		sed 's/^/    /' "$OUT/out" "$OUT/err" | head -20
		fail=1
	fi
done

# expect_of PROG NP STATUS PATTERN ARGS...: PROG ARGS on NP PEs ends with
# STATUS and, when PATTERN is not empty, its stderr has a line matching it
# that says "symheap:" exactly once.
expect_of() {
	local prog=$1 np=$2 want=$3 pat=$4
	shift 4
	run "$prog" "$np" "" "$@"
	local got=$?
	local ok=1
	[ "$got" -eq "$want" ] || ok=0
	if [ -n "$pat" ]; then
		local line
		line=$(grep -E -- "$pat" "$OUT/err" | head -1)
		[ -n "$line" ] || ok=0
		[ "$(grep -o 'symheap:' <<<"$line" | wc -l)" -eq 1 ] || ok=0
	fi
	if [ $ok = 1 ]; then
		echo "ok   $prog $*: status $got"
	else
		echo "FAIL $prog $*: status $got (want $want), stdout and stderr:"
		sed 's/^/    /' "$OUT/out" "$OUT/err" | head -10
		fail=1
	fi
}

# expect CASE NP STATUS PATTERN: t_err CASE (expect_of).
expect() { expect_of t_err "$2" "$3" "$4" "$1"; }

if want errors; then
expect pe 2 1 'symheap: PE 0: shmem_long_p: PE 7 does not exist \(the job has 2 PEs, 0 to 1\)'
expect notsym 2 1 'shmem_long_put: 8 bytes at 0x[0-9a-f]+ are not symmetric'
expect align 2 1 'shmem_int_atomic_add: the variable at 0x[0-9a-f]+ is not aligned'
expect clearlock 2 1 'shmem_clear_lock: the lock at 0x[0-9a-f]+ is not held'
expect relock 2 1 'shmem_set_lock: the lock at 0x[0-9a-f]+ is already held by this thread'
expect cmp 2 1 'shmem_long_wait_until: comparison 42 is none of SHMEM_CMP_EQ'
expect toobig 2 1 'shmem_putmem: 67108864 bytes at 0x[0-9a-f]+ run past the end'
expect noinit 2 1 'symheap: shmem_long_p: called before shmem_init'
expect doublefree 2 1 'symheap: Free: tlsf: free of offset 0x[0-9a-f]+: not a live block \(double free'
expect diverge 2 1 'symheap: collective allocation diverged: PE [01] call #[0-9]+ Free\(offset 0x[0-9a-f]+\); but PE [01] call #[0-9]+ Free\(offset 0x[0-9a-f]+\): PEs made different'
expect mallocbarrier 3 1 '(Barrier \(call #[0-9]+\) on PE [12] met Malloc of 64 B|Malloc of 64 B \(call #[0-9]+\) on PE 0 met Barrier) \(call #[0-9]+\) on PE [0-2]: PEs made different collective calls'
expect gexit0 3 0 ''
expect nofinalize 2 0 ''
expect gexit 3 3 ''
if [ "$(grep -c 'flushed before the exit' "$OUT/out")" -ne 3 ]; then
	echo "FAIL t_err gexit: stdout not flushed by shmem_global_exit:"
	sed 's/^/    /' "$OUT/out"
	fail=1
fi
fi # errors

# The fast path's bounds (t_bounds.c). First the edges that are valid, on
# 2 to 4 PEs and in the runtime's other modes; then every bound: a target
# PE of -1, n and n+1 on each path (put, get, AMO, put with signal, on the
# heap and on static data) must end the job with "PE X does not exist",
# not a crash; and the first byte past the end of the heap and of the
# static data, and a range that straddles either end, with an error that
# names the call.
if want bounds; then
	for np in 2 3 4; do
		if run t_bounds "$np" ""; then
			echo "ok   t_bounds -n $np (valid edges)"
		else
			echo "FAIL t_bounds -n $np (valid edges; status $?)"
			sed 's/^/    /' "$OUT/out" "$OUT/err" | head -20
			fail=1
		fi
	done
	for mode in SYMHEAP_OFFSET_MODE=1 SYMHEAP_PROTECT=1; do
		if job "$mode" -- -n 3 "$OUT/t_bounds"; then
			echo "ok   t_bounds -n 3 $mode (valid edges)"
		else
			echo "FAIL t_bounds -n 3 $mode (valid edges; status $?)"
			sed 's/^/    /' "$OUT/out" "$OUT/err" | head -20
			fail=1
		fi
	done
	declare -A fn=([p]=shmem_long_p [putmem]=shmem_putmem [put]=shmem_long_put [nbi]=shmem_putmem_nbi
		[iput]=shmem_long_iput [g]=shmem_long_g [getmem]=shmem_getmem [get]=shmem_long_get
		[iget]=shmem_long_iget [fadd]=shmem_long_atomic_fetch_add [fetch]=shmem_long_atomic_fetch
		[cswap]=shmem_long_atomic_compare_swap [set]=shmem_long_atomic_set [signal]=shmem_putmem_signal
		[wait]=shmem_long_wait_until [waitall]=shmem_long_wait_until_all)
	# bounds_pe OP PE: on 2 PEs, PE is -1, n (2) or n+1 (3).
	bounds_pe() {
		local op=$1 pe=$2 num
		case $pe in n) num=2 ;; n+1) num=3 ;; *) num=$pe ;; esac
		expect_of t_bounds 2 1 "symheap: PE 0: ${fn[${op#static-}]}: PE $num does not exist \(the job has 2 PEs, 0 to 1\)" pe "$op" "$pe"
	}
	for pe in -1 n n+1; do
		for op in p putmem g getmem fadd fetch signal static-p static-g static-fadd static-signal; do
			bounds_pe "$op" "$pe"
		done
	done
	for op in nbi iput iget cswap set; do
		bounds_pe "$op" n
	done
	# bounds_size OP WHERE
	bounds_size() {
		expect_of t_bounds 2 1 "symheap: PE 0: ${fn[$1]}: [0-9]+ bytes at 0x[0-9a-f]+ (are not symmetric|run past the end)" size "$1" "$2"
	}
	for op in p getmem fadd wait waitall; do
		bounds_size "$op" heap-past
		bounds_size "$op" static-past
	done
	for op in putmem put iput getmem get iget signal waitall; do
		bounds_size "$op" heap-straddle
		bounds_size "$op" static-straddle
	done
fi

# symheap stat sees a C job and the puts, gets and atomics its fast path
# counts (in C, in the PE's counters of the segment): the --wide table
# has a column for each.
if ! want stat; then
	:
elif "$BIN/symcc" -std=gnu11 -O2 -o "$OUT/stat_job" "$HERE/stat_job.c"; then
	"$BIN/shrun" --timeout 100s -n 2 "$OUT/stat_job" "$OUT/stat_done" >"$OUT/stat_out" 2>&1 &
	sp=$!
	pids+=("$sp")
	table=""
	for _ in $(seq 100); do
		jid=$(ls /dev/shm 2>/dev/null | grep "^symheap-$(id -u)-j$sp-" | head -1)
		if [ -n "$jid" ]; then
			table=$("$BIN/symheap" stat --wide "$jid" 2>&1)
			# Both PE rows show PUTS GETS ATOMICS 1000 1000 1000 once the
			# loops are done.
			[ "$(grep -cE '^ +[01] .* 1000 +1000 +1000 ' <<<"$table")" = 2 ] && break
		fi
		sleep 0.1
	done
	touch "$OUT/stat_done"
	wait "$sp"
	st=$?
	if [ "$(grep -cE '^ +[01] .* 1000 +1000 +1000 ' <<<"$table")" = 2 ] && grep -q 'PUTS  GETS  ATOMICS' <<<"$table" && [ $st = 0 ]; then
		echo "ok   symheap stat of a C job: 1000 puts, gets and atomics on each PE"
	else
		echo "FAIL symheap stat of a C job (job status $st):"
		sed 's/^/    /' <<<"$table" "$OUT/stat_out" | head -20
		fail=1
	fi
else
	echo "FAIL build stat_job"; fail=1
fi

left=$(leftovers)
if [ -n "$left" ]; then
	echo "FAIL segments left in /dev/shm (removed now):"
	sed 's/^/    /' <<<"$left"
	fail=1
fi
if [ $fail = 0 ]; then
	echo "test-c: all C tests passed"
else
	echo "test-c: FAILED"
fi
exit $fail
