package far

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/msg"
	"github.com/symheap/symheap/internal/shmsync"
	"github.com/symheap/symheap/internal/transport"
)

// Messages in a job on several nodes.
//
// A message between two PEs of one node goes through the node's
// shared-memory queues (internal/msg), as in a job on one node; one
// between nodes is a tagged message of the transport whose tag carries the sender's
// rank and the user's tag (msgTag). Each pair's messages take one path,
// so they stay in order.
//
// A receive from a PE of this node goes straight to internal/msg, unless
// receives matched lazily (below) are pending: it then queues behind
// them, so that a receive posted earlier still gets the first message
// both match. Every other receive (from a PE of another node, or from
// msg.AnySource) is matched lazily, in the order receives were posted: it
// waits in the PE's queue (msgs.pending) until the matching step runs,
// which looks for each pending receive in turn at the messages that
// arrived and wait for a receive: the transport's queue (TryProbe) and this node's
// (msg.Layer.Peek, after one msg.Layer.Poll per step). The step runs in
// every wait or test of any request, a send's included (test), and in
// the progress goroutine (progressMatch) whenever no wait or test has run
// it for matchQuiet: MPI's progress rule. A message above UCX's
// rendezvous threshold completes at its sender only once its receiver has
// posted its receive; were the step run by the receiving PE's message
// calls only, a PE that posts a receive and then enters a barrier, a
// team's Sync or a collective allocation, and a PE of another node that
// sends it 64 KiB and then enters the same, would wait for each other for
// good. A match posts a
// receive for exactly that message's sender and tag, which takes the
// earliest such message: the one probed (a receive posted to
// internal/msg directly would have taken it on arrival). A message longer
// than the receive's buffer completes the receive with errs.ErrTruncated and
// stays queued for a later receive. Sends are posted at once. Lock order:
// msgs.mu, then internal/msg's lock (Poll, Peek, Irecv).
//
// the transport's queue may grow between two probes of one step: the progress
// goroutine (or another goroutine of the program) may progress the
// worker whenever the step does not hold it. A message that a later
// receive finds may then have arrived after an earlier receive that
// could take it too looked and found nothing; taken, it would go to the
// later receive and the earlier one would get a later message (a window
// of receives from one sender with one tag got them out of order). So
// the step leaves such a message for the next step, where the earlier
// receive looks first, and the later receive counts as having found
// nothing. This node's queue needs no such care: it moves only at the
// step's Poll.
//
// A request of this path is a *msg.Request that internal/msg never sees, a
// key in the PE's table (msgs.reqs), as teams made by Split are. The
// table holds its keys weakly: an entry goes when the program drops its
// request (a cleanup), since Wait may be called again on a finished one.
//
// Threads. The matching step may run in any goroutine of the program
// that waits or tests, and in the progress goroutine, and it writes the
// state of the receives it matches; so every field of a request that
// changes after it is made is guarded by msgs.mu, which every reader
// holds (test hands its waiter a snapshot, msgState).

// msgs is a PE's message state in a job on several nodes.
type msgs struct {
	mu      sync.Mutex
	reqs    map[weak.Pointer[msg.Request]]*msgReq // guarded by mu
	pending []*msgReq                             // receives not matched yet, in posting order; guarded by mu
	// local are the receives matched to a message of this node
	// (msgReq.local) that were not found complete yet; guarded by mu.
	// internal/msg has no progress thread: a large message's copy (and
	// its acknowledgement, which its sender waits for) moves only in the
	// receiving PE's calls, so the progress goroutine tests them
	// (progressMatch) while the PE is elsewhere.
	local []*msgReq
	// lastMatch is when the matching step last ran (now), stored by
	// the step under mu and loaded without it by the progress goroutine,
	// which stays out while waits and tests match (progressMatch).
	lastMatch atomic.Int64
}

// msgReq is one send or receive. The first four fields are set when it
// is made, before any other goroutine can see it, and only read after;
// the rest are guarded by msgs.mu (see Threads above).
type msgReq struct {
	send      bool
	peer, tag int  // destination or source asked for (msg.AnySource), tag or msg.AnyTag
	blocking  bool // made by Send or Recv: not in the table

	buf      []byte        // nil once released
	u        transport.Req // the transport's send, or the receive the step posted
	from     int           // a receive's matched sender, for the liveness of its wait
	done     bool          // st and err are final
	st       msg.Status    //
	err      error         //
	local    *msg.Request  // the receive posted to internal/msg for a message of this node it matched
	released bool          // Release was called (the collector frees the handle)
}

// msgState is a snapshot of a request, taken under msgs.mu for a
// waiter, which acts on it without the lock.
type msgState struct {
	done  bool
	st    msg.Status
	err   error
	local *msg.Request // as msgReq.local, while not done
	from  int
}

// onNode reports whether PE p runs on this PE's node.
func (l *Layer) onNode(p int) bool {
	return p >= 0 && p < l.npes && l.nodeOf[p] == l.nodeOf[l.rank]
}

func (l *Layer) msgCheck(op string, peer, tag int, any bool) error {
	if err := l.rt.Check(); err != nil {
		return err
	}
	if peer < 0 || peer >= l.npes {
		if !(any && peer == msg.AnySource) {
			return fmt.Errorf("symheap: %s: %w", op, l.rt.CheckPE(peer))
		}
	}
	if tag < 0 || tag > msg.MaxTag {
		if !(any && tag == msg.AnyTag) {
			return fmt.Errorf("symheap: %s with tag %d: %w (tags are 0 to %d%s)", op, tag, errs.ErrBadArg, msg.MaxTag, map[bool]string{true: ", or msg.AnyTag", false: ""}[any])
		}
	}
	return nil
}

// isend starts a send (of any size) to dest. A blocking one (Send)
// that the transport completed at once returns nil: nothing to wait for.
func (l *Layer) isend(buf []byte, dest, tag int, blocking bool) (*msgReq, error) {
	if err := l.msgCheck("Isend", dest, tag, false); err != nil {
		return nil, err
	}
	u, err := l.net.SendNB(dest, msgTag(l.rank, tag), buf)
	if err != nil {
		return nil, fmt.Errorf("symheap: Isend of %d bytes to PE %d: %w", len(buf), dest, l.peerLost(dest, err))
	}
	if u == nil && blocking {
		return nil, nil // complete at once: Send has nothing to wait for
	}
	return &msgReq{send: true, buf: buf, peer: dest, tag: tag, u: u, from: dest, blocking: blocking, done: u == nil,
		st: msg.Status{Source: l.rank, Tag: tag, Count: len(buf)}}, nil
}

// irecv queues a receive. The progress goroutine may match it from the
// moment it is queued.
func (l *Layer) irecv(buf []byte, source, tag int, blocking bool) (*msgReq, error) {
	if err := l.msgCheck("Irecv", source, tag, true); err != nil {
		return nil, err
	}
	r := &msgReq{buf: buf, peer: source, tag: tag, from: source, blocking: blocking}
	m := &l.msgs
	m.mu.Lock()
	m.pending = append(m.pending, r)
	m.mu.Unlock()
	return r, nil
}

// match is the matching step (see above). Called with m.mu held, from
// any goroutine.
func (l *Layer) match() {
	m := &l.msgs
	m.lastMatch.Store(now())
	// This node's queue: one progress step, then peeks that all see the
	// same queue (UCX's may grow between probes: see the top).
	l.rt.Msg().Poll()
	// The receives that took nothing from the transport's queue in this step (see
	// the top).
	var missedBuf [8]*msgReq
	missed := missedBuf[:0]
	kept := m.pending[:0]
	for _, r := range m.pending {
		if (r.peer == msg.AnySource || l.onNode(r.peer)) && l.matchLocal(r) {
			continue
		}
		if l.onNode(r.peer) {
			kept = append(kept, r)
			continue
		}
		want, mask := msgTag(max(r.peer, 0), max(r.tag, 0)), tagFull
		if r.peer == msg.AnySource {
			mask &^= 0xfffff << 36
		}
		if r.tag == msg.AnyTag {
			mask &^= 1<<36 - 1
		}
		stag, n, ok := l.net.TryProbe(want, mask)
		src, tag := int(stag>>36&0xfffff), int(stag&(1<<36-1))
		if !ok || wantedBy(missed, src, tag) {
			kept, missed = append(kept, r), append(missed, r)
			continue
		}
		if !r.found(msg.Status{Source: src, Tag: tag, Count: n}) {
			continue
		}
		u, err := l.net.RecvNB(r.buf[:n], stag)
		if err != nil {
			r.done, r.err = true, fmt.Errorf("symheap: Recv from PE %d: %w", src, l.peerLost(src, err))
			continue
		}
		r.u = u
	}
	clear(m.pending[len(kept):])
	m.pending = kept
}

// wantedBy reports whether one of missed, receives posted before the one
// matching now that took nothing from the transport's queue in this step, would
// take a message from src with tag: it is theirs first (see the top).
func wantedBy(missed []*msgReq, src, tag int) bool {
	for _, q := range missed {
		if (q.peer == src || q.peer == msg.AnySource) && (q.tag == tag || q.tag == msg.AnyTag) {
			return true
		}
	}
	return false
}

// found records the message a pending receive matched, and reports
// whether it fits the receive's buffer; if not, the receive ends with
// errs.ErrTruncated and the message stays queued for a later one. Called with
// msgs.mu held.
func (r *msgReq) found(st msg.Status) bool {
	r.from, r.st = st.Source, st
	if st.Count <= len(r.buf) {
		return true
	}
	r.done = true
	r.err = fmt.Errorf("symheap: Recv from PE %d with tag %d: a message of %d bytes into a buffer of %d: %w", st.Source, st.Tag, st.Count, len(r.buf), errs.ErrTruncated)
	return false
}

// matchLocal looks for a message of this node for the pending receive r
// (from msg.AnySource or a PE of this node) and, if one waits, posts an
// internal/msg receive for exactly its sender and tag, or ends r with
// errs.ErrTruncated if it does not fit (the message stays queued). It reports
// whether r is matched. Called with m.mu held.
func (l *Layer) matchLocal(r *msgReq) bool {
	st, ok := l.rt.Msg().Peek(r.peer, r.tag)
	if !ok {
		return false
	}
	if !r.found(st) {
		return true
	}
	u, err := l.rt.Msg().Irecv(r.buf[:st.Count], st.Source, st.Tag)
	if err != nil {
		r.done, r.err = true, err
		return true
	}
	r.local = u
	m := &l.msgs
	m.local = append(m.local, r)
	return true
}

// test runs the matching step, whatever r is, while receives wait to
// be matched, completes r if it can, and returns its state. A send's
// test matches too: a message above UCX's rendezvous threshold completes
// at its sender only once its receiver has posted its receive, which
// the matching step does. Were only a receive's own wait to match, two
// PEs that each post a receive, send to the other and wait on the send
// first would each wait for the other's matching step. It holds
// msgs.mu throughout, so that r's state moves under it only (the
// progress goroutine matches too); the calls it makes under it (Test of
// the transport's request or of internal/msg's) do not wait, but for the naming of
// a failed request's peer (peerLost), which may look for another node's
// announcement for a moment: the job is broken then.
func (l *Layer) test(r *msgReq) msgState {
	m := &l.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
	if !r.done && len(m.pending) != 0 {
		l.match()
	}
	switch {
	case r.done:
	case r.local != nil:
		if done, st, err := r.local.Test(); done {
			r.done, r.st, r.err = true, st, err
		}
	case r.u != nil:
		// A receive's length is the probed message's (r.st.Count).
		if done, _, err := l.net.Test(r.u, r.from); done {
			r.done = true
			if err != nil {
				what := "Recv from"
				if r.send {
					what = "Send to"
				}
				r.err = fmt.Errorf("symheap: %s PE %d: %w", what, r.from, l.peerLost(r.from, err))
			}
		}
	}
	return r.state()
}

// state is r's snapshot. Called with msgs.mu held.
func (r *msgReq) state() msgState {
	if r.done {
		return msgState{done: true, st: r.st, err: r.err, from: r.from}
	}
	return msgState{local: r.local, from: r.from}
}

// finish ends r with st and err, unless it ended meanwhile (a test in
// another goroutine, which saw the same outcome), takes it out of the
// queue if it was still waiting to be matched, and returns its outcome.
func (l *Layer) finish(r *msgReq, st msg.Status, err error) (msg.Status, error) {
	m := &l.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
	if !r.done {
		r.done, r.st, r.err = true, st, err
		l.unqueue(r)
	}
	return r.st, r.err
}

// wait waits until r is complete: matching, progressing, and checking
// every SleepSlice or so that the peer (any PE, for msg.AnySource) lives.
func (l *Layer) wait(r *msgReq) (msg.Status, error) {
	lastChecked := time.Now() // the first check after a while, not at once
	// A receive that may match a message of this node polls both queues
	// under the runtime's pacing: the node's messages wake nobody on the
	// transport's event descriptor.
	canLocal := !r.send && (r.peer == msg.AnySource || l.onNode(r.peer))
	pace := shmsync.Pace()
	for {
		s := l.test(r)
		if s.done {
			return s.st, s.err
		}
		if s.local != nil {
			// Matched to a message of this node: internal/msg's own wait,
			// without the matching lock.
			st, err := s.local.Wait()
			return l.finish(r, st, err)
		}
		if time.Since(lastChecked) > 50*time.Millisecond {
			lastChecked = time.Now()
			var err error
			if s.from >= 0 {
				err = l.pinger(s.from)()
			} else {
				err = l.rt.PeerLost()
			}
			if err == nil {
				err = l.net.Check(s.from)
			}
			if err != nil {
				return l.finish(r, msg.Status{}, fmt.Errorf("symheap: waiting for a message: %w", l.peerLost(s.from, err)))
			}
		}
		switch {
		case canLocal:
			if r.peer == msg.AnySource {
				l.net.Progress()
			}
			pace.Step()
		case !r.send && l.recvAlone(r):
		default:
			l.net.WaitEvent()
		}
	}
}

// progressMatch is the progress goroutine's matching step (far_net.go),
// run after each of its wake-ups: it matches the receives that wait to be
// matched, and moves those matched to a message of this node (see
// msgs.local), while the PE waits in anything but a message call, or
// runs its own code (see the top). It reports whether receives are still
// under way, so that the goroutine comes back within busySleep rather
// than sleeping on the worker: the node's messages do not wake it.
//
// It stays out of the matching while waits and tests match (one ran the
// step within matchQuiet), and never waits for the matching lock: its
// holder is a wait or test, which matches, or a receive being queued,
// which the goroutine's next round finds.
func (l *Layer) progressMatch() (busy bool) {
	m := &l.msgs
	if !m.mu.TryLock() {
		return true
	}
	defer m.mu.Unlock()
	if len(m.pending) != 0 && time.Duration(now()-m.lastMatch.Load()) >= matchQuiet {
		// What woke the goroutine (a rendezvous request, an eager
		// message) is in the transport's queue once the transport has progressed.
		l.net.Progress()
		l.match()
	}
	kept := m.local[:0]
	for _, r := range m.local {
		if !r.done {
			// internal/msg's Test makes its progress (the copy, the
			// acknowledgement) and does not wait.
			if done, st, err := r.local.Test(); done {
				r.done, r.st, r.err = true, st, err
			} else {
				kept = append(kept, r)
			}
		}
	}
	clear(m.local[len(kept):])
	m.local = kept
	return len(m.pending) != 0 || len(m.local) != 0
}

// busySleep is how long the progress goroutine sleeps while receives are
// under way (progressMatch): a receive from this node, or one a message
// of this node may match, moves without a wake-up from the worker.
const busySleep = time.Millisecond

// matchQuiet is how recently a wait or test must have run the matching
// step for the progress goroutine to leave it to them.
const matchQuiet = 2 * time.Millisecond

// now is the monotonic time since the package started, in ns.
func now() int64 { return int64(time.Since(clock)) }

var clock = time.Now()

// FastMax is the largest message recvAlone takes: well inside UCX's
// eager messages over TCP, which are complete on arrival (a rendezvous
// would hold the wait in C until the sender answers).
const FastMax = 1 << 10

// recvAlone is the wait of a receive from a PE of another node that is
// the only one waiting to be matched: the matching step, the wait for the
// message and the receive, for a message of at most FastMax bytes that
// fits, in one call into C of up to a millisecond. It holds the matching
// lock meanwhile, so no other receive is posted or matched before r
// (which keeps posting order); any other message is left to the matching
// step. It reports whether it took the place of a wait: false when r is
// not such a receive.
func (l *Layer) recvAlone(r *msgReq) bool {
	m := &l.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
	if r.done || r.u != nil || r.local != nil || r.peer < 0 || l.onNode(r.peer) || len(m.pending) != 1 || m.pending[0] != r {
		return false
	}
	st, got, err := l.recvMatch(r.buf, r.peer, r.tag)
	switch {
	case err != nil:
		r.done, r.err = true, err
	case got:
		r.found(st)
		r.done = true
	default:
		// Nothing within the slice, or a message for the matching step,
		// which runs next: no wait.
		return true
	}
	clear(m.pending)
	m.pending = m.pending[:0]
	return true
}

// recvMatch is the one call into C of recvAlone and recvNow: it waits up
// to a slice for a message from source (of another node) with tag (or
// msg.AnyTag) and receives it if it is at most FastMax bytes and fits buf.
// got is false when nothing came, or what came is left for the matching
// step. Called with msgs.mu held.
func (l *Layer) recvMatch(buf []byte, source, tag int) (st msg.Status, got bool, err error) {
	want, mask := msgTag(source, max(tag, 0)), tagFull
	if tag == msg.AnyTag {
		mask &^= 1<<36 - 1
	}
	out, stag, n, err := l.net.RecvMatch(buf, want, mask, FastMax, source)
	if err != nil {
		return msg.Status{}, false, fmt.Errorf("symheap: Recv from PE %d: %w", source, l.peerLost(source, err))
	}
	if out != transport.MatchReceived {
		return msg.Status{}, false, nil
	}
	return msg.Status{Source: source, Tag: int(stag & (1<<36 - 1)), Count: n}, true, nil
}

// unqueue removes a receive that ended without a match from the queue.
// Called with msgs.mu held.
func (l *Layer) unqueue(r *msgReq) {
	m := &l.msgs
	for i, q := range m.pending {
		if q == r {
			m.pending = append(m.pending[:i], m.pending[i+1:]...)
			return
		}
	}
}

// register makes r a *msg.Request.
func (l *Layer) register(r *msgReq) *msg.Request {
	h := new(msg.Request)
	m := &l.msgs
	m.mu.Lock()
	if m.reqs == nil {
		m.reqs = map[weak.Pointer[msg.Request]]*msgReq{}
	}
	key := weak.Make(h)
	m.reqs[key] = r
	m.mu.Unlock()
	runtime.AddCleanup(h, func(key weak.Pointer[msg.Request]) {
		m.mu.Lock()
		delete(m.reqs, key)
		m.mu.Unlock()
	}, key)
	return h
}

// Requests returns the number of requests in the table (which holds them
// weakly: an entry goes when the program drops its request and a
// collection runs its cleanup).
func (l *Layer) Requests() int {
	m := &l.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.reqs)
}

// requestOf returns the state of a request of this path; nil if req is
// internal/msg's.
func (l *Layer) requestOf(req *msg.Request) *msgReq {
	if l == nil || req == nil {
		return nil
	}
	m := &l.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reqs[weak.Make(req)]
}

// The API's entry points in a job that spans nodes: Send, Isend, Recv
// and Irecv to and from any PE, and the requests' Wait, Test and Release
// (which report ok false for a request of internal/msg's).

func (l *Layer) Send(buf []byte, dest, tag int) error {
	if l.onNode(dest) {
		return l.rt.Msg().Send(buf, dest, tag)
	}
	r, err := l.isend(buf, dest, tag, true)
	if err != nil || r == nil {
		return err
	}
	_, err = l.wait(r)
	return err
}

func (l *Layer) Isend(buf []byte, dest, tag int) (*msg.Request, error) {
	if l.onNode(dest) {
		r, err := l.rt.Msg().Isend(buf, dest, tag)
		return r, err
	}
	r, err := l.isend(buf, dest, tag, false)
	if err != nil {
		return nil, err
	}
	return l.register(r), nil
}

func (l *Layer) Recv(buf []byte, source, tag int) (msg.Status, error) {
	if l.direct(source) {
		st, err := l.rt.Msg().Recv(buf, source, tag)
		return st, err
	}
	if st, ok, err := l.recvNow(buf, source, tag); ok {
		return st, err
	}
	r, err := l.irecv(buf, source, tag, true)
	if err != nil {
		return msg.Status{}, err
	}
	return l.wait(r)
}

// recvNow is Recv's fast path for a small message from a PE of another
// node when no receive waits to be matched: recvAlone's wait and receive,
// without a request. It reports false, having done nothing, when the
// receive is not such a one, or no message fit to take came within
// recvAlone's slice: Recv then queues it and waits as usual.
func (l *Layer) recvNow(buf []byte, source, tag int) (msg.Status, bool, error) {
	if source < 0 || source >= l.npes || l.onNode(source) || tag < 0 || tag > msg.MaxTag || l.rt.Check() != nil {
		return msg.Status{}, false, nil // msg.AnySource, this node, or an error the usual path reports
	}
	m := &l.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.pending) != 0 {
		return msg.Status{}, false, nil
	}
	st, got, err := l.recvMatch(buf, source, tag)
	return st, got || err != nil, err
}

func (l *Layer) Irecv(buf []byte, source, tag int) (*msg.Request, error) {
	if l.direct(source) {
		r, err := l.rt.Msg().Irecv(buf, source, tag)
		return r, err
	}
	r, err := l.irecv(buf, source, tag, false)
	if err != nil {
		return nil, err
	}
	return l.register(r), nil
}

// direct reports whether a receive from source goes straight to
// internal/msg: source is a PE of this node and no receive waits to be
// matched lazily (see the top).
func (l *Layer) direct(source int) bool {
	if !l.onNode(source) {
		return false
	}
	m := &l.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pending) == 0
}

// ReqWait and ReqTest are Request.Wait and Test for this path; ok
// false: the request is internal/msg's.
func (l *Layer) ReqWait(req *msg.Request) (st msg.Status, err error, ok bool) {
	r := l.requestOf(req)
	if r == nil {
		return msg.Status{}, nil, false
	}
	st, err = l.wait(r)
	return st, err, true
}

// ReqRelease is Request.Release for this path: the handle is the
// collector's to free (register), so Release only checks, as internal/msg's
// does, that the request is done and was not released before, and lets
// go of its buffer.
func (l *Layer) ReqRelease(req *msg.Request) (err error, ok bool) {
	r := l.requestOf(req)
	if r == nil {
		return nil, false
	}
	m := &l.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
	if r.released || !r.done {
		return msg.ReleaseRefused(r.released), true
	}
	r.released, r.buf = true, nil
	return nil, true
}

func (l *Layer) ReqTest(req *msg.Request) (done bool, st msg.Status, err error, ok bool) {
	r := l.requestOf(req)
	if r == nil {
		return false, msg.Status{}, nil, false
	}
	s := l.test(r)
	if !s.done {
		l.net.Progress()
		return false, msg.Status{}, nil, true
	}
	return true, s.st, s.err, true
}
