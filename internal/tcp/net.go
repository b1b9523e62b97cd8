package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/transport"
)

func init() {
	transport.Register(transport.Transport{Name: "tcp", Priority: 10, Open: Open})
}

// Tunables (see the package doc).
const (
	// slice is how long a wait waits before it checks the peer again.
	slice = time.Millisecond
	// copyMax is the largest message SendNB copies (and completes at
	// once); a larger one is written from the caller's buffer.
	copyMax = 16 << 10
	// maxQueued bounds the copied bytes waiting in one peer's queue; a
	// blocking Put that would exceed it waits for the writer.
	maxQueued = 32 << 20
	// linger bounds how long Close waits for the peers' goodbyes.
	linger = 2 * time.Second
	// attemptTimeout bounds one candidate address's dial and handshake.
	attemptTimeout = 3 * time.Second
)

// errNetClosed is the cause of every failure after Close.
var errNetClosed = fmt.Errorf("tcp: the transport was closed: %w", errs.ErrClosed)

// errPeerClosed is the cause of a wait on a peer that said goodbye.
var errPeerClosed = errors.New("the peer closed its transport (an orderly goodbye)")

// errAnnounced is the cause of a wait ended by an announcement when
// Config.Announced is nil.
var errAnnounced = errors.New("announced lost by another peer")

// peerState is what this PE knows of a peer's end. Guarded by Net.mu.
type peerState struct {
	lost   error // why its connection broke without a goodbye; set once
	closed bool  // it said goodbye (and was not lost before)
}

// Net is one PE's transport.Net over TCP (see the package doc).
type Net struct {
	cfg     transport.Config
	rank    int
	size    int
	job     string
	own     []uint64 // this PE's region sizes
	recs    []record // every PE's record; read-only after Open
	ln      net.Listener
	ctx     context.Context // cancelled by Close: ends dialling
	cancel  context.CancelFunc
	closing chan struct{} // closed by Close: ends every wait
	closed  atomic.Bool   // Close has begun
	// targetOnly leaves every check of an operation to the target (tests).
	targetOnly bool

	mu        sync.Mutex
	outs      []*outConn           // the connection this PE dialled to each peer, nil until first use; guarded by mu
	ins       map[*inConn]struct{} // accepted connections; guarded by mu
	state     []peerState          // guarded by mu
	firstLost int                  // the first peer lost, -1: none; guarded by mu
	shut      bool                 // Close has taken the connections: no new one; guarded by mu

	q         queue
	incoming  event // an operation or message handled by a server (Sleep, Progress)
	local     event // a reply taken or a write done (WaitEvent)
	sleepSeen atomic.Uint64
	progSeen  atomic.Uint64
	wg        sync.WaitGroup // every goroutine of the Net
}

// Open listens, publishes this PE's record through c.Boot, fences, and
// reads every PE's record. Connections are made on first use.
// SYMHEAP_TCP_ADDR, if set, is the one IP to listen on and publish.
// c.PeerErrors is ignored: peers' failures are always reported.
func Open(c transport.Config) (transport.Net, error) {
	if c.Boot == nil {
		return nil, fmt.Errorf("tcp: Open without a bootstrap: %w", errs.ErrBadConfig)
	}
	rank, size := c.Boot.Rank(), c.Boot.Size()
	if size <= 0 || rank < 0 || rank >= size {
		return nil, fmt.Errorf("tcp: Open: rank %d of %d: %w", rank, size, errs.ErrBadConfig)
	}
	ip := os.Getenv("SYMHEAP_TCP_ADDR")
	if ip != "" && net.ParseIP(ip) == nil {
		return nil, fmt.Errorf("tcp: SYMHEAP_TCP_ADDR=%q is not an IP address: %w", ip, errs.ErrBadConfig)
	}
	ln, err := net.Listen("tcp", listenAddr(ip))
	if err != nil {
		return nil, fmt.Errorf("tcp: listening on %s: %w", listenAddr(ip), err)
	}
	n := &Net{
		cfg: c, rank: rank, size: size, job: c.Boot.Job(), ln: ln,
		closing:   make(chan struct{}),
		outs:      make([]*outConn, size),
		ins:       map[*inConn]struct{}{},
		state:     make([]peerState, size),
		firstLost: -1,
		recs:      make([]record, size),
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	for _, r := range c.Regions {
		n.own = append(n.own, uint64(len(r)))
	}
	// Serve from now on: a peer may dial as soon as it has the record.
	n.wg.Add(1)
	go n.accept()
	rec := record{Addrs: candidates(ip, ln.Addr().(*net.TCPAddr).Port), Regions: n.own}
	fail := func(err error) (transport.Net, error) {
		n.Close()
		return nil, err
	}
	if err := c.Boot.Publish(bootKey, rec.encode()); err != nil {
		return fail(fmt.Errorf("tcp: publishing this PE's addresses: %w", err))
	}
	if err := c.Boot.Fence(); err != nil {
		return fail(fmt.Errorf("tcp: fence after publishing: %w", err))
	}
	for p := range size {
		b, err := c.Boot.Get(p, bootKey)
		if err != nil {
			return fail(fmt.Errorf("tcp: PE %d's addresses: %w", p, err))
		}
		if n.recs[p], err = decodeRecord(b); err != nil {
			return fail(fmt.Errorf("tcp: PE %d's addresses: %v: %w", p, err, errs.ErrBadConfig))
		}
	}
	return n, nil
}

// accept is the listener's goroutine: a server goroutine per connection.
func (n *Net) accept() {
	defer n.wg.Done()
	for {
		c, err := n.ln.Accept()
		if err != nil {
			if n.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient failure (out of descriptors): try again soon.
			select {
			case <-n.closing:
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		ic := &inConn{n: n, c: c}
		n.mu.Lock()
		if n.shut {
			n.mu.Unlock()
			c.Close()
			continue
		}
		n.ins[ic] = struct{}{}
		n.wg.Add(1)
		n.mu.Unlock()
		go ic.serve()
	}
}

// checkPeer checks that the Net is open and peer is a rank of the job.
func (n *Net) checkPeer(peer int, what string) error {
	if n.closed.Load() {
		return fmt.Errorf("tcp: %s: %w", what, errNetClosed)
	}
	if peer < 0 || peer >= n.size {
		return fmt.Errorf("tcp: %s: peer %d: %w (the job has %d)", what, peer, errs.ErrBadPE, n.size)
	}
	return nil
}

// checkAt returns the origin's check's error, unless a test turned the
// origin's checks off (targetOnly) to exercise the target's.
func (n *Net) checkAt(err error) error {
	if n.targetOnly {
		return nil
	}
	return err
}

// out returns the connection to peer, starting it on first use; an
// error if the peer is lost or gone, or the Net closed.
func (n *Net) out(peer int, what string) (*outConn, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.shut || n.closed.Load() {
		return nil, fmt.Errorf("tcp: %s: %w", what, errNetClosed)
	}
	if st := n.state[peer]; st.lost != nil {
		return nil, &transport.PeerError{Peer: peer, Op: what, Err: st.lost}
	} else if st.closed {
		return nil, &transport.PeerError{Peer: peer, Op: what, Err: errPeerClosed}
	}
	oc := n.outs[peer]
	if oc == nil {
		oc = newOutConn(n, peer)
		n.outs[peer] = oc
		n.wg.Add(1)
		go oc.run()
	}
	return oc, nil
}

// opErr turns the cause of a failed operation on peer into its error: a
// target's refusal or the Net's close as they are, anything else a
// PeerError.
func (n *Net) opErr(peer int, what string, cause error) error {
	var r refused
	var pe *transport.PeerError
	switch {
	case cause == nil:
		return nil
	case errors.As(cause, &pe):
		return cause
	case errors.As(cause, &r):
		return fmt.Errorf("tcp: %s on peer %d: refused by the target: %w", what, peer, cause)
	case errors.Is(cause, errs.ErrClosed) && !errors.Is(cause, errPeerClosed):
		return fmt.Errorf("tcp: %s on peer %d: %w", what, peer, cause)
	}
	return &transport.PeerError{Peer: peer, Op: what, Err: cause}
}

// refused is a target's refusal of an operation, its text as the target
// wrote it.
type refused struct{ text string }

func (e refused) Error() string { return e.text }
func (e refused) Unwrap() error { return errs.ErrBadArg }

// markLost records that peer's connection broke without a goodbye, and
// fails what waits on this PE's connection to it.
func (n *Net) markLost(peer int, cause error) {
	n.mu.Lock()
	st := &n.state[peer]
	if st.lost == nil && !st.closed && !n.shut {
		st.lost = cause
		if n.firstLost < 0 {
			n.firstLost = peer
		}
	}
	oc := n.outs[peer]
	n.mu.Unlock()
	if oc != nil {
		oc.fail(cause)
	}
	n.local.signal()
}

// markClosed records peer's goodbye (unless it was lost before).
func (n *Net) markClosed(peer int) {
	n.mu.Lock()
	if n.state[peer].lost == nil {
		n.state[peer].closed = true
	}
	n.mu.Unlock()
	n.local.signal()
}

// peerGone returns why peer cannot be waited on: lost, or (orderly)
// closed; nil otherwise.
func (n *Net) peerGone(peer int, orderly bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch st := n.state[peer]; {
	case st.lost != nil:
		return st.lost
	case orderly && st.closed:
		return errPeerClosed
	}
	return nil
}

// stuck is the check between slices of a wait on peer (-1: on none in
// particular), as UCX's worker makes it: an announcement, the peer's
// loss (or, for orderly, its goodbye), Config.Lost, and (timed) the
// timeout counted from start.
func (n *Net) stuck(peer int, what string, start time.Time, timed, orderly bool) error {
	if v, ok := n.q.watched(); ok {
		if n.cfg.Announced != nil {
			return n.cfg.Announced(v)
		}
		return &transport.PeerError{Peer: int(v), Op: what, Err: errAnnounced}
	}
	if peer >= 0 && peer < n.size {
		if cause := n.peerGone(peer, orderly); cause != nil {
			return &transport.PeerError{Peer: peer, Op: what, Err: cause}
		}
	}
	if n.cfg.Lost != nil {
		if err := n.cfg.Lost(peer); err != nil {
			return err
		}
	}
	if timed && n.cfg.Timeout > 0 && time.Since(start) > n.cfg.Timeout {
		who := "a peer"
		if peer >= 0 {
			who = fmt.Sprintf("peer %d", peer)
		}
		return &transport.PeerError{Peer: peer, Op: what, Err: fmt.Errorf("%s has not answered for %v: %w", who, n.cfg.Timeout, transport.ErrTimeout)}
	}
	return nil
}

// waiter is one wait's state: what it waits on, for the checks between
// slices, and the slice's timer.
type waiter struct {
	n              *Net
	peer           int
	what           string
	timed, orderly bool
	check          func() error
	start          time.Time
	t              *time.Timer
}

func (n *Net) newWaiter(peer int, what string, timed, orderly bool, check func() error) *waiter {
	return &waiter{n: n, peer: peer, what: what, timed: timed, orderly: orderly, check: check, start: time.Now(), t: time.NewTimer(slice)}
}

// block waits until ch is closed (nil: never), the slice ends, or the Net
// closes. At the end of a slice it makes the checks; their error, or the
// Net's close, ends the wait.
func (w *waiter) block(ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-w.n.closing:
		return fmt.Errorf("tcp: %s: %w", w.what, errNetClosed)
	case <-w.t.C:
	}
	w.t.Reset(slice)
	if err := w.n.stuck(w.peer, w.what, w.start, w.timed, w.orderly); err != nil {
		return err
	}
	if w.check != nil {
		return w.check()
	}
	return nil
}

func (w *waiter) stop() { w.t.Stop() }

// waitDone waits until done is closed, as block does.
func (n *Net) waitDone(done <-chan struct{}, peer int, what string, timed, orderly bool, check func() error) error {
	select {
	case <-done:
		return nil
	default:
	}
	w := n.newWaiter(peer, what, timed, orderly, check)
	defer w.stop()
	for {
		if err := w.block(done); err != nil {
			return err
		}
		select {
		case <-done:
			return nil
		default:
		}
	}
}

// Put implements transport.Net. A blocking put copies src.
func (n *Net) Put(peer int, r transport.Region, off uint64, src []byte, nbi bool) error {
	if err := n.checkPeer(peer, "put"); err != nil {
		return err
	}
	if err := n.checkAt(checkRange(n.recs[peer].Regions, r, off, uint64(len(src)))); err != nil {
		return fmt.Errorf("tcp: put to peer %d: %w", peer, err)
	}
	oc, err := n.out(peer, "put")
	if err != nil || len(src) == 0 {
		return err
	}
	f := &frame{h: req{op: opPut, region: uint32(r), off: off, n: uint64(len(src))}, data: src}
	if !nbi {
		f.data, f.copied = slices.Clone(src), true
	}
	return n.opErr(peer, "put", oc.postSpace(f, nil))
}

// Get implements transport.Net.
func (n *Net) Get(dst []byte, peer int, r transport.Region, off uint64) error {
	if err := n.checkPeer(peer, "get"); err != nil {
		return err
	}
	if err := n.checkAt(checkRange(n.recs[peer].Regions, r, off, uint64(len(dst)))); err != nil {
		return fmt.Errorf("tcp: get from peer %d: %w", peer, err)
	}
	oc, err := n.out(peer, "get")
	if err != nil || len(dst) == 0 {
		return err
	}
	c := newCall(dst)
	if err := oc.post(&frame{h: req{op: opGet, region: uint32(r), off: off, n: uint64(len(dst))}}, c); err != nil {
		return n.opErr(peer, "get", err)
	}
	_, err = oc.await(c, "get", true)
	return err
}

// Atomic implements transport.Net.
func (n *Net) Atomic(op transport.AMO, peer int, r transport.Region, off uint64, size int, v, cmp uint64) (uint64, error) {
	if err := n.checkPeer(peer, "atomic"); err != nil {
		return 0, err
	}
	if err := n.checkAt(checkAMO(n.recs[peer].Regions, op, r, off, size)); err != nil {
		return 0, fmt.Errorf("tcp: atomic on peer %d: %w", peer, err)
	}
	oc, err := n.out(peer, "atomic")
	if err != nil {
		return 0, err
	}
	f := &frame{h: req{op: opAMO, amo: uint8(op), size: uint8(size), region: uint32(r), off: off, v: v, cmp: cmp}}
	if !fetching(op) {
		return 0, n.opErr(peer, "atomic", oc.post(f, nil))
	}
	c := newCall(nil)
	if err := oc.post(f, c); err != nil {
		return 0, n.opErr(peer, "atomic", err)
	}
	old, err := oc.await(c, "atomic", true)
	if size == 4 {
		old &= 0xffffffff
	}
	return old, err
}

// Fence implements transport.Net: nothing to do, operations to a peer
// are performed in the order they were posted (see the package doc).
func (n *Net) Fence() error {
	if n.closed.Load() {
		return fmt.Errorf("tcp: fence: %w", errNetClosed)
	}
	return nil
}

// Flush implements transport.Net: a flush request to every peer with
// puts or non-fetching atomics since its last one, and a wait for the
// answers (and for flush requests other goroutines sent before).
func (n *Net) Flush() error {
	if n.closed.Load() {
		return fmt.Errorf("tcp: flush: %w", errNetClosed)
	}
	n.mu.Lock()
	outs := slices.Clone(n.outs)
	n.mu.Unlock()
	type pending struct {
		oc *outConn
		c  *call
	}
	var ps []pending
	var first error
	for _, oc := range outs {
		if oc == nil {
			continue
		}
		c, err := oc.flush()
		if err != nil && first == nil {
			first = n.opErr(oc.peer, "flush", err)
		}
		if c != nil {
			ps = append(ps, pending{oc, c})
		}
	}
	for _, p := range ps {
		if _, err := p.oc.await(p.c, "flush", true); err != nil {
			if errors.Is(err, transport.ErrTimeout) {
				p.oc.redirty()
			}
			if first == nil {
				first = err
			}
		}
	}
	return first
}

// Progress implements transport.Net: the goroutines make the progress;
// it reports whether an incoming operation or message was handled since
// the last call.
func (n *Net) Progress() bool {
	cur := n.incoming.count()
	return n.progSeen.Swap(cur) != cur
}

// Sleep implements transport.Net. It returns at once if an incoming
// operation or message was handled since the last Sleep returned, or an
// announcement has arrived; else when one of them happens, the Net
// closes, or d passes. After Close it sleeps d.
func (n *Net) Sleep(d time.Duration) (announced uint64, ok bool) {
	if v, ok := n.q.watched(); ok {
		return v, true
	}
	if n.closed.Load() {
		time.Sleep(d)
		return 0, false
	}
	seen := n.sleepSeen.Load()
	if cur := n.incoming.count(); cur != seen {
		n.sleepSeen.Store(cur)
		return n.q.watched()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-n.incoming.since(seen):
	case <-t.C:
	case <-n.closing:
	}
	n.sleepSeen.Store(n.incoming.count())
	return n.q.watched()
}

// WaitEvent implements transport.Tagged: it waits at most a slice for an
// operation or message to arrive or a reply or write of this PE's to
// complete.
func (n *Net) WaitEvent() {
	in, lo := n.incoming.count(), n.local.count()
	a, b := n.incoming.since(in), n.local.since(lo)
	select {
	case <-a:
		return
	case <-b:
		return
	default: // nothing yet: wait, at most a slice
	}
	t := time.NewTimer(slice)
	defer t.Stop()
	select {
	case <-a:
	case <-b:
	case <-t.C:
	case <-n.closing:
	}
}

// Send implements transport.Tagged.
func (n *Net) Send(peer int, tag uint64, buf []byte, check func() error) error {
	r, err := n.SendNB(peer, tag, buf)
	if err != nil || r == nil {
		return err
	}
	s := r.(*sendReq)
	if err := n.waitDone(s.done, peer, "send", false, true, check); err != nil {
		s.oc.unqueue(s)
		return err
	}
	return n.opErr(peer, "send", s.err)
}

// sendReq is a SendNB of a message written from the caller's buffer. err
// is written under its connection's mu before done is closed.
type sendReq struct {
	oc   *outConn
	f    *frame
	done chan struct{}
	err  error
}

// SendNB implements transport.Tagged. A message of at most copyMax bytes
// is copied, and complete at once (nil Req).
func (n *Net) SendNB(peer int, tag uint64, buf []byte) (transport.Req, error) {
	if err := n.checkPeer(peer, "send"); err != nil {
		return nil, err
	}
	oc, err := n.out(peer, "send")
	if err != nil {
		return nil, err
	}
	f := &frame{h: req{op: opMsg, off: tag, n: uint64(len(buf))}}
	if len(buf) <= copyMax {
		f.data, f.copied = slices.Clone(buf), true
		return nil, n.opErr(peer, "send", oc.post(f, nil))
	}
	s := &sendReq{oc: oc, f: f, done: make(chan struct{})}
	f.data, f.sr = buf, s
	if err := oc.post(f, nil); err != nil {
		return nil, n.opErr(peer, "send", err)
	}
	return s, nil
}

// TryProbe implements transport.Tagged.
func (n *Net) TryProbe(tag, mask uint64) (stag uint64, l int, ok bool) {
	return n.q.probe(tag, mask)
}

// Probe implements transport.Tagged.
func (n *Net) Probe(tag, mask uint64, from int, check func() error) (uint64, int, error) {
	if n.closed.Load() {
		return 0, 0, fmt.Errorf("tcp: probe: %w", errNetClosed)
	}
	if from >= n.size {
		return 0, 0, n.checkPeer(from, "probe")
	}
	if from >= 0 {
		n.out(from, "probe") // so that its loss is noticed; the checks report it
	}
	var w *waiter
	for {
		seen := n.incoming.count()
		if stag, l, ok := n.q.probe(tag, mask); ok {
			if w != nil {
				w.stop()
			}
			return stag, l, nil
		}
		if w == nil {
			w = n.newWaiter(from, "probe", false, true, check)
			defer w.stop()
		}
		if err := w.block(n.incoming.since(seen)); err != nil {
			return 0, 0, err
		}
	}
}

// RecvNB implements transport.Tagged.
func (n *Net) RecvNB(buf []byte, tag uint64) (transport.Req, error) {
	r := n.q.post(buf, tag, ^uint64(0))
	if r == nil || n.closed.Load() {
		if r != nil {
			n.q.cancel(r)
		}
		return nil, fmt.Errorf("tcp: receive: %w", errNetClosed)
	}
	return r, nil
}

// RecvMatch implements transport.Tagged.
func (n *Net) RecvMatch(buf []byte, tag, mask uint64, maxLen, from int) (transport.Match, uint64, int, error) {
	limit := max(0, min(len(buf), maxLen))
	var t *time.Timer
	for {
		seen := n.incoming.count()
		if out, stag, l := n.q.take(buf, tag, mask, limit); out != 0 {
			if t != nil {
				t.Stop()
			}
			return transport.Match(out), stag, l, nil
		}
		if n.closed.Load() {
			return transport.MatchNone, 0, 0, fmt.Errorf("tcp: receive from peer %d: %w", from, errNetClosed)
		}
		if t == nil {
			t = time.NewTimer(slice)
			defer t.Stop()
		}
		select {
		case <-n.incoming.since(seen):
		case <-n.closing:
		case <-t.C:
			return transport.MatchNone, 0, 0, nil
		}
	}
}

// Recv implements transport.Tagged.
func (n *Net) Recv(buf []byte, tag, mask uint64, from int, check func() error) (int, uint64, error) {
	if n.closed.Load() {
		return 0, 0, fmt.Errorf("tcp: receive: %w", errNetClosed)
	}
	if from >= n.size {
		return 0, 0, n.checkPeer(from, "receive")
	}
	r := n.q.post(buf, tag, mask)
	if r == nil {
		return 0, 0, fmt.Errorf("tcp: receive: %w", errNetClosed)
	}
	select {
	case <-r.done:
		return r.n, r.stag, r.err
	default:
	}
	if from >= 0 {
		n.out(from, "receive") // so that its loss is noticed; the checks report it
	}
	if err := n.waitDone(r.done, from, "receive", false, true, check); err != nil {
		if n.q.cancel(r) {
			return 0, 0, err
		}
		<-r.done // completed meanwhile: it is received
	}
	return r.n, r.stag, r.err
}

// Test implements transport.Tagged.
func (n *Net) Test(r transport.Req, peer int) (done bool, l int, err error) {
	switch r := r.(type) {
	case nil:
		return true, 0, nil
	case *sendReq:
		select {
		case <-r.done:
			return true, 0, n.opErr(peer, "send", r.err)
		default:
			return false, 0, nil
		}
	case *recvReq:
		select {
		case <-r.done:
			return true, r.n, r.err
		default:
			return false, 0, nil
		}
	}
	return true, 0, fmt.Errorf("tcp: Test of a %T, not a request of this transport: %w", r, errs.ErrBadArg)
}

// Check implements transport.Tagged.
func (n *Net) Check(peer int) error {
	return n.stuck(peer, "message", time.Now(), false, false)
}

// Failed implements transport.Tagged.
func (n *Net) Failed() (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p := n.firstLost; p >= 0 {
		return p, &transport.PeerError{Peer: p, Op: "connection", Err: n.state[p].lost}
	}
	return -1, nil
}

// Watch implements transport.Tagged. A second Watch replaces the first if
// its announcement has not arrived.
func (n *Net) Watch(tag, mask uint64) error {
	if n.closed.Load() {
		return fmt.Errorf("tcp: Watch: %w", errNetClosed)
	}
	if err := n.q.setWatch(tag, mask); err != nil {
		return err
	}
	if _, ok := n.q.watched(); ok {
		n.incoming.signal() // arrived before: Sleep returns it now
	}
	return nil
}

// Watched implements transport.Tagged.
func (n *Net) Watched() (uint64, bool) { return n.q.watched() }

// Connect implements transport.Tagged: it starts the connections to
// peers (their frames wait in order until each is up).
func (n *Net) Connect(peers []int) error {
	for _, p := range peers {
		if p < 0 || p >= len(n.outs) {
			return fmt.Errorf("tcp: connect to peer %d of %d: %w", p, len(n.outs), errs.ErrBadArg)
		}
		if _, err := n.out(p, "connect"); err != nil {
			return err
		}
	}
	return nil
}

// connected reports whether this Net has started its connection to peer.
func (n *Net) connected(peer int) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return peer >= 0 && peer < len(n.outs) && n.outs[peer] != nil
}

// Announce implements transport.Tagged: an 8-byte message to each of
// peers that is connected (Connect, or an earlier operation) and not
// known lost; with flush, a wait (at most Timeout, and ended by the
// checks of every wait) until they have been written.
func (n *Net) Announce(peers []int, tag, val uint64, flush bool) {
	var b [8]byte
	for i := range b {
		b[i] = byte(val >> (8 * i))
	}
	var sent []*sendReq
	for _, p := range peers {
		if !n.connected(p) || n.checkPeer(p, "announce") != nil {
			continue
		}
		oc, err := n.out(p, "announce")
		if err != nil {
			continue
		}
		f := &frame{h: req{op: opMsg, off: tag, n: 8}, data: b[:]}
		if flush {
			f.sr = &sendReq{oc: oc, f: f, done: make(chan struct{})}
		}
		if oc.post(f, nil) == nil && flush {
			sent = append(sent, f.sr)
		}
	}
	if len(sent) == 0 {
		return
	}
	w := n.newWaiter(-1, "announce", true, false, nil)
	defer w.stop()
	for _, s := range sent {
		for {
			select {
			case <-s.done:
			default:
				if w.block(s.done) != nil {
					return
				}
				continue
			}
			break
		}
	}
}

// Describe implements transport.Net: the address of the connection to
// peer, or its candidates if there is none yet.
func (n *Net) Describe(peer int) (string, error) {
	if err := n.checkPeer(peer, "describe"); err != nil {
		return "", err
	}
	n.mu.Lock()
	oc := n.outs[peer]
	n.mu.Unlock()
	if oc != nil {
		if a := oc.remote(); a != "" {
			return "tcp " + a, nil
		}
	}
	a := n.recs[peer].Addrs
	s := "tcp " + a[0] + " (not connected yet"
	if len(a) > 1 {
		s += "; also " + strings.Join(a[1:], ", ")
	}
	return s + ")", nil
}

// Close implements transport.Net (see the package doc). Idempotent.
func (n *Net) Close() {
	if !n.closed.CompareAndSwap(false, true) {
		return
	}
	close(n.closing)
	n.cancel()
	n.ln.Close()
	n.mu.Lock()
	n.shut = true
	outs := slices.Clone(n.outs)
	var ins []*inConn
	for ic := range n.ins {
		ins = append(ins, ic)
	}
	n.mu.Unlock()
	deadline := time.Now().Add(linger)
	for _, oc := range outs {
		if oc != nil {
			oc.bye(deadline)
		}
	}
	for _, ic := range ins {
		ic.bye(deadline)
	}
	n.wg.Wait()
	for _, oc := range outs {
		if oc != nil {
			oc.fail(errNetClosed)
		}
	}
	n.q.close(errNetClosed)
	n.incoming.signal()
	n.local.signal()
}

var _ transport.Net = (*Net)(nil)
