// Package memcopy copies large blocks of memory at the speed of the C
// library's memcpy where Go's copy falls short of it.
//
// # What it fixes
//
// Go's copy is the runtime's memmove. On amd64 it copies a block of 2 KiB
// or more with REP MOVSQ when the CPU prefers string moves (Intel with ERMS
// and FSRM) and the destination is 16-byte aligned; otherwise with AVX
// loads and stores, and from 1 MiB up with non-temporal (streaming)
// stores, which bypass the caches. glibc's memcpy on the same CPUs uses
// REP MOVSB at those sizes, whatever the alignment, and streams only
// blocks larger than about three quarters of the last-level cache's share
// per thread. So for a destination that is not 16-byte aligned (a Put
// into s[3:], a message into a buffer at an odd offset), 1 MiB or more,
// that would fit the cache, Go's copy writes to memory where glibc's
// writes to the cache: measured at 0.54-0.81x glibc's bandwidth on the
// machine of docs/bench/floors.md, and at parity when the destination is
// aligned or the data are not in cache.
//
// # The rule
//
// Move copies n bytes. It takes REP MOVSB when all of these hold, and the
// runtime's memmove otherwise:
//
//  1. the CPU prefers string moves: GenuineIntel with ERMS and FSRM
//     (CPUID), the runtime's own test for REP MOVS;
//  2. n >= Large (1 MiB), the size from which the runtime streams, and
//     n < the streaming threshold glibc uses, three quarters of the
//     last-level cache's share per thread (CPUID leaf 4): above it both
//     stream, and streaming is right;
//  3. the destination is not 16-byte aligned (aligned, the runtime uses
//     REP MOVSQ already);
//  4. the blocks do not overlap (memmove handles overlap).
//
// Like glibc, it then copies the first 64 bytes with the runtime's
// memmove and the rest with REP MOVSB from the destination's first 64-byte
// boundary: string moves run faster into an aligned destination.
//
// Everywhere else (arm64, other vendors, older CPUs, and under the race
// detector, which sees copy's accesses but not an assembly routine's) Move
// is copy.
//
// # Memory order
//
// The completion rules of symheap (Put, Quiet, Fence, Barrier; the root
// package's rma.go) assume that the stores of a copy are ordered before
// the caller's later stores, as ordinary stores are under x86-TSO. REP
// MOVSB keeps that: the stores within one string operation may complete
// out of order among themselves, but not out of order with the stores
// before or after the instruction (Intel SDM vol. 3A, 9.2.4.1 "Memory
// Ordering Model for String Operations on Write-back Memory"). The
// runtime's non-temporal loops, which are weakly ordered, end with SFENCE.
// So a copy by Move, by either path, is complete in program order when it
// returns, and a flag stored after it is seen after the data. This
// package issues no non-temporal store of its own; a path that does must
// end with SFENCE before it returns.
package memcopy

// Large is the smallest copy Move may take REP MOVSB for: the size from
// which the runtime's memmove streams on amd64 (memmove_amd64.s).
const Large = 1 << 20

// Bytes copies min(len(dst), len(src)) bytes from src to dst and returns
// the count, as copy does.
func Bytes(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n < Large {
		return copy(dst, src)
	}
	moveBytes(dst, src, n)
	return n
}

// Rule reports the rule's inputs on this CPU, for tests and symheap info:
// whether REP MOVSB may be used, and below which size.
func Rule() (rep bool, below uint64) { return useRep, uint64(repBelow) }
