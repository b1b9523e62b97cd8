// Package memcopy copies blocks of memory at the speed of the C library's
// memcpy where Go's copy falls short of it: blocks of 129 bytes to 1 KiB on
// CPUs with 64-byte vector registers, on Intel CPUs with fast string
// moves large blocks at odd destinations and blocks larger than one
// thread's share of the cache, and on AMD CPUs with 64-byte vector
// registers blocks from 1 MiB to a quarter of the L3.
//
// # Small blocks
//
// For 33 bytes to 2 KiB the runtime's memmove uses 16-byte SSE moves (up
// to 256 bytes) or a loop of 32-byte AVX moves; glibc's memcpy, on CPUs
// where it takes them, 64-byte AVX-512 moves, and copies a block of 512
// bytes to 2 KiB in the first-level cache much faster (measured:
// docs/bench/design-measurements.md, «internal/memcopy, small blocks,
// glibc»). Move does the same (memcopy_amd64.s) when glibc's
// rule for them holds (vecRule): AVX-512 F and VL, and on Intel AVX-VNNI,
// from Small (129 bytes) to VecMax (1 KiB). The bounds are where copies
// that cross cores, the ones that matter here, stop gaining (Intel Xeon
// of the Sapphire Rapids class, docs/bench/floors.md; measured:
// docs/bench/design-measurements.md, «internal/memcopy, small blocks»
// and its lower and upper bounds):
//
//   - below 129 bytes, a message's payload into the ring (which the
//     receiver has just read) and out of it took longer with 64-byte
//     moves (64 and 96 bytes) or the same (32, 48), though a copy in one
//     core's cache ran faster;
//   - from 2 KiB, where the runtime takes REP MOVSQ, writing a buffer that
//     the other core then reads took longer with 64-byte stores (2000 B
//     to 16 KiB), and so did send/recv of 3-6 KiB, though again a copy in
//     one core's cache ran faster up to 16 KiB;
//   - in between, both kinds of copy gain or tie.
//
// A copy whose destination stays with the copying core (a Get, a
// receive, a collective's copy into the caller's dst: the caller reads
// what it fetched) has no such cost, and BetterLocal takes
// the vector copy for it up to LocalMax (16 KiB, where glibc's memcpy
// also moves from vectors to REP MOVSB on these CPUs). A Get of 4 KiB in
// one core's cache took less time than with REP MOVSQ, and 1-16 KiB that
// PE 1 had just written took as long or a little less. A Put stays with
// Better: the target reads what it is given, and a Put of 2-16 KiB that
// the target copied out at once took longer with 64-byte stores
// (measured: docs/bench/design-measurements.md, «internal/memcopy, Get
// and Put of 1-16 KiB»).
//
// # Large blocks
//
// Go's copy is the runtime's memmove. On amd64 it copies a block of 2 KiB
// or more with REP MOVSQ when the CPU prefers string moves (Intel with ERMS
// and FSRM) and the destination is 16-byte aligned, at every size;
// otherwise with AVX loads and stores, and from 1 MiB up with
// non-temporal (streaming) stores, which bypass the caches. glibc's memcpy
// on the same CPUs uses REP MOVSB at those sizes, whatever the alignment,
// and streams only blocks larger than its non-temporal threshold (about
// three quarters of one thread's share of the shared cache). So they
// differ twice:
//
//   - a destination that is not 16-byte aligned (a Put into s[3:], a
//     message into a buffer at an odd offset), 1 MiB or more, that would
//     fit the cache: Go's copy writes to memory where glibc's writes to
//     the cache, and falls well short of glibc's bandwidth (measured:
//     docs/bench/design-measurements.md, «internal/memcopy, large blocks:
//     REP MOVSB»);
//   - an aligned destination above the threshold: glibc streams, and Go's
//     REP MOVSQ reads every line of the destination into the cache before
//     writing it, evicting what was there (docs/bench/p2p.md).
//
// The two are at parity in between.
//
// On AMD CPUs glibc 2.36 stops REP MOVSB at the size of the second-level
// cache (its x86_rep_movsb_stop_threshold: string moves run slowly above
// it there) and copies larger blocks, up to its non-temporal threshold,
// with a loop of four 64-byte loads and aligned 64-byte stores that go
// through the caches; the runtime's memmove streams from 1 MiB. A Put of
// 1 and 4 MiB, which fits the cache, then went to memory where glibc's
// stayed in the cache, and fell short of glibc's bandwidth; from 8 MiB
// the runtime's streaming was the faster (docs/bench/p2p.md, «Large Puts
// on AMD»). glibc's threshold there is a quarter of the L3 as the CPU
// reports it, which on a VM may be the whole socket's (127 MiB), where
// a core has only its complex's (32 MiB).
//
// # The rule
//
// Move copies n bytes. It takes the vector copy when the CPU passes
// vecRule, Small <= n <= LocalMax and the blocks do not overlap: called
// alone, it makes BetterLocal's choice, and a caller whose destination
// another core reads next asks Better first (which stops at VecMax). On
// an AMD CPU that passes vecRule it takes the vector copy also for
// Large <= n < a quarter of the L3 (amdStreamFrom: glibc's non-temporal
// threshold from CPUID leaf 0x80000006, at most a quarter of one core
// complex's L3), between blocks that do not overlap: glibc's loop for
// those sizes. For
// n >= Large (1 MiB, the size from which the runtime streams) on a CPU
// that prefers string moves (GenuineIntel with ERMS and FSRM, read with
// CPUID: the runtime's own test for REP MOVS), between blocks that do not
// overlap (memmove handles overlap), it takes
//
//  1. streaming stores (ntMove: 16-byte loads, MOVNTDQ stores of whole
//     lines, SFENCE at the end), whatever the alignment, from glibc's
//     non-temporal threshold on (probe computes it from CPUID leaf 4 as
//     glibc 2.36 does);
//  2. below it, for a destination that is not 16-byte aligned (aligned,
//     the runtime uses REP MOVSQ already), REP MOVSB: like glibc, the
//     first 64 bytes with the runtime's memmove and the rest from the
//     destination's first 64-byte boundary, where string moves run
//     faster.
//
// Every other copy is the runtime's memmove.
//
// Everywhere else (arm64, other vendors, older CPUs, and under the race
// detector, which sees copy's accesses but not an assembly routine's) Move
// is copy.
//
// # Memory order
//
// The completion rules of symheap (Put, Quiet, Fence, Barrier; the root
// package's rma.go) assume that the stores of a copy are ordered before
// the caller's later stores, as ordinary stores are under x86-TSO. The
// vector copy's stores are ordinary (VMOVDQU64 to write-back memory). REP
// MOVSB keeps that: the stores within one string operation may complete
// out of order among themselves, but not out of order with the stores
// before or after the instruction (Intel SDM vol. 3A, 9.2.4.1 "Memory
// Ordering Model for String Operations on Write-back Memory"). The
// streaming stores, of the runtime's loops and of ntMove, are weakly
// ordered, and both end with SFENCE, which orders them before every later
// store. So a copy by Move, by any path, is complete in program order when
// it returns, and a flag stored after it is seen after the data. A new
// path with streaming stores must end with SFENCE before it returns.
package memcopy

// Large is the smallest copy Move may take REP MOVSB or streaming stores
// for: the size from which the runtime's memmove streams on amd64
// (memmove_amd64.s).
const Large = 1 << 20

// Small and VecMax bound the sizes Move may copy with 64-byte vector
// registers (see the package doc): from 129 bytes, where the runtime's
// memmove takes 16 moves of 16 bytes, to 1 KiB.
const (
	Small  = 129
	VecMax = 1 << 10
)

// LocalMax bounds the vector copy for copies whose destination stays
// with the copying core (BetterLocal).
const LocalMax = 16 << 10

// Better reports whether Move copies n bytes better than the runtime's
// memmove on this CPU: the vector copy's sizes (Small to VecMax, where the
// CPU has it) and from Large. Callers with a copy of their own for the
// other sizes (core.CopyBytes, which the compiler inlines) call Move only
// then. Its first test is against a constant, so that a small copy pays
// no more. It is generic in the element type of its caller, which it does
// not use, as core's fast-path primitives are: an API function, generic,
// is compiled in the user's package, and the compiler inlines there the
// generic functions of any package but the plain ones only of packages
// the user's package imports, which an internal one never is (a plain
// Better was a call in every Put of 129 bytes or more).
func Better[T any](n uint64) bool {
	return n >= Small && (n >= Large || useVec && n <= VecMax)
}

// BetterLocal is Better for a copy whose destination the copying core
// reads or keeps next (a Get, a receive buffer, a collective's dst): it
// takes the vector copy up to LocalMax.
func BetterLocal[T any](n uint64) bool {
	return n >= Small && (n >= Large || useVec && n <= LocalMax)
}

// Bytes copies min(len(dst), len(src)) bytes from src to dst and returns
// the count, as copy does: with Move where it is Better, else with copy.
func Bytes(dst, src []byte) int {
	n := min(len(dst), len(src))
	if !Better[byte](uint64(n)) {
		return copy(dst, src)
	}
	moveBytes(dst, src, n)
	return n
}

// BytesLocal is Bytes for a destination the copying core reads or keeps
// next (a receive buffer): with Move where it is BetterLocal.
func BytesLocal(dst, src []byte) int {
	n := min(len(dst), len(src))
	if !BetterLocal[byte](uint64(n)) {
		return copy(dst, src)
	}
	moveBytes(dst, src, n)
	return n
}

// Rule reports the rule's inputs on this CPU, for tests and symheap
// bench: whether the large-block rule applies (REP MOVSB for odd
// destinations, streaming stores), and the size from which Move streams.
func Rule() (rep bool, from uint64) { return useRep, uint64(streamFrom) }

// Vector reports whether Move copies Small to VecMax bytes (LocalMax for
// BetterLocal's callers) with 64-byte vector registers on this CPU.
func Vector() bool { return useVec }

// VectorBelow reports the size below which Move copies blocks from Large
// on with 64-byte vector registers too (AMD: a quarter of the L3), or 0
// where it does not.
func VectorBelow() uint64 { return uint64(vecBelow) }
