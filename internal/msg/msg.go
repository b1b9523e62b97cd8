package msg

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/symheap/symheap/internal/config"
	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/memcopy"
	"github.com/symheap/symheap/internal/shmsync"
	"github.com/symheap/symheap/internal/unix"
)

// AnySource and AnyTag match any sender and any tag in Recv and Irecv.
const AnySource, AnyTag = -1, -1

// MaxTag is the largest tag a message may carry (tags start at 0).
const MaxTag = 1<<31 - 1

// DefaultEagerLimit and DefaultSharedEagerLimit are the eager limits for
// ordinary send buffers and for send buffers in the segment, unless
// SYMHEAP_MSG_EAGER and SYMHEAP_MSG_EAGER_SHARED say otherwise. The root
// package documents how they were chosen. Both limits are capped at a
// quarter of a ring.
const (
	DefaultEagerLimit       = 2 << 10
	DefaultSharedEagerLimit = 1 << 10
)

// spinFor is how long a blocking call polls before it goes to sleep, when
// the job has no more PEs than the machine has cores. It must exceed the
// time a futex wake-up takes (tens of microseconds on a busy virtual
// machine): otherwise two PEs that take turns both fall asleep at every
// turn, each woken by the other, and stay in that rhythm. It is longer
// than the polling of shmsync's pacing, which the rest of the wait
// follows: with the pacing's shorter budget a ping-pong of 8 B messages
// on a loaded machine fell into that rhythm, each message a sleep and a
// wake-up instead of a transfer (measured:
// docs/bench/design-measurements.md, «internal/msg/msg.go, blocking
// waits»).
const spinFor = time.Millisecond

// livenessEvery is how many sends to one destination go without asking
// whether it still lives (a system call: at 64 it was still a visible
// share of a small send, and asking on every large message cost more than
// the rest of an 8 KiB one; measured: docs/bench/design-measurements.md,
// «internal/msg, liveness checks of sends»); the first send to it,
// and every send to a PE this PE has seen die, ask. A send to a dead PE
// that is not asked either waits for its receiver (a large message, or a
// small one that finds the ring full), and the wait finds the PE gone, or
// succeeds into memory nobody reads.
const livenessEvery = 1024

// Status describes a received message (or, for a send, the message sent).
// The root package's Status has the same fields, so that one converts to
// the other for free.
type Status struct {
	Source int // the sending PE
	Tag    int
	Count  int // the message's length in bytes (also when truncated)
}

// Paths of a send (the package comment).
const (
	pathEager   = 1 + iota
	pathSegment // single copy from the segment, in user space
	pathKernel  // single copy by process_vm_readv
	pathBounce  // pipelined copy through bounce chunks in the sender's shared heap
)

// Runtime is what the layer asks of the runtime of its PE. The layer
// calls AllocBounce and FreeBounce only without its lock held (the
// package comment, "Locking"); the others may be called with it held, and
// must not take any lock of the runtime's that is held while the layer is
// called, nor sleep (SleepFenced excepted, which is called without it).
type Runtime interface {
	// Check returns an error wrapping errs.ErrClosed once the PE is
	// closed, else nil.
	Check() error
	// CheckPeers returns an error wrapping errs.ErrPeerLost naming the
	// first of pes (every PE of the job when nil) that is gone.
	CheckPeers(pes []int) error
	// Alive reports whether PE pe still lives.
	Alive(pe int) bool
	// Pid returns the process id of PE pe.
	Pid(pe int) int
	// SleepFenced sleeps on word until cond() holds, after the
	// asymmetric fence that stands in for the publishers' own (queue.go,
	// "Waking", S2..S6); check runs whenever a sleep slice runs out, and
	// its error ends the wait. The caller has announced itself in the
	// sleepers count the publishers load.
	SleepFenced(word *atomic.Uint32, cond func() bool, check func() error) error
	// AllocBounce takes size bytes aligned to align from this PE's local
	// shared heap; when the heap has no room the error wraps
	// errs.ErrOutOfMemory.
	AllocBounce(size, align uint64) (core.SharedOff, error)
	// FreeBounce gives a block of AllocBounce's back. An error means the
	// heap's shared metadata (or its lock word) was overwritten.
	FreeBounce(off core.SharedOff) error
}

// Config is what Init needs besides the Runtime.
type Config struct {
	Space    *core.Space // the segment as this PE sees it
	Stats    *core.Stats // this PE's counters, which symheap stat shows
	Relaxed  bool        // this process is registered for asymmetric fences (membarrier)
	Settings Settings
}

// Settings are the messaging settings of the environment (ReadSettings).
type Settings struct {
	Eager       int  // SYMHEAP_MSG_EAGER: eager limit in bytes, ordinary send buffers
	EagerShared int  // SYMHEAP_MSG_EAGER_SHARED: eager limit for send buffers in the segment
	Split       int  // SYMHEAP_MSG_SPLIT: the smallest message copied by both sides; 0: never
	NoKernel    bool // SYMHEAP_MSG_NOKERNEL: never use process_vm_readv
	AllBounce   bool // SYMHEAP_MSG_BOUNCE: every large message by bounce buffers
}

// Layer is one PE's messaging: its view of the queues in shared memory,
// its requests and its matching tables. The fields marked immutable are
// set by Init; Layer.lock guards all the others (the package comment,
// "Locking"). The zero Layer is ready for Init; it must not be copied.
type Layer struct {
	lock msgLock

	// Immutable after Init.
	rt          Runtime
	sp          *core.Space
	stats       *core.Stats // written by this PE only; symheap stat reads them
	rank, npes  int
	bell        *bell          // this PE's doorbell
	bells       []*bell        // every PE's doorbell
	slots       []*splitSlot   // this PE's split slots
	peerSlots   [][]*splitSlot // every PE's split slots
	boxLimit    int            // the largest message sent through the fast boxes
	boxQuiet    int            // polls a receive skips the box it just wrote into (fast.go, "Quiet")
	eager       int            // eager limit in bytes, ordinary send buffers
	eagerShared int            // eager limit for send buffers in the segment
	noKernel    bool           // SYMHEAP_MSG_NOKERNEL: never use process_vm_readv
	allBounce   bool           // SYMHEAP_MSG_BOUNCE: every large message by bounce buffers
	splitMin    int            // SYMHEAP_MSG_SPLIT: the smallest message copied by both sides; 0: never
	// relaxed: this process is registered for asymmetric fences, so its
	// publishing stores are release stores (queue.go, "Waking").
	relaxed bool

	in  []rxRing  // from each sender, in this PE's control block
	out []txPeer  // to each receiver, in its control block
	box []boxPair // with each peer (box.go)

	posted     queue[*Request] // receives waiting for a message, oldest first
	unexp      queue[*inMsg]   // messages waiting for a receive, oldest first
	xfers      map[xferKey]*inMsg
	sends      map[uint64]*Request // this PE's large sends awaiting the receiver, by id
	noSlab     []*Request          // bounce sends waiting for another transfer's buffer to be freed
	wantBounce []*Request          // bounce sends whose buffer bounceWork is to allocate
	toFree     []spentBounce       // bounce buffers bounceWork is to free
	spare      *Request            // a finished request of a blocking call, for reuse
	freeReqs   []*Request          // requests the program released (Request.Release), for reuse
	reqBlock   []Request           // requests not handed out yet (allocRequest)
	spareMsgs  []*inMsg            // delivered eager messages, for reuse
	broken     error               // a record that cannot be: every wait fails with it
	completed  uint64              // requests completed, to wake this PE's sleepers
	nextID     uint64
	queued     int // records in backlogs

	slotGen       []uint64   // generation of each split slot
	slotBusy      []bool     // in use by a transfer
	splitting     []*Request // receives waiting for the sender's chunks
	helped        uint64     // bytes this PE copied for its receivers (Counters)
	orphans       uint64     // chunks this PE's senders could not write (Counters)
	boxed         uint64     // messages this PE sent through fast boxes (Counters)
	fastRecvs     uint64     // receives completed by recvFast (Counters)
	splits        uint64     // receives split (Counters)
	noSlot        uint64     // receives that found no split slot (Counters)
	kernelRefused []bool     // per receiver: it answered NACK once
	sentTo        []uint64   // per destination: sends, for the liveness checks (destAlive)
	checkOne      [1]int     // the list of one PE of destAlive's and waitCheck's checks (under the lock), which so allocate nothing
	dead          []bool     // per PE: a liveness check found it gone
}

// txPeer is the sending side towards one PE.
type txPeer struct {
	ring    txRing
	backlog []outRec // records that found the ring full, in order
}

// outRec is a record waiting in a backlog.
type outRec struct {
	kind    uint8
	w1      uint64
	body    [4]uint64
	payload []byte   // eager payload (the sender's buffer)
	req     *Request // eager send completed when the record is written
}

// xferKey names a large message by sender and the sender's id.
type xferKey struct {
	src int
	id  uint64
}

// inMsg is a message that arrived: unexpected, or being received.
type inMsg struct {
	src, tag, size int
	path           uint8
	id             uint64
	where          uint64   // segment offset (segment) or address (kernel)
	data           []byte   // eager payload, copied out of the ring
	chunks         []chunk  // bounce chunks filled but not yet copied out
	got            int      // bytes copied into the receive buffer
	recv           *Request // the receive it matched; nil while unexpected
	err            error    // the sender aborted it while it was unexpected: its receive fails with this
}

// chunk is one filled bounce chunk in the sender's shared heap.
type chunk struct{ slot, off, n uint64 }

// Request is an outstanding Isend or Irecv. Wait or Test it until done; a
// send's buffer must not change, and a receive's must not be read, before.
type Request struct {
	l    *Layer
	buf  []byte
	peer int // destination, or the source asked for (AnySource)
	tag  int // tag, or the tag asked for (AnyTag)

	done     atomic.Uint32 // 1 once done: set (under Layer.lock, by markDone) after st and err; Wait and Test read it without
	send     bool
	finished bool // blocking calls' requests: set instead of done, read under Layer.lock only
	blocking bool // made by Send or Recv: recycled when done
	// large: the request took a large message's path (startLarge,
	// startRecv), whose tables may name it after it is done (an inMsg's
	// recv, a late record): Release does not reuse it.
	large    bool
	released bool  // in Layer.freeReqs, or dropped by Release
	inWork   bool  // bounceWork refers to it (wantBounce, toFree): not recycled until it is done with it
	path     uint8 // a send's path
	st       Status
	err      error
	checked  time.Duration // Test: last liveness check, since reqEpoch (0: none yet)
	big      *reqBig       // what large messages and sleeping waits need (more); nil until then
}

// reqBig is the part of a Request that a small message never needs: a
// large message's transfer, a receive's split copy, and a sleeping wait's
// closures. It is made on first use (Request.more): a request of a window
// of small Isends, which a program that does not release it leaves to the
// garbage collector, is 120 bytes instead of 208, and the collector runs
// that much less often (docs/bench/design-measurements.md).
type reqBig struct {
	// Sends of large messages.
	id     uint64
	bounce *bounceTx
	// Receives: the large message being copied in, and its split slot
	// (index+1; 0: none) and generation.
	msg      *inMsg
	split    int
	splitGen uint64
	// The poll and the liveness check of a wait that sleeps, made once
	// per Request (sleepFuncs), so that a reused request's sleeping wait
	// allocates nothing.
	pollFn  func() bool
	checkFn func() error
}

// reqEpoch is the origin of Request.checked.
var reqEpoch = time.Now()

// more returns r's reqBig, making it on first use. Called with the lock
// held (or on a request nobody else sees yet).
func (r *Request) more() *reqBig {
	if r.big == nil {
		r.big = new(reqBig)
	}
	return r.big
}

// inMsgOf returns the large message r is receiving, if any.
func (r *Request) inMsgOf() *inMsg {
	if r.big == nil {
		return nil
	}
	return r.big.msg
}

// sleepFuncs returns r's poll and liveness check for Layer.sleep, making
// them on first use.
func (r *Request) sleepFuncs() (poll func() bool, check func() error) {
	l := r.l
	l.lock.Lock() // r.big: the layer may be making it (startRecv)
	b := r.makeSleepFuncs()
	l.lock.Unlock() // nothing queued (unlock)
	return b.pollFn, b.checkFn
}

// makeSleepFuncs makes r's sleep functions (sleepFuncs) if it has none
// yet, and returns r's reqBig. Called with the lock held: by a wait, and
// when r is released for reuse or kept as the spare, so that a reused
// request's first sleep allocates nothing.
func (r *Request) makeSleepFuncs() *reqBig {
	l := r.l
	b := r.more()
	if b.pollFn == nil { // made under the lock, once per request
		b.pollFn = func() bool {
			l.lock.Lock()
			l.progress()
			if l.bouncing() {
				l.flushBounce()
			}
			done := r.over() || l.broken != nil
			l.unlock()
			return done
		}
		b.checkFn = func() error { return l.waitCheck(r) }
	}
	return b
}

// Init maps the rings of this PE's messaging and applies its settings.
func (l *Layer) Init(rt Runtime, c Config) error {
	sp := c.Space
	n := sp.NPEs
	l.rt, l.sp, l.stats, l.rank, l.npes = rt, sp, c.Stats, sp.Rank, n
	s := c.Settings
	rb := ringBytes(n)
	l.eager = min(s.Eager, int(rb/4-recHdrSize))
	l.eagerShared = min(s.EagerShared, int(rb/4-recHdrSize))
	l.boxLimit = min(BoxMax, l.eager, l.eagerShared)
	l.Retune()
	l.splitMin, l.noKernel, l.allBounce = s.Split, s.NoKernel, s.AllBounce
	area := func(p int) []byte { return sp.Bytes(msgArea, p) }
	cells := func(a []byte, s int) []byte {
		o := ringsOff(n) + uint64(s)*rb
		return a[o : o+rb : o+rb]
	}
	slots := func(a []byte) []*splitSlot {
		v := make([]*splitSlot, splitSlots)
		for i := range v {
			v[i] = core.View[splitSlot](a[splitOff(n)+uint64(i)*lineSize:])
		}
		return v
	}
	mine := area(l.rank)
	l.relaxed = c.Relaxed
	l.lock.canPark = l.relaxed && !raceEnabled // steals need the asymmetric fence (msgLock)
	l.bell = core.View[bell](mine)
	l.bells = make([]*bell, n)
	l.in = make([]rxRing, n)
	l.out = make([]txPeer, n)
	l.box = make([]boxPair, n)
	l.slots = slots(mine)
	l.slotGen = make([]uint64, splitSlots)
	l.slotBusy = make([]bool, splitSlots)
	l.peerSlots = make([][]*splitSlot, n)
	for p := 0; p < n; p++ {
		theirs := area(p)
		l.bells[p] = core.View[bell](theirs)
		l.peerSlots[p] = slots(theirs)
		l.in[p] = rxRing{head: u64At(mine, uint64(lineSize+p*lineSize)), data: cells(mine, p), mask: rb/cellSize - 1}
		l.out[p].ring = txRing{head: u64At(theirs, uint64(lineSize+l.rank*lineSize)), data: cells(theirs, l.rank),
			cells: rb / cellSize, mask: rb/cellSize - 1, relaxed: l.relaxed}
		if p != l.rank {
			b := &l.box[p]
			b.line, b.mine = boxOf(area, n, l.rank, p)
			b.theirs = boxSlot - b.mine
		}
	}
	l.xfers = make(map[xferKey]*inMsg)
	l.sends = make(map[uint64]*Request)
	l.kernelRefused = make([]bool, n)
	l.sentTo = make([]uint64, n)
	l.dead = make([]bool, n)
	return nil
}

// ReadSettings reads SYMHEAP_MSG_EAGER, SYMHEAP_MSG_EAGER_SHARED,
// SYMHEAP_MSG_SPLIT, SYMHEAP_MSG_NOKERNEL and SYMHEAP_MSG_BOUNCE through
// getenv, and tells param each one's value and its source.
func ReadSettings(getenv func(string) string, param func(name, value, source string)) (Settings, error) {
	var s Settings
	size := func(name string, def, limit int64, dst *int) error {
		v := getenv(name)
		if v == "" {
			*dst = int(def)
			param(name, strconv.FormatInt(def, 10), "default")
			return nil
		}
		n, err := config.ParseSize(v)
		if err != nil {
			return fmt.Errorf("symheap: %s: %w", name, err)
		}
		*dst = int(min(n, limit))
		param(name, v, "environment")
		return nil
	}
	if err := size(config.EnvMsgEager, DefaultEagerLimit, 1<<20, &s.Eager); err != nil {
		return s, err
	}
	if err := size(config.EnvMsgEagerShared, DefaultSharedEagerLimit, 1<<20, &s.EagerShared); err != nil {
		return s, err
	}
	if err := size(config.EnvMsgSplit, defaultSplitMin, 1<<40, &s.Split); err != nil {
		return s, err
	}
	flag := func(name string, dst *bool) error {
		v := getenv(name)
		if v == "" {
			param(name, "0", "default")
			return nil
		}
		on, ok := config.ParseYesNo(v)
		if !ok {
			return fmt.Errorf("symheap: %s=%q: %w (use 1 or 0, yes or no)", name, v, errs.ErrBadConfig)
		}
		*dst = on
		param(name, v, "environment")
		return nil
	}
	if err := flag(config.EnvMsgNoKernel, &s.NoKernel); err != nil {
		return s, err
	}
	return s, flag(config.EnvMsgBounce, &s.AllBounce)
}

// Close ends messaging: requests still outstanding are abandoned (the
// runtime's Close is collective, so every PE has stopped sending), and so
// are the bounce buffers of this PE's transfers, which go with the
// segment.
func (l *Layer) Close() {
	l.lock.Lock()
	defer l.lock.Unlock()
	l.posted, l.unexp = queue[*Request]{}, queue[*inMsg]{}
	l.noSlab, l.wantBounce, l.toFree = nil, nil, nil
	clear(l.xfers)
	clear(l.sends)
}

// Retune reads again the poll counts this layer derives from the
// transfer time (shmsync), once Init has measured it between PEs.
func (l *Layer) Retune() {
	if l.npes <= runtime.NumCPU() {
		// A transfer's worth of polls (fast.go, "Quiet"); not measured
		// where the PEs share cores, whose receives poll once.
		l.boxQuiet = shmsync.TransferPolls()
	}
}

// EagerLimit returns the largest message this PE sends through the rings
// from ordinary memory.
func (l *Layer) EagerLimit() int { return l.eager }

// SharedEagerLimit returns the largest message this PE sends through the
// rings from a buffer in the segment.
func (l *Layer) SharedEagerLimit() int { return l.eagerShared }

// Counters are figures of this PE's messaging that tests look at.
type Counters struct {
	Boxed     uint64 // messages sent through fast boxes
	FastRecvs uint64 // receives completed by the fast path (fast.go)
	Helped    uint64 // bytes this PE copied for its receivers (split.go)
	Orphans   uint64 // chunks this PE's senders could not write (split.go)
	Splits    uint64 // large receives copied by both PEs (split.go)
	NoSlot    uint64 // large receives that would have split but found every split slot taken
}

// Counters returns this PE's counters.
func (l *Layer) Counters() Counters {
	l.lock.Lock()
	defer l.lock.Unlock()
	return Counters{Boxed: l.boxed, FastRecvs: l.fastRecvs, Helped: l.helped, Orphans: l.orphans, Splits: l.splits, NoSlot: l.noSlot}
}

// KernelRefused reports whether PE p has answered NACK to this PE: it
// may not read this PE's memory with process_vm_readv.
func (l *Layer) KernelRefused(p int) bool {
	l.lock.Lock()
	defer l.lock.Unlock()
	return l.kernelRefused[p]
}

// eagerFor reports whether a message of buf goes through the rings.
func (l *Layer) eagerFor(buf []byte) bool {
	n := len(buf)
	if n <= l.eagerShared && n <= l.eager {
		return true
	}
	if n > max(l.eager, l.eagerShared) {
		return false
	}
	p, _ := core.SliceData(buf)
	if _, inSeg := l.sp.SegOffset(p); inSeg {
		return n <= l.eagerShared
	}
	return n <= l.eager
}

// The calls below (Send, Isend, Recv, Irecv) expect the runtime to have
// checked that the PE is open.

// Send sends buf to PE dest with tag and returns when buf may be reused.
func (l *Layer) Send(buf []byte, dest, tag int) error {
	r, err := l.isend(buf, dest, tag, "Send", true)
	if err != nil || r == nil {
		return err
	}
	_, err = r.wait()
	return err
}

// Isend starts sending buf to PE dest with tag.
func (l *Layer) Isend(buf []byte, dest, tag int) (*Request, error) {
	return l.isend(buf, dest, tag, "Isend", false)
}

// Recv receives a message from PE source (or AnySource) with tag (or
// AnyTag) into buf.
func (l *Layer) Recv(buf []byte, source, tag int) (Status, error) {
	return l.RecvStop(buf, source, tag, nil)
}

// isend validates and starts a send. For a blocking call it returns a nil
// Request when the message was sent at once (an eager message that found
// room); its request comes from the spares and goes back there (recycle).
func (l *Layer) isend(buf []byte, dest, tag int, op string, blocking bool) (*Request, error) {
	if err := l.checkPE(dest); err != nil {
		return nil, fmt.Errorf("symheap: %s: %w", op, err)
	}
	if tag < 0 || tag > MaxTag {
		return nil, fmt.Errorf("symheap: %s with tag %d: %w (tags run from 0 to %d)", op, tag, errs.ErrBadArg, MaxTag)
	}
	l.lock.Lock()
	// A small message first tries the fast box, before anything else
	// (writeBox), when no liveness check of dest is due (destAlive).
	if len(buf) <= l.boxLimit && !l.dead[dest] && l.sentTo[dest]%livenessEvery != 0 && l.writeBox(dest, tag, buf) {
		l.sentTo[dest]++
		r := l.sent(blocking, buf, dest, tag)
		l.lock.Unlock() // nothing queued (unlock)
		return r, nil
	}
	eager := l.eagerFor(buf)
	if err := l.destAlive(dest); err != nil {
		l.lock.Unlock() // nothing queued (unlock)
		return nil, fmt.Errorf("symheap: %s to PE %d: %w", op, dest, err)
	}
	var r *Request
	if eager {
		w1 := uint64(uint32(tag)) | uint64(len(buf))<<32
		if len(l.out[dest].backlog) == 0 && (len(buf) <= l.boxLimit && l.writeBox(dest, tag, buf) || l.writeEager(dest, w1, buf)) {
			// Sent: no progress, which would only delay the return (and
			// pull back the line just written). Every call that waits,
			// and every receive, makes it.
			r = l.sent(blocking, buf, dest, tag)
			l.lock.Unlock() // nothing queued (unlock)
			return r, nil
		}
		rec := outRec{kind: recEager, w1: w1, payload: buf}
		if l.post(dest, rec) {
			r = l.sent(blocking, buf, dest, tag) // the ring had room after all
		} else {
			r = l.newRequest(blocking, true, buf, dest, tag)
			r.path = pathEager
			l.out[dest].backlog[len(l.out[dest].backlog)-1].req = r
		}
	} else {
		r = l.newRequest(blocking, true, buf, dest, tag)
		l.startLarge(r)
	}
	l.progress()
	l.unlock()
	return r, nil
}

// Irecv starts receiving a message from PE source (or AnySource) with tag
// (or AnyTag) into buf.
func (l *Layer) Irecv(buf []byte, source, tag int) (*Request, error) {
	if err := l.recvArgs(source, tag, "Irecv"); err != nil {
		return nil, err
	}
	l.lock.Lock()
	r := l.newRequest(false, false, buf, source, tag)
	// No progress: a window of Irecvs is posted before the messages are
	// drained (by Wait, Test, or any other call that makes progress),
	// which then go straight to their receives instead of through the
	// unexpected queue, and every Irecv is cheaper by a look at every
	// ring and box. It gives the boxes it may receive from back, though
	// (a store only when one was taken since), as progress would: a
	// sender that only sends finds its box free again.
	if source != AnySource {
		l.box[source].ack(l.relaxed)
	} else {
		for p := range l.box {
			l.box[p].ack(l.relaxed)
		}
	}
	l.match(r)
	l.lock.Unlock() // nothing queued (unlock): match makes no progress
	return r, nil
}

// Poll makes progress: messages that arrived are matched with posted
// receives or queued as unexpected.
func (l *Layer) Poll() {
	l.lock.Lock()
	l.progress()
	l.unlock()
}

// Peek reports the oldest message that arrived and waits for a receive,
// from source (or AnySource) with tag (or AnyTag), without receiving it
// and without making progress (so that several peeks in a row see one
// queue): an Irecv for exactly its source and tag then takes it, unless
// a receive posted meanwhile matches it first. A job on several nodes
// matches its receives of any source this way against this node's
// messages and the network's in turn (internal/far's msg.go).
func (l *Layer) Peek(source, tag int) (Status, bool) {
	l.lock.Lock()
	var st Status
	ok := false
	for _, m := range l.unexp.s {
		if (source == AnySource || source == m.src) && (tag == AnyTag || tag == m.tag) {
			st, ok = Status{m.src, m.tag, m.size}, true
			break
		}
	}
	l.unlock()
	return st, ok
}

// checkPE validates a PE number; the caller says "symheap:" and names
// the call.
func (l *Layer) checkPE(target int) error {
	if target < 0 || target >= l.npes {
		return fmt.Errorf("PE %d does not exist (job has %d PEs, 0 to %d): %w", target, l.npes, l.npes-1, errs.ErrBadPE)
	}
	return nil
}

// recvArgs validates the source and tag of a receive.
func (l *Layer) recvArgs(source, tag int, op string) error {
	if source != AnySource {
		if err := l.checkPE(source); err != nil {
			return fmt.Errorf("symheap: %s: %w (or AnySource)", op, err)
		}
	}
	if tag != AnyTag && (tag < 0 || tag > MaxTag) {
		return fmt.Errorf("symheap: %s with tag %d: %w (tags run from 0 to %d, or AnyTag)", op, tag, errs.ErrBadArg, MaxTag)
	}
	return nil
}

// sent returns the request of a send that completed at once: none for a
// blocking call, a done one for Isend. Called with the lock held.
func (l *Layer) sent(blocking bool, buf []byte, dest, tag int) *Request {
	if blocking {
		return nil
	}
	if k := len(l.freeReqs); k > 0 {
		// A released request is done already: only its result changes
		// (Release, reuse), with no store to done.
		r := l.freeReqs[k-1]
		l.freeReqs = l.freeReqs[:k-1]
		r.send, r.peer, r.tag, r.st, r.err, r.released = true, dest, tag, Status{Source: l.rank, Tag: tag, Count: len(buf)}, nil, false
		return r
	}
	r := l.allocRequest()
	r.l, r.send, r.peer, r.tag, r.st = l, true, dest, tag, Status{Source: l.rank, Tag: tag, Count: len(buf)}
	r.markDone()
	return r
}

// newRequest makes a request, reusing the spare one for a blocking call.
// Called with the lock held.
func (l *Layer) newRequest(blocking, send bool, buf []byte, peer, tag int) *Request {
	r := l.spare
	if !blocking || r == nil {
		r = l.allocRequest()
		r.l, r.send, r.buf, r.peer, r.tag, r.blocking = l, send, buf, peer, tag, blocking
		return r
	}
	l.spare = nil
	r.send, r.buf, r.peer, r.tag = send, buf, peer, tag
	r.err, r.st, r.path, r.finished, r.large = nil, Status{}, 0, false, false
	if b := r.big; b != nil {
		b.id, b.bounce, b.msg, b.split, b.splitGen = 0, nil, nil, 0, 0
	}
	return r
}

// allocRequest returns a new, zero Request: one the program released
// (Request.Release) if there is one, which costs no allocation; else one
// of a block of reqsPerBlock, allocated at once: one allocation instead
// of 64 for a window of 64 Isends or Irecvs. A request the program did
// not release is never reused, so the API's semantics (Wait and Test may
// be called on a done request at any time) hold for it; a request kept by
// the program keeps its block (8 KiB) alive. Called with the lock held.
func (l *Layer) allocRequest() *Request {
	if k := len(l.freeReqs); k > 0 {
		r := l.freeReqs[k-1]
		l.freeReqs = l.freeReqs[:k-1]
		r.reuse()
		return r
	}
	if len(l.reqBlock) == 0 {
		l.reqBlock = make([]Request, reqsPerBlock)
	}
	r := &l.reqBlock[0]
	l.reqBlock = l.reqBlock[1:]
	return r
}

// recycle keeps a blocking call's finished request for the next one.
// Nothing refers to a finished request any more: completion removes it
// from the posted receives, the large sends and the backlogs; only
// bounceWork may still hold it (inWork), and then it is not kept. Called
// with the lock held.
func (l *Layer) recycle(r *Request) {
	if r.inWork {
		return
	}
	r.buf = nil
	r.makeSleepFuncs()
	l.spare = r
}

// reuse makes a released request new again. A released request is done,
// not a blocking call's, took no large message's path and holds no buffer
// (Release): only these fields differ from a new one's. (Not *r =
// Request{}: its stores, and the collector's barriers on its pointers,
// cost a small send more than the rest of it.)
func (r *Request) reuse() {
	r.st, r.err, r.checked, r.released, r.path = Status{}, nil, 0, false, 0
	if raceEnabled {
		r.done.Store(0)
		return
	}
	shmsync.StoreRelease32(&r.done, 0) // in-process: nobody else sees r before the call that reuses it returns it
}

// reqsPerBlock is the requests allocRequest allocates at once: 8160
// bytes, within the Go allocator's 8 KiB size class.
const reqsPerBlock = 68

// maxFreeReqs bounds the released requests a PE keeps for reuse: more
// than a window of any size programs use, and few enough bytes (120
// each, and a reqBig for those that needed one) to keep for good.
const maxFreeReqs = 4096

// Release gives a done request back to its PE for reuse by a later Isend
// or Irecv, which then allocates nothing: a program that releases its
// requests sends and receives without allocating. The program must not
// use r after Release (a later call may hand the same *Request out
// again). A request that is not done yet is an error, and stays valid.
func (r *Request) Release() error {
	if r == nil || r.l == nil {
		return fmt.Errorf("symheap: Release of a nil Request: %w", errs.ErrBadArg)
	}
	l := r.l
	l.lock.Lock()
	defer l.lock.Unlock() // nothing queued (unlock)
	return l.releaseLocked(r)
}

// releaseLocked is Release with the lock held.
func (l *Layer) releaseLocked(r *Request) error {
	switch {
	case r.l != l:
		return fmt.Errorf("symheap: Release of a Request of another PE: %w", errs.ErrBadArg)
	case r.released || r.blocking || !r.over():
		return ReleaseRefused(r.released)
	}
	r.released = true
	r.buf = nil
	if !r.large && !r.inWork && len(l.freeReqs) < maxFreeReqs {
		r.makeSleepFuncs()
		l.freeReqs = append(l.freeReqs, r)
	}
	return nil
}

// ReleaseRefused is the error of a Release that may not be made: of a
// request released before, else of one not done (the multi-node path's
// requests give the same).
func ReleaseRefused(released bool) error {
	if released {
		return fmt.Errorf("symheap: Release of a Request released before: %w (a released Request must not be used)", errs.ErrBadArg)
	}
	return fmt.Errorf("symheap: Release of a Request that is not done: %w (Wait or Test it until it is)", errs.ErrBadArg)
}

// ReleaseAll releases requests at(0) .. at(n-1) under one acquisition
// of the lock, as Release does one: a window of requests costs one lock
// instead of one each. Nil requests, and requests made by no Isend or
// Irecv of this layer (a handle of the multi-node path: the collector
// takes those), are skipped. A request that may not be released (not
// done, or released before) is left as it is, and the first such is named
// in the error; the others are released.
func ReleaseAll(n int, at func(i int) *Request) error {
	var l *Layer
	for i := range n {
		if r := at(i); r != nil && r.l != nil {
			l = r.l
			break
		}
	}
	if l == nil {
		return nil
	}
	var first error
	l.lock.Lock()
	for i := range n {
		r := at(i)
		if r == nil || r.l == nil {
			continue
		}
		if err := l.releaseLocked(r); err != nil && first == nil {
			first = fmt.Errorf("request %d of %d: %w", i, n, err)
		}
	}
	l.lock.Unlock() // nothing queued (unlock)
	return first
}

// Wait blocks until the request is done and returns its result. It may be
// called again and returns the same result (until Release).
func (r *Request) Wait() (Status, error) {
	if r == nil || r.l == nil {
		return Status{}, fmt.Errorf("symheap: Wait on a nil Request: %w", errs.ErrBadArg)
	}
	if r.done.Load() != 0 {
		return r.st, r.err
	}
	if err := r.l.rt.Check(); err != nil {
		return Status{}, err
	}
	return r.wait()
}

// wait is Wait once the request is known to be of a live PE. A blocking
// call's request is recycled on the way out.
func (r *Request) wait() (Status, error) {
	r.l.lock.Lock()
	return r.waitLocked(0, nil)
}

// waitLocked is wait, called with the lock held, which it releases. stop,
// if not nil, can end the wait (stop.go): it then returns stopped, with
// the lock released and the request as it was.
func (r *Request) waitLocked(first int, stop func() error) (Status, error) {
	l := r.l
	if l.npes <= runtime.NumCPU() {
		// A core per PE: spin for a while before sleeping (see spinFor).
		if res, err, ok := r.spin(first); ok {
			return res, err
		}
	} else {
		l.unlock()
	}
	poll, check := r.sleepFuncs()
	var err error
	if stop == nil {
		err = l.sleep(poll, check)
	} else if err = l.sleepStop(poll, check, stop); isStopped(err) {
		return Status{}, err // r as it was (stop.go)
	}
	if err != nil {
		l.fail(r, err)
	}
	l.lock.Lock()
	defer l.unlock()
	return r.finish()
}

// spin polls for the request for up to spinFor and reports whether it
// ended (with its result). Called with the lock held, which it keeps
// between polls (so the poll that sees a message goes straight to
// progress, with no locked instruction between the line's arrival and
// the reply: msgLock) and lets go whenever another goroutine of this PE
// wants it, at every yield, and to do bounce work its progress queued
// (flushBounce); it returns with the lock released.
//
// Each poll looks at the rings and boxes without taking their records
// (arrived), then pauses (shmsync.Pause); progress runs when one shows a
// record, at poll 0 (first is 1 when the caller has just made progress)
// and at every 32nd, for the work that announces itself otherwise (room
// in a full ring, a sender's split chunks).
func (r *Request) spin(first int) (Status, error, bool) {
	l := r.l
	var start time.Time // read only once the wait is not a short one
	for i := first; ; i++ {
		if i&31 == 0 || l.arrived() {
			l.progress()
			if l.bouncing() {
				l.flushBounce()
			}
			if r.over() || l.broken != nil {
				res, err := r.finish()
				l.unlock()
				return res, err, true
			}
		}
		switch {
		case i == 1024:
			start = time.Now()
		case i > 1024 && i&255 == 0:
			l.unlock()
			if time.Since(start) > spinFor {
				return Status{}, nil, false
			}
			// Gosched lets this PE's goroutines run; SchedYield the
			// other processes of this core, one of which may be the
			// peer we wait for (the kernel often runs both PEs of a
			// pair on one core): without it a window of messages
			// between two PEs on one core cost each side a whole
			// spinFor per turn (docs/bench/p2p.md).
			runtime.Gosched()
			unix.SchedYield()
			l.lock.Lock()
			continue
		}
		if l.lock.contended() {
			l.unlock()
			runtime.Gosched()
			l.lock.Lock()
		}
		shmsync.Pause()
	}
}

// finish returns the result of a request that is over, failing it first
// if this PE's messaging broke, and recycles a blocking call's request.
// Called with the lock held.
func (r *Request) finish() (Status, error) {
	l := r.l
	if !r.over() && l.broken != nil {
		l.failLocked(r, l.broken)
	}
	res, err := r.st, r.err
	if r.blocking {
		l.recycle(r)
	}
	return res, err
}

// sleep waits until poll reports done: it polls and yields under the
// runtime's one pacing (shmsync "Pacing"), then sleeps on this PE's
// doorbell: the sleeper's side (S1..S7) of queue.go's "Waking". check
// runs whenever a sleep slice runs out; its error ends the wait.
func (l *Layer) sleep(poll func() bool, check func() error) error {
	b := l.bell
	if p := shmsync.Pace(); p.Until(poll) {
		return nil
	}
	b.sleepers.Add(1)                             // S1: seq-cst; pairs with the writers' sleepers load (W2)
	defer b.sleepers.Add(^uint32(0))              // S7
	return l.rt.SleepFenced(&b.word, poll, check) // S2..S6
}

// arrived reports whether an incoming ring or box shows a record that
// progress has not taken, without taking it. Called with the lock held.
func (l *Layer) arrived() bool {
	for s := range l.in {
		r := &l.in[s]
		if _, _, ok := r.peek(); ok {
			return true
		}
		if _, _, ok := l.box[s].pending(r.pos); ok {
			return true
		}
	}
	return false
}

// Test makes progress and reports whether the request is done, with its
// result if so.
func (r *Request) Test() (done bool, st Status, err error) {
	if r == nil || r.l == nil {
		return false, Status{}, fmt.Errorf("symheap: Test on a nil Request: %w", errs.ErrBadArg)
	}
	if r.done.Load() != 0 {
		return true, r.st, r.err
	}
	l := r.l
	if err := l.rt.Check(); err != nil {
		return false, Status{}, err
	}
	l.lock.Lock()
	l.progress()
	l.unlock() // does the bounce work progress queued, which may complete r
	if r.done.Load() != 0 {
		return true, r.st, r.err
	}
	if now := time.Since(reqEpoch); r.checked == 0 || now-r.checked > shmsync.SleepSlice {
		r.checked = now
		if err := l.waitCheck(r); err != nil {
			l.fail(r, err)
			return true, r.st, r.err
		}
	}
	return false, Status{}, nil
}

// complete ends a request. Called with the lock held.
func (r *Request) complete(st Status, err error) {
	r.st, r.err = st, err
	r.l.completed++
	// Nothing reads these once the request is done: let them go, so that
	// a request the program keeps holds no buffer alive (nor do the other
	// requests of its block: allocRequest).
	r.buf = nil
	if b := r.big; b != nil {
		b.msg, b.bounce = nil, nil
	}
	if r.blocking {
		r.finished = true // its waiter looks under the lock: no fence needed
		return
	}
	r.markDone()
}

// markDone publishes a request's result (st, err) to Wait and Test in
// other goroutines: a release store, which pairs with their load of done.
// Not a sequentially consistent one (an XCHG on amd64): that would wait
// for every store before it, the message's line in the receiver's ring
// among them, to reach this core, and in a stream of Isends hold every
// send up for a transfer between cores.
func (r *Request) markDone() {
	if raceEnabled {
		r.done.Store(1) // the race detector sees no release in StoreRelease32
		return
	}
	shmsync.StoreRelease32(&r.done, 1) // in-process, release: pairs with the loads in Wait, Test and over
}

// over reports whether the request is complete. Called with the lock
// held.
func (r *Request) over() bool { return r.finished || r.done.Load() != 0 }

// waitCheck is the liveness check of a wait: the PEs the request depends on.
func (l *Layer) waitCheck(r *Request) error {
	if err := l.rt.Check(); err != nil {
		return err
	}
	l.lock.Lock()
	peer := r.peer
	if m := r.inMsgOf(); m != nil {
		peer = m.src
	}
	var err error
	if peer == AnySource {
		err = l.rt.CheckPeers(nil)
	} else {
		l.checkOne[0] = peer // under the lock, so that the check allocates nothing
		err = l.rt.CheckPeers(l.checkOne[:])
	}
	l.lock.Unlock() // nothing queued (unlock)
	if err != nil {
		l.lock.Lock()
		for p := range l.dead {
			l.dead[p] = l.dead[p] || !l.rt.Alive(p)
		}
		l.lock.Unlock() // nothing queued (unlock)
	}
	return err
}

// fail ends a request that can no longer complete, unless it completed in
// the meantime, and withdraws it from every table.
func (l *Layer) fail(r *Request, err error) {
	l.lock.Lock()
	defer l.unlock()
	l.failLocked(r, err)
}

// failLocked is fail with the lock held.
func (l *Layer) failLocked(r *Request, err error) {
	if r.over() {
		return
	}
	l.posted.s = remove(l.posted.s, r)
	l.noSlab = remove(l.noSlab, r)       // (bounceWork, if it has r, sees it over)
	l.splitting = remove(l.splitting, r) // its slot stays busy: the sender may still write
	if m := r.inMsgOf(); m != nil {
		m.recv = nil
		delete(l.xfers, xferKey{m.src, m.id})
	}
	if r.send {
		if r.big != nil {
			delete(l.sends, r.big.id)
		}
		l.dropBounce(r, false)
		if r.peer >= 0 {
			q := &l.out[r.peer]
			for i := range q.backlog {
				if q.backlog[i].req == r {
					q.backlog = append(q.backlog[:i], q.backlog[i+1:]...)
					l.queued--
					break
				}
			}
		}
	}
	what := "receive from"
	if r.send {
		what = "send to"
	}
	peer := "PE " + strconv.Itoa(r.peer)
	if r.peer == AnySource {
		peer = "any PE"
	}
	r.complete(Status{}, fmt.Errorf("symheap: %s %s with tag %d: %w", what, peer, r.tag, err))
}

// destAlive checks that dest lives, for one send in livenessEvery to it
// (the first among them), and for every send to a PE seen dead. Called
// with the lock held.
func (l *Layer) destAlive(dest int) error {
	if !l.dead[dest] {
		l.sentTo[dest]++
		if l.sentTo[dest]%livenessEvery != 1 {
			return nil
		}
	}
	l.checkOne[0] = dest
	err := l.rt.CheckPeers(l.checkOne[:])
	if err != nil {
		l.dead[dest] = true
	}
	return err
}

// postRecv matches a new receive against the unexpected messages, or posts
// it and makes progress. Called with the lock held.
func (l *Layer) postRecv(r *Request) {
	if !l.match(r) {
		l.progress()
	}
}

// match matches a new receive against the unexpected messages, or posts
// it, and reports whether it matched. Called with the lock held.
func (l *Layer) match(r *Request) bool {
	for i, m := range l.unexp.s {
		if !r.matches(m.src, m.tag) {
			continue
		}
		if m.err != nil {
			// Aborted by its sender before any receive matched it: the
			// receive it would have matched fails, so that it does not
			// match the sender's next message instead.
			l.unexp.s = removeAt(l.unexp.s, i)
			r.complete(Status{m.src, m.tag, m.size}, m.err)
			return true
		}
		if m.size > len(r.buf) {
			r.complete(Status{m.src, m.tag, m.size}, truncated(m.src, m.tag, m.size, len(r.buf)))
			return true
		}
		l.unexp.s = removeAt(l.unexp.s, i)
		l.deliver(r, m)
		return true
	}
	l.posted.push(r)
	return false
}

func (r *Request) matches(src, tag int) bool {
	return (r.peer == AnySource || r.peer == src) && (r.tag == AnyTag || r.tag == tag)
}

// takePosted removes and returns the oldest posted receive that matches a
// message and can hold it; receives that match but are too short end with
// ErrTruncated on the way.
func (l *Layer) takePosted(src, tag, size int) *Request {
	for i := 0; i < len(l.posted.s); {
		r := l.posted.s[i]
		if !r.matches(src, tag) {
			i++
			continue
		}
		l.posted.s = removeAt(l.posted.s, i)
		if size > len(r.buf) {
			r.complete(Status{src, tag, size}, truncated(src, tag, size, len(r.buf)))
			continue
		}
		return r
	}
	return nil
}

func truncated(src, tag, size, have int) error {
	return fmt.Errorf("symheap: receive of a %d-byte message from PE %d with tag %d into a %d-byte buffer: %w (the message stays queued; receive it with a buffer of at least %d bytes)",
		size, src, tag, have, errs.ErrTruncated, size)
}

// deliver gives a matched message to a receive that can hold it.
func (l *Layer) deliver(r *Request, m *inMsg) {
	if m.path == pathEager {
		memcopy.BytesLocal(r.buf, m.data)
		r.complete(Status{m.src, m.tag, m.size}, nil)
		l.freeMsg(m)
		return
	}
	l.startRecv(r, m)
}

// eagerMsg makes the unexpected message for an eager payload (a copy: the
// ring's cells go back to the sender), reusing a delivered one.
func (l *Layer) eagerMsg(src, tag int, payload []byte) *inMsg {
	var m *inMsg
	if k := len(l.spareMsgs); k > 0 {
		m, l.spareMsgs = l.spareMsgs[k-1], l.spareMsgs[:k-1]
	} else {
		m = new(inMsg)
	}
	*m = inMsg{src: src, tag: tag, size: len(payload), path: pathEager, data: append(m.data[:0], payload...)}
	return m
}

// freeMsg keeps a delivered eager message for reuse: nothing refers to
// it any more (it has left the unexpected queue).
func (l *Layer) freeMsg(m *inMsg) {
	if len(l.spareMsgs) < 256 && cap(m.data) <= 2*max(l.eager, l.eagerShared) {
		l.spareMsgs = append(l.spareMsgs, m)
	}
}

// post sends a record to dst, or queues it behind the records already
// waiting for room. It reports whether the record went out at once.
func (l *Layer) post(dst int, rec outRec) bool {
	q := &l.out[dst]
	if len(q.backlog) == 0 && l.write(dst, &rec) {
		return true
	}
	q.backlog = append(q.backlog, rec)
	l.queued++
	return false
}

// write puts a record into the ring to dst if it has room.
func (l *Layer) write(dst int, rec *outRec) bool {
	if rec.kind == recEager {
		return l.writeEager(dst, rec.w1, rec.payload)
	}
	t := &l.out[dst].ring
	off, ok := t.reserve(ctlCells)
	if !ok {
		return false
	}
	for i, v := range rec.body {
		t.putBody(off, i, v)
	}
	t.commit(off, ctlCells, rec.kind, rec.w1)
	l.ring(dst)
	return true
}

// writeEager puts an eager message into the ring to dst if it has room.
func (l *Layer) writeEager(dst int, w1 uint64, payload []byte) bool {
	t := &l.out[dst].ring
	n := uint64(len(payload))
	off, ok := t.reserve(cellsFor(n))
	if !ok {
		return false
	}
	memcopy.Bytes(t.data[off+recHdrSize:off+recHdrSize+n], payload)
	t.commit(off, cellsFor(n), recEager, w1)
	l.ring(dst)
	// A plain increment (core.Bump): a locked one would wait for the
	// record's line to reach this core, which in a stream of sends holds
	// every send up for a transfer between cores.
	core.Bump(&l.stats.MsgEager) // written by this PE only, under the lock; symheap stat reads it
	return true
}

// writeBox puts a message of at most boxLimit bytes into the fast box
// with dst, if the box is free and no record waits in the backlog to dst
// (it would come after the message in the ring but before it in order).
// A send tries it first thing under the lock, and it publishes before
// any bookkeeping: in a ping-pong, every instruction between the lock
// and the publishing store delays the reply (msgLock).
func (l *Layer) writeBox(dst, tag int, payload []byte) bool {
	b := &l.box[dst]
	if b.line == nil || b.busy || len(l.out[dst].backlog) != 0 || !b.free() {
		return false
	}
	b.put(tag, payload, l.out[dst].ring.tail, l.relaxed)
	l.ring(dst)
	l.boxed++
	core.Bump(&l.stats.MsgEager) // written by this PE only, under the lock; symheap stat reads it (writeEager)
	return true
}

// ring wakes PE p if it sleeps on its doorbell: steps W2 and W3 of
// queue.go's "Waking", after the caller's publishing store (W1: a
// record's word 0, a box message, a head).
func (l *Layer) ring(p int) {
	b := l.bells[p]
	if b.sleepers.Load() != 0 { // W2; seq-cst: pairs with the sleeper's sleepers.Add (S1, then its membarrier S2)
		shmsync.Wake(&b.word, &b.sleepers)
	}
}

// wakeOwn wakes a goroutine of this PE that may sleep waiting for a
// request completed since completed was read: nobody else will ring for
// it.
func (l *Layer) wakeOwn(completed uint64) {
	if l.completed != completed && l.bell.sleepers.Load() != 0 { // seq-cst; pairs with the sleeper's announcement (S1 in Layer.sleep)
		shmsync.Wake(&l.bell.word, &l.bell.sleepers)
	}
}

// progress drains the incoming rings, pushes backlogs and polls split
// copies. Called with the lock held. It may queue bounce work (Locking),
// which its caller's unlock or flushBounce does.
func (l *Layer) progress() {
	completed := l.completed
	for s := range l.in {
		r := &l.in[s]
		b := &l.box[s]
		drained := false
		for l.broken == nil {
			// The ring first, then the box: a record the ring shows was
			// published before any box message that comes after it
			// (queue.go, "Fast boxes").
			w0, off, ok := r.peek()
			bw0, ready, has := b.pending(r.pos)
			if ready {
				l.takeBox(s, b, bw0)
				drained = true
				continue
			}
			if has && !ok {
				// The ring records before the box message were published
				// before it: they show now.
				if w0, off, ok = r.peek(); !ok {
					l.broken = fmt.Errorf("symheap: the fast box from PE %d holds a message after ring position %d, which the ring does not show: %w (shared memory was overwritten)", s, uint32(bw0>>32), errs.ErrPeerLost)
					break
				}
			}
			if !ok {
				break
			}
			if n := recCells(w0); n == 0 || off/cellSize+n > r.mask+1 {
				l.broken = fmt.Errorf("symheap: the ring from PE %d holds a record of %d cells at cell %d: %w (shared memory was overwritten)", s, n, off/cellSize, errs.ErrPeerLost)
				break
			}
			l.handle(s, r, w0, off)
			r.consumed(w0)
			drained = true
		}
		// Give the cells and the box back when the ring is idle, or a
		// quarter of it waits: not at once, so that a receive that has
		// just found its message returns before it pays for the stores
		// and the check. (A reply through the box gives the box back
		// on its way.)
		if !drained {
			b.ack(l.relaxed)
		}
		if (!drained || r.pos-r.published >= (r.mask+1)/4) && r.release() {
			l.ring(s) // the sender may wait for room
		}
	}
	if l.queued > 0 {
		for d := range l.out {
			q := &l.out[d]
			for len(q.backlog) > 0 && l.write(d, &q.backlog[0]) {
				if r := q.backlog[0].req; r != nil {
					r.complete(Status{l.rank, r.tag, len(r.buf)}, nil)
				}
				q.backlog[0] = outRec{}
				q.backlog = q.backlog[1:]
				l.queued--
			}
		}
	}
	l.pollSplits()
	// A goroutine of this PE may sleep waiting for a request completed
	// here: nobody else will ring for it. (wakeOwn, by hand: it is just
	// too large to inline.)
	if l.completed != completed && l.bell.sleepers.Load() != 0 { // seq-cst; pairs with the sleeper's announcement (S1 in Layer.sleep)
		shmsync.Wake(&l.bell.word, &l.bell.sleepers)
	}
}

// handle acts on one record from PE src.
func (l *Layer) handle(src int, r *rxRing, w0, off uint64) {
	switch recKind(w0) {
	case recSkip:
	case recEager:
		w1 := r.w1(off)
		tag, n := int(uint32(w1)), w1>>32
		if recHdrSize+n > recCells(w0)*cellSize {
			l.broken = fmt.Errorf("symheap: the ring from PE %d holds a %d-byte message in %d cells: %w (shared memory was overwritten)", src, n, recCells(w0), errs.ErrPeerLost)
			return
		}
		l.arrive(src, tag, r.data[off+recHdrSize:off+recHdrSize+n])
	case recRTS:
		w1 := r.w1(off)
		m := &inMsg{src: src, tag: int(uint32(w1)), path: uint8(w1 >> 32), size: int(r.word(off, 0)), id: r.word(off, 1), where: r.word(off, 2)}
		if m.path != pathSegment {
			l.xfers[xferKey{src, m.id}] = m
		}
		if q := l.takePosted(src, m.tag, m.size); q != nil {
			l.startRecv(q, m)
			return
		}
		l.unexp.push(m)
	case recChunk:
		m := l.xfers[xferKey{src, r.word(off, 0)}]
		if m == nil {
			return // the receive was abandoned
		}
		m.chunks = append(m.chunks, chunk{slot: r.word(off, 1), off: r.word(off, 2), n: r.word(off, 3)})
		if m.recv != nil {
			l.copyChunks(m)
		}
	case recAbort:
		key := xferKey{src, r.word(off, 0)}
		m := l.xfers[key]
		if m == nil {
			return
		}
		delete(l.xfers, key)
		err := fmt.Errorf("symheap: PE %d could not send its %d-byte message with tag %d: %w (it found no room for bounce buffers; raise SYMHEAP_SHARED_SIZE)",
			src, m.size, m.tag, errs.ErrOutOfMemory)
		if m.recv != nil {
			m.recv.complete(Status{src, m.tag, m.size}, err)
			return
		}
		// Still unexpected: it stays in its place, and the receive that
		// matches it fails with err (match).
		m.err = err
	case recCTS:
		if q := l.sends[r.word(off, 0)]; q != nil {
			l.helpCopy(q, src, r.w1(off), r.word(off, 1), r.word(off, 2), r.word(off, 3))
		}
	case recAck, recNack, recChunkAck:
		q := l.sends[r.word(off, 0)]
		if q == nil {
			return
		}
		l.sendEvent(q, recKind(w0), r.word(off, 1))
	}
}

// arrive gives an eager message, whose payload is still in shared memory,
// to the oldest matching posted receive, or queues a copy of it as
// unexpected.
func (l *Layer) arrive(src, tag int, payload []byte) {
	if q := l.takePosted(src, tag, len(payload)); q != nil {
		memcopy.BytesLocal(q.buf, payload)
		q.complete(Status{src, tag, len(payload)}, nil)
		return
	}
	l.unexp.push(l.eagerMsg(src, tag, payload))
}

// takeBox takes the message in PE src's box slot, whose word 0 is w0.
func (l *Layer) takeBox(src int, b *boxPair, w0 uint64) {
	tag, payload, bad := b.msg()
	if bad {
		l.broken = fmt.Errorf("symheap: the fast box from PE %d holds a message longer than %d bytes: %w (shared memory was overwritten)", src, BoxMax, errs.ErrPeerLost)
		return
	}
	l.arrive(src, tag, payload)
	b.got = uint16(w0)
}

// queue is a FIFO of receives or messages waiting for each other: a slice
// whose front moves on as its oldest element is taken (removeAt), over an
// array it goes back to when it empties, so that a window of receives
// allocates nothing once the array has grown to hold one.
type queue[E comparable] struct {
	s   []E // the elements, oldest first
	arr []E // the array s lies in, from its start
}

// push appends x.
func (q *queue[E]) push(x E) {
	if len(q.s) == 0 {
		q.s = q.arr[:0]
	} else if len(q.s) == cap(q.s) && 2*len(q.s) <= cap(q.arr) {
		// s has moved on to the array's end but fills at most half of
		// it: move it back to the start instead of growing the array.
		n := copy(q.arr[:cap(q.arr)], q.s)
		clear(q.arr[n:cap(q.arr)])
		q.s = q.arr[:n]
	}
	q.s = append(q.s, x)
	if cap(q.s) > cap(q.arr) { // a new array
		q.arr = q.s[:0]
	}
}

// remove deletes the first x from s, keeping the order.
func remove[E comparable](s []E, x E) []E {
	for i, v := range s {
		if v == x {
			return removeAt(s, i)
		}
	}
	return s
}

// removeAt deletes s[i], keeping the order. Taking the oldest element,
// the usual case for the queues, costs nothing: the slice moves on.
func removeAt[E any](s []E, i int) []E {
	var zero E
	if len(s) == 1 {
		s[0] = zero
		return s[:0] // keeps the array for the next append
	}
	if i == 0 {
		s[0] = zero
		return s[1:]
	}
	copy(s[i:], s[i+1:])
	s[len(s)-1] = zero
	return s[:len(s)-1]
}

// errPeerCopy describes a failed large transfer.
var errPeerCopy = errors.New("the receiver could not copy the message")
