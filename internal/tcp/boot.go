package tcp

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/transport"
)

// The rendezvous bootstrap: for jobs started without PMIx, each PE is
// told (SYMHEAP_BOOT=host:port) where rank 0 listens. Rank 0 serves
// there; every other PE keeps one TCP connection to it, over which
// travel, as JSON messages:
//
//  1. hello (job, rank, size, node) and, once every rank has joined,
//     welcome (every rank's node) — or refuse;
//  2. fence (what the PE published since its last fence) and, once every
//     rank has sent its fence, fenced (what every rank published), which
//     is PMIx's collecting fence;
//  3. lost (rank 0 tells everyone of a PE whose connection closed
//     without a goodbye);
//  4. bye, the orderly goodbye, either way.
//
// A PE that sees its connection to rank 0 close without a goodbye
// reports rank 0 lost.

func init() {
	transport.RegisterBoot(transport.Boot{Name: "rendezvous", Priority: 10, Detect: detect})
}

// defaultBootTimeout is how long PEs wait for each other to join, unless
// SYMHEAP_BOOT_TIMEOUT says otherwise.
const defaultBootTimeout = 60 * time.Second

// detect is the rendezvous's transport.Boot.Detect: it applies when
// SYMHEAP_BOOT is set.
func detect(getenv func(string) string, who transport.Who) (transport.Bootstrap, error) {
	addr := getenv("SYMHEAP_BOOT")
	if addr == "" {
		return nil, nil
	}
	var missing []string
	if who.Rank < 0 {
		missing = append(missing, "this PE's rank")
	}
	if who.Size < 0 {
		missing = append(missing, "the job's size")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("rendezvous: SYMHEAP_BOOT=%s is set, but the launcher's variables do not give %s (set SYMHEAP_PE and SYMHEAP_NPES, or start the PEs with a launcher that does): %w",
			addr, strings.Join(missing, " or "), errs.ErrBadConfig)
	}
	timeout, err := bootTimeout(getenv)
	if err != nil {
		return nil, err
	}
	job := who.Job
	if job == "" {
		job = "rendezvous-" + addr
	}
	return rendezvous(nil, addr, who.Rank, who.Size, job, nodeName(getenv), timeout)
}

// bootTimeout reads SYMHEAP_BOOT_TIMEOUT: a duration ("90s") or seconds.
func bootTimeout(getenv func(string) string) (time.Duration, error) {
	v := getenv("SYMHEAP_BOOT_TIMEOUT")
	if v == "" {
		return defaultBootTimeout, nil
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second)), nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d, nil
	}
	return 0, fmt.Errorf("rendezvous: SYMHEAP_BOOT_TIMEOUT=%q is not a positive duration (\"90s\") or number of seconds: %w", v, errs.ErrBadConfig)
}

// Rendezvous joins the job of size PEs named job whose rank 0 listens at
// addr (host:port): rank 0 listens there, the others dial it. It returns
// once every rank has joined, or fails after SYMHEAP_BOOT_TIMEOUT
// (default 60 s). For tests and programs that start PEs themselves.
func Rendezvous(addr string, rank, size int, job string) (transport.Bootstrap, error) {
	timeout, err := bootTimeout(os.Getenv)
	if err != nil {
		return nil, err
	}
	return rendezvous(nil, addr, rank, size, job, nodeName(os.Getenv), timeout)
}

// RendezvousOn is Rendezvous for rank 0 on a listener of its own (one on
// port 0, whose address the caller gives the other ranks). It takes l
// over: the bootstrap's Close closes it.
func RendezvousOn(l net.Listener, size int, job string) (transport.Bootstrap, error) {
	timeout, err := bootTimeout(os.Getenv)
	if err != nil {
		l.Close()
		return nil, err
	}
	return rendezvous(l, l.Addr().String(), 0, size, job, nodeName(os.Getenv), timeout)
}

// bmsg is a rendezvous message.
type bmsg struct {
	T      string              `json:"t"` // hello, welcome, refuse, fence, fenced, lost, bye
	Job    string              `json:"job,omitempty"`
	Rank   int                 `json:"rank"`
	Size   int                 `json:"size,omitempty"`
	Node   string              `json:"node,omitempty"`
	Nodes  []string            `json:"nodes,omitempty"`
	Pub    map[string][]byte   `json:"pub,omitempty"` // fence: this PE's publications
	All    []map[string][]byte `json:"all,omitempty"` // fenced: every rank's, by rank
	Status string              `json:"status,omitempty"`
}

// bconn is one end of a rendezvous connection.
type bconn struct {
	c   net.Conn
	dec *json.Decoder
	mu  sync.Mutex // serializes writes
	enc *json.Encoder
}

func newBconn(c net.Conn) *bconn {
	return &bconn{c: c, dec: json.NewDecoder(c), enc: json.NewEncoder(c)}
}

func (b *bconn) send(m *bmsg) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.enc.Encode(m)
}

// boot is the rendezvous Bootstrap. Rank 0 runs the server (ln, peers),
// the others a client (up).
type boot struct {
	rank, size int
	job, addr  string
	nodes      []string // every rank's node; read-only after the join

	ln    net.Listener // rank 0
	up    *bconn       // ranks > 0: the connection to rank 0
	wg    sync.WaitGroup
	fence event // a fence completed, a loss, a close: Fence re-checks

	mu     sync.Mutex
	peers  []*bconn                  // rank 0: each rank's connection (nil: not joined, or gone); guarded by mu
	conns  map[*bconn]struct{}       // rank 0: every connection accepted and open, joined or not; guarded by mu
	pub    map[string][]byte         // published since the last fence; guarded by mu
	store  []map[string][]byte       // every rank's values as of the last fence; guarded by mu
	fences int                       // fences completed; guarded by mu
	round  map[int]map[string][]byte // rank 0: the current fence's contributions; guarded by mu
	lost   int                       // the first rank lost, -1: none; guarded by mu
	status string                    // how it was lost; guarded by mu
	left   []bool                    // ranks that said goodbye; guarded by mu
	broken error                     // no more fences (rank 0 gone or closed); guarded by mu
	closed bool                      // guarded by mu
	joined int                       // rank 0: ranks joined, itself included; guarded by mu
}

// rendezvous makes the bootstrap: rank 0 serves on l (or listens at
// addr), the others dial addr; it returns once every rank has joined.
func rendezvous(l net.Listener, addr string, rank, size int, job, node string, timeout time.Duration) (transport.Bootstrap, error) {
	if size <= 0 || rank < 0 || rank >= size {
		if l != nil {
			l.Close()
		}
		return nil, fmt.Errorf("rendezvous: rank %d of a job of %d: %w", rank, size, errs.ErrBadConfig)
	}
	b := &boot{rank: rank, size: size, job: job, addr: addr, lost: -1,
		pub: map[string][]byte{}, store: make([]map[string][]byte, size), left: make([]bool, size)}
	if rank == 0 {
		return b.serve(l, node, timeout)
	}
	return b.join(node, timeout)
}

// serve is rank 0's start: listen, take every other rank's hello, then
// welcome them all.
func (b *boot) serve(l net.Listener, node string, timeout time.Duration) (transport.Bootstrap, error) {
	if l == nil {
		var err error
		if l, err = net.Listen("tcp", b.addr); err != nil {
			return nil, fmt.Errorf("rendezvous: rank 0 listening at SYMHEAP_BOOT=%s: %w (it must name an address of rank 0's host and a free port)", b.addr, err)
		}
	}
	b.ln = l
	b.peers = make([]*bconn, b.size)
	b.conns = map[*bconn]struct{}{}
	b.nodes = make([]string, b.size)
	b.nodes[0] = node
	b.joined = 1
	b.round = map[int]map[string][]byte{}
	b.wg.Add(1)
	go b.accept()
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		seen := b.fence.count()
		b.mu.Lock()
		done := b.joined == b.size
		b.mu.Unlock()
		if done {
			break
		}
		select {
		case <-b.fence.since(seen):
		case <-t.C:
			b.mu.Lock()
			var missing []int
			for r := 1; r < b.size; r++ {
				if b.peers[r] == nil {
					missing = append(missing, r)
				}
			}
			joined := b.joined
			b.mu.Unlock()
			b.Close()
			return nil, fmt.Errorf("rendezvous at %s: %d of %d PEs joined within %v, missing ranks %v (check that they run with SYMHEAP_BOOT=%s, the same job size and job, and can reach this address; SYMHEAP_BOOT_TIMEOUT sets the wait)",
				b.addr, joined, b.size, timeout, missing, b.addr)
		}
	}
	b.mu.Lock()
	peers := slices.Clone(b.peers)
	b.mu.Unlock()
	for r, p := range peers {
		if p != nil {
			p.send(&bmsg{T: "welcome", Rank: r, Nodes: b.nodes})
		}
	}
	return b, nil
}

// accept is rank 0's listener goroutine.
func (b *boot) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		p := newBconn(c)
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			c.Close()
			continue
		}
		b.conns[p] = struct{}{}
		b.wg.Add(1)
		b.mu.Unlock()
		go b.serveConn(p)
	}
}

// serveConn is rank 0's goroutine for one rank's connection: its hello,
// then its fences and goodbye.
func (b *boot) serveConn(p *bconn) {
	defer b.wg.Done()
	defer func() {
		p.c.Close()
		b.mu.Lock()
		delete(b.conns, p)
		b.mu.Unlock()
	}()
	p.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var m bmsg
	if err := p.dec.Decode(&m); err != nil || m.T != "hello" {
		return
	}
	refuse := ""
	b.mu.Lock()
	switch {
	case b.closed:
		refuse = "rank 0 is closing"
	case m.Job != b.job:
		refuse = fmt.Sprintf("this is the rendezvous of job %q, not %q", b.job, m.Job)
	case m.Size != b.size:
		refuse = fmt.Sprintf("job %q has %d PEs, not %d", b.job, b.size, m.Size)
	case m.Rank <= 0 || m.Rank >= b.size:
		refuse = fmt.Sprintf("rank %d is not a joining rank of a job of %d", m.Rank, b.size)
	case b.peers[m.Rank] != nil || b.left[m.Rank]:
		refuse = fmt.Sprintf("rank %d has joined already", m.Rank)
	case b.joined == b.size:
		refuse = "the job is complete"
	}
	if refuse == "" {
		b.peers[m.Rank] = p
		b.nodes[m.Rank] = m.Node
		b.joined++
	}
	b.mu.Unlock()
	if refuse != "" {
		p.send(&bmsg{T: "refuse", Status: refuse})
		return
	}
	b.fence.signal()
	r := m.Rank
	p.c.SetReadDeadline(time.Time{})
	for {
		var m bmsg
		if err := p.dec.Decode(&m); err != nil {
			b.rankGone(r, fmt.Sprintf("its rendezvous connection closed without a goodbye (%v)", err))
			return
		}
		switch m.T {
		case "fence":
			b.contribute(r, m.Pub)
		case "bye":
			b.mu.Lock()
			b.left[r], b.peers[r] = true, nil
			b.mu.Unlock()
			b.fence.signal()
			return
		}
	}
}

// rankGone is rank 0's handling of a rank whose connection closed without
// a goodbye: it is lost, and every other rank is told.
func (b *boot) rankGone(r int, status string) {
	b.mu.Lock()
	if b.closed || b.left[r] {
		b.mu.Unlock()
		return
	}
	b.peers[r] = nil
	first := b.lost < 0
	if first {
		b.lost, b.status = r, status
	}
	peers := slices.Clone(b.peers)
	b.mu.Unlock()
	b.fence.signal()
	if first {
		for _, p := range peers {
			if p != nil {
				p.send(&bmsg{T: "lost", Rank: r, Status: status})
			}
		}
	}
}

// contribute records rank r's fence (rank 0); the last one completes the
// fence for everyone.
func (b *boot) contribute(r int, pub map[string][]byte) {
	b.mu.Lock()
	b.round[r] = pub
	if len(b.round) < b.size {
		b.mu.Unlock()
		return
	}
	all := make([]map[string][]byte, b.size)
	for q, v := range b.round {
		all[q] = v
	}
	b.round = map[int]map[string][]byte{}
	b.apply(all)
	peers := slices.Clone(b.peers)
	b.mu.Unlock()
	b.fence.signal()
	for _, p := range peers {
		if p != nil {
			p.send(&bmsg{T: "fenced", All: all})
		}
	}
}

// apply merges a fence's values into the store. Called with mu held.
func (b *boot) apply(all []map[string][]byte) {
	for q, v := range all {
		if q >= b.size {
			break
		}
		if b.store[q] == nil {
			b.store[q] = map[string][]byte{}
		}
		for k, x := range v {
			b.store[q][k] = x
		}
	}
	b.fences++
}

// join is the start of a rank other than 0: dial rank 0 until timeout,
// say hello, and wait for the welcome.
func (b *boot) join(node string, timeout time.Duration) (transport.Bootstrap, error) {
	end := time.Now().Add(timeout)
	hint := fmt.Sprintf("check that rank 0 runs, that SYMHEAP_BOOT=%s names its host and port on every PE, and that no firewall blocks it; SYMHEAP_BOOT_TIMEOUT sets the wait", b.addr)
	var c net.Conn
	for {
		var err error
		d := net.Dialer{Timeout: max(time.Until(end), time.Millisecond)}
		if c, err = d.Dial("tcp", b.addr); err == nil {
			break
		}
		if time.Now().After(end) {
			return nil, fmt.Errorf("rendezvous: rank %d could not reach rank 0 at %s within %v: %v (%s)", b.rank, b.addr, timeout, err, hint)
		}
		time.Sleep(min(100*time.Millisecond, time.Until(end)))
	}
	up := newBconn(c)
	c.SetDeadline(end)
	fail := func(err error) (transport.Bootstrap, error) {
		c.Close()
		return nil, err
	}
	if err := up.send(&bmsg{T: "hello", Job: b.job, Rank: b.rank, Size: b.size, Node: node}); err != nil {
		return fail(fmt.Errorf("rendezvous: rank %d saying hello to rank 0 at %s: %v (%s)", b.rank, b.addr, err, hint))
	}
	var m bmsg
	if err := up.dec.Decode(&m); err != nil {
		return fail(fmt.Errorf("rendezvous: rank %d waiting for every PE to join at %s within %v: %v (%s)", b.rank, b.addr, timeout, err, hint))
	}
	switch {
	case m.T == "refuse":
		return fail(fmt.Errorf("rendezvous: rank 0 at %s refused rank %d: %s: %w", b.addr, b.rank, m.Status, errs.ErrBadConfig))
	case m.T != "welcome" || len(m.Nodes) != b.size:
		return fail(fmt.Errorf("rendezvous: rank %d: unexpected answer %q from %s (not a symheap rendezvous?)", b.rank, m.T, b.addr))
	}
	c.SetDeadline(time.Time{})
	b.nodes, b.up = m.Nodes, up
	b.wg.Add(1)
	go b.listen()
	return b, nil
}

// listen is a client's goroutine: fences completed, losses, rank 0's
// goodbye.
func (b *boot) listen() {
	defer b.wg.Done()
	for {
		var m bmsg
		if err := b.up.dec.Decode(&m); err != nil {
			b.mu.Lock()
			if !b.closed && b.broken == nil {
				b.broken = fmt.Errorf("rendezvous: the connection to rank 0 at %s closed without a goodbye: %w", b.addr, errs.ErrPeerLost)
				if b.lost < 0 {
					b.lost, b.status = 0, fmt.Sprintf("its rendezvous connection closed without a goodbye (%v)", err)
				}
			}
			b.mu.Unlock()
			b.fence.signal()
			return
		}
		b.mu.Lock()
		switch m.T {
		case "fenced":
			b.apply(m.All)
		case "lost":
			if b.lost < 0 {
				b.lost, b.status = m.Rank, m.Status
			}
		case "bye":
			if b.broken == nil {
				b.broken = fmt.Errorf("rendezvous: rank 0 has closed the rendezvous: %w", errs.ErrClosed)
			}
		}
		b.mu.Unlock()
		b.fence.signal()
	}
}

// Name implements transport.Bootstrap.
func (b *boot) Name() string { return "rendezvous" }

// Rank implements transport.Bootstrap.
func (b *boot) Rank() int { return b.rank }

// Size implements transport.Bootstrap.
func (b *boot) Size() int { return b.size }

// Job implements transport.Bootstrap.
func (b *boot) Job() string { return b.job }

// Nodes implements transport.Bootstrap.
func (b *boot) Nodes() ([]string, error) { return slices.Clone(b.nodes), nil }

// Publish implements transport.Bootstrap.
func (b *boot) Publish(key string, val []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return fmt.Errorf("rendezvous: Publish: %w", errs.ErrClosed)
	}
	b.pub[key] = slices.Clone(val)
	return nil
}

// Fence implements transport.Bootstrap: a collecting fence through rank
// 0. It fails once a rank is lost or has left, or rank 0 is gone.
func (b *boot) Fence() error {
	b.mu.Lock()
	if err := b.fenceErr(); err != nil {
		b.mu.Unlock()
		return err
	}
	pub := b.pub
	b.pub = map[string][]byte{}
	want := b.fences + 1
	b.mu.Unlock()
	if b.rank == 0 {
		b.contribute(0, pub)
	} else if err := b.up.send(&bmsg{T: "fence", Pub: pub}); err != nil {
		return fmt.Errorf("rendezvous: fence: sending to rank 0 at %s: %v: %w", b.addr, err, errs.ErrPeerLost)
	}
	for {
		seen := b.fence.count()
		b.mu.Lock()
		done := b.fences >= want
		err := b.fenceErr()
		b.mu.Unlock()
		if done {
			return nil
		}
		if err != nil {
			return err
		}
		<-b.fence.since(seen)
	}
}

// fenceErr is why no fence can complete now. Called with mu held.
func (b *boot) fenceErr() error {
	switch {
	case b.closed:
		return fmt.Errorf("rendezvous: fence: %w", errs.ErrClosed)
	case b.lost >= 0:
		return fmt.Errorf("rendezvous: fence: rank %d is lost (%s): %w", b.lost, b.status, errs.ErrPeerLost)
	case b.broken != nil:
		return b.broken
	}
	for r, l := range b.left {
		if l {
			return fmt.Errorf("rendezvous: fence: rank %d has closed its bootstrap: %w", r, errs.ErrClosed)
		}
	}
	return nil
}

// Get implements transport.Bootstrap.
func (b *boot) Get(rank int, key string) ([]byte, error) {
	if rank < 0 || rank >= b.size {
		return nil, fmt.Errorf("rendezvous: Get from rank %d: %w (the job has %d)", rank, errs.ErrBadPE, b.size)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.store[rank][key]
	if !ok {
		return nil, fmt.Errorf("rendezvous: rank %d published no %q before the last fence: %w", rank, key, errs.ErrBadArg)
	}
	return slices.Clone(v), nil
}

// Lost implements transport.Bootstrap.
func (b *boot) Lost() (int, string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lost, b.status, b.lost >= 0
}

// Close implements transport.Bootstrap: the goodbye, then the
// connections. Idempotent.
func (b *boot) Close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	var conns []*bconn
	for p := range b.conns {
		conns = append(conns, p)
	}
	b.mu.Unlock()
	b.fence.signal()
	if b.ln != nil {
		b.ln.Close()
		for _, p := range conns {
			p.c.SetWriteDeadline(time.Now().Add(linger))
			p.send(&bmsg{T: "bye"})
			p.c.Close()
		}
	}
	if b.up != nil {
		b.up.c.SetWriteDeadline(time.Now().Add(linger))
		b.up.send(&bmsg{T: "bye"})
		b.up.c.Close()
	}
	b.wg.Wait()
}

var _ transport.Bootstrap = (*boot)(nil)
