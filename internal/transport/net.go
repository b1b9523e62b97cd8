package transport

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/symheap/symheap/memhook"
	"github.com/symheap/symheap/rcache"
)

// PEs on other nodes: a Net carries everything the multi-node layer
// (internal/far) sends between nodes, and a Bootstrap tells a PE who it
// is, where every PE runs and how to find them. Both are chosen by name
// from what is registered (Register, RegisterBoot): UCX and PMIx in the
// ucx build, TCP and a rendezvous in every build.
//
// The layer above numbers peers by their rank in the job (0 to Size-1,
// this PE included: a message to itself is allowed) and names memory by
// region and offset. Every PE registers the same regions in the same order
// (Config.Regions): region 0 is its symmetric heap, region 1 the node's
// control blocks. An offset means the same in every PE.

// Region is the index of a registered region (Config.Regions).
type Region int

// The regions the runtime registers.
const (
	RegionHeap    Region = 0 // this PE's symmetric heap
	RegionControl Region = 1 // the node's control blocks
	// RegionStatic is a C program's static data (.data and .bss, made
	// symmetric by the C library's static.c), which the PEs of a C
	// program register after the other two; a Go program registers two.
	RegionStatic Region = 2
)

// Match is the outcome of Tagged.RecvMatch.
type Match int

// The outcomes.
const (
	MatchNone     Match = iota // nothing arrived within the slice
	MatchReceived              // received into the buffer
	MatchOther                 // a matching message that does not qualify (too big); it stays queued
)

// Req is a non-blocking send or receive (SendNB, RecvNB). The nil Req is
// a send that completed at once.
type Req interface{}

// Tagged carries tagged messages between PEs. A tag is 64 bits; a
// receive names a tag and a mask and matches a message whose tag agrees
// with it on the mask's bits. Messages from one sender are matched in the
// order they were sent; a receive takes the earliest arrived message that
// matches it.
//
// Blocking calls wait in slices of at most about a millisecond and, between
// slices, check the peer they wait on (see Check) and run check (if not
// nil), whose error ends the wait. Unless said otherwise, a wait on one
// peer also ends after Config.Timeout with a PeerError wrapping ErrTimeout.
type Tagged interface {
	// Send sends buf to peer with tag and returns when buf may be reused.
	// Timeout does not apply (a large message may wait for its receiver).
	Send(peer int, tag uint64, buf []byte, check func() error) error
	// SendNB starts sending buf; buf must stay unchanged until Test
	// reports the request complete. A nil Req and nil error: complete.
	SendNB(peer int, tag uint64, buf []byte) (Req, error)
	// TryProbe reports the earliest arrived message matching tag under
	// mask, without receiving it and without waiting.
	TryProbe(tag, mask uint64) (stag uint64, n int, ok bool)
	// Probe waits until a matching message has arrived and reports it,
	// leaving it to be received. from (-1: any) and check are as for Recv.
	Probe(tag, mask uint64, from int, check func() error) (stag uint64, n int, err error)
	// RecvNB starts receiving the message with exactly tag (found by
	// TryProbe or Probe) into buf. Its Req is never nil (a receive is
	// reported complete by Test).
	RecvNB(buf []byte, tag uint64) (Req, error)
	// RecvMatch waits up to about a millisecond for a message matching
	// tag under mask and receives it into buf if it fits in buf and is at
	// most max bytes; a matching message that does not is left queued
	// (MatchOther). The tag and length are reported unless MatchNone; a
	// failed receive's error names from.
	RecvMatch(buf []byte, tag, mask uint64, max, from int) (Match, uint64, int, error)
	// Recv receives into buf the earliest message matching tag under mask
	// and returns its length and tag. from (-1: any) is the peer the
	// message is expected from, whose failure ends the wait. Timeout does
	// not apply. A message longer than buf is an error.
	Recv(buf []byte, tag, mask uint64, from int, check func() error) (n int, stag uint64, err error)
	// Test reports whether r is complete, with the received length (for a
	// receive) and its error. peer names the peer in that error.
	Test(r Req, peer int) (done bool, n int, err error)
	// WaitEvent makes progress, or waits at most about a millisecond for
	// something to arrive.
	WaitEvent()
	// Check returns the known failure of peer (-1: of none in
	// particular): an announcement (Watch) turned into an error by
	// Config.Announced, the peer's connection lost, or Config.Lost's
	// error. It does not wait.
	Check(peer int) error
	// Failed returns the first peer whose connection was lost, if any.
	Failed() (peer int, err error)
	// Watch sets up the receipt of one announcement: an 8-byte message
	// whose tag matches tag under mask. Once it has arrived, Watched
	// reports its value, every wait ends with Config.Announced's error
	// for it, and Sleep returns it.
	Watch(tag, mask uint64) error
	// Watched reports the announced value once it has arrived.
	Watched() (uint64, bool)
	// Connect makes the connections to peers now, each ready for use
	// when it returns; otherwise the first operation on a peer makes its
	// connection. Its error names the first peer it could not reach.
	Connect(peers []int) error
	// Announce sends the 8-byte val with tag to each of peers without
	// waiting for delivery (a peer that is gone does not hold it up);
	// with flush it then waits, at most Timeout, until they have left.
	// It makes no connection: a peer this Net has not connected to
	// (Connect, or an earlier operation on it) is skipped. Announcements
	// go out while peers fail, and a connection made then is one a
	// transport may not survive (UCX 1.13 aborts when a connection fails
	// with its wireup reply still queued).
	Announce(peers []int, tag, val uint64, flush bool)
}

// Net is one PE's connection to the others: one-sided operations on their
// registered regions, tagged messages, and progress.
//
// Over a network without remote memory access a peer's operation on this
// PE's memory may complete only while this PE makes progress: every
// blocking call makes progress while it waits, and the runtime runs a
// goroutine that calls Sleep in a loop.
type Net interface {
	Tagged
	// Put copies src to offset off of peer's region. It returns when src
	// may be reused (nbi false), or at once, src then being read until
	// the next Flush (nbi true). The data are visible at the target
	// after the next Flush.
	Put(peer int, r Region, off uint64, src []byte, nbi bool) error
	// Get copies len(dst) bytes at offset off of peer's region into dst
	// and returns when dst holds them.
	Get(dst []byte, peer int, r Region, off uint64) error
	// Atomic performs op on the size-byte (4 or 8, aligned) word at
	// offset off of peer's region, atomically with respect to every
	// other atomic on the word, from any PE, by this Net or by the CPUs
	// of the target's node, and returns the previous value for the
	// fetching ops (for AMOCompareSwap v is the new value and cmp the
	// expected one). The non-fetching ops return 0 once posted; they are
	// complete at the next Flush.
	Atomic(op AMO, peer int, r Region, off uint64, size int, v, cmp uint64) (uint64, error)
	// Fence orders the puts and atomics posted before it before those
	// posted after it, to each peer.
	Fence() error
	// Flush completes every operation posted so far at its target.
	Flush() error
	// Progress advances communication and reports whether it did anything.
	Progress() bool
	// Sleep is the progress goroutine's step: it makes progress until
	// there is nothing to do, then sleeps until something arrives (an
	// operation on this PE's memory performed, a message) or d passes.
	// It reports an announcement (Watch) once it has arrived.
	Sleep(d time.Duration) (announced uint64, ok bool)
	// Describe says what the transport uses to reach peer, for `symheap
	// info` and error messages.
	Describe(peer int) (string, error)
	// Close releases everything. Operations after Close fail.
	Close()
}

// Config is what a Net is opened with.
type Config struct {
	// Boot is the job's bootstrap: Open publishes what its peers need to
	// reach this PE, and fences, so that every PE has opened its Net when
	// Open returns.
	Boot Bootstrap
	// Regions is this PE's memory that the peers may put, get and
	// operate on, by index (RegionHeap, RegionControl). An empty region is
	// allowed; operations on it fail.
	Regions [][]byte
	// PeerErrors asks for the loss of a peer to be reported rather than
	// undefined (a transport may be faster without).
	PeerErrors bool
	// Timeout bounds a blocking operation on one peer that the peer
	// alone completes (a get, a fetching atomic, a flush); past it the
	// operation fails with a PeerError wrapping ErrTimeout. 0: no bound.
	Timeout time.Duration
	// Announced turns an announcement's value (Watch) into the error
	// that ends the waits; it may also not return (an exit).
	Announced func(v uint64) error
	// Lost reports a peer known lost by other means (the launcher): a
	// wait on it ends with its error. peer -1: any.
	Lost func(peer int) error
	// Cache asks a transport that registers memory to register the
	// buffers of puts, gets and sends outside Regions through a
	// registration cache (package rcache) and hand the handle to the
	// network (the enable decision of package memhook said yes).
	// Monitor, if not nil, is the PE's memory monitor, which the cache
	// subscribes to; Go buffers need none (rcache.AnchorOf).
	Cache   bool
	Monitor *memhook.Monitor
}

// Caching is a Net that registers memory through a registration cache:
// the cache's figures, for symheap stat. A transport without memory
// registration (tcp) has no cache and does not implement it.
type Caching interface {
	CacheStats() rcache.Stats
}

// Bootstrap is how a PE of a job on several nodes learns the job: who it
// is, where every PE runs, and a key-value exchange with a collective
// fence (PMIx's model).
type Bootstrap interface {
	// Name says what the bootstrap is, for messages ("PMIx").
	Name() string
	// Rank and Size are this PE's rank in the job and the job's size.
	Rank() int
	Size() int
	// Job names the job, the same in all its PEs and different from
	// other jobs' that may run beside it.
	Job() string
	// Nodes returns the name of every rank's node: PEs with the same name
	// share a node (its /dev/shm and IPC namespace).
	Nodes() ([]string, error)
	// Publish makes val visible under key to every PE after the next
	// Fence.
	Publish(key string, val []byte) error
	// Fence returns once every PE of the job has called it.
	Fence() error
	// Get returns the value rank published under key before the last
	// Fence.
	Get(rank int, key string) ([]byte, error)
	// Lost returns the first rank the launcher reported gone, if any.
	Lost() (rank int, status string, ok bool)
	// Close disconnects. Idempotent.
	Close()
}

// ErrPeer wraps every failure of an operation on a peer: the connection
// was lost, or the peer did not answer within Config.Timeout.
var ErrPeer = errors.New("transport: peer failure")

// ErrTimeout marks a peer that did not complete an operation in time.
var ErrTimeout = errors.New("transport: timed out")

// ErrUnknown is returned by Open and Detect for a name nothing registered.
var ErrUnknown = errors.New("transport: not in this build")

// PeerError is the failure of an operation on one peer (Peer -1: on no
// peer in particular, a flush). It wraps ErrPeer and the cause
// (ErrTimeout, a connection's error).
type PeerError struct {
	Peer int
	Op   string
	Err  error
}

func (e *PeerError) Error() string {
	if e.Peer < 0 {
		return fmt.Sprintf("%s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("%s (peer %d): %v", e.Op, e.Peer, e.Err)
}

func (e *PeerError) Unwrap() []error { return []error{ErrPeer, e.Err} }

// Transport is a registered Net.
type Transport struct {
	Name     string
	Priority int // higher is chosen when no name is given
	Open     func(Config) (Net, error)
}

// Boot is a registered Bootstrap.
type Boot struct {
	Name     string
	Priority int // tried first when several apply
	// Detect returns the job's Bootstrap when the environment (getenv)
	// says the process runs under it, nil and no error when it does not.
	// who is what the launcher's variables say of this PE in the job
	// (rank and size; -1 when they say nothing).
	Detect func(getenv func(string) string, who Who) (Bootstrap, error)
}

// Who is what the launcher's variables say about this PE's place in the
// whole job: rank and size, -1 when unknown; Job names the job.
type Who struct {
	Rank, Size int
	Job        string
}

var (
	mu         sync.RWMutex
	transports = map[string]Transport{}
	boots      = map[string]Boot{}
)

// Register makes a transport available. It panics on a duplicate name or
// a Transport without Open: both are programming errors.
func Register(t Transport) {
	mu.Lock()
	defer mu.Unlock()
	if t.Name == "" || t.Open == nil {
		panic("transport: Register of an incomplete transport")
	}
	if _, dup := transports[t.Name]; dup {
		panic("transport: Register called twice for " + t.Name)
	}
	transports[t.Name] = t
}

// RegisterBoot makes a bootstrap available, under the same rules.
func RegisterBoot(b Boot) {
	mu.Lock()
	defer mu.Unlock()
	if b.Name == "" || b.Detect == nil {
		panic("transport: RegisterBoot of an incomplete bootstrap")
	}
	if _, dup := boots[b.Name]; dup {
		panic("transport: RegisterBoot called twice for " + b.Name)
	}
	boots[b.Name] = b
}

// Transports returns the registered transports, highest priority first
// (ties by name).
func Transports() []Transport {
	return byPriority(transports, func(t Transport) (int, string) { return t.Priority, t.Name })
}

// Boots returns the registered bootstraps, highest priority first (ties
// by name).
func Boots() []Boot {
	return byPriority(boots, func(b Boot) (int, string) { return b.Priority, b.Name })
}

// byPriority returns the values of m, highest priority first, then by
// name.
func byPriority[T any](m map[string]T, key func(T) (int, string)) []T {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]T, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool {
		pi, ni := key(out[i])
		pj, nj := key(out[j])
		if pi != pj {
			return pi > pj
		}
		return ni < nj
	})
	return out
}

// Lookup returns the transport registered under name.
func Lookup(name string) (Transport, bool) {
	mu.RLock()
	defer mu.RUnlock()
	t, ok := transports[name]
	return t, ok
}

// Open opens the transport named name, or with name "" the registered
// one of highest priority.
func Open(name string, c Config) (Net, error) {
	if name == "" {
		ts := Transports()
		if len(ts) == 0 {
			return nil, fmt.Errorf("no transport to other nodes is registered: %w", ErrUnknown)
		}
		return ts[0].Open(c)
	}
	t, ok := Lookup(name)
	if !ok {
		return nil, fmt.Errorf("transport %q: %w (this build has %s)", name, ErrUnknown, names())
	}
	return t.Open(c)
}

func names() string {
	var s []string
	for _, t := range Transports() {
		s = append(s, t.Name)
	}
	if len(s) == 0 {
		return "none"
	}
	return fmt.Sprint(s)
}

// Detect returns the Bootstrap of the first registered bootstrap (highest
// priority first) whose Detect finds its launcher, or nil when none does.
// name, if not empty, tries that one only.
func Detect(name string, getenv func(string) string, who Who) (Bootstrap, error) {
	for _, b := range Boots() {
		if name != "" && b.Name != name {
			continue
		}
		bs, err := b.Detect(getenv, who)
		if err != nil || bs != nil {
			return bs, err
		}
	}
	if name != "" {
		mu.RLock()
		_, ok := boots[name]
		mu.RUnlock()
		if !ok {
			return nil, fmt.Errorf("bootstrap %q: %w", name, ErrUnknown)
		}
	}
	return nil, nil
}
