package rcache

// The queue of pending invalidations.
//
// # Why a queue
//
// A release event arrives on whatever thread released the memory: inside a
// heap's free (holding the heap's lock), or on the userfaultfd reader (while
// a thread waits in munmap). The callback may not deregister (slow, and it
// may free memory and re-enter the monitor) and should not take the cache's
// mutex (the releasing thread may be inside the cache already, for instance
// in a registrar that freed memory). So the callback only appends the range
// here, under a mutex of its own held for a few instructions, and sets
// pending. Every cache call that looks entries up first drains the queue
// under the cache's mutex, which marks every overlapping entry invalid before
// the lookup: an entry is never returned after its release was published.
//
// # Bounded
//
// The queue holds at most max ranges, in a buffer allocated once, so that
// push never allocates. When it is full, compact sorts it, joins ranges that
// overlap or touch, and then joins neighbours across the smallest gaps until
// at most max/2 ranges remain. Joining only widens ranges: more entries may
// be invalidated than strictly needed, never fewer.
//
// # Paths
//
//	push (callback):  lock; compact if full; append; pending = true; unlock
//	take (cache, under Cache.mu): lock; swap the buffer with an empty spare;
//	                  pending = false; unlock
//
// pending is read without the lock on the cache's hot path: a push that has
// returned has stored true, so a lookup that starts after the release
// returned sees it.

import (
	"slices"
	"sync"
	"sync/atomic"
)

type invQueue struct {
	// pending is true while buf is not empty. Stored under mu, loaded
	// without it by every cache call.
	pending atomic.Bool

	mu      sync.Mutex
	buf     []Range   // pending ranges; cap == max (guarded by mu)
	gaps    []uintptr // compact's scratch; cap == max (guarded by mu)
	max     int
	events  uint64 // ranges pushed (guarded by mu)
	compact uint64 // times the queue was full (guarded by mu)
}

func newInvQueue(max int) *invQueue {
	if max < 4 {
		max = 4
	}
	return &invQueue{buf: make([]Range, 0, max), gaps: make([]uintptr, 0, max), max: max}
}

// push records r. It never allocates and never blocks for long.
func (q *invQueue) push(r Range) {
	if r.End <= r.Start {
		return
	}
	q.mu.Lock()
	q.events++
	if len(q.buf) == q.max {
		q.compactLocked()
	}
	q.buf = append(q.buf, r)
	// Pairs with the Load at the start of every cache call.
	q.pending.Store(true)
	q.mu.Unlock()
}

// take returns the pending ranges and leaves spare (emptied) in their place.
func (q *invQueue) take(spare []Range) []Range {
	q.mu.Lock()
	b := q.buf
	q.buf = spare[:0]
	q.pending.Store(false)
	q.mu.Unlock()
	return b
}

// compactLocked sorts and joins the buffer down to at most max/2 ranges.
func (q *invQueue) compactLocked() {
	q.compact++
	b := q.buf
	slices.SortFunc(b, func(x, y Range) int {
		switch {
		case x.Start < y.Start:
			return -1
		case x.Start > y.Start:
			return 1
		}
		return 0
	})
	// Join ranges that overlap or touch.
	b = joinWithin(b, 0)
	if len(b) > q.max/2 {
		// The gap that must be bridged: the k-th smallest, where k is
		// how many ranges must disappear.
		g := q.gaps[:0]
		for i := 1; i < len(b); i++ {
			g = append(g, b[i].Start-b[i-1].End)
		}
		slices.Sort(g)
		b = joinWithin(b, g[len(b)-q.max/2-1])
		q.gaps = g[:0]
	}
	q.buf = b
}

// joinWithin joins, in place, neighbours of the sorted slice b separated by
// at most gap bytes, and returns the shortened slice.
func joinWithin(b []Range, gap uintptr) []Range {
	if len(b) == 0 {
		return b
	}
	out := b[:1]
	for _, r := range b[1:] {
		last := &out[len(out)-1]
		if r.Start <= last.End || r.Start-last.End <= gap {
			if r.End > last.End {
				last.End = r.End
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

func (q *invQueue) counts() (events, compactions uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.events, q.compact
}
