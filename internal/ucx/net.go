//go:build ucx

package ucx

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/symheap/symheap/internal/transport"
	"github.com/symheap/symheap/memhook"
	"github.com/symheap/symheap/rcache"
)

// The transport.Net over UCX, registered as "ucx": the transport of
// choice where it is built.

func init() {
	transport.Register(transport.Transport{Name: "ucx", Priority: 20, Open: OpenNet})
}

// bootKey is the key under which each PE publishes its Peer record.
const bootKey = "symheap.ucx"

// ucxNet is a Worker with every peer's published base addresses, which
// turn the seam's region offsets into UCX's remote addresses.
type ucxNet struct {
	w       *Worker
	bases   [][]uint64      // by peer, by region
	regions []memhook.Range // this PE's registered regions, which need no entry

	// cache registers the buffers of puts, gets and sends outside the
	// regions (symheap's registration cache, one transport: this
	// worker), whose handle each operation hands to UCX.
	cache *rcache.Cache
	// held are the entries of non-blocking puts, given back at the
	// next Flush (heldMu).
	heldMu sync.Mutex
	held   []*rcache.Entry
}

// cacheMin is the smallest buffer registered through the cache: UCX sends
// smaller ones by copying them (eager protocols), with no registration.
const cacheMin = 4096

// The cache's bounds: registrations of idle buffers beyond them are
// released, least recently used first.
const (
	cacheMaxEntries = 1024
	cacheMaxBytes   = 1 << 30
)

// memReg registers ranges with a worker (ucp_mem_map).
type memReg struct{ w *Worker }

func (m memReg) Name() string { return "ucx" }
func (m memReg) Register(r rcache.Range) (rcache.Handle, error) {
	return m.w.MemMap(r.Start, r.Len())
}
func (m memReg) Deregister(_ rcache.Range, h rcache.Handle) error {
	return m.w.MemUnmap(h.(Mem))
}

// OpenNet opens a Worker for the job c.Boot describes, registers c.Regions,
// publishes this PE's address, bases and keys, fences, and reads every
// PE's (its own too: messages to itself). Endpoints are made on first use.
func OpenNet(c transport.Config) (transport.Net, error) {
	size := c.Boot.Size()
	w, err := Open(size, c.PeerErrors)
	if err != nil {
		return nil, err
	}
	n := &ucxNet{w: w, bases: make([][]uint64, size)}
	fail := func(err error) (transport.Net, error) {
		if n.cache != nil {
			n.cache.Close()
		}
		w.Close()
		return nil, err
	}
	if c.Cache {
		n.cache, err = rcache.New(rcache.Config{Registrars: []rcache.Registrar{memReg{w}},
			MaxEntries: cacheMaxEntries, MaxBytes: cacheMaxBytes, Monitor: c.Monitor})
		if err != nil {
			return fail(err)
		}
	}
	w.Timeout, w.Lost, w.Announced = c.Timeout, c.Lost, c.Announced
	addr, err := w.Address()
	if err != nil {
		return fail(err)
	}
	bases := make([]uint64, len(c.Regions))
	rkeys := make([][]byte, len(c.Regions))
	for i, r := range c.Regions {
		if rkeys[i], err = w.RegisterBytes(r); err != nil {
			return fail(err)
		}
		bases[i] = addressOf(r)
		n.regions = append(n.regions, memhook.RangeOf(r))
	}
	if err := c.Boot.Publish(bootKey, encodePeer(addr, bases, rkeys)); err != nil {
		return fail(err)
	}
	if err := c.Boot.Fence(); err != nil {
		return fail(err)
	}
	for r := range size {
		b, err := c.Boot.Get(r, bootKey)
		if err != nil {
			return fail(fmt.Errorf("ucx: PE %d's address: %w", r, err))
		}
		info, err := decodePeer(b, len(c.Regions))
		if err != nil {
			return fail(fmt.Errorf("ucx: PE %d's address: %w", r, err))
		}
		n.bases[r] = info.Bases
		w.SetPeer(r, info)
	}
	return n, nil
}

// encodePeer and decodePeer are the record each PE publishes: its worker
// address, then for each region its base and packed key, each byte
// string preceded by its length.
func encodePeer(addr []byte, bases []uint64, rkeys [][]byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(addr)))
	b = append(b, addr...)
	for i := range bases {
		b = binary.LittleEndian.AppendUint64(b, bases[i])
		b = binary.LittleEndian.AppendUint32(b, uint32(len(rkeys[i])))
		b = append(b, rkeys[i]...)
	}
	return b
}

func decodePeer(b []byte, regions int) (Peer, error) {
	bad := errors.New("malformed record")
	next := func(n int) ([]byte, bool) {
		if n < 0 || len(b) < n {
			return nil, false
		}
		v := b[:n]
		b = b[n:]
		return v, true
	}
	var p Peer
	l, ok := next(4)
	if !ok {
		return p, bad
	}
	if p.Addr, ok = next(int(binary.LittleEndian.Uint32(l))); !ok {
		return p, bad
	}
	for range regions {
		v, ok := next(8)
		if !ok {
			return p, bad
		}
		p.Bases = append(p.Bases, binary.LittleEndian.Uint64(v))
		if l, ok = next(4); !ok {
			return p, bad
		}
		k, ok := next(int(binary.LittleEndian.Uint32(l)))
		if !ok {
			return p, bad
		}
		p.Rkeys = append(p.Rkeys, k)
	}
	return p, nil
}

func (n *ucxNet) base(peer int, r transport.Region) (uint64, error) {
	if peer < 0 || peer >= len(n.bases) || int(r) < 0 || int(r) >= len(n.bases[peer]) {
		return 0, fmt.Errorf("ucx: peer %d region %d: no such region", peer, r)
	}
	return n.bases[peer][r], nil
}

// entry returns the cache's entry for buf and its memory handle, or none
// (a small buffer, one in a registered region, memory the cache cannot
// follow). The caller gives the entry back (done) once UCX is finished
// with buf.
func (n *ucxNet) entry(buf []byte) (*rcache.Entry, Mem, error) {
	if n.cache == nil || len(buf) < cacheMin {
		return nil, Mem{}, nil
	}
	r := memhook.RangeOf(buf)
	for _, reg := range n.regions {
		if reg.Contains(r) {
			return nil, Mem{}, nil
		}
	}
	e, err := n.cache.GetBytes(buf, 1)
	if e == nil || err != nil {
		return nil, Mem{}, err
	}
	return e, e.Handle(0).(Mem), nil
}

func (n *ucxNet) done(e *rcache.Entry) {
	if e != nil {
		n.cache.Put(e)
	}
}

// CacheStats returns the registration cache's figures (transport.Caching).
func (n *ucxNet) CacheStats() rcache.Stats {
	if n.cache == nil {
		return rcache.Stats{}
	}
	return n.cache.Stats()
}

func (n *ucxNet) Put(peer int, r transport.Region, off uint64, src []byte, nbi bool) error {
	b, err := n.base(peer, r)
	if err != nil {
		return err
	}
	e, m, err := n.entry(src)
	if err != nil {
		return err
	}
	err = n.w.Put(peer, int(r), b+off, src, nbi, m)
	if nbi && err == nil && e != nil {
		// UCX reads src until the next Flush: so long the entry is held.
		n.heldMu.Lock()
		n.held = append(n.held, e)
		n.heldMu.Unlock()
		return nil
	}
	n.done(e)
	return err
}

func (n *ucxNet) Get(dst []byte, peer int, r transport.Region, off uint64) error {
	b, err := n.base(peer, r)
	if err != nil {
		return err
	}
	e, m, err := n.entry(dst)
	if err != nil {
		return err
	}
	defer n.done(e)
	return n.w.Get(dst, peer, int(r), b+off, m)
}

// amoOps maps the seam's atomics to UCP's, and whether they fetch.
var amoOps = map[transport.AMO]struct {
	op    int
	fetch bool
}{
	transport.AMOFetch: {OpOr, true}, // or 0
	transport.AMOSet:   {OpSwap, true},
	transport.AMOSwap:  {OpSwap, true}, transport.AMOCompareSwap: {OpCSwap, true},
	transport.AMOFetchAdd: {OpAdd, true}, transport.AMOFetchAnd: {OpAnd, true},
	transport.AMOFetchOr: {OpOr, true}, transport.AMOFetchXor: {OpXor, true},
	transport.AMOAdd: {OpAdd, false}, transport.AMOAnd: {OpAnd, false},
	transport.AMOOr: {OpOr, false}, transport.AMOXor: {OpXor, false},
}

func (n *ucxNet) Atomic(op transport.AMO, peer int, r transport.Region, off uint64, size int, v, cmp uint64) (uint64, error) {
	o, ok := amoOps[op]
	if !ok {
		return 0, fmt.Errorf("ucx: atomic operation %d: not an operation", op)
	}
	if size != 4 && size != 8 {
		return 0, fmt.Errorf("ucx: atomic on %d bytes: only 4 and 8", size)
	}
	b, err := n.base(peer, r)
	if err != nil {
		return 0, err
	}
	if op == transport.AMOFetch {
		v = 0
	}
	return n.w.Atomic(o.op, peer, int(r), b+off, size, v, cmp, o.fetch)
}

func (n *ucxNet) Fence() error { return n.w.Fence() }
func (n *ucxNet) Flush() error {
	if err := n.w.Flush(); err != nil {
		return err
	}
	n.heldMu.Lock()
	held := n.held
	n.held = nil
	n.heldMu.Unlock()
	for _, e := range held {
		n.done(e)
	}
	return nil
}
func (n *ucxNet) Progress() bool { return n.w.Progress() }
func (n *ucxNet) Sleep(d time.Duration) (uint64, bool) {
	return n.w.Sleep(d)
}
func (n *ucxNet) Describe(peer int) (string, error) { return n.w.EndpointInfo(peer) }

// Close closes the cache, which deregisters every idle entry (UCX's
// cleanup refuses a context with memory still mapped), then the worker.
// An entry still held (a non-blocking put never flushed) is given up with
// the context; its deregistration then does nothing.
func (n *ucxNet) Close() {
	if n.cache != nil {
		n.heldMu.Lock()
		held := n.held
		n.held = nil
		n.heldMu.Unlock()
		for _, e := range held {
			n.done(e)
		}
		n.cache.Close()
	}
	n.w.Close()
}

func (n *ucxNet) Send(peer int, tag uint64, buf []byte, check func() error) error {
	e, m, err := n.entry(buf)
	if err != nil {
		return err
	}
	defer n.done(e)
	return n.w.Send(peer, tag, buf, check, m)
}

// sendReq is a non-blocking send whose buffer has a cache entry, given
// back when Test finds the send complete.
type sendReq struct {
	r *Req
	e *rcache.Entry
}

func (n *ucxNet) SendNB(peer int, tag uint64, buf []byte) (transport.Req, error) {
	e, m, err := n.entry(buf)
	if err != nil {
		return nil, err
	}
	r, err := n.w.SendNB(peer, tag, buf, m)
	if r == nil {
		n.done(e)
		return nil, err // complete at once, or failed: no request
	}
	if e != nil {
		return &sendReq{r, e}, err
	}
	return r, err
}

func (n *ucxNet) TryProbe(tag, mask uint64) (uint64, int, bool) { return n.w.TryProbe(tag, mask) }

func (n *ucxNet) Probe(tag, mask uint64, from int, check func() error) (uint64, int, error) {
	return n.w.Probe(tag, mask, from, check)
}

func (n *ucxNet) RecvNB(buf []byte, tag uint64) (transport.Req, error) {
	r, err := n.w.RecvNB(buf, tag)
	if r == nil {
		return nil, err
	}
	return r, err
}

func (n *ucxNet) RecvMatch(buf []byte, tag, mask uint64, max, from int) (transport.Match, uint64, int, error) {
	return n.w.RecvMatch(buf, tag, mask, max, from)
}

func (n *ucxNet) Recv(buf []byte, tag, mask uint64, from int, check func() error) (int, uint64, error) {
	return n.w.Recv(buf, tag, mask, from, check)
}

func (n *ucxNet) Test(r transport.Req, peer int) (bool, int, error) {
	if r == nil {
		return true, 0, nil
	}
	if s, ok := r.(*sendReq); ok {
		done, k, err := n.w.Test(s.r, peer)
		if done {
			n.heldMu.Lock()
			e := s.e
			s.e = nil // two goroutines may test one request
			n.heldMu.Unlock()
			n.done(e)
		}
		return done, k, err
	}
	req, ok := r.(*Req)
	if !ok {
		return true, 0, fmt.Errorf("ucx: Test of a %T: not a UCX request", r)
	}
	return n.w.Test(req, peer)
}

func (n *ucxNet) WaitEvent()                   { n.w.WaitEvent() }
func (n *ucxNet) Check(peer int) error         { return n.w.Check(peer) }
func (n *ucxNet) Failed() (int, error)         { return n.w.Failed() }
func (n *ucxNet) Watch(tag, mask uint64) error { return n.w.Watch(tag, mask) }
func (n *ucxNet) Watched() (uint64, bool)      { return n.w.Watched() }
func (n *ucxNet) Connect(peers []int) error    { return n.w.Connect(peers) }
func (n *ucxNet) Announce(peers []int, tag, val uint64, flush bool) {
	n.w.Announce(peers, tag, val, flush)
}
