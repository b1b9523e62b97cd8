#!/usr/bin/env bash
# bench/peers/build-cc.sh - install a C compiler (gcc, libc6-dev) from
# Debian's packages when none is in PATH: libsymheap and its tests need one.
# Needs root or password-less sudo; says what to do otherwise.
set -euo pipefail
command -v gcc >/dev/null 2>&1 && exit 0
as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo -n "$@"
	else return 126; fi
}
command -v apt-get >/dev/null 2>&1 || { echo "build-cc.sh: gcc is missing and apt-get is not available: install a C compiler (gcc)" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
as_root apt-get -o DPkg::Lock::Timeout=120 -y -q install gcc libc6-dev >/dev/null 2>&1 ||
	{ as_root apt-get -o DPkg::Lock::Timeout=120 -q update >/dev/null 2>&1 &&
	  as_root apt-get -o DPkg::Lock::Timeout=120 -y -q install gcc libc6-dev >/dev/null 2>&1; } ||
	{ echo "build-cc.sh: gcc is missing and could not be installed (run as root: apt-get install gcc libc6-dev)" >&2; exit 1; }
command -v gcc >/dev/null 2>&1 || { echo "build-cc.sh: gcc still not in PATH after installing it" >&2; exit 1; }
