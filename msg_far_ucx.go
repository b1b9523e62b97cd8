//go:build ucx

package symheap

import (
	"fmt"
	"runtime"
	"sync"
	"time"
	"weak"

	"github.com/symheap/symheap/internal/msg"
	"github.com/symheap/symheap/internal/ucx"
)

// Messages in a job on several nodes (build tag ucx).
//
// Every message of such a job, between PEs of one node too, is a UCX
// tagged message whose tag carries the sender's rank and the user's tag
// (msgTag): so AnySource and AnyTag are masks over one queue, UCX's, and
// the messages of one pair stay in order. (UCX reaches a PE of the same
// node through its own transports: shared memory where UCX_TLS allows
// it.) The node's shared-memory rings of internal/msg are not used.
//
// Receives are matched lazily, in the order they were posted: a receive
// waits in the PE's queue (farMsgs.pending) until a wait or test of any
// request runs the matching step, which probes UCX's queue of arrived
// messages for each pending receive in turn, without progressing UCX in
// between (so that every probe of one step sees the same queue, and the
// earliest receive that matches a message gets it). A match posts a UCX
// receive for exactly that message's tag, which takes the earliest
// message with that tag: the one probed. A message longer than the
// receive's buffer completes the receive with ErrTruncated and stays
// queued for a later receive. Sends are posted at once.
//
// A request of this path is a *Request that internal/msg never sees, a
// key in the PE's table (farMsgs.reqs), as teams made by Split are. The
// table holds its keys weakly: an entry goes when the program drops its
// request (a cleanup), since Wait may be called again on a finished one.

// farMsgs is a PE's message state in a job on several nodes.
type farMsgs struct {
	mu      sync.Mutex
	reqs    map[weak.Pointer[msg.Request]]*farMsgReq
	pending []*farMsgReq // receives not matched yet, in posting order
}

// farMsgReq is one send or receive.
type farMsgReq struct {
	send        bool
	buf         []byte
	peer, tag   int // destination or source asked for (AnySource), tag or AnyTag
	u           *ucx.Req
	from        int // a receive's matched sender, for the liveness of its wait
	done        bool
	st          Status
	err         error
	blocking    bool // made by Send or Recv: not in the table
	lastChecked time.Time
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

// farIsend starts a send (of any size) to dest.
func (pe *PE) farIsend(buf []byte, dest, tag int, blocking bool) (*farMsgReq, error) {
	if err := pe.msgCheck("Isend", dest, tag, false); err != nil {
		return nil, err
	}
	f := pe.farL
	u, err := f.w.SendNB(dest, msgTag(pe.rank, tag), buf)
	if err != nil {
		return nil, fmt.Errorf("symheap: Isend of %d bytes to PE %d: %w", len(buf), dest, f.peerLost(dest, err))
	}
	return &farMsgReq{send: true, buf: buf, peer: dest, tag: tag, u: u, from: dest, blocking: blocking,
		st: Status{Source: pe.rank, Tag: tag, Count: len(buf)}}, nil
}

// farIrecv queues a receive.
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

// match is the matching step (see above). Called with m.mu held.
func (pe *PE) match() {
	f := pe.farL
	m := &f.msgs
	kept := m.pending[:0]
	for _, r := range m.pending {
		want, mask := msgTag(max(r.peer, 0), max(r.tag, 0)), tagFull
		if r.peer == AnySource {
			mask &^= 0xfffff << 36
		}
		if r.tag == AnyTag {
			mask &^= 1<<36 - 1
		}
		stag, n, ok := f.w.TryProbe(want, mask)
		if !ok {
			kept = append(kept, r)
			continue
		}
		src, tag := int(stag>>36&0xfffff), int(stag&(1<<36-1))
		r.from, r.st = src, Status{Source: src, Tag: tag, Count: n}
		if n > len(r.buf) {
			r.done = true
			r.err = fmt.Errorf("symheap: Recv from PE %d with tag %d: a message of %d bytes into a buffer of %d: %w", src, tag, n, len(r.buf), ErrTruncated)
			continue
		}
		u, err := f.w.RecvNB(r.buf[:n], stag)
		if err != nil {
			r.done, r.err = true, fmt.Errorf("symheap: Recv from PE %d: %w", src, f.peerLost(src, err))
			continue
		}
		r.u = u
	}
	clear(m.pending[len(kept):])
	m.pending = kept
}

// test runs the matching step and reports whether r is complete.
func (pe *PE) farTest(r *farMsgReq) bool {
	f := pe.farL
	if r.done {
		return true
	}
	if r.u == nil {
		f.msgs.mu.Lock()
		pe.match()
		f.msgs.mu.Unlock()
		if r.done || r.u == nil {
			return r.done
		}
	}
	// A receive's length is the probed message's (r.st.Count).
	done, _, err := f.w.Test(r.u, r.from)
	if !done {
		return false
	}
	r.done = true
	if err != nil {
		what := "Recv from"
		if r.send {
			what = "Send to"
		}
		r.err = fmt.Errorf("symheap: %s PE %d: %w", what, r.from, f.peerLost(r.from, err))
	}
	return true
}

// farWait waits until r is complete: matching, progressing, and checking
// every SleepSlice or so that the peer (any PE, for AnySource) lives.
func (pe *PE) farWait(r *farMsgReq) (Status, error) {
	f := pe.farL
	var ping func() error
	if r.lastChecked.IsZero() {
		r.lastChecked = time.Now() // the first check after a while, not at once
	}
	for !pe.farTest(r) {
		if time.Since(r.lastChecked) > 50*time.Millisecond {
			r.lastChecked = time.Now()
			var err error
			if r.from >= 0 {
				if ping == nil || r.from != r.peer {
					ping = f.pinger(r.from)
				}
				err = ping()
			} else {
				err = pe.peerLost()
			}
			if err == nil {
				err = f.w.Check(r.from)
			}
			if err != nil {
				r.done = true
				r.err = fmt.Errorf("symheap: waiting for a message: %w", f.peerLost(r.from, err))
				pe.dropPending(r)
				break
			}
		}
		f.w.WaitEvent()
	}
	return r.st, r.err
}

// dropPending removes a receive that ended without a match.
func (pe *PE) dropPending(r *farMsgReq) {
	m := &pe.farL.msgs
	m.mu.Lock()
	defer m.mu.Unlock()
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
	r, err := pe.farIsend(buf, dest, tag, true)
	if err != nil {
		return err
	}
	_, err = pe.farWait(r)
	return err
}

func (pe *PE) farMsgIsend(buf []byte, dest, tag int) (*Request, error) {
	r, err := pe.farIsend(buf, dest, tag, false)
	if err != nil {
		return nil, err
	}
	return pe.register(r), nil
}

func (pe *PE) farMsgRecv(buf []byte, source, tag int) (Status, error) {
	r, err := pe.farIrecv(buf, source, tag, true)
	if err != nil {
		return Status{}, err
	}
	return pe.farWait(r)
}

func (pe *PE) farMsgIrecv(buf []byte, source, tag int) (*Request, error) {
	r, err := pe.farIrecv(buf, source, tag, false)
	if err != nil {
		return nil, err
	}
	return pe.register(r), nil
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

func farReqTest(req *Request) (done bool, st Status, err error, ok bool) {
	pe, r := farRequestOf(req)
	if r == nil {
		return false, Status{}, nil, false
	}
	if !pe.farTest(r) {
		pe.farL.w.Progress()
		return false, Status{}, nil, true
	}
	return true, r.st, r.err, true
}
