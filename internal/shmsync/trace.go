package shmsync

import (
	"sync/atomic"
	"time"
)

// # Lost wake-ups, counted
//
// A wake-up is lost when a sleeper runs its futex slice out although a
// writer changed what it waits for and finished its wake-up step (Wake,
// Arrive, the root's signal wake-up) while it slept. The sleeper was then
// queued on the futex when the FUTEX_WAKE came, and a working protocol
// wakes it: the kernel dequeues it at the wake, and a sleeper dequeued by
// a wake returns 0 even when its timer fired meanwhile. A slow wake-up is
// not a lost one: on a loaded machine the writer may wait for a core
// between its store and its wake-up step, and the woken sleeper for one
// after it. Timing round trips measures that, and fails on a busy machine;
// so the tests count lost wake-ups instead, from facts that load does not
// move:
//
//   - the sleeper's: how each futex sleep ended (the kernel's ETIMEDOUT or
//     not), and when it began, read from Monotonic before the futex call.
//     The kernel computes the sleep's deadline from the same clock inside
//     the call, so the deadline is no earlier than Start+Slice (Deadline),
//     and its timer never fires before the deadline;
//   - the writer's: the Monotonic time by which its write and its wake-up
//     step had returned, read by the writer after them ("done").
//
// A sleep that timed out although a write it waited for, which its wait
// had not seen when the sleep read its futex word, had finished its
// wake-up step before the sleep's deadline, lost that wake-up (Missed).
// Under a working protocol there are none, at any load. Which write a
// sleep may be charged with is the test's to say: the one its wait waited
// for.
//
// TraceSleeps reports every futex sleep of WaitWord, SleepFenced and
// WaitCount, and of waits elsewhere that report through Traced (alloc's
// Lock), to a function the test sets; with none set a sleep reads no
// clock. The protocol is the same either way.

// Sleep is one futex sleep of a wait, as TraceSleeps reports it.
type Sleep struct {
	Word     *atomic.Uint32 // the futex word slept on
	Start    int64          // Monotonic, read before the futex call
	Slice    time.Duration  // the futex timeout
	TimedOut bool           // the kernel ended it by its timeout (ETIMEDOUT): no wake-up came
	Met      bool           // the wait's condition held after it: the wait ends
	Check    bool           // the wait runs its liveness check next
}

// Deadline is the earliest time (Monotonic) at which s could time out.
func (s Sleep) Deadline() int64 { return s.Start + int64(s.Slice) }

// Missed reports whether s lost the wake-up of a write whose wake-up step
// had returned by done (Monotonic): s timed out although that wake-up came
// before s's deadline. The caller charges s only with a write that s's
// wait waited for and had not seen when s began (see "Lost wake-ups").
func (s Sleep) Missed(done int64) bool { return s.TimedOut && done < s.Deadline() }

// tracer is the function TraceSleeps set, or nil.
var tracer atomic.Pointer[func(Sleep)]

// TraceSleeps makes every futex sleep of this process's waits call f, in
// the sleeping goroutine, after the sleep's condition test and before its
// liveness check; nil stops it. f must not block. It returns the function
// that puts back the tracer set before, which a test defers.
func TraceSleeps(f func(Sleep)) (restore func()) {
	var p *func(Sleep)
	if f != nil {
		p = &f
	}
	old := tracer.Swap(p)
	return func() { tracer.Store(old) }
}

// traceStart returns the tracer and the start of a sleep about to begin:
// nil and 0 when no tracer is set.
func traceStart() (*func(Sleep), int64) {
	t := tracer.Load()
	if t == nil {
		return nil, 0
	}
	return t, Monotonic()
}

// Traced is traceStart for a futex wait outside this package (alloc's
// Lock): the tracer TraceSleeps set, for the wait to report its sleep to
// after the futex call, and the sleep's start (Monotonic, read now, before
// that call); nil and 0, reading no clock, when none is set.
func Traced() (trace func(Sleep), start int64) {
	t, start := traceStart()
	if t == nil {
		return nil, 0
	}
	return *t, start
}
