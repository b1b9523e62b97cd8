package msg

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/memcopy"
	"github.com/symheap/symheap/internal/unix"
)

// Split copies: a large single-copy message copied by both PEs at once.
//
// A message of at least the split size (SYMHEAP_MSG_SPLIT, default
// defaultSplitMin) on the segment or kernel path is copied in chunks
// (chunkFor: smallChunk or splitChunk bytes) that the receiver and the
// sender claim from a shared cursor: the receiver reads from the
// sender's buffer (memcpy from the segment, or process_vm_readv), the
// sender writes into the receiver's buffer (memcpy into the segment
// through the writable mapping, or process_vm_writev). A sender that
// waits for its send (Send, Wait) thus lends its core to the copy; one
// that is busy elsewhere lends nothing, and the receiver copies every
// chunk itself, as without a split.
//
// # The slot (receiver's message area, splitSlots of them, one line each)
//
//	claim   gen<<genShift | bytes claimed: the cursor, tagged with the
//	        generation of the transfer that uses the slot
//	done    bytes copied, by either side
//	orphan  offset+1 of a chunk the sender claimed but could not write
//	        (process_vm_writev refused), for the receiver to copy; 0: none
//
// # Steps
//
//  1. R matches an RTS and can split (size, a free slot, a destination the
//     sender can write, not a message to itself): for the kernel path it
//     first reads the message's first probeBytes itself, so that a refused
//     process_vm_readv still turns into the bounce path with nothing
//     claimed; from the segment it reads nothing first. It takes a slot,
//     bumps its generation, sets done and claim past what it copied, and
//     posts CTS{id, slot, gen, where} to S. (Reading a whole chunk first,
//     as it once did, left S idle for that chunk, and a 1 MiB half round
//     trip took longer, from the segment and through the kernel; measured:
//     docs/bench/design-measurements.md, «internal/msg/split.go, the
//     receiver's first read».)
//  2. R claims and copies chunks until the cursor reaches the end.
//  3. S, on CTS, claims and copies chunks the same way; a claim is a CAS
//     that fails if the generation changed, so a late CTS (the transfer
//     finished without S) claims nothing. S adds each chunk to done after
//     copying it, and rings R.
//  4. R, in progress, copies an orphan if there is one, and once done
//     reaches the size posts ACK, completes the receive and frees the slot.
//     A receive that finds every slot taken first does this for the splits
//     under way (pollSplits): one drain of the ring can match a whole
//     window of large messages, and R, copying them one after another, is
//     through the claims of each while S still copies its last chunk; so
//     the slots of the first 16 were all still taken when the 17th came,
//     and the rest of the window went unsplit (windows of 64 Isends of 1
//     MiB, ordinary buffers, moved much slower than with the slots taken
//     back; measured: docs/bench/design-measurements.md,
//     «internal/msg/split.go, split slots in a window»).
//     Every claim S made in this generation is in done by then, so the
//     slot's next generation cannot meet a stale writer.

// defaultSplitMin is where splitting starts to pay. With chunks of 256
// KiB it did not at 512 KiB (two chunks: the CTS round trip and the claims
// cost more than the sender's help gave; docs/bench/design-measurements.md,
// «internal/msg, SYMHEAP_MSG_SPLIT default»), so splits began at 1 MiB.
// With chunks of 64 KiB below 1 MiB (chunkFor) they pay from 256 KiB:
// half round trips of 256 KiB and 512 KiB took less time (ordinary and
// shared-heap buffers) and a window of 512 KiB Isends ran faster, with 1
// MiB and above unchanged (measured: docs/bench/design-measurements.md,
// «internal/msg/split.go, chunks»).
const (
	splitSlots      = 16
	splitChunk      = 256 << 10
	smallChunk      = 64 << 10
	defaultSplitMin = 256 << 10
	probeBytes      = 4 << 10 // what R reads before a kernel split's CTS
	genShift        = 40      // messages below 1 TiB
	claimMask       = 1<<genShift - 1
)

// Destination kinds in a CTS (word 1).
const (
	dstSegment = 1 // a segment offset: S copies into it
	dstAddress = 2 // an address in R: S writes with process_vm_writev
)

// chunkFor is the chunk of a split copy of size bytes, the same for both
// PEs: smallChunk below 1 MiB, so that a message of 256 KiB still has
// four chunks to share, splitChunk from 1 MiB, where fewer claims pay.
func chunkFor(size uint64) uint64 {
	if size < 1<<20 {
		return smallChunk
	}
	return splitChunk
}

// splitArea is the bytes of the split slots in a message area.
const splitArea = splitSlots * lineSize

// splitSlot is one slot, in the receiver's message area.
type splitSlot struct {
	claim  atomic.Uint64 // gen<<genShift | bytes claimed; CAS by both sides
	done   atomic.Uint64 // bytes copied; added to by both sides
	orphan atomic.Uint64 // offset+1 of a chunk the sender could not write; 0: none
	_      [40]byte
}

// trySplit starts a split copy of the matched message m into r (steps 1
// and 2) and reports whether it did. Called with Layer.lock held.
func (l *Layer) trySplit(r *Request, m *inMsg) bool {
	if l.splitMin == 0 || m.size < l.splitMin || m.src == l.rank {
		return false
	}
	idx := l.freeSlot()
	if idx < 0 {
		// A window of large receives: the earlier ones, copied by now
		// but for the sender's last chunks, give their slots back.
		l.pollSplits()
		if idx = l.freeSlot(); idx < 0 {
			l.noSlot++
			return false
		}
	}
	kind, where := uint64(dstAddress), uint64(unix.AddrOf(r.buf))
	p, _ := core.SliceData(r.buf)
	if so, in := l.sp.SegOffset(p); in {
		kind, where = dstSegment, uint64(so)
	} else if l.noKernel {
		return false
	}
	first := uint64(0) // from the segment: nothing to learn first, S may start at once
	if m.path != pathSegment {
		first = min(probeBytes, uint64(m.size))
		if err := l.copyIn(r, m, 0, first); err != nil {
			if m.path == pathKernel && refused(err) {
				return false // the caller takes the bounce path
			}
			l.endRecv(r, m, err)
			return true
		}
	}
	l.splits++
	sl := l.slots[idx]
	gen := (l.slotGen[idx] + 1) & (1<<(64-genShift) - 1)
	l.slotGen[idx], l.slotBusy[idx] = gen, true
	sl.done.Store(first)                  // read by S only after the CTS below publishes the generation
	sl.orphan.Store(0)                    // likewise
	sl.claim.Store(gen<<genShift | first) // S's CAS pairs with it; the ring record below orders it before S sees the CTS
	b := r.more()
	b.split, b.splitGen = idx+1, gen
	m.recv, b.msg = r, m
	l.post(m.src, outRec{kind: recCTS, w1: kind, body: [4]uint64{m.id, uint64(idx), gen, where}})
	l.claimCopy(r, m)
	l.splitPoll(r)
	if !r.over() {
		l.splitting = append(l.splitting, r)
	}
	return true
}

// freeSlot returns the index of a split slot not in use, or -1.
func (l *Layer) freeSlot() int {
	for i, busy := range l.slotBusy {
		if !busy {
			return i
		}
	}
	return -1
}

// pollSplits is step 4 for every split under way. Called with
// Layer.lock held.
func (l *Layer) pollSplits() {
	if len(l.splitting) == 0 {
		return
	}
	rest := l.splitting[:0]
	for _, r := range l.splitting {
		l.splitPoll(r)
		if !r.over() {
			rest = append(rest, r)
		}
	}
	clear(l.splitting[len(rest):])
	l.splitting = rest
}

// claimCopy is the receiver's side of step 2.
func (l *Layer) claimCopy(r *Request, m *inMsg) {
	sl := l.slots[r.big.split-1]
	size := uint64(m.size)
	for {
		v := sl.claim.Load() // pairs with S's CAS: we see its claims
		off := v & claimMask
		if off >= size {
			return
		}
		n := min(chunkFor(size), size-off)
		if !sl.claim.CompareAndSwap(v, v+n) { // the chunk is ours; S's CAS pairs with it
			continue
		}
		if err := l.copyIn(r, m, off, n); err != nil {
			l.endRecv(r, m, err)
			return
		}
		sl.done.Add(n) // S never waits for it; our own splitPoll reads it
	}
}

// splitPoll is step 4 for one receive. Called with Layer.lock held.
func (l *Layer) splitPoll(r *Request) {
	if r.over() || r.big == nil || r.big.split == 0 {
		return
	}
	m := r.big.msg
	sl := l.slots[r.big.split-1]
	if o := sl.orphan.Load(); o != 0 { // acquire: pairs with S's store after its failed write
		off := o - 1
		n := min(chunkFor(uint64(m.size)), uint64(m.size)-off)
		sl.orphan.Store(0)
		l.orphans++
		if err := l.copyIn(r, m, off, n); err != nil {
			l.endRecv(r, m, err)
			return
		}
		sl.done.Add(n)
	}
	if sl.done.Load() < uint64(m.size) { // acquire: pairs with S's Add after each chunk it copied
		return
	}
	l.slotBusy[r.big.split-1] = false
	r.big.split = 0
	delete(l.xfers, xferKey{m.src, m.id})
	l.post(m.src, outRec{kind: recAck, body: [4]uint64{m.id, 0}})
	r.complete(Status{m.src, m.tag, m.size}, nil)
}

// endRecv ends a receive of a large message with an error: it tells the
// sender (ACK with failure) and, if the receive holds a split slot, keeps
// the slot out of use (the sender may still write into its chunks).
func (l *Layer) endRecv(r *Request, m *inMsg, err error) {
	delete(l.xfers, xferKey{m.src, m.id})
	if r.big != nil {
		r.big.split = 0
	}
	l.post(m.src, outRec{kind: recAck, body: [4]uint64{m.id, 1}})
	r.complete(Status{m.src, m.tag, m.size}, err)
}

// copyIn copies n bytes at offset off of message m into r's buffer, from
// the sender's buffer: from the segment, or with process_vm_readv.
func (l *Layer) copyIn(r *Request, m *inMsg, off, n uint64) error {
	if m.path == pathSegment {
		if m.where > uint64(len(l.sp.Mem())) || off+n > uint64(len(l.sp.Mem()))-m.where {
			return fmt.Errorf("symheap: PE %d sent a descriptor outside the segment (offset %#x, %d bytes): %w", m.src, m.where, m.size, errs.ErrBadArg)
		}
		memcopy.BytesLocal(r.buf[off:off+n], l.sp.Mem()[m.where+off:])
		return nil
	}
	err := ReadFrom(l.rt.Pid(m.src), r.buf[off:off+n], uintptr(m.where+off))
	switch {
	case err == nil:
		return nil
	case refused(err):
		return err
	case errors.Is(err, unix.ESRCH):
		return fmt.Errorf("symheap: receive from PE %d: its process is gone: %w", m.src, errs.ErrPeerLost)
	}
	return fmt.Errorf("symheap: receive of %d bytes from PE %d: process_vm_readv: %w", m.size, m.src, err)
}

// refused reports whether a process_vm_readv/writev error means the
// kernel will not let this process at the other's memory.
func refused(err error) bool {
	return errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOSYS)
}

// helpCopy is the sender's side (step 3) for send r and the receiver's
// CTS. Called with Layer.lock held.
func (l *Layer) helpCopy(r *Request, dst int, kind, idx, gen, where uint64) {
	if idx >= splitSlots {
		return
	}
	sl := l.peerSlots[dst][idx]
	size := uint64(len(r.buf))
	helped := false
	for {
		v := sl.claim.Load() // pairs with R's store of the generation and with its CASes
		off := v & claimMask
		if v>>genShift != gen || off >= size {
			break
		}
		n := min(chunkFor(size), size-off)
		if !sl.claim.CompareAndSwap(v, v+n) { // the chunk is ours; R's CAS pairs with it
			continue
		}
		helped = true
		if kind == dstSegment {
			if where > uint64(len(l.sp.WMem())) || off+n > uint64(len(l.sp.WMem()))-where {
				sl.orphan.Store(off + 1) // release: R copies it (and fails the same way, reporting it)
				break
			}
			memcopy.Bytes(l.sp.WMem()[where+off:where+off+n], r.buf[off:off+n])
		} else if err := WriteTo(l.rt.Pid(dst), r.buf[off:off+n], uintptr(where+off)); err != nil {
			sl.orphan.Store(off + 1) // release: R copies the chunk we could not write
			break
		}
		sl.done.Add(n) // release: publishes our chunk to R's splitPoll
		l.helped += n
	}
	if helped {
		l.ring(dst)
	}
}

func writeToProcess(pid int, src []byte, dst uintptr) error {
	for len(src) > 0 {
		n, err := unix.ProcessVMWrite(pid, src, dst)
		if err != nil {
			return err
		}
		if n <= 0 {
			return fmt.Errorf("process_vm_writev copied nothing at %#x", dst)
		}
		src, dst = src[n:], dst+uintptr(n)
	}
	return nil
}
