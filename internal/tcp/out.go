package tcp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// An out connection: the one this PE dialled to a peer, which carries
// all of this PE's requests to it (see the package doc).
//
// Paths:
//
//  1. A caller posts a frame (post): under mu it is appended to queue,
//     and a call waiting for a reply is entered in calls under a fresh id
//     first, so that the reply cannot come before it is there.
//  2. The writer (run) dials, then repeatedly takes the whole queue and
//     writes it, in order; then it completes the frames' sendReqs.
//  3. The reader (read) takes each reply, finds its call, fills it and
//     closes its done channel, all under mu.
//  4. A broken connection fails every call and queued frame (fail), once.
//
// Invariant: once err is set, queue and calls are empty and stay so.

// frame is a request waiting to be written.
type frame struct {
	h      req
	data   []byte   // what follows the header
	copied bool     // data is the frame's own copy (counted in outConn.queued)
	sr     *sendReq // completed once written, if not nil
}

// call is a request waiting for its reply. Its result fields are written
// under outConn.mu before done is closed.
type call struct {
	done chan struct{}
	dst  []byte // a get's destination
	v    uint64 // a fetching atomic's previous value
	err  error
}

func newCall(dst []byte) *call { return &call{done: make(chan struct{}), dst: dst} }

type outConn struct {
	n    *Net
	peer int

	mu        sync.Mutex
	cond      sync.Cond // signalled (with mu) when queue grows, stop or err is set
	queue     []*frame  // not yet taken by the writer, in post order; guarded by mu
	queued    int       // bytes of copied data in queue; guarded by mu
	calls     map[uint64]*call
	nextID    uint64    // guarded by mu
	dirty     bool      // puts or non-fetching atomics posted since the last flush request; guarded by mu
	lastFlush *call     // the latest flush request; guarded by mu
	err       error     // why the connection is unusable (set once); guarded by mu
	stop      bool      // Close queued the goodbye; guarded by mu
	deadline  time.Time // Close's deadline for the connection; guarded by mu
	conn      net.Conn  // set once connected; guarded by mu
	addr      string    // the address connected to; guarded by mu
}

func newOutConn(n *Net, peer int) *outConn {
	oc := &outConn{n: n, peer: peer, calls: map[uint64]*call{}}
	oc.cond.L = &oc.mu
	return oc
}

// post queues f, and enters c (if not nil) to take its reply.
func (oc *outConn) post(f *frame, c *call) error {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	return oc.postLocked(f, c)
}

func (oc *outConn) postLocked(f *frame, c *call) error {
	if oc.err != nil {
		return oc.err
	}
	if oc.stop {
		return errNetClosed
	}
	if c != nil {
		oc.nextID++
		f.h.id = oc.nextID
		oc.calls[f.h.id] = c
	}
	if f.h.op == opPut || (f.h.op == opAMO && c == nil) {
		oc.dirty = true
	}
	if f.copied {
		oc.queued += len(f.data)
	}
	oc.queue = append(oc.queue, f)
	oc.cond.Signal()
	return nil
}

// postSpace posts a copied frame once the queue has room for it (or is
// empty), waiting for the writer as a timed wait on the peer.
func (oc *outConn) postSpace(f *frame, c *call) error {
	var w *waiter
	for {
		seen := oc.n.local.count()
		oc.mu.Lock()
		if !f.copied || oc.queued == 0 || oc.queued+len(f.data) <= maxQueued || oc.err != nil || oc.stop {
			err := oc.postLocked(f, c)
			oc.mu.Unlock()
			if w != nil {
				w.stop()
			}
			return err
		}
		oc.mu.Unlock()
		if w == nil {
			w = oc.n.newWaiter(oc.peer, "put", true, true, nil)
		}
		if err := w.block(oc.n.local.since(seen)); err != nil {
			w.stop()
			return err
		}
	}
}

// unqueue takes back the frame of s if the writer has not taken it (a
// Send whose wait failed: its buffer is the caller's again).
func (oc *outConn) unqueue(s *sendReq) {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	if i := slices.Index(oc.queue, s.f); i >= 0 {
		oc.queue = slices.Delete(oc.queue, i, i+1)
	}
}

// await waits for c's reply (a timed wait on the peer) and returns c's
// result; a wait that fails takes c back, unless its reply came
// meanwhile.
func (oc *outConn) await(c *call, what string, timed bool) (uint64, error) {
	if err := oc.n.waitDone(c.done, oc.peer, what, timed, true, nil); err != nil {
		oc.mu.Lock()
		select {
		case <-c.done:
		default:
			for id, q := range oc.calls {
				if q == c {
					delete(oc.calls, id)
				}
			}
			oc.mu.Unlock()
			return 0, err
		}
		oc.mu.Unlock()
	}
	return c.v, oc.n.opErr(oc.peer, what, c.err)
}

// flush sends a flush request if anything was posted since the last one,
// and returns the call to wait for: the new request, or the latest one
// if it is not answered yet (another goroutine waits for it, and what
// this caller posted may be before it), or nil.
func (oc *outConn) flush() (*call, error) {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	if !oc.dirty {
		if c := oc.lastFlush; c != nil {
			select {
			case <-c.done: // answered: its outcome was its waiter's
			default:
				return c, nil
			}
		}
		return nil, nil
	}
	c := newCall(nil)
	if err := oc.postLocked(&frame{h: req{op: opFlush}}, c); err != nil {
		return nil, err
	}
	oc.dirty, oc.lastFlush = false, c
	return c, nil
}

// redirty makes the next Flush ask again (a flush that timed out).
func (oc *outConn) redirty() {
	oc.mu.Lock()
	oc.dirty = oc.err == nil
	oc.mu.Unlock()
}

// remote returns the address connected to, "" if none yet.
func (oc *outConn) remote() string {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	return oc.addr
}

// fail makes the connection unusable with cause, once: every call and
// queued frame ends with it, and the socket is closed (which ends the
// writer and reader).
func (oc *outConn) fail(cause error) {
	oc.mu.Lock()
	if oc.err != nil {
		oc.mu.Unlock()
		return
	}
	oc.err = cause
	for id, c := range oc.calls {
		c.err = cause
		close(c.done)
		delete(oc.calls, id)
	}
	for _, f := range oc.queue {
		if f.sr != nil {
			f.sr.err = cause
			close(f.sr.done)
		}
	}
	oc.queue, oc.queued = nil, 0
	conn := oc.conn
	oc.cond.Broadcast()
	oc.mu.Unlock()
	if conn != nil {
		conn.Close()
	}
	oc.n.local.signal()
}

// broken is what a failed read or write of the connection means: nothing
// if the Net is closing, the peer's goodbye if it said one, else its
// loss.
func (oc *outConn) broken(err error) {
	switch {
	case oc.n.closed.Load():
		oc.fail(errNetClosed)
	case oc.n.peerGone(oc.peer, true) == errPeerClosed:
		oc.fail(errPeerClosed)
	default:
		oc.n.markLost(oc.peer, err)
	}
}

// bye queues the goodbye after what is queued (Close), and bounds what
// is left of the connection's life by deadline.
func (oc *outConn) bye(deadline time.Time) {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	if oc.err != nil || oc.stop {
		return
	}
	oc.queue = append(oc.queue, &frame{h: req{op: opBye}})
	oc.stop, oc.deadline = true, deadline
	if oc.conn != nil {
		oc.conn.SetDeadline(deadline)
	}
	oc.cond.Broadcast()
}

// run is the writer goroutine: it connects, starts the reader, and writes
// the queue until the goodbye or a failure.
func (oc *outConn) run() {
	defer oc.n.wg.Done()
	c, addr, err := oc.connect()
	if err != nil {
		if oc.n.closed.Load() {
			oc.fail(errNetClosed)
		} else {
			oc.n.markLost(oc.peer, err)
		}
		return
	}
	oc.mu.Lock()
	if oc.err != nil {
		oc.mu.Unlock()
		c.Close()
		return
	}
	oc.conn, oc.addr = c, addr
	if oc.stop {
		c.SetDeadline(oc.deadline)
	}
	oc.mu.Unlock()
	oc.n.wg.Add(1)
	go oc.read(c)

	bw := bufio.NewWriterSize(c, 64<<10)
	var hb [reqSize]byte
	var batch []*frame
	for {
		oc.mu.Lock()
		for len(oc.queue) == 0 && oc.err == nil {
			oc.cond.Wait()
		}
		if oc.err != nil {
			oc.mu.Unlock()
			return
		}
		// Swap the queue with the spare batch: the writer owns batch.
		batch, oc.queue = oc.queue, batch[:0]
		oc.mu.Unlock()
		var werr error
		bye := false
		for _, f := range batch {
			f.h.encode(&hb)
			if _, werr = bw.Write(hb[:]); werr == nil && len(f.data) > 0 {
				_, werr = bw.Write(f.data)
			}
			if werr != nil {
				break
			}
			bye = bye || f.h.op == opBye
		}
		if werr == nil {
			werr = bw.Flush()
		}
		oc.mu.Lock()
		for _, f := range batch {
			if f.copied {
				oc.queued -= len(f.data)
			}
			if f.sr != nil {
				if werr != nil {
					f.sr.err = werr
				}
				close(f.sr.done)
			}
		}
		oc.mu.Unlock()
		clear(batch)
		oc.n.local.signal()
		if werr != nil {
			oc.broken(fmt.Errorf("writing to %s: %w", addr, werr))
			return
		}
		if bye {
			// The reader waits for the peer's goodbye, or its hang-up.
			if tc, ok := c.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
			return
		}
	}
}

// read is the reader goroutine: it takes the replies and completes their
// calls.
func (oc *outConn) read(c net.Conn) {
	defer oc.n.wg.Done()
	br := bufio.NewReaderSize(c, 64<<10)
	var hb [repSize]byte
	for {
		if _, err := io.ReadFull(br, hb[:]); err != nil {
			oc.broken(fmt.Errorf("reading from %s: %w", c.RemoteAddr(), err))
			return
		}
		var h rep
		h.decode(&hb)
		switch h.op {
		case replyBye:
			oc.n.markClosed(oc.peer)
			oc.fail(errPeerClosed)
			return
		case replyGet, replyAMO, replyFlush:
		default:
			oc.broken(fmt.Errorf("protocol error: reply %d from %s", h.op, c.RemoteAddr()))
			return
		}
		if h.n > maxMsg || (h.status != statusOK && h.n > maxText) {
			oc.broken(fmt.Errorf("protocol error: a reply of %d bytes from %s", h.n, c.RemoteAddr()))
			return
		}
		// Into a buffer of its own: the caller may have given up on the
		// call (and reuse its destination) while the data arrive.
		var data []byte
		if h.n > 0 {
			data = make([]byte, h.n)
			if _, err := io.ReadFull(br, data); err != nil {
				oc.broken(fmt.Errorf("reading from %s: %w", c.RemoteAddr(), err))
				return
			}
		}
		oc.mu.Lock()
		if k := oc.calls[h.id]; k != nil {
			delete(oc.calls, h.id)
			switch {
			case h.status != statusOK:
				k.err = refused{string(data)}
			case h.op == replyGet:
				copy(k.dst, data)
			case h.op == replyAMO:
				k.v = h.v
			}
			close(k.done)
		}
		oc.mu.Unlock()
		oc.n.local.signal()
	}
}

// connect dials the peer's candidate addresses in order until one
// answers as the peer. A round in which every candidate failed for good
// (refused the connection, or is another process) is an error: the peer
// is gone; a round with a candidate that timed out (a stopped or slow
// peer) is tried again, with a growing pause, until Close.
func (oc *outConn) connect() (net.Conn, string, error) {
	n := oc.n
	addrs := n.recs[oc.peer].Addrs
	pause := 10 * time.Millisecond
	for {
		var why []string
		again := false
		for _, a := range addrs {
			c, refusal, err := oc.try(a)
			if c != nil {
				return c, a, nil
			}
			if n.ctx.Err() != nil {
				return nil, "", errNetClosed
			}
			switch {
			case refusal != "":
				why = append(why, a+": "+refusal)
			case errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH):
				why = append(why, err.Error())
			default:
				why = append(why, err.Error())
				again = true
			}
		}
		if !again {
			return nil, "", fmt.Errorf("no address of PE %d answers as PE %d of job %q (%s)", oc.peer, oc.peer, n.job, strings.Join(why, "; "))
		}
		select {
		case <-n.ctx.Done():
			return nil, "", errNetClosed
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// try dials a and makes the handshake. It returns the connection, or the
// process's refusal, or the error.
func (oc *outConn) try(a string) (net.Conn, string, error) {
	n := oc.n
	d := net.Dialer{Timeout: attemptTimeout}
	c, err := d.DialContext(n.ctx, "tcp", a)
	if err != nil {
		return nil, "", err
	}
	c.SetDeadline(time.Now().Add(attemptTimeout))
	// Close interrupts the handshake.
	stop := context.AfterFunc(n.ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	refusal, err := "", error(nil)
	if _, err = c.Write(appendHello(nil, n.job, n.rank, oc.peer)); err == nil {
		refusal, err = readAnswer(c)
	}
	if !stop() {
		c.Close()
		return nil, "", errNetClosed
	}
	switch {
	case err != nil:
		// Tell a server that may still take the hello that this side
		// gave up: it ends the connection without taking it for a loss.
		var hb [reqSize]byte
		(&req{op: opAbort}).encode(&hb)
		c.SetDeadline(time.Now().Add(10 * time.Millisecond))
		c.Write(hb[:])
		c.Close()
		return nil, "", fmt.Errorf("handshake with %s: %w", a, err)
	case refusal != "":
		c.Close()
		return nil, refusal, nil
	}
	c.SetDeadline(time.Time{})
	return c, "", nil
}
