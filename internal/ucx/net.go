//go:build ucx

package ucx

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/symheap/symheap/internal/transport"
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
	w     *Worker
	bases [][]uint64 // by peer, by region
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
		w.Close()
		return nil, err
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

func (n *ucxNet) Put(peer int, r transport.Region, off uint64, src []byte, nbi bool) error {
	b, err := n.base(peer, r)
	if err != nil {
		return err
	}
	return n.w.Put(peer, int(r), b+off, src, nbi)
}

func (n *ucxNet) Get(dst []byte, peer int, r transport.Region, off uint64) error {
	b, err := n.base(peer, r)
	if err != nil {
		return err
	}
	return n.w.Get(dst, peer, int(r), b+off)
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

func (n *ucxNet) Fence() error   { return n.w.Fence() }
func (n *ucxNet) Flush() error   { return n.w.Flush() }
func (n *ucxNet) Progress() bool { return n.w.Progress() }
func (n *ucxNet) Sleep(d time.Duration) (uint64, bool) {
	return n.w.Sleep(d)
}
func (n *ucxNet) Describe(peer int) (string, error) { return n.w.EndpointInfo(peer) }
func (n *ucxNet) Close()                            { n.w.Close() }

func (n *ucxNet) Send(peer int, tag uint64, buf []byte, check func() error) error {
	return n.w.Send(peer, tag, buf, check)
}

func (n *ucxNet) SendNB(peer int, tag uint64, buf []byte) (transport.Req, error) {
	r, err := n.w.SendNB(peer, tag, buf)
	if r == nil {
		return nil, err // complete at once, or failed: no request
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
func (n *ucxNet) Announce(peers []int, tag, val uint64, flush bool) {
	n.w.Announce(peers, tag, val, flush)
}
