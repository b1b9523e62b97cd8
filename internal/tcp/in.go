package tcp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/symheap/symheap/internal/transport"
)

// An in connection: one a peer dialled to this PE, served by one
// goroutine (serve) that performs the peer's requests in the order they
// come and answers on the same connection (see the package doc).
//
// The server is the only writer of its connection, so replies need no
// lock. Close interrupts the server's read (a deadline in the past) under
// mu, and the server, seeing closing, says goodbye, drains what the
// peer still sends until it hangs up or the deadline, and leaves: after
// the interrupt it touches no region.
type inConn struct {
	n *Net
	c net.Conn

	mu       sync.Mutex
	closing  bool      // Close has interrupted the server; guarded by mu
	deadline time.Time // Close's bound for the goodbye; guarded by mu
}

// setDeadline sets the connection's deadline unless Close has taken it
// over.
func (ic *inConn) setDeadline(t time.Time) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if !ic.closing {
		ic.c.SetDeadline(t)
	}
}

func (ic *inConn) isClosing() bool {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	return ic.closing
}

// bye interrupts the server (Close).
func (ic *inConn) bye(deadline time.Time) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	ic.closing, ic.deadline = true, deadline
	ic.c.SetReadDeadline(time.Unix(1, 0))
	ic.c.SetWriteDeadline(deadline)
}

// handshake reads the peer's hello and answers it; it returns the peer's
// rank, or -1 if the connection is not to be served.
func (ic *inConn) handshake() int {
	n := ic.n
	ic.setDeadline(time.Now().Add(attemptTimeout))
	job, from, to, ok, err := readHello(ic.c)
	if err != nil {
		return -1
	}
	refusal := ""
	switch {
	case !ok:
		refusal = "not a symheap tcp transport (bad magic)"
	case job != n.job:
		refusal = fmt.Sprintf("this is PE %d of job %q, not of job %q", n.rank, n.job, job)
	case to != n.rank:
		refusal = fmt.Sprintf("this is PE %d of job %q, not PE %d", n.rank, n.job, to)
	case from < 0 || from >= n.size:
		refusal = fmt.Sprintf("job %q has no PE %d", n.job, from)
	}
	if _, err := ic.c.Write(appendAnswer(nil, refusal)); err != nil || refusal != "" {
		return -1
	}
	ic.setDeadline(time.Time{})
	return from
}

// serve is the server goroutine.
func (ic *inConn) serve() {
	n := ic.n
	defer n.wg.Done()
	defer func() {
		ic.c.Close()
		n.mu.Lock()
		delete(n.ins, ic)
		n.mu.Unlock()
	}()
	from := ic.handshake()
	if from < 0 {
		return
	}
	br := bufio.NewReaderSize(ic.c, 64<<10)
	bw := bufio.NewWriterSize(ic.c, 64<<10)
	s := server{n: n, from: from, br: br, bw: bw}
	for {
		// Answers go out before the server blocks on reading: pipelined
		// requests share one write.
		if br.Buffered() == 0 && bw.Buffered() > 0 {
			if err := bw.Flush(); err != nil {
				ic.end(from, false, fmt.Errorf("answering %s: %w", ic.c.RemoteAddr(), err))
				return
			}
		}
		bye, err := s.one()
		if ic.isClosing() {
			// The stream is whole (a goodbye may follow) unless Close
			// interrupted a request part way.
			ic.shutdown(bw, err == nil || bye || errors.Is(err, errIdle))
			return
		}
		if err != nil || bye {
			ic.end(from, bye, err)
			return
		}
	}
}

// end leaves after the peer's goodbye (bye), its abort (both nil), or a
// broken connection: the peer's loss.
func (ic *inConn) end(from int, bye bool, err error) {
	switch {
	case bye:
		ic.n.markClosed(from)
	case err != nil && err != errAbort:
		ic.n.markLost(from, fmt.Errorf("connection from %s: %w", ic.c.RemoteAddr(), err))
	}
}

// shutdown is the server's part of Close: the goodbye (if the stream is
// whole), the end of writing, and a drain until the peer hangs up or the
// deadline.
func (ic *inConn) shutdown(bw *bufio.Writer, whole bool) {
	ic.mu.Lock()
	deadline := ic.deadline
	ic.mu.Unlock()
	if whole {
		var hb [repSize]byte
		(&rep{op: replyBye}).encode(&hb)
		bw.Write(hb[:])
		bw.Flush()
	}
	if tc, ok := ic.c.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
	ic.c.SetReadDeadline(deadline)
	io.Copy(io.Discard, ic.c)
}

// errIdle is a connection that ended, or was interrupted, between two
// requests.
var errIdle = errors.New("between requests")

// errAbort is a client's abort of its handshake: not a loss.
var errAbort = errors.New("the peer gave up the connection during its handshake")

// server performs one in connection's requests.
type server struct {
	n      *Net
	from   int
	br     *bufio.Reader
	bw     *bufio.Writer
	sticky string // the first refusal of a request without reply since the last flush
	hb     [reqSize]byte
	rb     [repSize]byte
}

// refuse records the refusal of a request that has no reply.
func (s *server) refuse(err error) {
	if s.sticky == "" {
		s.sticky = err.Error()
	}
}

// reply writes a reply header and its data.
func (s *server) reply(op uint8, id uint64, v uint64, data []byte, refusal error) error {
	h := rep{op: op, id: id, v: v, n: uint64(len(data))}
	if refusal != nil {
		data = []byte(refusal.Error())
		if len(data) > maxText {
			data = data[:maxText]
		}
		h.status, h.n = statusRefused, uint64(len(data))
	}
	h.encode(&s.rb)
	if _, err := s.bw.Write(s.rb[:]); err != nil {
		return err
	}
	_, err := s.bw.Write(data)
	return err
}

// one reads and performs one request. bye: the peer said goodbye (and
// was answered).
func (s *server) one() (bye bool, err error) {
	n := s.n
	if k, err := io.ReadFull(s.br, s.hb[:]); err != nil {
		if k == 0 {
			return false, fmt.Errorf("%w: %w", errIdle, err)
		}
		return false, err
	}
	var h req
	h.decode(&s.hb)
	r := transport.Region(int32(h.region))
	switch h.op {
	case opPut:
		if err := checkRange(n.own, r, h.off, h.n); err != nil {
			s.refuse(err)
			_, err = io.CopyN(io.Discard, s.br, int64(h.n))
			return false, err
		}
		if _, err := io.ReadFull(s.br, n.cfg.Regions[r][h.off:h.off+h.n]); err != nil {
			return false, err
		}
		n.incoming.signal()
	case opGet:
		if err := checkRange(n.own, r, h.off, h.n); err != nil {
			return false, s.reply(replyGet, h.id, 0, nil, err)
		}
		return false, s.reply(replyGet, h.id, 0, n.cfg.Regions[r][h.off:h.off+h.n], nil)
	case opAMO:
		op := transport.AMO(h.amo)
		err := checkAMO(n.own, op, r, h.off, int(h.size))
		var old uint64
		if err == nil {
			old, err = performAMO(n.cfg.Regions[r], op, h.off, int(h.size), h.v, h.cmp)
		}
		if err == nil {
			n.incoming.signal()
		}
		if h.id == 0 {
			if err != nil {
				s.refuse(err)
			}
			return false, nil
		}
		return false, s.reply(replyAMO, h.id, old, nil, err)
	case opMsg:
		if h.n > maxMsg {
			return false, fmt.Errorf("protocol error: a message of %d bytes", h.n)
		}
		data := make([]byte, h.n)
		if _, err := io.ReadFull(s.br, data); err != nil {
			return false, err
		}
		n.q.deliver(&message{from: s.from, tag: h.off, data: data})
		n.incoming.signal()
	case opFlush:
		var refusal error
		if s.sticky != "" {
			refusal = fmt.Errorf("an earlier put or atomic: %s", s.sticky)
			s.sticky = ""
		}
		return false, s.reply(replyFlush, h.id, 0, nil, refusal)
	case opBye:
		s.reply(replyBye, 0, 0, nil, nil)
		s.bw.Flush()
		return true, nil
	case opAbort:
		return false, errAbort
	default:
		return false, fmt.Errorf("protocol error: request %d", h.op)
	}
	return false, nil
}
