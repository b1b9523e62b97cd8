package msg

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/memcopy"
	"github.com/symheap/symheap/internal/unix"
)

// Large messages: the single-copy, kernel and bounce protocols (the
// package comment names them). Records, sender S, receiver R, each in the
// ring S→R or R→S:
//
//	segment   S: RTS{tag, segment, len, id, offset}      R copies, R: ACK{id, 0}
//	kernel    S: RTS{tag, kernel, len, id, address}      R process_vm_readv, R: ACK{id, 0}
//	          refused (EPERM, ENOSYS):  R: NACK{id}, then as bounce from S's side
//	bounce    S: RTS{tag, bounce, len, id}; S: CHUNK{id, slot, offset, n} for each
//	          slot it fills; R copies each chunk out, R: CHUNKACK{id, slot};
//	          S refills the slot with the next piece; the last CHUNKACK ends it
//	failure   S: ABORT{id} (no bounce buffer to be had); R: ACK{id, 1} (copy failed)
//
// RTS records travel in order with the eager ones, so matching order holds
// whatever the protocol. CHUNK records may arrive before R has matched the
// RTS: R keeps them with the unexpected message (inMsg.chunks) and copies
// them out once it matches.
//
// # Bounce buffers
//
// A bounce transfer uses one buffer of up to BounceSlots chunks of
// BounceChunk bytes from the sender's shared heap, allocated when it
// starts and freed when it ends. Neither happens under the lock (the
// package comment, "Locking"):
//
//  1. A send that needs a buffer (pushChunks without one: the start of a
//     bounce send, or a NACK) is queued in wantBounce, marked inWork.
//  2. The lock's release (unlock, or flushBounce in a poller) runs
//     bounceWork: it takes the queues, reads the sizes, and lets the lock
//     go.
//  3. Without the lock it frees the spent buffers (toFree), then
//     allocates, for each send, a buffer halving the chunk size while the
//     heap has no room (down to MinBounceChunk).
//  4. With the lock again it installs the results: a freed buffer
//     completes the send that was waiting for it (or the free's error
//     does); a buffer goes to its send, which posts its first chunks, or
//     back to toFree if the send failed meanwhile; a send that got none
//     waits (noSlab) while another transfer of this PE holds a buffer,
//     and is tried again once one is freed, or else fails with
//     ErrOutOfMemory (ABORT to the receiver).
//  5. It repeats while the queues are not empty, then releases the lock.
//
// A free that fails means the heap's shared metadata was overwritten: the
// send that waited for the free ends with the error, or, if none did,
// every wait of this PE's messaging fails with it (Layer.broken).

const (
	BounceChunk    = 256 << 10 // bytes per chunk
	BounceSlots    = 4         // chunks in flight per transfer
	MinBounceChunk = 4 << 10   // the smallest chunk tried when the heap is tight
)

// bounceTx is a bounce transfer's sender side.
type bounceTx struct {
	off   core.SharedOff // the buffer's offset in this PE's shared heap
	seg   core.SegOff    // and in the segment
	chunk uint64         // bytes per slot
	busy  []uint64       // bytes in each slot awaiting CHUNKACK; 0 = free
	sent  uint64         // bytes copied into slots so far
	acked uint64         // bytes the receiver has copied out
}

// spentBounce is a bounce buffer to free, and the send that completes
// once it is freed (nil: none).
type spentBounce struct {
	off core.SharedOff
	req *Request
}

// startLarge starts a send above the eager limit: chooses the path, posts
// the RTS and, for a bounce, the first chunks. Called with the lock held.
func (l *Layer) startLarge(r *Request) {
	r.large = true
	l.nextID++
	big := r.more()
	big.id = l.nextID
	l.sends[big.id] = r
	var where uint64
	p, _ := core.SliceData(r.buf)
	so, inSeg := l.sp.SegOffset(p)
	switch {
	case l.allBounce:
		r.path = pathBounce
	case inSeg && uint64(so)+uint64(len(r.buf)) <= uint64(len(l.sp.Mem())):
		r.path, where = pathSegment, uint64(so)
	case l.noKernel || l.kernelRefused[r.peer]:
		r.path = pathBounce
	default:
		r.path, where = pathKernel, uint64(unix.AddrOf(r.buf))
	}
	l.post(r.peer, outRec{kind: recRTS, w1: uint64(uint32(r.tag)) | uint64(r.path)<<32,
		body: [4]uint64{uint64(len(r.buf)), big.id, where}})
	if r.path == pathBounce {
		l.pushChunks(r)
	}
}

// sendEvent acts on the receiver's answer to a large send.
func (l *Layer) sendEvent(r *Request, kind uint8, arg uint64) {
	c := l.stats // written by this PE only; symheap stat reads them
	switch kind {
	case recAck:
		delete(l.sends, r.big.id)
		if arg != 0 {
			r.complete(Status{}, fmt.Errorf("symheap: send of %d bytes to PE %d with tag %d: %w", len(r.buf), r.peer, r.tag, errPeerCopy))
			return
		}
		if r.path == pathSegment {
			c.MsgSingleCopy.Add(1)
		} else {
			c.MsgKernel.Add(1)
		}
		// The receiver has read the buffer through the kernel; until here
		// r (and l.sends) kept it reachable.
		runtime.KeepAlive(r.buf)
		r.complete(Status{l.rank, r.tag, len(r.buf)}, nil)
	case recNack:
		l.kernelRefused[r.peer] = true
		r.path = pathBounce
		l.pushChunks(r)
	case recChunkAck:
		b := r.big.bounce
		if b == nil || arg >= uint64(len(b.busy)) || b.busy[arg] == 0 {
			return
		}
		b.acked += b.busy[arg]
		b.busy[arg] = 0
		if b.acked == uint64(len(r.buf)) {
			delete(l.sends, r.big.id)
			c.MsgBounce.Add(1)
			l.dropBounce(r, true) // completed once the buffer is freed
			return
		}
		l.pushChunks(r)
	}
}

// pushChunks fills the free slots of a bounce transfer with the next
// pieces of the message and posts a CHUNK for each. A transfer without a
// buffer is queued for one instead (step 1 of "Bounce buffers").
func (l *Layer) pushChunks(r *Request) {
	b := r.more().bounce
	if b == nil {
		if !r.inWork {
			r.inWork = true
			l.wantBounce = append(l.wantBounce, r)
		}
		return
	}
	size := uint64(len(r.buf))
	for slot := range b.busy {
		if b.sent == size {
			break
		}
		if b.busy[slot] != 0 {
			continue
		}
		n := min(b.chunk, size-b.sent)
		at := uint64(b.seg) + uint64(slot)*b.chunk
		memcopy.Bytes(l.sp.Mem()[at:at+n], r.buf[b.sent:b.sent+n])
		b.busy[slot] = n
		b.sent += n
		l.post(r.peer, outRec{kind: recChunk, body: [4]uint64{r.big.id, uint64(slot), at, n}})
	}
}

// dropBounce queues r's bounce buffer, if it has one, to be freed; r
// completes once it is if then is set.
func (l *Layer) dropBounce(r *Request, then bool) {
	if r.big == nil || r.big.bounce == nil {
		return
	}
	b := r.big.bounce
	r.big.bounce = nil
	s := spentBounce{off: b.off}
	if then {
		s.req = r
		r.inWork = true
	}
	l.toFree = append(l.toFree, s)
}

// bouncing reports whether bounce work is queued. Called with the lock
// held.
func (l *Layer) bouncing() bool { return len(l.wantBounce) != 0 || len(l.toFree) != 0 }

// unlock releases the lock, doing the bounce work queued under it first
// (bounceWork). Every release of the lock goes through it, except where
// nothing can have been queued since the lock was taken.
func (l *Layer) unlock() {
	if l.bouncing() {
		l.bounceWork()
		return
	}
	l.lock.Unlock()
}

// flushBounce does the bounce work queued under the lock, for a caller
// that holds it and keeps it: it lets the lock go meanwhile.
func (l *Layer) flushBounce() {
	l.bounceWork()
	l.lock.Lock()
}

// bounceWork allocates and frees bounce buffers, steps 2 to 5 of "Bounce
// buffers". Called with the lock held; returns with it released.
func (l *Layer) bounceWork() {
	completed := l.completed
	for l.bouncing() {
		want, spent := l.wantBounce, l.toFree
		l.wantBounce, l.toFree = nil, nil
		sizes := make([]uint64, len(want))
		for i, r := range want {
			if r.over() { // failed while queued: needs no buffer
				r.inWork = false
				continue
			}
			sizes[i] = uint64(len(r.buf))
		}
		l.lock.Unlock()
		freeErrs := make([]error, len(spent))
		for i, s := range spent {
			freeErrs[i] = l.rt.FreeBounce(s.off)
		}
		got := make([]*bounceTx, len(want))
		allocErrs := make([]error, len(want))
		for i, n := range sizes {
			if n != 0 {
				got[i], allocErrs[i] = l.allocBounce(n)
			}
		}
		l.lock.Lock()
		freed := false
		for i, s := range spent {
			freed = l.freed(s, freeErrs[i]) || freed
		}
		if freed {
			// Room: the sends that waited for it try again.
			waiting := l.noSlab
			l.noSlab = nil
			for _, r := range waiting {
				l.pushChunks(r)
			}
		}
		// Buffers first, so that a send that got none sees the
		// transfers that did (noBounce).
		for i, r := range want {
			if b := got[i]; b != nil {
				r.inWork = false
				if r.over() { // failed meanwhile
					l.toFree = append(l.toFree, spentBounce{off: b.off})
					continue
				}
				r.more().bounce = b
				l.pushChunks(r)
			}
		}
		for i, r := range want {
			if got[i] == nil && sizes[i] != 0 {
				r.inWork = false
				l.noBounce(r, sizes[i], allocErrs[i])
			}
		}
	}
	l.wakeOwn(completed)
	l.lock.Unlock()
}

// freed acts on the free of a spent buffer, and reports whether it
// succeeded. Called with the lock held.
func (l *Layer) freed(s spentBounce, err error) bool {
	r := s.req
	if r != nil {
		r.inWork = false
	}
	if err != nil {
		err = fmt.Errorf("symheap: freeing a bounce buffer (offset %#x of PE %d's local shared heap): %w (the heap's shared metadata was overwritten)", uint64(s.off), l.rank, err)
		if r != nil && !r.over() {
			r.complete(Status{}, err)
		} else if l.broken == nil {
			l.broken = err
		}
		return false
	}
	if r != nil && !r.over() {
		r.complete(Status{l.rank, r.tag, len(r.buf)}, nil)
	}
	return true
}

// noBounce acts on a send of size bytes that got no bounce buffer: it
// waits for another transfer's buffer (noSlab) if one holds one or is
// being freed, else it fails. Called with the lock held.
func (l *Layer) noBounce(r *Request, size uint64, err error) {
	if r.over() {
		return
	}
	if errors.Is(err, errs.ErrOutOfMemory) {
		held := len(l.toFree) != 0
		for _, q := range l.sends {
			held = held || q != r && q.big != nil && q.big.bounce != nil
		}
		if held {
			l.noSlab = append(l.noSlab, r) // tried again once a buffer is freed
			return
		}
	}
	id := r.more().id
	delete(l.sends, id)
	l.post(r.peer, outRec{kind: recAbort, body: [4]uint64{id}})
	r.complete(Status{}, fmt.Errorf("symheap: send of %d bytes to PE %d with tag %d needs a bounce buffer of at least %d bytes in the local shared heap: %w (raise SYMHEAP_SHARED_SIZE, or let process_vm_readv work: see SYMHEAP_MSG_NOKERNEL and ptrace restrictions)",
		size, r.peer, r.tag, min(size, 2*MinBounceChunk), err))
}

// allocBounce gets a bounce buffer for a message of size bytes, halving
// the chunk size while the heap has no room. Called without the lock.
func (l *Layer) allocBounce(size uint64) (*bounceTx, error) {
	var lastErr error = fmt.Errorf("the local shared heap is empty (SYMHEAP_SHARED_SIZE is 0): %w", errs.ErrOutOfMemory)
	for c := min(uint64(BounceChunk), (size+lineSize-1)&^(lineSize-1)); l.sp.Lay.SharedSize > 0 && c >= min(MinBounceChunk, size); c /= 2 {
		slots := min(uint64(BounceSlots), (size+c-1)/c)
		off, err := l.rt.AllocBounce(slots*c, lineSize)
		if err == nil {
			return &bounceTx{off: off, seg: l.sp.SharedSeg(l.rank, off), chunk: c, busy: make([]uint64, slots)}, nil
		}
		lastErr = err
		if !errors.Is(err, errs.ErrOutOfMemory) {
			break
		}
	}
	return nil, lastErr
}

// startRecv starts copying a matched large message into r's buffer.
// Called with the lock held.
func (l *Layer) startRecv(r *Request, m *inMsg) {
	r.large = true
	m.recv, r.more().msg = r, m
	ok := Status{m.src, m.tag, m.size}
	if (m.path == pathSegment || m.path == pathKernel) && l.trySplit(r, m) {
		return
	}
	switch m.path {
	case pathSegment:
		if m.where > uint64(len(l.sp.Mem())) || uint64(m.size) > uint64(len(l.sp.Mem()))-m.where {
			l.post(m.src, outRec{kind: recAck, body: [4]uint64{m.id, 1}})
			r.complete(ok, fmt.Errorf("symheap: PE %d sent a descriptor outside the segment (offset %#x, %d bytes): %w", m.src, m.where, m.size, errs.ErrBadArg))
			return
		}
		memcopy.BytesLocal(r.buf[:m.size], l.sp.Mem()[m.where:])
		l.post(m.src, outRec{kind: recAck, body: [4]uint64{m.id, 0}})
		r.complete(ok, nil)
	case pathKernel:
		err := ReadFrom(l.rt.Pid(m.src), r.buf[:m.size], uintptr(m.where))
		switch {
		case err == nil:
			delete(l.xfers, xferKey{m.src, m.id})
			l.post(m.src, outRec{kind: recAck, body: [4]uint64{m.id, 0}})
			r.complete(ok, nil)
		case refused(err):
			// Refused: the sender switches to bounce buffers.
			m.path = pathBounce
			l.post(m.src, outRec{kind: recNack, body: [4]uint64{m.id}})
			l.copyChunks(m)
		case errors.Is(err, unix.ESRCH):
			delete(l.xfers, xferKey{m.src, m.id})
			r.complete(ok, fmt.Errorf("symheap: receive from PE %d: its process is gone: %w", m.src, errs.ErrPeerLost))
		default:
			delete(l.xfers, xferKey{m.src, m.id})
			l.post(m.src, outRec{kind: recAck, body: [4]uint64{m.id, 1}})
			r.complete(ok, fmt.Errorf("symheap: receive of %d bytes from PE %d: process_vm_readv: %w", m.size, m.src, err))
		}
	case pathBounce:
		l.copyChunks(m)
	}
}

// ReadFrom copies len(dst) bytes from address src of process pid, and
// WriteTo copies src to address dst of process pid: process_vm_readv and
// process_vm_writev to the end. They are variables so that tests can make
// them refuse, as ptrace rules would.
var (
	ReadFrom = readFromProcess
	WriteTo  = writeToProcess
)

func readFromProcess(pid int, dst []byte, src uintptr) error {
	for len(dst) > 0 {
		n, err := unix.ProcessVMRead(pid, dst, src)
		if err != nil {
			return err
		}
		if n <= 0 {
			return fmt.Errorf("process_vm_readv copied nothing at %#x", src)
		}
		dst, src = dst[n:], src+uintptr(n)
	}
	return nil
}

// copyChunks copies the filled chunks of a matched bounce message out and
// acknowledges each; the last one completes the receive.
func (l *Layer) copyChunks(m *inMsg) {
	r := m.recv
	for _, c := range m.chunks {
		if c.off > uint64(len(l.sp.Mem())) || c.n > uint64(len(l.sp.Mem()))-c.off || c.n > uint64(m.size-m.got) {
			delete(l.xfers, xferKey{m.src, m.id})
			r.complete(Status{m.src, m.tag, m.size}, fmt.Errorf("symheap: PE %d sent a bounce chunk outside its buffer (offset %#x, %d bytes): %w", m.src, c.off, c.n, errs.ErrBadArg))
			return
		}
		memcopy.BytesLocal(r.buf[m.got:], l.sp.Mem()[c.off:c.off+c.n])
		m.got += int(c.n)
		l.post(m.src, outRec{kind: recChunkAck, body: [4]uint64{m.id, c.slot}})
	}
	m.chunks = m.chunks[:0]
	if m.got == m.size {
		delete(l.xfers, xferKey{m.src, m.id})
		r.complete(Status{m.src, m.tag, m.size}, nil)
	}
}
