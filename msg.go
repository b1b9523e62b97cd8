package symheap

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/symheap/symheap/internal/core"

	"github.com/symheap/symheap/internal/config"
	"github.com/symheap/symheap/internal/shmsync"
	"github.com/symheap/symheap/internal/unix"
)

// Message passing: Send, Recv, Isend, Irecv.
//
// # Paths
//
// A message of at most boxMax (16) bytes travels through the fast box the
// two PEs share, one cache line for both directions, when the box is free
// (msg_queue.go, "Fast boxes"). A message of at most the eager limit
// (DefaultEagerLimit, env SYMHEAP_MSG_EAGER; DefaultSharedEagerLimit, env
// SYMHEAP_MSG_EAGER_SHARED, when the send buffer lies in the segment)
// travels whole through the ring from sender to receiver (msg_queue.go).
// Either way the sender copies it in, the receiver copies it out, and the
// send is complete once it is in. A larger message
// is announced by a descriptor record (RTS: tag, length, id, where) and
// copied once, by the receiver, from the sender's buffer:
//
//	segment  the send buffer lies in the job's segment (a local shared
//	         heap, or a symmetric heap): the receiver copies straight from
//	         it, in user space (HMPI's single copy)
//	kernel   the buffer is ordinary Go memory: the receiver copies it with
//	         process_vm_readv from the address the sender gave, one copy
//	         through the kernel. The sender's Request holds the buffer, so
//	         it stays reachable (and Go's collector does not move heap
//	         objects) until the receiver's ack arrives
//	bounce   process_vm_readv was refused (EPERM from ptrace rules or
//	         seccomp; the receiver answers NACK and the sender never tries
//	         it to that PE again), or SYMHEAP_MSG_NOKERNEL=1, or for every
//	         large message SYMHEAP_MSG_BOUNCE=1: the sender copies the
//	         message piecewise into a few chunks of a buffer in its own
//	         shared heap and posts a CHUNK record for each; the receiver
//	         copies each out and answers CHUNKACK, which frees the chunk for
//	         the next piece, so both copies run at once
//
// The receiver answers ACK when it has copied a segment or kernel message;
// the last CHUNKACK ends a bounce. Only then does the send complete. Each
// path is counted on the sender (peStats msgEager, box messages included,
// msgSingleCopy, msgKernel, msgBounce). A segment or kernel message of at least
// SYMHEAP_MSG_SPLIT bytes is copied by both PEs at once when the sender is
// waiting for it: the receiver reads chunks, the sender writes chunks
// (msg_split.go), still one copy of every byte.
//
// The eager limits trade the eager path's second copy against the large
// paths' handshake (RTS, then ACK): see DefaultEagerLimit.
//
// # Matching
//
// Every PE keeps, in its own memory, the receives it has posted and the
// messages that arrived before a matching receive (unexpected: eager
// payloads copied out of the ring, and descriptors). A new receive first
// takes the oldest matching unexpected message; otherwise it is posted. A
// record drained from a ring goes to the oldest matching posted receive;
// otherwise it is queued as unexpected. The box and the ring of a pair
// form one FIFO sequence (msg_queue.go) and both queues keep arrival
// order, so messages from one sender with one tag never overtake each
// other. A receive whose buffer is too short for the
// message it matches ends with ErrTruncated and the message's real size
// in Status.Count, and the message stays where it was (a later receive
// with a large enough buffer gets it).
//
// # Progress and waiting
//
// There is no progress thread. Every receive, every Test and Wait, and
// every send that cannot complete at once drains this PE's incoming rings
// and boxes, pushes records that found a ring full (each destination's
// backlog, in order), and advances bounce transfers. (A send that
// completes at once returns without: its progress would only delay the
// return, and pull back the line just written.) A blocking wait does this
// in a loop (Request.spin): it polls, holding msgState.mu, for up to
// spinFor while the job has no more PEs than the machine has cores, then
// spins briefly and yields without it, then sleeps on this PE's doorbell
// (PE.sleep), which every record addressed to it and every release of
// ring room rings when it sleeps (msg_queue.go, "Waking"), as does a
// goroutine of this PE that completes another's request. Every polling
// loop pauses (shmsync.Pause) between polls. On each 50 ms sleep slice it
// checks the liveness of the PEs it waits for, so a dead peer turns into
// ErrPeerLost well within a second. Sends check the destination's
// liveness too: every large one, and on the eager path the first and
// then one in livenessEvery, and every one to a PE already seen dead.
//
// A blocking Recv from one source first tries the fast path
// (msg_fast.go): when nothing else is under way it takes the next message
// from that source's box or ring straight into its buffer, without a
// Request or a full progress.
//
// # Locking
//
// msgState.mu (a msgLock, msg_lock.go) serialises this PE's goroutines on
// the queues, the rings' producer and consumer sides, the boxes and the
// tables below. Nothing sleeps or blocks while holding it; a wait that
// polls holds it between polls and lets it go when another goroutine
// asks. The path from the arrival of a message to the publishing of the
// reply (fast receive, then send) takes no locked instruction while the
// PE's messaging runs on one P.

// AnySource and AnyTag match any sender and any tag in Recv and Irecv.
const AnySource, AnyTag = -1, -1

// MaxTag is the largest tag a message may carry (tags start at 0).
const MaxTag = 1<<31 - 1

// DefaultEagerLimit is the largest message sent through the rings when
// the send buffer is ordinary memory, and DefaultSharedEagerLimit when it
// lies in the segment (a local shared heap or a symmetric heap), unless
// SYMHEAP_MSG_EAGER and SYMHEAP_MSG_EAGER_SHARED say otherwise; larger
// messages are copied once from the sender's buffer. BenchmarkEagerCrossover
// chose them: eager time over single-copy time for a ping-pong, two PEs on
// two cores of the machine it was tuned on, was
//
//	           1 KiB  2 KiB  4 KiB  6 KiB  8 KiB
//	ordinary   0.44   0.51   0.79   1.24   1.15   (process_vm_readv costs ~1 us)
//	shared     0.88   0.98   1.53   1.76   5.3    (the single copy is a memcpy)
//
// Both limits are capped at a quarter of a ring.
const (
	DefaultEagerLimit       = 4 << 10
	DefaultSharedEagerLimit = 2 << 10
)

// spinFor is how long a blocking call polls before it goes to sleep, when
// the job has no more PEs than the machine has cores. It must exceed the
// time a futex wake-up takes (tens of microseconds on a busy virtual
// machine): otherwise two PEs that take turns both fall asleep at every
// turn, each woken by the other, and stay in that rhythm.
const spinFor = time.Millisecond

// livenessEvery is how many eager sends to one destination go without
// asking whether it still lives (a system call, ~0.5 us: at 64 it was a
// tenth of a small send); the first send to it, and every send to a PE
// this PE has seen die, ask. A send to a dead PE that is not asked
// succeeds into memory nobody reads; once the ring is full, the send
// waits, and the wait finds the PE gone.
const livenessEvery = 1024

// Status describes a received message (or, for a send, the message sent).
type Status struct {
	Source int // the sending PE
	Tag    int
	Count  int // the message's length in bytes (also when truncated)
}

// Paths of a send (msgState design comment).
const (
	pathEager   = 1 + iota
	pathSegment // single copy from the segment, in user space
	pathKernel  // single copy by process_vm_readv
	pathBounce  // pipelined copy through bounce chunks in the sender's shared heap
)

// msgState is this PE's messaging state. All fields but the immutable
// views are guarded by mu.
type msgState struct {
	mu    msgLock
	bell  *bell     // this PE's doorbell
	bells []*bell   // every PE's doorbell
	in    []rxRing  // from each sender, in this PE's control block
	out   []txPeer  // to each receiver, in its control block
	box   []boxPair // with each peer (msg_box.go)

	// relaxed: this process is registered for asymmetric fences, so its
	// publishing stores are release stores (msg_queue.go, "Waking").
	relaxed bool

	posted    []*Request // receives waiting for a message, oldest first
	unexp     []*inMsg   // messages waiting for a receive, oldest first
	xfers     map[xferKey]*inMsg
	sends     map[uint64]*Request // this PE's large sends awaiting the receiver, by id
	noSlab    []*Request          // bounce sends waiting for a buffer
	spare     *Request            // a finished request of a blocking call, for reuse
	reqBlock  []Request           // requests not handed out yet (allocRequest)
	spareMsgs []*inMsg            // delivered eager messages, for reuse
	broken    error               // a record that cannot be: every wait fails with it
	completed uint64              // requests completed, to wake this PE's sleepers
	nextID    uint64
	queued    int // records in backlogs

	boxLimit      int            // the largest message sent through the fast boxes
	eager         int            // eager limit in bytes, ordinary send buffers
	eagerShared   int            // eager limit for send buffers in the segment
	noKernel      bool           // SYMHEAP_MSG_NOKERNEL: never use process_vm_readv
	allBounce     bool           // SYMHEAP_MSG_BOUNCE: every large message by bounce buffers
	splitMin      int            // SYMHEAP_MSG_SPLIT: the smallest message copied by both sides; 0: never
	slots         []*splitSlot   // this PE's split slots
	slotGen       []uint64       // generation of each of them
	slotBusy      []bool         // in use by a transfer
	peerSlots     [][]*splitSlot // every PE's split slots
	splitting     []*Request     // receives waiting for the sender's chunks
	helped        uint64         // bytes this PE copied for its receivers (tests read it)
	orphans       uint64         // chunks this PE's senders could not write (tests read it)
	boxed         uint64         // messages this PE sent through fast boxes (tests read it)
	fastRecvs     uint64         // receives completed by recvFast (tests read it)
	kernelRefused []bool         // per receiver: it answered NACK once
	eagerSent     []uint64       // per destination: eager sends, for the liveness checks
	dead          []bool         // per PE: a liveness check found it gone
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
}

// chunk is one filled bounce chunk in the sender's shared heap.
type chunk struct{ slot, off, n uint64 }

// Request is an outstanding Isend or Irecv. Wait or Test it until done; a
// send's buffer must not change, and a receive's must not be read, before.
type Request struct {
	pe   *PE
	send bool
	buf  []byte
	peer int // destination, or the source asked for (AnySource)
	tag  int // tag, or the tag asked for (AnyTag)

	done     atomic.Bool // set (under msgState.mu) after st and err; Wait and Test read it without
	finished bool        // blocking calls' requests: set instead of done, read under msgState.mu only
	st       Status
	err      error

	// Sends of large messages.
	id     uint64
	path   uint8
	bounce *bounceTx
	// Receives: the large message being copied in, and its split slot
	// (index+1; 0: none) and generation.
	msg      *inMsg
	split    int
	splitGen uint64

	checked  time.Time // Test: last liveness check
	blocking bool      // made by Send or Recv: recycled when done
}

// initMsg maps the rings and reads the messaging settings.
func (pe *PE) initMsg() error {
	st := &pe.ext.msg
	if err := pe.msgSettings(); err != nil {
		return err
	}
	n := pe.npes
	rb := ringBytes(n)
	st.eager = min(st.eager, int(rb/4-recHdrSize))
	st.eagerShared = min(st.eagerShared, int(rb/4-recHdrSize))
	st.boxLimit = min(boxMax, st.eager, st.eagerShared)
	area := func(p int) []byte { return pe.sp.Bytes(msgArea, p) }
	cells := func(a []byte, s int) []byte {
		o := ringsOff(n) + uint64(s)*rb
		return a[o : o+rb : o+rb]
	}
	slots := func(a []byte) []*splitSlot {
		v := make([]*splitSlot, splitSlots)
		for i := range v {
			v[i] = slotAt(a[splitOff(n)+uint64(i)*cellSize:])
		}
		return v
	}
	mine := area(pe.rank)
	st.relaxed = pe.membarrierReady()
	st.mu.canPark = st.relaxed && !raceEnabled // steals need the asymmetric fence (msgLock)
	st.bell = bellAt(mine)
	st.bells = make([]*bell, n)
	st.in = make([]rxRing, n)
	st.out = make([]txPeer, n)
	st.box = make([]boxPair, n)
	st.slots = slots(mine)
	st.slotGen = make([]uint64, splitSlots)
	st.slotBusy = make([]bool, splitSlots)
	st.peerSlots = make([][]*splitSlot, n)
	for p := 0; p < n; p++ {
		theirs := area(p)
		st.bells[p] = bellAt(theirs)
		st.peerSlots[p] = slots(theirs)
		st.in[p] = rxRing{head: u64At(mine, uint64(cellSize+p*cellSize)), data: cells(mine, p), mask: rb/cellSize - 1}
		st.out[p].ring = txRing{head: u64At(theirs, uint64(cellSize+pe.rank*cellSize)), data: cells(theirs, pe.rank),
			cells: rb / cellSize, mask: rb/cellSize - 1, relaxed: st.relaxed}
		if p != pe.rank {
			b := &st.box[p]
			b.line, b.mine = boxOf(area, n, pe.rank, p)
			b.theirs = boxSlot - b.mine
		}
	}
	st.xfers = make(map[xferKey]*inMsg)
	st.sends = make(map[uint64]*Request)
	st.kernelRefused = make([]bool, n)
	st.eagerSent = make([]uint64, n)
	st.dead = make([]bool, n)
	return nil
}

// msgSettings reads SYMHEAP_MSG_EAGER, SYMHEAP_MSG_EAGER_SHARED,
// SYMHEAP_MSG_SPLIT, SYMHEAP_MSG_NOKERNEL and SYMHEAP_MSG_BOUNCE.
func (pe *PE) msgSettings() error {
	st := &pe.ext.msg
	add := func(name, val, src string) { pe.set.params = append(pe.set.params, Param{name, val, src}) }
	size := func(name string, def, limit int64, dst *int) error {
		v := getenv(name)
		if v == "" {
			*dst = int(def)
			add(name, strconv.FormatInt(def, 10), "default")
			return nil
		}
		n, err := config.ParseSize(v)
		if err != nil {
			return fmt.Errorf("symheap: %s: %w", name, err)
		}
		*dst = int(min(n, limit))
		add(name, v, "environment")
		return nil
	}
	if err := size("SYMHEAP_MSG_EAGER", DefaultEagerLimit, 1<<20, &st.eager); err != nil {
		return err
	}
	if err := size("SYMHEAP_MSG_EAGER_SHARED", DefaultSharedEagerLimit, 1<<20, &st.eagerShared); err != nil {
		return err
	}
	if err := size("SYMHEAP_MSG_SPLIT", defaultSplitMin, 1<<40, &st.splitMin); err != nil {
		return err
	}
	flag := func(name string, dst *bool) error {
		switch v := getenv(name); v {
		case "":
			add(name, "0", "default")
		case "1", "true", "yes", "on":
			*dst = true
			add(name, v, "environment")
		case "0", "false", "no", "off":
			add(name, v, "environment")
		default:
			return fmt.Errorf("symheap: %s=%q: %w (use 1 or 0)", name, v, ErrBadConfig)
		}
		return nil
	}
	if err := flag("SYMHEAP_MSG_NOKERNEL", &st.noKernel); err != nil {
		return err
	}
	return flag("SYMHEAP_MSG_BOUNCE", &st.allBounce)
}

// closeMsg ends messaging: requests still outstanding are abandoned (Close
// is collective, so every PE has stopped sending).
func (pe *PE) closeMsg() {
	st := &pe.ext.msg
	st.mu.Lock()
	defer st.mu.Unlock()
	st.posted, st.unexp, st.noSlab = nil, nil, nil
	clear(st.xfers)
	clear(st.sends)
}

// EagerLimit returns the largest message this PE sends through the rings
// from ordinary memory (larger ones are copied once from the sender's
// buffer).
func (pe *PE) EagerLimit() int { return pe.ext.msg.eager }

// SharedEagerLimit returns the largest message this PE sends through the
// rings from a buffer in a local shared heap or a symmetric heap.
func (pe *PE) SharedEagerLimit() int { return pe.ext.msg.eagerShared }

// eagerFor reports whether a message of buf goes through the rings.
func (st *msgState) eagerFor(pe *PE, buf []byte) bool {
	n := len(buf)
	if n <= st.eagerShared && n <= st.eager {
		return true
	}
	if n > max(st.eager, st.eagerShared) {
		return false
	}
	p, _ := core.SliceData(buf)
	if _, inSeg := pe.sp.SegOffset(p); inSeg {
		return n <= st.eagerShared
	}
	return n <= st.eager
}

// Send sends buf to PE dest with tag (0 to MaxTag) and returns when buf
// may be reused: at once for a small message, after the receiver has
// copied a large one. A destination that has died gives ErrPeerLost.
func (pe *PE) Send(buf []byte, dest, tag int) error {
	r, err := pe.isend(buf, dest, tag, "Send", true)
	if err != nil || r == nil {
		return err
	}
	_, err = r.wait()
	return err
}

// Isend starts sending buf to PE dest with tag. buf must not change until
// the request is done (Wait, Test).
func (pe *PE) Isend(buf []byte, dest, tag int) (*Request, error) {
	return pe.isend(buf, dest, tag, "Isend", false)
}

// Recv receives a message from PE source (or AnySource) with tag (or
// AnyTag) into buf. If buf is shorter than the message it returns
// ErrTruncated with the message's size in Count, and the message stays
// queued for a later receive. If the PE it waits for dies it returns
// ErrPeerLost within a second.
func (pe *PE) Recv(buf []byte, source, tag int) (Status, error) {
	if err := pe.recvArgs(source, tag, "Recv"); err != nil {
		return Status{}, err
	}
	st := &pe.ext.msg
	st.mu.Lock()
	if res, ok := pe.recvFast(buf, source, tag); ok {
		st.mu.Unlock()
		return res, nil
	}
	r := pe.newRequest(true, false, buf, source, tag)
	pe.postRecv(r)
	if r.over() {
		res, err := r.finish()
		st.mu.Unlock()
		return res, err
	}
	// Still holding the lock: spin keeps it while it polls, starting
	// with a look at the rings and boxes (postRecv has just made
	// progress).
	return r.waitLocked(1)
}

// isend validates and starts a send. For a blocking call it returns a nil
// Request when the message was sent at once (an eager message that found
// room); its request comes from the spares and goes back there (recycle).
func (pe *PE) isend(buf []byte, dest, tag int, op string, blocking bool) (*Request, error) {
	if err := pe.check(); err != nil {
		return nil, err
	}
	if err := pe.checkPE(dest); err != nil {
		return nil, fmt.Errorf("symheap: %s: %w", op, err)
	}
	if tag < 0 || tag > MaxTag {
		return nil, fmt.Errorf("symheap: %s with tag %d: %w (tags run from 0 to %d)", op, tag, ErrBadArg, MaxTag)
	}
	st := &pe.ext.msg
	st.mu.Lock()
	defer st.mu.Unlock()
	// A small message first tries the fast box, before anything else
	// (writeBox), when no liveness check of dest is due (destAlive).
	if len(buf) <= st.boxLimit && !st.dead[dest] && st.eagerSent[dest]%livenessEvery != 0 && pe.writeBox(dest, tag, buf) {
		st.eagerSent[dest]++
		return pe.sent(blocking, buf, dest, tag), nil
	}
	eager := st.eagerFor(pe, buf)
	if err := pe.destAlive(dest, eager); err != nil {
		return nil, fmt.Errorf("symheap: %s to PE %d: %w", op, dest, err)
	}
	var r *Request
	if eager {
		w1 := uint64(uint32(tag)) | uint64(len(buf))<<32
		if len(st.out[dest].backlog) == 0 && (len(buf) <= st.boxLimit && pe.writeBox(dest, tag, buf) || pe.writeEager(dest, w1, buf)) {
			// Sent: no progress, which would only delay the return (and
			// pull back the line just written). Every call that waits,
			// and every receive, makes it.
			return pe.sent(blocking, buf, dest, tag), nil
		}
		rec := outRec{kind: recEager, w1: w1, payload: buf}
		if pe.post(dest, rec) {
			r = pe.sent(blocking, buf, dest, tag) // the ring had room after all
		} else {
			r = pe.newRequest(blocking, true, buf, dest, tag)
			r.path = pathEager
			st.out[dest].backlog[len(st.out[dest].backlog)-1].req = r
		}
	} else {
		r = pe.newRequest(blocking, true, buf, dest, tag)
		pe.startLarge(r)
	}
	pe.progress()
	return r, nil
}

// Irecv starts receiving a message from PE source (or AnySource) with tag
// (or AnyTag) into buf.
func (pe *PE) Irecv(buf []byte, source, tag int) (*Request, error) {
	if err := pe.recvArgs(source, tag, "Irecv"); err != nil {
		return nil, err
	}
	st := &pe.ext.msg
	st.mu.Lock()
	defer st.mu.Unlock()
	r := pe.newRequest(false, false, buf, source, tag)
	pe.postRecv(r)
	return r, nil
}

// recvArgs validates the source and tag of a receive.
func (pe *PE) recvArgs(source, tag int, op string) error {
	if err := pe.check(); err != nil {
		return err
	}
	if source != AnySource {
		if err := pe.checkPE(source); err != nil {
			return fmt.Errorf("symheap: %s: %w (or AnySource)", op, err)
		}
	}
	if tag != AnyTag && (tag < 0 || tag > MaxTag) {
		return fmt.Errorf("symheap: %s with tag %d: %w (tags run from 0 to %d, or AnyTag)", op, tag, ErrBadArg, MaxTag)
	}
	return nil
}

// sent returns the request of a send that completed at once: none for a
// blocking call, a done one for Isend. Called with msgState.mu held.
func (pe *PE) sent(blocking bool, buf []byte, dest, tag int) *Request {
	if blocking {
		return nil
	}
	r := pe.ext.msg.allocRequest()
	r.pe, r.send, r.peer, r.tag, r.st = pe, true, dest, tag, Status{Source: pe.rank, Tag: tag, Count: len(buf)}
	r.done.Store(true) // in-process: publishes st to Wait and Test
	return r
}

// newRequest makes a request, reusing the spare one for a blocking call.
// Called with msgState.mu held.
func (pe *PE) newRequest(blocking, send bool, buf []byte, peer, tag int) *Request {
	st := &pe.ext.msg
	r := st.spare
	if !blocking || r == nil {
		r = st.allocRequest()
		r.pe, r.send, r.buf, r.peer, r.tag, r.blocking = pe, send, buf, peer, tag, blocking
		return r
	}
	st.spare = nil
	r.send, r.buf, r.peer, r.tag = send, buf, peer, tag
	r.err, r.st, r.id, r.path, r.bounce, r.msg = nil, Status{}, 0, 0, nil, nil
	r.split, r.splitGen, r.finished = 0, 0, false
	return r
}

// allocRequest returns a new, zero Request. Requests are allocated 64 at a
// time: one allocation instead of 64 for a window of Isends or Irecvs.
// Each stays a distinct object that is never reused, so the API's
// semantics (Wait and Test may be called on a done request at any time)
// hold; a request kept by the program keeps its 64-request block (12 KiB)
// alive. Called with msgState.mu held.
func (st *msgState) allocRequest() *Request {
	if len(st.reqBlock) == 0 {
		st.reqBlock = make([]Request, 64)
	}
	r := &st.reqBlock[0]
	st.reqBlock = st.reqBlock[1:]
	return r
}

// recycle keeps a blocking call's finished request for the next one.
// Nothing refers to a finished request any more: completion removes it
// from the posted receives, the large sends and the backlogs. Called with
// msgState.mu held.
func (pe *PE) recycle(r *Request) {
	r.buf = nil
	pe.ext.msg.spare = r
}

// Wait blocks until the request is done and returns its result. It may be
// called again and returns the same result.
func (r *Request) Wait() (Status, error) {
	if r == nil || r.pe == nil {
		return Status{}, fmt.Errorf("symheap: Wait on a nil Request: %w", ErrBadArg)
	}
	if r.done.Load() {
		return r.st, r.err
	}
	if err := r.pe.check(); err != nil {
		return Status{}, err
	}
	return r.wait()
}

// wait is Wait once the request is known to be of a live PE. A blocking
// call's request is recycled on the way out.
func (r *Request) wait() (Status, error) {
	r.pe.ext.msg.mu.Lock()
	return r.waitLocked(0)
}

// waitLocked is wait, called with msgState.mu held, which it releases.
func (r *Request) waitLocked(first int) (Status, error) {
	pe := r.pe
	st := &pe.ext.msg
	if pe.npes <= runtime.NumCPU() {
		// A core per PE: spin for a while before sleeping (see spinFor).
		if res, err, ok := r.spin(first); ok {
			return res, err
		}
	} else {
		st.mu.Unlock()
	}
	poll := func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		pe.progress()
		return r.over() || st.broken != nil
	}
	if err := pe.sleep(poll, func() error { return pe.waitCheck(r) }); err != nil {
		pe.fail(r, err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return r.finish()
}

// spin polls for the request for up to spinFor and reports whether it
// ended (with its result). Called with msgState.mu held, which it keeps
// between polls (so the poll that sees a message goes straight to
// progress, with no locked instruction between the line's arrival and
// the reply: msgLock) and lets go whenever another goroutine of this PE
// wants it and at every yield; it returns with the lock released.
//
// Each poll looks at the rings and boxes without taking their records
// (arrived), then pauses (shmsync.Pause); progress runs when one shows a
// record, at poll 0 (first is 1 when the caller has just made progress)
// and at every 32nd, for the work that announces itself otherwise (room
// in a full ring, a sender's split chunks).
func (r *Request) spin(first int) (Status, error, bool) {
	pe := r.pe
	st := &pe.ext.msg
	var start time.Time // read only once the wait is not a short one
	for i := first; ; i++ {
		if i&31 == 0 || st.arrived() {
			pe.progress()
			if r.over() || st.broken != nil {
				res, err := r.finish()
				st.mu.Unlock()
				return res, err, true
			}
		}
		switch {
		case i == 1024:
			start = time.Now()
		case i > 1024 && i&255 == 0:
			st.mu.Unlock()
			if time.Since(start) > spinFor {
				return Status{}, nil, false
			}
			runtime.Gosched()
			st.mu.Lock()
			continue
		}
		if st.mu.contended() {
			st.mu.Unlock()
			runtime.Gosched()
			st.mu.Lock()
		}
		shmsync.Pause()
	}
}

// finish returns the result of a request that is over, failing it first
// if this PE's messaging broke, and recycles a blocking call's request.
// Called with msgState.mu held.
func (r *Request) finish() (Status, error) {
	pe := r.pe
	st := &pe.ext.msg
	if !r.over() && st.broken != nil {
		pe.failLocked(r, st.broken)
	}
	res, err := r.st, r.err
	if r.blocking {
		pe.recycle(r)
	}
	return res, err
}

// sleep waits until poll reports done: it spins and yields as
// shmsync.WaitWord does, then sleeps on this PE's doorbell: the sleeper's
// side (S1..S7) of msg_queue.go's "Waking". check runs whenever a sleep
// slice runs out; its error ends the wait.
func (pe *PE) sleep(poll func() bool, check func() error) error {
	b := pe.ext.msg.bell
	spins, yields := 1000, 64
	if pe.npes > runtime.NumCPU() {
		spins, yields = 0, 16 // spinning would take the core of the PE we wait for
	}
	for range spins {
		if poll() {
			return nil
		}
	}
	for range yields {
		unix.SchedYield()
		if poll() {
			return nil
		}
	}
	b.sleepers.Add(1)                           // S1: seq-cst; pairs with the writers' sleepers load (W2)
	defer b.sleepers.Add(^uint32(0))            // S7
	return pe.sleepFenced(&b.word, poll, check) // S2..S6
}

// arrived reports whether an incoming ring or box shows a record that
// progress has not taken, without taking it. Called with msgState.mu
// held.
func (st *msgState) arrived() bool {
	for s := range st.in {
		r := &st.in[s]
		if _, _, ok := r.peek(); ok {
			return true
		}
		if _, _, ok := st.box[s].pending(r.pos); ok {
			return true
		}
	}
	return false
}

// Test makes progress and reports whether the request is done, with its
// result if so.
func (r *Request) Test() (done bool, st Status, err error) {
	if r == nil || r.pe == nil {
		return false, Status{}, fmt.Errorf("symheap: Test on a nil Request: %w", ErrBadArg)
	}
	if r.done.Load() {
		return true, r.st, r.err
	}
	pe := r.pe
	if err := pe.check(); err != nil {
		return false, Status{}, err
	}
	ms := &pe.ext.msg
	ms.mu.Lock()
	pe.progress()
	ms.mu.Unlock()
	if r.done.Load() {
		return true, r.st, r.err
	}
	if now := time.Now(); now.Sub(r.checked) > shmsync.SleepSlice {
		r.checked = now
		if err := pe.waitCheck(r); err != nil {
			pe.fail(r, err)
			return true, r.st, r.err
		}
	}
	return false, Status{}, nil
}

// complete ends a request. Called with msgState.mu held.
func (r *Request) complete(st Status, err error) {
	r.st, r.err = st, err
	r.pe.ext.msg.completed++
	// Nothing reads these once the request is done: let them go, so that
	// a request the program keeps holds no buffer alive (nor do the other
	// requests of its block: allocRequest).
	r.buf, r.msg, r.bounce = nil, nil, nil
	if r.blocking {
		r.finished = true // its waiter looks under the lock: no fence needed
		return
	}
	r.done.Store(true) // in-process: publishes st and err to Wait and Test
}

// over reports whether the request is complete. Called with msgState.mu
// held.
func (r *Request) over() bool { return r.finished || r.done.Load() }

// waitCheck is the liveness check of a wait: the PEs the request depends on.
func (pe *PE) waitCheck(r *Request) error {
	if err := pe.check(); err != nil {
		return err
	}
	st := &pe.ext.msg
	st.mu.Lock()
	peer := r.peer
	if r.msg != nil {
		peer = r.msg.src
	}
	st.mu.Unlock()
	var err error
	if peer == AnySource {
		err = pe.peerLost()
	} else {
		err = pe.seg.CheckPeers([]int{peer})
	}
	if err != nil {
		st.mu.Lock()
		for p := range st.dead {
			st.dead[p] = st.dead[p] || !pe.seg.Alive(p)
		}
		st.mu.Unlock()
	}
	return err
}

// fail ends a request that can no longer complete, unless it completed in
// the meantime, and withdraws it from every table.
func (pe *PE) fail(r *Request, err error) {
	st := &pe.ext.msg
	st.mu.Lock()
	defer st.mu.Unlock()
	pe.failLocked(r, err)
}

// failLocked is fail with msgState.mu held.
func (pe *PE) failLocked(r *Request, err error) {
	st := &pe.ext.msg
	if r.over() {
		return
	}
	st.posted = remove(st.posted, r)
	st.noSlab = remove(st.noSlab, r)
	st.splitting = remove(st.splitting, r) // its slot stays busy: the sender may still write
	if m := r.msg; m != nil {
		m.recv = nil
		delete(st.xfers, xferKey{m.src, m.id})
	}
	if r.send {
		delete(st.sends, r.id)
		pe.freeBounce(r)
		if r.peer >= 0 {
			q := &st.out[r.peer]
			for i := range q.backlog {
				if q.backlog[i].req == r {
					q.backlog = append(q.backlog[:i], q.backlog[i+1:]...)
					st.queued--
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

// destAlive checks that dest lives: for every large message, and for one
// eager message in livenessEvery. Called with msgState.mu held.
func (pe *PE) destAlive(dest int, eager bool) error {
	st := &pe.ext.msg
	if eager && !st.dead[dest] {
		st.eagerSent[dest]++
		if st.eagerSent[dest]%livenessEvery != 1 {
			return nil
		}
	}
	err := pe.seg.CheckPeers([]int{dest})
	if err != nil {
		st.dead[dest] = true
	}
	return err
}

// postRecv matches a new receive against the unexpected messages, or posts
// it. Called with msgState.mu held.
func (pe *PE) postRecv(r *Request) {
	st := &pe.ext.msg
	for i, m := range st.unexp {
		if !r.matches(m.src, m.tag) {
			continue
		}
		if m.size > len(r.buf) {
			r.complete(Status{m.src, m.tag, m.size}, truncated(m.src, m.tag, m.size, len(r.buf)))
			return
		}
		st.unexp = removeAt(st.unexp, i)
		pe.deliver(r, m)
		return
	}
	st.posted = append(st.posted, r)
	pe.progress()
}

func (r *Request) matches(src, tag int) bool {
	return (r.peer == AnySource || r.peer == src) && (r.tag == AnyTag || r.tag == tag)
}

// takePosted removes and returns the oldest posted receive that matches a
// message and can hold it; receives that match but are too short end with
// ErrTruncated on the way.
func (st *msgState) takePosted(src, tag, size int) *Request {
	for i := 0; i < len(st.posted); {
		r := st.posted[i]
		if !r.matches(src, tag) {
			i++
			continue
		}
		st.posted = removeAt(st.posted, i)
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
		size, src, tag, have, ErrTruncated, size)
}

// deliver gives a matched message to a receive that can hold it.
func (pe *PE) deliver(r *Request, m *inMsg) {
	if m.path == pathEager {
		copy(r.buf, m.data)
		r.complete(Status{m.src, m.tag, m.size}, nil)
		pe.ext.msg.freeMsg(m)
		return
	}
	pe.startRecv(r, m)
}

// eagerMsg makes the unexpected message for an eager payload (a copy: the
// ring's cells go back to the sender), reusing a delivered one.
func (st *msgState) eagerMsg(src, tag int, payload []byte) *inMsg {
	var m *inMsg
	if k := len(st.spareMsgs); k > 0 {
		m, st.spareMsgs = st.spareMsgs[k-1], st.spareMsgs[:k-1]
	} else {
		m = new(inMsg)
	}
	*m = inMsg{src: src, tag: tag, size: len(payload), path: pathEager, data: append(m.data[:0], payload...)}
	return m
}

// freeMsg keeps a delivered eager message for reuse: nothing refers to
// it any more (it has left the unexpected queue).
func (st *msgState) freeMsg(m *inMsg) {
	if len(st.spareMsgs) < 256 && cap(m.data) <= 2*max(st.eager, st.eagerShared) {
		st.spareMsgs = append(st.spareMsgs, m)
	}
}

// post sends a record to dst, or queues it behind the records already
// waiting for room. It reports whether the record went out at once.
func (pe *PE) post(dst int, rec outRec) bool {
	st := &pe.ext.msg
	q := &st.out[dst]
	if len(q.backlog) == 0 && pe.write(dst, &rec) {
		return true
	}
	q.backlog = append(q.backlog, rec)
	st.queued++
	return false
}

// write puts a record into the ring to dst if it has room.
func (pe *PE) write(dst int, rec *outRec) bool {
	if rec.kind == recEager {
		return pe.writeEager(dst, rec.w1, rec.payload)
	}
	t := &pe.ext.msg.out[dst].ring
	off, ok := t.reserve(1)
	if !ok {
		return false
	}
	for i, v := range rec.body {
		t.putBody(off, i, v)
	}
	t.commit(off, 1, rec.kind, rec.w1)
	pe.ring(dst)
	return true
}

// writeEager puts an eager message into the ring to dst if it has room.
func (pe *PE) writeEager(dst int, w1 uint64, payload []byte) bool {
	t := &pe.ext.msg.out[dst].ring
	n := uint64(len(payload))
	off, ok := t.reserve(cellsFor(n))
	if !ok {
		return false
	}
	copy(t.data[off+recHdrSize:off+recHdrSize+n], payload)
	t.commit(off, cellsFor(n), recEager, w1)
	pe.ring(dst)
	// After the ring: its locked instruction waits for the record's
	// lines, which the receiver may be waiting for.
	pe.stats.MsgEager.Add(1) // written by this PE only; symheap stat reads it
	return true
}

// writeBox puts a message of at most boxLimit bytes into the fast box
// with dst, if the box is free and no record waits in the backlog to dst
// (it would come after the message in the ring but before it in order).
// A send tries it first thing under the lock, and it publishes before
// any bookkeeping: in a ping-pong, every instruction between the lock
// and the publishing store delays the reply (msgLock).
func (pe *PE) writeBox(dst, tag int, payload []byte) bool {
	st := &pe.ext.msg
	b := &st.box[dst]
	if b.line == nil || len(st.out[dst].backlog) != 0 || !b.free() {
		return false
	}
	b.put(tag, payload, st.out[dst].ring.tail, st.relaxed)
	pe.ring(dst)
	st.boxed++
	pe.stats.MsgEager.Add(1) // written by this PE only; symheap stat reads it
	return true
}

// ring wakes PE p if it sleeps on its doorbell: steps W2 and W3 of
// msg_queue.go's "Waking", after the caller's publishing store (W1: a
// record's word 0, a box message, a head).
func (pe *PE) ring(p int) {
	b := pe.ext.msg.bells[p]
	if b.sleepers.Load() != 0 { // W2; seq-cst: pairs with the sleeper's sleepers.Add (S1, then its membarrier S2)
		shmsync.Wake(&b.word, &b.sleepers)
	}
}

// progress drains the incoming rings, pushes backlogs and retries bounce
// sends that wait for a buffer. Called with msgState.mu held.
func (pe *PE) progress() {
	st := &pe.ext.msg
	completed := st.completed
	for s := range st.in {
		r := &st.in[s]
		b := &st.box[s]
		drained := false
		for st.broken == nil {
			// The ring first, then the box: a record the ring shows was
			// published before any box message that comes after it
			// (msg_queue.go, "Fast boxes").
			w0, off, ok := r.peek()
			bw0, ready, has := b.pending(r.pos)
			if ready {
				pe.takeBox(s, b, bw0)
				drained = true
				continue
			}
			if has && !ok {
				// The ring records before the box message were published
				// before it: they show now.
				if w0, off, ok = r.peek(); !ok {
					st.broken = fmt.Errorf("symheap: the fast box from PE %d holds a message after ring position %d, which the ring does not show: %w (shared memory was overwritten)", s, uint32(bw0>>32), ErrPeerLost)
					break
				}
			}
			if !ok {
				break
			}
			if n := recCells(w0); n == 0 || off/cellSize+n > r.mask+1 {
				st.broken = fmt.Errorf("symheap: the ring from PE %d holds a record of %d cells at cell %d: %w (shared memory was overwritten)", s, n, off/cellSize, ErrPeerLost)
				break
			}
			pe.handle(s, r, w0, off)
			r.consumed(w0)
			drained = true
		}
		// Give the cells and the box back when the ring is idle, or a
		// quarter of it waits: not at once, so that a receive that has
		// just found its message returns before it pays for the stores
		// and the check. (A reply through the box gives the box back
		// on its way.)
		if !drained {
			b.ack(st.relaxed)
		}
		if (!drained || r.pos-r.published >= (r.mask+1)/4) && r.release() {
			pe.ring(s) // the sender may wait for room
		}
	}
	if st.queued > 0 {
		for d := range st.out {
			q := &st.out[d]
			for len(q.backlog) > 0 && pe.write(d, &q.backlog[0]) {
				if r := q.backlog[0].req; r != nil {
					r.complete(Status{pe.rank, r.tag, len(r.buf)}, nil)
				}
				q.backlog[0] = outRec{}
				q.backlog = q.backlog[1:]
				st.queued--
			}
		}
	}
	if len(st.splitting) > 0 {
		rest := st.splitting[:0]
		for _, r := range st.splitting {
			pe.splitPoll(r)
			if !r.over() {
				rest = append(rest, r)
			}
		}
		clear(st.splitting[len(rest):])
		st.splitting = rest
	}
	if len(st.noSlab) > 0 {
		waiting := st.noSlab
		st.noSlab = nil
		for _, r := range waiting {
			pe.pushChunks(r)
		}
	}
	// A goroutine of this PE may sleep waiting for a request completed
	// here: nobody else will ring for it.
	if st.completed != completed && st.bell.sleepers.Load() != 0 { // seq-cst; pairs with the sleeper's announcement (S1 in PE.sleep)
		shmsync.Wake(&st.bell.word, &st.bell.sleepers)
	}
}

// handle acts on one record from PE src.
func (pe *PE) handle(src int, r *rxRing, w0, off uint64) {
	st := &pe.ext.msg
	switch recKind(w0) {
	case recSkip:
	case recEager:
		w1 := r.w1(off)
		tag, n := int(uint32(w1)), w1>>32
		if recHdrSize+n > recCells(w0)*cellSize {
			st.broken = fmt.Errorf("symheap: the ring from PE %d holds a %d-byte message in %d cells: %w (shared memory was overwritten)", src, n, recCells(w0), ErrPeerLost)
			return
		}
		st.arrive(src, tag, r.data[off+recHdrSize:off+recHdrSize+n])
	case recRTS:
		w1 := r.w1(off)
		m := &inMsg{src: src, tag: int(uint32(w1)), path: uint8(w1 >> 32), size: int(r.word(off, 0)), id: r.word(off, 1), where: r.word(off, 2)}
		if m.path != pathSegment {
			st.xfers[xferKey{src, m.id}] = m
		}
		if q := st.takePosted(src, m.tag, m.size); q != nil {
			pe.startRecv(q, m)
			return
		}
		st.unexp = append(st.unexp, m)
	case recChunk:
		m := st.xfers[xferKey{src, r.word(off, 0)}]
		if m == nil {
			return // the receive was abandoned
		}
		m.chunks = append(m.chunks, chunk{slot: r.word(off, 1), off: r.word(off, 2), n: r.word(off, 3)})
		if m.recv != nil {
			pe.copyChunks(m)
		}
	case recAbort:
		key := xferKey{src, r.word(off, 0)}
		m := st.xfers[key]
		if m == nil {
			return
		}
		delete(st.xfers, key)
		err := fmt.Errorf("symheap: PE %d could not send its %d-byte message with tag %d: %w (it found no room for bounce buffers; raise SYMHEAP_SHARED_SIZE)",
			src, m.size, m.tag, ErrOutOfMemory)
		if m.recv != nil {
			m.recv.complete(Status{src, m.tag, m.size}, err)
			return
		}
		st.unexp = remove(st.unexp, m)
	case recCTS:
		if q := st.sends[r.word(off, 0)]; q != nil {
			pe.helpCopy(q, src, r.w1(off), r.word(off, 1), r.word(off, 2), r.word(off, 3))
		}
	case recAck, recNack, recChunkAck:
		q := st.sends[r.word(off, 0)]
		if q == nil {
			return
		}
		pe.sendEvent(q, recKind(w0), r.word(off, 1))
	}
}

// arrive gives an eager message, whose payload is still in shared memory,
// to the oldest matching posted receive, or queues a copy of it as
// unexpected.
func (st *msgState) arrive(src, tag int, payload []byte) {
	if q := st.takePosted(src, tag, len(payload)); q != nil {
		copy(q.buf, payload)
		q.complete(Status{src, tag, len(payload)}, nil)
		return
	}
	st.unexp = append(st.unexp, st.eagerMsg(src, tag, payload))
}

// takeBox takes the message in PE src's box slot, whose word 0 is w0.
func (pe *PE) takeBox(src int, b *boxPair, w0 uint64) {
	st := &pe.ext.msg
	tag, payload, bad := b.msg()
	if bad {
		st.broken = fmt.Errorf("symheap: the fast box from PE %d holds a message longer than %d bytes: %w (shared memory was overwritten)", src, boxMax, ErrPeerLost)
		return
	}
	st.arrive(src, tag, payload)
	b.got = uint16(w0)
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
