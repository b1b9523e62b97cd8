package symheap

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/symheap/symheap/internal/core"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/internal/unix"
)

// Large messages: the single-copy, kernel and bounce protocols (msg.go
// names them). Records, sender S, receiver R, each in the ring S→R or R→S:
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
// A bounce transfer uses one buffer of up to bounceSlots chunks of
// bounceChunk bytes from the sender's shared heap, allocated when it
// starts and freed when it ends; if the heap has no room even for small
// chunks the send waits for another bounce transfer of this PE to end,
// and fails with ErrOutOfMemory when there is none.

const (
	bounceChunk    = 256 << 10 // bytes per chunk
	bounceSlots    = 4         // chunks in flight per transfer
	minBounceChunk = 4 << 10   // the smallest chunk tried when the heap is tight
)

// bounceTx is a bounce transfer's sender side.
type bounceTx struct {
	off   uint64   // the buffer's offset in this PE's shared heap
	seg   uint64   // and in the segment
	chunk uint64   // bytes per slot
	busy  []uint64 // bytes in each slot awaiting CHUNKACK; 0 = free
	sent  uint64   // bytes copied into slots so far
	acked uint64   // bytes the receiver has copied out
}

// startLarge starts a send above the eager limit: chooses the path, posts
// the RTS and, for a bounce, the first chunks. Called with msgState.mu held.
func (pe *PE) startLarge(r *Request) {
	st := &pe.ext.msg
	st.nextID++
	r.id = st.nextID
	st.sends[r.id] = r
	var where uint64
	p, _ := core.SliceData(r.buf)
	so, inSeg := pe.sp.SegOffset(p)
	switch {
	case st.allBounce:
		r.path = pathBounce
	case inSeg && uint64(so)+uint64(len(r.buf)) <= uint64(len(pe.sp.Mem())):
		r.path, where = pathSegment, uint64(so)
	case st.noKernel || st.kernelRefused[r.peer]:
		r.path = pathBounce
	default:
		r.path, where = pathKernel, uint64(unix.AddrOf(r.buf))
	}
	pe.post(r.peer, outRec{kind: recRTS, w1: uint64(uint32(r.tag)) | uint64(r.path)<<32,
		body: [4]uint64{uint64(len(r.buf)), r.id, where}})
	if r.path == pathBounce {
		pe.pushChunks(r)
	}
}

// sendEvent acts on the receiver's answer to a large send.
func (pe *PE) sendEvent(r *Request, kind uint8, arg uint64) {
	st := &pe.ext.msg
	c := pe.stats // written by this PE only; symheap stat reads them
	switch kind {
	case recAck:
		delete(st.sends, r.id)
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
		// r (and st.sends) kept it reachable.
		runtime.KeepAlive(r.buf)
		r.complete(Status{pe.rank, r.tag, len(r.buf)}, nil)
	case recNack:
		st.kernelRefused[r.peer] = true
		r.path = pathBounce
		pe.pushChunks(r)
	case recChunkAck:
		b := r.bounce
		if b == nil || arg >= uint64(len(b.busy)) || b.busy[arg] == 0 {
			return
		}
		b.acked += b.busy[arg]
		b.busy[arg] = 0
		if b.acked == uint64(len(r.buf)) {
			delete(st.sends, r.id)
			pe.freeBounce(r)
			c.MsgBounce.Add(1)
			r.complete(Status{pe.rank, r.tag, len(r.buf)}, nil)
			return
		}
		pe.pushChunks(r)
	}
}

// pushChunks fills the free slots of a bounce transfer with the next
// pieces of the message and posts a CHUNK for each, allocating the buffer
// first if the transfer has none.
func (pe *PE) pushChunks(r *Request) {
	if r.bounce == nil && !pe.allocBounce(r) {
		return
	}
	b := r.bounce
	size := uint64(len(r.buf))
	for slot := range b.busy {
		if b.sent == size {
			break
		}
		if b.busy[slot] != 0 {
			continue
		}
		n := min(b.chunk, size-b.sent)
		at := b.seg + uint64(slot)*b.chunk
		copy(pe.sp.Mem()[at:at+n], r.buf[b.sent:b.sent+n])
		b.busy[slot] = n
		b.sent += n
		pe.post(r.peer, outRec{kind: recChunk, body: [4]uint64{r.id, uint64(slot), at, n}})
	}
}

// allocBounce gets a bounce buffer for r, halving the chunk size while
// the heap has no room. When even the smallest is refused, r waits for
// another transfer to end (noSlab), or fails if there is none.
func (pe *PE) allocBounce(r *Request) bool {
	st := &pe.ext.msg
	size := uint64(len(r.buf))
	pool := pe.ext.shared.pools[pe.rank]
	var lastErr error = fmt.Errorf("the local shared heap is empty (SYMHEAP_SHARED_SIZE is 0): %w", ErrOutOfMemory)
	for c := min(uint64(bounceChunk), (size+cellSize-1)&^(cellSize-1)); pool != nil && c >= min(minBounceChunk, size); c /= 2 {
		slots := min(uint64(bounceSlots), (size+c-1)/c)
		off, err := pool.Alloc(slots*c, cellSize)
		if err == nil {
			r.bounce = &bounceTx{off: uint64(off), seg: pe.seg.SharedOffOf(pe.rank) + uint64(off), chunk: c, busy: make([]uint64, slots)}
			return true
		}
		lastErr = err
		if !errors.Is(err, ErrOutOfMemory) {
			break
		}
	}
	for _, q := range st.sends {
		if q != r && q.bounce != nil {
			st.noSlab = append(st.noSlab, r) // retried in progress
			return false
		}
	}
	delete(st.sends, r.id)
	pe.post(r.peer, outRec{kind: recAbort, body: [4]uint64{r.id}})
	r.complete(Status{}, fmt.Errorf("symheap: send of %d bytes to PE %d with tag %d needs a bounce buffer of at least %d bytes in the local shared heap: %w (raise SYMHEAP_SHARED_SIZE, or let process_vm_readv work: see SYMHEAP_MSG_NOKERNEL and ptrace restrictions)",
		size, r.peer, r.tag, min(size, 2*minBounceChunk), lastErr))
	return false
}

// freeBounce returns a transfer's bounce buffer to the shared heap.
func (pe *PE) freeBounce(r *Request) {
	if b := r.bounce; b != nil {
		pe.ext.shared.pools[pe.rank].Free(alloc.Off(b.off))
		r.bounce = nil
	}
}

// startRecv starts copying a matched large message into r's buffer.
// Called with msgState.mu held.
func (pe *PE) startRecv(r *Request, m *inMsg) {
	st := &pe.ext.msg
	m.recv, r.msg = r, m
	ok := Status{m.src, m.tag, m.size}
	if (m.path == pathSegment || m.path == pathKernel) && pe.trySplit(r, m) {
		return
	}
	switch m.path {
	case pathSegment:
		if m.where > uint64(len(pe.sp.Mem())) || uint64(m.size) > uint64(len(pe.sp.Mem()))-m.where {
			pe.post(m.src, outRec{kind: recAck, body: [4]uint64{m.id, 1}})
			r.complete(ok, fmt.Errorf("symheap: PE %d sent a descriptor outside the segment (offset %#x, %d bytes): %w", m.src, m.where, m.size, ErrBadArg))
			return
		}
		copy(r.buf[:m.size], pe.sp.Mem()[m.where:])
		pe.post(m.src, outRec{kind: recAck, body: [4]uint64{m.id, 0}})
		r.complete(ok, nil)
	case pathKernel:
		err := readFrom(pe.seg.Pid(m.src), r.buf[:m.size], uintptr(m.where))
		switch {
		case err == nil:
			delete(st.xfers, xferKey{m.src, m.id})
			pe.post(m.src, outRec{kind: recAck, body: [4]uint64{m.id, 0}})
			r.complete(ok, nil)
		case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOSYS):
			// Refused: the sender switches to bounce buffers.
			m.path = pathBounce
			pe.post(m.src, outRec{kind: recNack, body: [4]uint64{m.id}})
			pe.copyChunks(m)
		case errors.Is(err, unix.ESRCH):
			delete(st.xfers, xferKey{m.src, m.id})
			r.complete(ok, fmt.Errorf("symheap: receive from PE %d: its process is gone: %w", m.src, ErrPeerLost))
		default:
			delete(st.xfers, xferKey{m.src, m.id})
			pe.post(m.src, outRec{kind: recAck, body: [4]uint64{m.id, 1}})
			r.complete(ok, fmt.Errorf("symheap: receive of %d bytes from PE %d: process_vm_readv: %w", m.size, m.src, err))
		}
	case pathBounce:
		pe.copyChunks(m)
	}
}

// readFrom copies len(dst) bytes from address src of process pid (a
// variable so that tests can make it refuse, as ptrace rules would).
var readFrom = readFromProcess

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
func (pe *PE) copyChunks(m *inMsg) {
	st := &pe.ext.msg
	r := m.recv
	for _, c := range m.chunks {
		if c.off > uint64(len(pe.sp.Mem())) || c.n > uint64(len(pe.sp.Mem()))-c.off || c.n > uint64(m.size-m.got) {
			delete(st.xfers, xferKey{m.src, m.id})
			r.complete(Status{m.src, m.tag, m.size}, fmt.Errorf("symheap: PE %d sent a bounce chunk outside its buffer (offset %#x, %d bytes): %w", m.src, c.off, c.n, ErrBadArg))
			return
		}
		copy(r.buf[m.got:], pe.sp.Mem()[c.off:c.off+c.n])
		m.got += int(c.n)
		pe.post(m.src, outRec{kind: recChunkAck, body: [4]uint64{m.id, c.slot}})
	}
	m.chunks = m.chunks[:0]
	if m.got == m.size {
		delete(st.xfers, xferKey{m.src, m.id})
		r.complete(Status{m.src, m.tag, m.size}, nil)
	}
}
