package tcp

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"github.com/symheap/symheap/internal/errs"
)

// The receive side of tagged messages, as UCX's tag matching:
//
//   - posted receives (Recv, RecvNB, Watch) wait in the order they were
//     posted;
//   - a message that arrives (deliver, from a server goroutine) goes to
//     the earliest posted receive it matches, else to the end of the
//     unexpected queue;
//   - a receive being posted takes the earliest message of the unexpected
//     queue that it matches, else waits;
//   - TryProbe, Probe and RecvMatch search the unexpected queue in
//     arrival order.
//
// Each sender's messages come in over one connection, read by one
// goroutine, so they arrive (and are matched) in the order sent.

// message is an arrived message that no receive has taken yet.
type message struct {
	from int
	tag  uint64
	data []byte
}

// recvReq is a posted receive. Its result fields are written once, under
// queue.mu, before done is closed; a reader that has seen done closed
// (or holds queue.mu) may read them.
type recvReq struct {
	tag, mask uint64
	buf       []byte
	done      chan struct{}
	n         int    // the message's length
	stag      uint64 // the message's tag
	from      int    // its sender
	err       error  // a truncation, or the Net's close
}

// matches reports whether a message tag matches tag under mask.
func matches(stag, tag, mask uint64) bool { return stag&mask == tag&mask }

// queue holds the posted receives and the unexpected messages.
type queue struct {
	mu     sync.Mutex
	msgs   []*message // unexpected, in arrival order; guarded by mu
	posted []*recvReq // in post order; guarded by mu
	watch  *recvReq   // the standing receive of Watch, if any; guarded by mu
	closed bool       // guarded by mu: nothing more is posted or delivered
}

// complete fills r from m and ends it. Called with q.mu held.
func (r *recvReq) complete(m *message) {
	r.stag, r.from, r.n = m.tag, m.from, len(m.data)
	if len(m.data) > len(r.buf) {
		r.err = fmt.Errorf("tcp: a message of %d bytes from peer %d with tag %#x into a buffer of %d: %w",
			len(m.data), m.from, m.tag, len(r.buf), errs.ErrTruncated)
	} else {
		copy(r.buf, m.data)
	}
	close(r.done)
}

// deliver hands an arrived message to the earliest posted receive it
// matches, or queues it. It reports false once the queue is closed.
func (q *queue) deliver(m *message) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	for i, r := range q.posted {
		if matches(m.tag, r.tag, r.mask) {
			q.posted = slices.Delete(q.posted, i, i+1)
			r.complete(m)
			return true
		}
	}
	q.msgs = append(q.msgs, m)
	return true
}

// post posts a receive of a message matching tag under mask into buf.
// It returns nil once the queue is closed.
func (q *queue) post(buf []byte, tag, mask uint64) *recvReq {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.postLocked(buf, tag, mask)
}

// postLocked is post with q.mu held.
func (q *queue) postLocked(buf []byte, tag, mask uint64) *recvReq {
	if q.closed {
		return nil
	}
	r := &recvReq{tag: tag, mask: mask, buf: buf, done: make(chan struct{})}
	if i := q.find(tag, mask); i >= 0 {
		m := q.msgs[i]
		q.msgs = slices.Delete(q.msgs, i, i+1)
		r.complete(m)
		return r
	}
	q.posted = append(q.posted, r)
	return r
}

// cancel takes r back unless it has completed; it reports whether it
// did.
func (q *queue) cancel(r *recvReq) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if i := slices.Index(q.posted, r); i >= 0 {
		q.posted = slices.Delete(q.posted, i, i+1)
		return true
	}
	return false
}

// find returns the index of the earliest unexpected message matching tag
// under mask, or -1. Called with q.mu held.
func (q *queue) find(tag, mask uint64) int {
	for i, m := range q.msgs {
		if matches(m.tag, tag, mask) {
			return i
		}
	}
	return -1
}

// probe reports the earliest unexpected message matching tag under mask.
func (q *queue) probe(tag, mask uint64) (stag uint64, n int, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if i := q.find(tag, mask); i >= 0 {
		return q.msgs[i].tag, len(q.msgs[i].data), true
	}
	return 0, 0, false
}

// take receives the earliest unexpected message matching tag under mask
// into buf if it is at most limit bytes (MatchReceived: 1); one that is
// larger stays queued (MatchOther: 2); none: 0.
func (q *queue) take(buf []byte, tag, mask uint64, limit int) (outcome int, stag uint64, n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	i := q.find(tag, mask)
	if i < 0 {
		return 0, 0, 0
	}
	m := q.msgs[i]
	if len(m.data) > limit {
		return 2, m.tag, len(m.data)
	}
	q.msgs = slices.Delete(q.msgs, i, i+1)
	copy(buf, m.data)
	return 1, m.tag, len(m.data)
}

// setWatch posts the standing receive of one 8-byte announcement,
// replacing an earlier one that has not completed.
func (q *queue) setWatch(tag, mask uint64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.watch != nil {
		if i := slices.Index(q.posted, q.watch); i >= 0 {
			q.posted = slices.Delete(q.posted, i, i+1)
		}
		q.watch = nil
	}
	r := q.postLocked(make([]byte, 8), tag, mask)
	if r == nil {
		return fmt.Errorf("tcp: Watch: %w", errs.ErrClosed)
	}
	q.watch = r
	return nil
}

// watched reports the announcement once it has arrived.
func (q *queue) watched() (uint64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	r := q.watch
	if r == nil {
		return 0, false
	}
	select {
	case <-r.done:
		// A watch ended by close (or by a longer message) announces
		// nothing.
		if r.err != nil {
			return 0, false
		}
		return binary.LittleEndian.Uint64(r.buf), true
	default:
		return 0, false
	}
}

// close ends every posted receive with err (but the watch, which keeps
// what it has) and refuses what comes after.
func (q *queue) close(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for _, r := range q.posted {
		r.err = err
		close(r.done)
	}
	q.posted = nil
	q.msgs = nil
}
