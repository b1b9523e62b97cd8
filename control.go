package symheap

import "sync/atomic"

// control is the fixed part of a PE's control block, the first bytes of
// the block (the rest is carved by the layers: core.RegisterArea). Every field is
// touched by several processes and only through sync/atomic.
//
// It is also the C library's definition of these words: capi/gen lays it
// out, with allocSlot, allocRecord and signal, as struct shmemi_control
// in capi/shmemi_formats.h (registered in cabi.go). After a change here,
// run go generate ./capi/gen; make build fails until then.
type control struct {
	// Global words, used in PE 0's block only.
	exitCode atomic.Uint32 // exitSet|code once some PE called GlobalExit

	// This PE's exit watcher.
	exitWord     atomic.Uint32 // futex word, bumped to wake the watcher
	exitSleepers atomic.Uint32
	watchStop    atomic.Uint32 // set by this PE's Close to end its watcher

	// Global (PE 0's block): the watchers that have run their
	// before-exit step (cabi.BeforeExit) on a GlobalExit.
	exitReady atomic.Uint32

	// Multi-node jobs (internal/far): set by this node's leader when its
	// cross-node barrier found a PE lost, to 2 + that PE's rank (1: not
	// known which); loaded by the node's PEs after the barrier.
	farLost atomic.Int64

	// What this PE runs (cabi.LangGo, cabi.LangC) and, for a C PE, the
	// window of its program's static data (the C library's static.c:
	// pid, memfd descriptor, size): stored by the PE before Init's
	// barrier, loaded by every PE of the node after it (cabi_unsafe.go,
	// "Go and C PEs in one job").
	lang       atomic.Uint32
	_          uint32
	staticPid  atomic.Int64
	staticFd   atomic.Int64
	staticSize atomic.Uint64

	// This PE's wake-up channel for point-to-point synchronisation
	// (wait.go), on a cache line of its own: writers load sig.sleepers
	// after every Put and atomic, so the line must stay read-mostly.
	sig signal

	// Global: the number of processes asleep on any PE's signal (PE 0's
	// block only), so that Quiet looks at every PE's sleepers only when
	// someone sleeps.
	sleeping atomic.Uint32
	_        [124]byte // with the next line: CPUs prefetch lines in 128-byte pairs

	// The records of this PE's latest collective allocation phases,
	// exchanged and compared by every PE (symalloc.go): phase k writes
	// slot k%2. Each record has a 128-byte pair of lines to itself, so
	// that the other PEs' polling of a record (and the adjacent-line
	// prefetcher) never pulls in a line this PE writes for another
	// purpose.
	allocRec [2]allocSlot

	// The node's first PE's block: the word its first two PEs bounce to
	// measure the transfer time at Init (probe.go), alone in a 128-byte
	// pair of lines.
	probe atomic.Uint64
	_     [120]byte
}

// signal is a futex word and the count of processes asleep on it. A
// waiter on this PE's symmetric heap (WaitUntil, or SetLock on PE 0)
// sleeps on word; any PE that changes this PE's heap through Put or an
// atomic bumps word and wakes it when sleepers is non-zero (see wait.go
// for the protocol and its proof).
type signal struct {
	word     atomic.Uint32 // futex word; bumped by writers to this heap
	sleepers atomic.Uint32 // waiters between announcing a sleep and leaving
	_        [56]byte      // own cache line
}

// The layers' areas follow the fixed part (core.ControlSize bytes), each
// registered by its layer (core.RegisterArea).

// allocSlot is an allocRecord alone in a 128-byte pair of cache lines.
type allocSlot struct {
	allocRecord
	_ [64]byte
}

// allocRecord describes one collective allocation call on one PE.
// Its owner writes the fields, then publishes them with the seq store;
// the other PEs read them once they have seen seq (symalloc.go).
type allocRecord struct {
	seq   atomic.Uint64 // phase number, from 1 (a call has one or two phases)
	call  atomic.Uint64 // call number, from 1
	kind  atomic.Uint64 // callMalloc, callFree, ...
	size  atomic.Uint64 // bytes asked for
	align atomic.Uint64 // alignment | hints<<32
	in    atomic.Uint64 // offset passed in (Free, Realloc), or noOff
	out   atomic.Uint64 // resulting offset, or noOff on failure (or before the local part)
	hints atomic.Uint64 // the hints in full (align holds only their low 32 bits)
}
