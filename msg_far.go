package symheap

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/symheap/symheap/internal/msg"
	"github.com/symheap/symheap/internal/shmsync"
	"github.com/symheap/symheap/internal/transport"
)

// Messages in a job on several nodes.
//
// A message between two PEs of one node goes through the node's
// shared-memory queues (internal/msg), as in a job on one node; one
// between nodes is a UCX tagged message whose tag carries the sender's
// rank and the user's tag (msgTag). Each pair's messages take one path,
// so they stay in order.
//
// A receive from a PE of this node goes straight to internal/msg, unless
// receives matched lazily (below) are pending: it then queues behind
// them, so that a receive posted earlier still gets the first message
// both match. Every other receive (from a PE of another node, or from
// AnySource) is matched lazily, in the order receives were posted: it
// waits in the PE's queue (farMsgs.pending) until the matching step runs,
// which looks for each pending receive in turn at the messages that
// arrived and wait for a receive: UCX's queue (TryProbe) and this node's
// (msg.Layer.Peek, after one msg.Layer.Poll per step). The step runs in
// every wait or test of any request, a send's included (farTest), and in
// the progress goroutine (progressMatch) whenever no wait or test has run
// it for matchQuiet: MPI's progress rule. A message above UCX's
// rendezvous threshold completes at its sender only once its receiver has
// posted the UCX receive; were the step run by the receiving PE's message
// calls only, a PE that posts a receive and then enters a barrier, a
// team's Sync or a collective allocation, and a PE of another node that
// sends it 64 KiB and then enters the same, would wait for each other for
// good. A match posts a
// receive for exactly that message's sender and tag, which takes the
// earliest such message: the one probed (a receive posted to
// internal/msg directly would have taken it on arrival). A message longer
// than the receive's buffer completes the receive with ErrTruncated and
// stays queued for a later receive. Sends are posted at once. Lock order:
// farMsgs.mu, then internal/msg's lock (Poll, Peek, Irecv).
//
// UCX's queue may grow between two probes of one step: the progress
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
// A request of this path is a *Request that internal/msg never sees, a
// key in the PE's table (farMsgs.reqs), as teams made by Split are. The
// table holds its keys weakly: an entry goes when the program drops its
// request (a cleanup), since Wait may be called again on a finished one.
//
// Threads. The matching step may run in any goroutine of the program
// that waits or tests, and in the progress goroutine, and it writes the
// state of the receives it matches; so every field of a request that
// changes after it is made is guarded by farMsgs.mu, which every reader
// holds (farTest hands its waiter a snapshot, farState).

// farMsgs is a PE's message state in a job on several nodes.
type farMsgs struct {
	mu      sync.Mutex
	reqs    map[weak.Pointer[msg.Request]]*farMsgReq // guarded by mu
	pending []*farMsgReq                             // receives not matched yet, in posting order; guarded by mu
	// local are the receives matched to a message of this node
	// (farMsgReq.local) that were not found complete yet; guarded by mu.
	// internal/msg has no progress thread: a large message's copy (and
	// its acknowledgement, which its sender waits for) moves only in the
	// receiving PE's calls, so the progress goroutine tests them
	// (progressMatch) while the PE is elsewhere.
	local []*farMsgReq
	// lastMatch is when the matching step last ran (farNow), stored by
	// the step under mu and loaded without it by the progress goroutine,
	// which stays out while waits and tests match (progressMatch).
	lastMatch atomic.Int64
}

// farMsgReq is one send or receive. The first four fields are set when it
// is made, before any other goroutine can see it, and only read after;
// the rest are guarded by farMsgs.mu (see Threads above).
type farMsgReq struct {
	send      bool
	peer, tag int  // destination or source asked for (AnySource), tag or AnyTag
	blocking  bool // made by Send or Recv: not in the table

	buf      []byte        // nil once released
	u        transport.Req // the UCX send, or the UCX receive the step posted
	from     int           // a receive's matched sender, for the liveness of its wait
	done     bool          // st and err are final
	st       Status        //
	err      error         //
	local    *msg.Request  // the receive posted to internal/msg for a message of this node it matched
	released bool          // Release was called (the collector frees the handle)
}

// farState is a snapshot of a request, taken under farMsgs.mu for a
// waiter, which acts on it without the lock.
type farState struct {
	done  bool
	st    Status
	err   error
	local *msg.Request // as farMsgReq.local, while not done
	from  int
}

// onNode reports whether PE p runs on this PE's node.
func (pe *PE) onNode(p int) bool {
	return p >= 0 && p < pe.npes && pe.topo.nodeOf[p] == pe.topo.nodeOf[pe.rank]
}

func (pe *PE) msgCheck(op string, peer, tag int, any bool) error {
	if err := pe.check(); err != nil {
		return err
	}
	if peer < 0 || peer >= pe.npes {
		if !(any && peer == AnySource) {
			return fmt.Errorf("symheap: %s: %w", op, pe.checkPE(peer))
		}
	}
	if tag < 0 || tag > MaxTag {
		if !(any && tag == AnyTag) {
			return fmt.Errorf("symheap: %s with tag %d: %w (tags are 0 to %d%s)", op, tag, ErrBadArg, MaxTag, map[bool]string{true: ", or AnyTag", false: ""}[any])
		}
	}
	return nil
}

// farIsend starts a send (of any size) to dest. A blocking one (Send)
// that UCX completed at once returns nil: nothing to wait for.
func (pe *PE) farIsend(buf []byte, dest, tag int, blocking bool) (*farMsgReq, error) {
	if err := pe.msgCheck("Isend", dest, tag, false); err != nil {
		return nil, err
	}
	f := pe.farL
	u, err := f.net.SendNB(dest, msgTag(pe.rank, tag), buf)
	if err != nil {
		return nil, fmt.Errorf("symheap: Isend of %d bytes to PE %d: %w", len(buf), dest, f.peerLost(dest, err))
	}
	if u == nil && blocking {
		return nil, nil // complete at once: Send has nothing to wait for
	}
	return &farMsgReq{send: true, buf: buf, peer: dest, tag: tag, u: u, from: dest, blocking: blocking, done: u == nil,
		st: Status{Source: pe.rank, Tag: tag, Count: len(buf)}}, nil
}

// farIrecv queues a receive. The progress goroutine may match it from the
// moment it is queued.
func (pe *PE) farIrecv(buf []byte, source, tag int, blocking bool) (*farMsgReq, error) {
	if err := pe.msgCheck("Irecv", source, tag, true); err != nil {
		return nil, err
	}
	r := &farMsgReq{buf: buf, peer: source, tag: tag, from: source, blocking: blocking}
	m := &pe.farL.msgs
	m.mu.Lock()
	m.pending = append(m.pending, r)
	m.mu.Unlock()
	return r, nil
}

// match is the matching step (see above). Called with m.mu held, from
// any goroutine.
func (pe *PE) match() {
	f := pe.farL
	m := &f.msgs
	m.lastMatch.Store(farNow())
	// This node's queue: one progress step, then peeks that all see the
	// same queue (UCX's may grow between probes: see the top).
	pe.ext.msg.Poll()
	// The receives that took nothing from UCX's queue in this step (see
	// the top).
	var missedBuf [8]*farMsgReq
	missed := missedBuf[:0]
	kept := m.pending[:0]
	for _, r := range m.pending {
		if (r.peer == AnySource || pe.onNode(r.peer)) && pe.matchLocal(r) {
			continue
		}
		if pe.onNode(r.peer) {
			kept = append(kept, r)
			continue
		}
		want, mask := msgTag(max(r.peer, 0), max(r.tag, 0)), tagFull
		if r.peer == AnySource {
			mask &^= 0xfffff << 36
		}
		if r.tag == AnyTag {
			mask &^= 1<<36 - 1
		}
		stag, n, ok := f.net.TryProbe(want, mask)
		src, tag := int(stag>>36&0xfffff), int(stag&(1<<36-1))
		if !ok || wantedBy(missed, src, tag) {
			kept, missed = append(kept, r), append(missed, r)
			continue
		}
		if !r.found(Status{Source: src, Tag: tag, Count: n}) {
			continue
		}
		u, err := f.net.RecvNB(r.buf[:n], stag)
		if err != nil {
			r.done, r.err = true, fmt.Errorf("symheap: Recv from PE %d: %w", src, f.peerLost(src, err))
			continue
		}
		r.u = u
	}
	clear(m.pending[len(kept):])
	m.pending = kept
}

// wantedBy reports whether one of missed, receives posted before the one
// matching now that took nothing from UCX's queue in this step, would
// take a message from src with tag: it is theirs first (see the top).
func wantedBy(missed []*farMsgReq, src, tag int) bool {
	for _, q := range missed {
		if (q.peer == src || q.peer == AnySource) && (q.tag == tag || q.tag == AnyTag) {
			return true
		}
	}
	return false
}

// found records the message a pending receive matched, and reports
// whether it fits the receive's buffer; if not, the receive ends with
// ErrTruncated and the message stays queued for a later one. Called with
// farMsgs.mu held.
func (r *farMsgReq) found(st Status) bool {
	r.from, r.st = st.Source, st
	if st.Count <= len(r.buf) {
		return true
	}
	r.done = true
	r.err = fmt.Errorf("symheap: Recv from PE %d with tag %d: a message of %d bytes into a buffer of %d: %w", st.Source, st.Tag, st.Count, len(r.buf), ErrTruncated)
	return false
}

// matchLocal looks for a message of this node for the pending receive r
// (from AnySource or a PE of this node) and, if one waits, posts an
// internal/msg receive for exactly its sender and tag, or ends r with
// ErrTruncated if it does not fit (the message stays queued). It reports
// whether r is matched. Called with m.mu held.
func (pe *PE) matchLocal(r *farMsgReq) bool {
	st, ok := pe.ext.msg.Peek(r.peer, r.tag)
	if !ok {
		return false
	}
	if !r.found(Status(st)) {
		return true
	}
	u, err := pe.ext.msg.Irecv(r.buf[:st.Count], st.Source, st.Tag)
	if err != nil {
		r.done, r.err = true, err
		return true
	}
	r.local = u
	m := &pe.farL.msgs
	m.local = append(m.local, r)
	return true
}

// farTest runs the matching step, whatever r is, while receives wait to
// be matched, completes r if it can, and returns its state. A send's
// test matches too: a message above UCX's rendezvous threshold completes
// at its sender only once its receiver has posted the UCX receive, which
// the matching step does. Were only a receive's own wait to match, two
// PEs that each post a receive, send to the other and wait on the send
// first would each wait for the other's matching step. It holds
// farMsgs.mu throughout, so that r's state moves under it only (the
// progress goroutine matches too); the calls it makes under it (Test of
// UCX's request or of internal/msg's) do not wait, but for the naming of
// a failed request's peer (peerLost), which may look for another node's
// announcement for a moment: the job is broken then.
func (pe *PE) farTest(r *farMsgReq) farState {
	f := pe.farL
	m := &f.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
	if !r.done && len(m.pending) != 0 {
		pe.match()
	}
	switch {
	case r.done:
	case r.local != nil:
		if done, st, err := r.local.Test(); done {
			r.done, r.st, r.err = true, Status(st), err
		}
	case r.u != nil:
		// A receive's length is the probed message's (r.st.Count).
		if done, _, err := f.net.Test(r.u, r.from); done {
			r.done = true
			if err != nil {
				what := "Recv from"
				if r.send {
					what = "Send to"
				}
				r.err = fmt.Errorf("symheap: %s PE %d: %w", what, r.from, f.peerLost(r.from, err))
			}
		}
	}
	return r.state()
}

// state is r's snapshot. Called with farMsgs.mu held.
func (r *farMsgReq) state() farState {
	if r.done {
		return farState{done: true, st: r.st, err: r.err, from: r.from}
	}
	return farState{local: r.local, from: r.from}
}

// finish ends r with st and err, unless it ended meanwhile (a test in
// another goroutine, which saw the same outcome), takes it out of the
// queue if it was still waiting to be matched, and returns its outcome.
func (pe *PE) finish(r *farMsgReq, st Status, err error) (Status, error) {
	m := &pe.farL.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
	if !r.done {
		r.done, r.st, r.err = true, st, err
		pe.unqueue(r)
	}
	return r.st, r.err
}

// farWait waits until r is complete: matching, progressing, and checking
// every SleepSlice or so that the peer (any PE, for AnySource) lives.
func (pe *PE) farWait(r *farMsgReq) (Status, error) {
	f := pe.farL
	lastChecked := time.Now() // the first check after a while, not at once
	// A receive that may match a message of this node polls both queues
	// under the runtime's pacing: the node's messages wake nobody on the
	// UCX worker's event descriptor.
	canLocal := !r.send && (r.peer == AnySource || pe.onNode(r.peer))
	pace := shmsync.Pace()
	for {
		s := pe.farTest(r)
		if s.done {
			return s.st, s.err
		}
		if s.local != nil {
			// Matched to a message of this node: internal/msg's own wait,
			// without the matching lock.
			st, err := s.local.Wait()
			return pe.finish(r, Status(st), err)
		}
		if time.Since(lastChecked) > 50*time.Millisecond {
			lastChecked = time.Now()
			var err error
			if s.from >= 0 {
				err = f.pinger(s.from)()
			} else {
				err = pe.peerLost()
			}
			if err == nil {
				err = f.net.Check(s.from)
			}
			if err != nil {
				return pe.finish(r, Status{}, fmt.Errorf("symheap: waiting for a message: %w", f.peerLost(s.from, err)))
			}
		}
		switch {
		case canLocal:
			if r.peer == AnySource {
				f.net.Progress()
			}
			pace.Step()
		case !r.send && pe.recvAlone(r):
		default:
			f.net.WaitEvent()
		}
	}
}

// progressMatch is the progress goroutine's matching step (far_net.go),
// run after each of its wake-ups: it matches the receives that wait to be
// matched, and moves those matched to a message of this node (see
// farMsgs.local), while the PE waits in anything but a message call, or
// runs its own code (see the top). It reports whether receives are still
// under way, so that the goroutine comes back within busySleep rather
// than sleeping on the worker: the node's messages do not wake it.
//
// It stays out of the matching while waits and tests match (one ran the
// step within matchQuiet), and never waits for the matching lock: its
// holder is a wait or test, which matches, or a receive being queued,
// which the goroutine's next round finds.
func (pe *PE) progressMatch() (busy bool) {
	m := &pe.farL.msgs
	if !m.mu.TryLock() {
		return true
	}
	defer m.mu.Unlock()
	if len(m.pending) != 0 && time.Duration(farNow()-m.lastMatch.Load()) >= matchQuiet {
		// What woke the goroutine (a rendezvous request, an eager
		// message) is in UCX's queue once the worker has progressed.
		pe.farL.net.Progress()
		pe.match()
	}
	kept := m.local[:0]
	for _, r := range m.local {
		if !r.done {
			// internal/msg's Test makes its progress (the copy, the
			// acknowledgement) and does not wait.
			if done, st, err := r.local.Test(); done {
				r.done, r.st, r.err = true, Status(st), err
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

// farNow is the monotonic time since the package started, in ns.
func farNow() int64 { return int64(time.Since(farClock)) }

var farClock = time.Now()

// fastMax is the largest message recvAlone takes: well inside UCX's
// eager messages over TCP, which are complete on arrival (a rendezvous
// would hold the wait in C until the sender answers).
const fastMax = 1 << 10

// recvAlone is the wait of a receive from a PE of another node that is
// the only one waiting to be matched: the matching step, the wait for the
// message and the receive, for a message of at most fastMax bytes that
// fits, in one call into C of up to a millisecond. It holds the matching
// lock meanwhile, so no other receive is posted or matched before r
// (which keeps posting order); any other message is left to the matching
// step. It reports whether it took the place of a wait: false when r is
// not such a receive.
func (pe *PE) recvAlone(r *farMsgReq) bool {
	f := pe.farL
	m := &f.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
	if r.done || r.u != nil || r.local != nil || r.peer < 0 || pe.onNode(r.peer) || len(m.pending) != 1 || m.pending[0] != r {
		return false
	}
	st, got, err := pe.recvMatch(r.buf, r.peer, r.tag)
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
// AnyTag) and receives it if it is at most fastMax bytes and fits buf.
// got is false when nothing came, or what came is left for the matching
// step. Called with farMsgs.mu held.
func (pe *PE) recvMatch(buf []byte, source, tag int) (st Status, got bool, err error) {
	f := pe.farL
	want, mask := msgTag(source, max(tag, 0)), tagFull
	if tag == AnyTag {
		mask &^= 1<<36 - 1
	}
	out, stag, n, err := f.net.RecvMatch(buf, want, mask, fastMax, source)
	if err != nil {
		return Status{}, false, fmt.Errorf("symheap: Recv from PE %d: %w", source, f.peerLost(source, err))
	}
	if out != transport.MatchReceived {
		return Status{}, false, nil
	}
	return Status{Source: source, Tag: int(stag & (1<<36 - 1)), Count: n}, true, nil
}

// unqueue removes a receive that ended without a match from the queue.
// Called with farMsgs.mu held.
func (pe *PE) unqueue(r *farMsgReq) {
	m := &pe.farL.msgs
	for i, q := range m.pending {
		if q == r {
			m.pending = append(m.pending[:i], m.pending[i+1:]...)
			return
		}
	}
}

// register makes r a *Request.
func (pe *PE) register(r *farMsgReq) *Request {
	h := new(msg.Request)
	m := &pe.farL.msgs
	m.mu.Lock()
	if m.reqs == nil {
		m.reqs = map[weak.Pointer[msg.Request]]*farMsgReq{}
	}
	key := weak.Make(h)
	m.reqs[key] = r
	m.mu.Unlock()
	runtime.AddCleanup(h, func(key weak.Pointer[msg.Request]) {
		m.mu.Lock()
		delete(m.reqs, key)
		m.mu.Unlock()
	}, key)
	return (*Request)(h)
}

// farRequestOf returns the state of a request of this path.
func farRequestOf(req *Request) (*PE, *farMsgReq) {
	pe := farJob.Load()
	if pe == nil || req == nil {
		return nil, nil
	}
	m := &pe.farL.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
	return pe, m.reqs[weak.Make((*msg.Request)(req))]
}

// The API's entry points for this path (msg.go calls them when the job
// spans nodes).

func (pe *PE) farMsgSend(buf []byte, dest, tag int) error {
	if pe.onNode(dest) {
		return pe.ext.msg.Send(buf, dest, tag)
	}
	r, err := pe.farIsend(buf, dest, tag, true)
	if err != nil || r == nil {
		return err
	}
	_, err = pe.farWait(r)
	return err
}

func (pe *PE) farMsgIsend(buf []byte, dest, tag int) (*Request, error) {
	if pe.onNode(dest) {
		r, err := pe.ext.msg.Isend(buf, dest, tag)
		return (*Request)(r), err
	}
	r, err := pe.farIsend(buf, dest, tag, false)
	if err != nil {
		return nil, err
	}
	return pe.register(r), nil
}

func (pe *PE) farMsgRecv(buf []byte, source, tag int) (Status, error) {
	if pe.direct(source) {
		st, err := pe.ext.msg.Recv(buf, source, tag)
		return Status(st), err
	}
	if st, ok, err := pe.recvNow(buf, source, tag); ok {
		return st, err
	}
	r, err := pe.farIrecv(buf, source, tag, true)
	if err != nil {
		return Status{}, err
	}
	return pe.farWait(r)
}

// recvNow is Recv's fast path for a small message from a PE of another
// node when no receive waits to be matched: recvAlone's wait and receive,
// without a request. It reports false, having done nothing, when the
// receive is not such a one, or no message fit to take came within
// recvAlone's slice: Recv then queues it and waits as usual.
func (pe *PE) recvNow(buf []byte, source, tag int) (Status, bool, error) {
	if source < 0 || source >= pe.npes || pe.onNode(source) || tag < 0 || tag > MaxTag || pe.check() != nil {
		return Status{}, false, nil // AnySource, this node, or an error the usual path reports
	}
	m := &pe.farL.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.pending) != 0 {
		return Status{}, false, nil
	}
	st, got, err := pe.recvMatch(buf, source, tag)
	return st, got || err != nil, err
}

func (pe *PE) farMsgIrecv(buf []byte, source, tag int) (*Request, error) {
	if pe.direct(source) {
		r, err := pe.ext.msg.Irecv(buf, source, tag)
		return (*Request)(r), err
	}
	r, err := pe.farIrecv(buf, source, tag, false)
	if err != nil {
		return nil, err
	}
	return pe.register(r), nil
}

// direct reports whether a receive from source goes straight to
// internal/msg: source is a PE of this node and no receive waits to be
// matched lazily (see the top).
func (pe *PE) direct(source int) bool {
	if !pe.onNode(source) {
		return false
	}
	m := &pe.farL.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pending) == 0
}

// farReqWait and farReqTest are Request.Wait and Test for this path; ok
// false: the request is internal/msg's.
func farReqWait(req *Request) (st Status, err error, ok bool) {
	pe, r := farRequestOf(req)
	if r == nil {
		return Status{}, nil, false
	}
	st, err = pe.farWait(r)
	return st, err, true
}

// farReqRelease is Request.Release for this path: the handle is the
// collector's to free (register), so Release only checks, as internal/msg's
// does, that the request is done and was not released before, and lets
// go of its buffer.
func farReqRelease(req *Request) (err error, ok bool) {
	pe, r := farRequestOf(req)
	if r == nil {
		return nil, false
	}
	m := &pe.farL.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
	if r.released || !r.done {
		return msg.ReleaseRefused(r.released), true
	}
	r.released, r.buf = true, nil
	return nil, true
}

func farReqTest(req *Request) (done bool, st Status, err error, ok bool) {
	pe, r := farRequestOf(req)
	if r == nil {
		return false, Status{}, nil, false
	}
	s := pe.farTest(r)
	if !s.done {
		pe.farL.net.Progress()
		return false, Status{}, nil, true
	}
	return true, s.st, s.err, true
}
