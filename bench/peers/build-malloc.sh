#!/usr/bin/env bash
# Builds the C malloc peers of alloc/bench_test.go (BenchmarkPeerMalloc):
# bench/peers/csrc/malloc_bench.c linked three ways, into DIR (default
# bench/peers/bin, git-ignored):
#
#   malloc_bench_glibc     the C library's malloc
#   malloc_bench_jemalloc  -ljemalloc   (Debian: libjemalloc-dev)
#   malloc_bench_mimalloc  -lmimalloc   (Debian: libmimalloc-dev)
#
# Missing packages are installed with apt-get (only when missing; apt-get
# update is run first if an install fails). A peer whose library cannot be
# had is skipped with a message; the script fails only if nothing was built.
set -u
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-$here/bin}
mkdir -p "$dir"
src=$here/csrc/malloc_bench.c
cc=${CC:-gcc}
cflags="-O2 -std=c11 -D_POSIX_C_SOURCE=200809L"

if ! command -v "$cc" >/dev/null 2>&1; then
	echo "build-malloc: no C compiler ($cc); install gcc" >&2
	exit 1
fi

missing=()
for pkg in libjemalloc-dev libmimalloc-dev; do
	dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
	sudo=""
	[ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && sudo="sudo -n"
	echo "build-malloc: installing ${missing[*]}" >&2
	if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >&2; then
		DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq >&2 &&
			DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >&2 ||
			echo "build-malloc: could not install ${missing[*]}" >&2
	fi
fi

built=0
build() { # name, extra link flags
	local out=$dir/malloc_bench_$1
	if [ -x "$out" ] && [ "$out" -nt "$src" ] && [ "$out" -nt "$0" ]; then
		built=$((built + 1))
		return
	fi
	if $cc $cflags -o "$out.tmp" "$src" $2 2>"$dir/build-$1.log"; then
		mv "$out.tmp" "$out"
		built=$((built + 1))
	else
		rm -f "$out.tmp"
		echo "build-malloc: $1 not built (see $dir/build-$1.log)" >&2
	fi
}
build glibc ""
build jemalloc "-ljemalloc"
build mimalloc "-lmimalloc"
echo "build-malloc: $built peer(s) in $dir" >&2
[ "$built" -gt 0 ]
