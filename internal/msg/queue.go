package msg

import (
	"encoding/binary"
	"math/bits"
	"sync/atomic"

	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/shmsync"
)

// Message queues: one lock-free single-producer single-consumer ring per
// ordered pair of PEs, in the receiver's control block, and one fast box
// per pair of PEs (box.go) for the smallest messages.
//
// # Layout of the message area (msgArea in every PE's control block)
//
//	+0                          the PE's doorbell (bell), its own line
//	+64 + s*64                  head: cells this PE has consumed from
//	                            sender s's ring, its own line (written by
//	                            this PE, read by sender s when it runs out
//	                            of room)
//	+64 + n*64                  the split slots (split.go)
//	boxesOff + q*boxStride      the fast box of this PE and each PE q above
//	  (+64 + n*64 + splitArea)  it: one line, a 32-byte slot per direction
//	boxesOff + n*boxStride
//	    + s*ringBytes           the cells of sender s's ring
//
// A ring is ringBytes/16 cells of 16 bytes (a power of two). Positions
// count cells from 0 and never wrap (uint64); cell = position mod cells.
// A record occupies whole, contiguous cells:
//
//	word 0   (atomic) stamp: uint32(position) | cells<<32 | kind<<48
//	word 1   kind-specific (eager: tag | length<<32)
//	+16 ..   payload (eager) or body words (control records)
//
// Word 0 is written last by the producer, with a release store (publish;
// "Waking" says when it is sequentially consistent instead), and read
// first by the consumer, with an atomic load; it publishes the rest of the
// record, which is plain data (like the payload of a message). A record
// that would straddle the ring's end is preceded by a skip record that
// fills the cells up to the end. So a small message is part of one cache
// line that crosses from the sender's core to the receiver's: the receiver
// polls the very word that publishes the data. A message of up to 16
// bytes takes two cells, half a line: in a stream of them, when the
// sender is ahead of the receiver, two share a line and its transfer
// (with 64-byte cells, each took a line of its own; the sender's stores
// to a line the receiver holds are what a stream of small sends waits
// for). Control records take ctlCells cells.
//
// # Producer (sender), put of an n-cell record
//
//  1. Skip cells to the end of the ring if the record would straddle it.
//  2. If tail+skip+n - headSeen > cells, reload head (headSeen); if the
//     record still does not fit, the ring is full: the caller queues the
//     record in its backlog and retries during progress.
//  3. Write the skip record (step 4), then the record's payload and word 1.
//  4. Store word 0; tail += n. Ring the receiver's doorbell if it sleeps.
//
// # Consumer (receiver), during progress (and recvFast, fast.go)
//
//  1. Load word 0 of the cell at the read position p. It is a record iff
//     its kind is non-zero and its stamp is uint32(p); else nothing is
//     pending.
//  2. Handle it (copy the payload out, or act on the control record) and
//     advance p by its cells.
//  3. Give the cells back: clear word 0 of every cell of the records read
//     since the last time but their first (see the invariant), store
//     head = p, and ring the sender's doorbell if the sender sleeps (it
//     may be waiting for room). This is done at the first drain that
//     finds the ring empty, or once a quarter of the ring has been read
//     since the last time: not at once, so that a receive that has just
//     found its message returns without waiting for the lines it clears.
//
// # Invariant: the read position never shows a stale record
//
// Every cell outside [head, tail) holds in word 0 either zero or the
// header of an old record, whose stamp is that of a position at least one
// lap back, never uint32(p) for the position p the consumer polls. Payload
// bytes of an old record, which could look like anything, are never
// there: the consumer clears word 0 of a record's payload cells before it
// gives them back (step 3, before its store of head), and the producer
// writes only the cells of the records it publishes. Cells start zeroed.
// (Cells read but not yet given back lie behind p: the consumer does not
// poll them again, and the producer cannot write them.) The clearing falls
// to the consumer, and costs nothing for a one-cell record, because the
// producer's stores to the cell after its record would pull the very line
// the consumer reads next away from it.
//
// # Fast boxes
//
// A ping-pong through the rings alternates two lines, one per direction;
// one line shared by both directions bounces in much less time ("Cost";
// measured: docs/bench/design-measurements.md, «internal/msg/queue.go,
// fast boxes» and «..., rings»). So each pair of PEs shares a box: one
// line in the lower PE's area, where each of the two owns a 32-byte slot
// for its messages to the other (box.go gives the slot's words). A
// message of at most BoxMax bytes goes into the box when the box is free,
// that is when the peer has taken the previous one, and no record waits
// in the backlog to the peer; otherwise into the ring.
//
// Sender (writeBox, under Layer.lock):
//
//  1. Check the box is free: the peer's slot acknowledges (got) every
//     message this PE put (sent).
//  2. Write word 1 (tag, length) and the payload, then publish word 0:
//     sent+1, the acknowledgement of the peer's messages taken so far,
//     and this PE's ring tail towards the peer (ringPos).
//  3. Ring the peer's doorbell if it sleeps.
//
// Receiver, per source, in progress and recvFast:
//
//  1. Peek the ring at the read position p (acquire load of word 0).
//  2. Load the peer slot's word 0 (acquire). If it holds the next message
//     (sent == got+1) and ringPos <= p, take it: copy it out, got++.
//     Otherwise take the ring record at p, if any. A box message with
//     ringPos > p waits for the ring records before it, which are
//     published already and show at the next peek.
//  3. Publish got with this PE's next box message to that peer, or at the
//     first drain that finds nothing from it (boxPair.ack): not at once,
//     so that a reply carries the acknowledgement in the same line.
//
// # Invariant: one order for the box and the ring
//
// The messages of one sender to one receiver form one sequence, split
// between the box and the ring, and the receiver takes them in it. A box
// message records the ring tail at the time it was sent: the ring records
// before it in the sequence lie below ringPos and were published before
// it (the sender's publishing stores are release stores, in program
// order), those after it lie at ringPos and above. The receiver takes the
// box message exactly when its read position reaches ringPos, and it
// loads the box after peeking the ring (both acquire loads), so a ring
// record it sees at p >= ringPos, written after the box message, comes
// with the box message visible too. At most one box message is out at a
// time (the box is free only once it is taken), so ringPos, 32 bits, is
// at most a ring's length from p, and sent and got, 16 bits, never
// mistake one message for another.
//
// # Waking
//
// Sleepers are announced on the PE's bell. Whoever publishes something a
// PE may wait for (a ring record, a box message, room in a ring, the
// completion of another goroutine's request) loads the PE's sleeper count
// after its publishing store and wakes it only if the count is non-zero,
// so the busy path makes no system call and touches no line the consumer
// writes.
//
// The publishing stores are release stores (shmsync.StoreRelease64, a
// plain MOV on amd64) when this process is registered for asymmetric
// fences (Layer.relaxed), which gives no order between the store and
// the sleepers load after it. The sleeper's asymmetric fence gives it, as
// for puts in the root package's wait.go (whose sleeping half,
// Runtime.SleepFenced, the sleeper uses):
//
//	sleeper (Layer.sleep)                  writer
//	S1 bell.sleepers.Add(1)                W1 publishing store (release)
//	S2 membarrier(GLOBAL_EXPEDITED)        W2 if bell.sleepers.Load() != 0 {
//	loop:                                  W3     bell.word.Add(1)
//	  S3 v := bell.word.Load()                    FutexWake(bell.word)
//	  S4 if poll(): leave                     }
//	  S5 FutexWait(bell.word, v, 50 ms)
//	  S6 on timeout: liveness check
//	S7 bell.sleepers.Add(-1)
//
// No wake-up is lost, by wait.go's proof with W1 for its P1, W2 for P3
// and W3 for P4 and P5: if W2 reads zero it precedes S1, and it cannot
// follow the writer's barrier point in S2 (S1 is visible after it), so
// W1, before W2, precedes the point and is visible to S4; if W2 reads
// non-zero, W3's locked add follows W1, and S3..S5 either see the new
// word or are woken. A writer whose process could not register stores
// sequentially consistently instead (wait.go's fence P2), and a sleeper
// whose membarrier fails sleeps in 1 ms slices.
//
// # Cost
//
// What decided the paths above, each measured against the alternative
// (figures: docs/bench/design-measurements.md): one line polled with a
// pause per pair and direction (the fast box) against two lines, one per
// direction (the rings); no locked instruction between the arrival of a
// message and the reply; the receive fast path (fast.go); no progress in
// a send that completes at once and no memmove call for a word payload;
// word 0 stored by a release store, not an XCHG, which would wait for the
// record's lines; 16-byte cells rather than 64-byte ones, so that small
// messages share lines. Avoided in the rings, each for a measured cost: the
// producer clearing the cell after its record (the consumer's next poll
// then misses on a line the producer holds), the consumer storing head
// after every record (a fence on the way back to the caller), and atomic
// stores for anything but word 0 (each waits for the line).

const (
	lineSize   = 64 // a cache line: the doorbell, heads, split slots and boxes each take one
	cellSize   = 16 // a ring cell
	recHdrSize = 16
	ctlCells   = (recHdrSize + 4*8) / cellSize // the cells of a control record: header and 4 body words

	minRingBytes = 2 << 10
	maxRingBytes = 64 << 10
	ringBudget   = 1 << 20 // ring bytes per receiver, shared among its senders
)

// Record kinds (word 0 bits 48..55). Zero is never a kind.
const (
	recEager    = 1 + iota // sender→receiver: a whole small message
	recSkip                // padding to the end of the ring
	recRTS                 // sender→receiver: a large message is ready (descriptor)
	recAck                 // receiver→sender: a large message was received (or failed)
	recNack                // receiver→sender: process_vm_readv refused; use bounce buffers
	recChunk               // sender→receiver: a bounce chunk is filled
	recChunkAck            // receiver→sender: a bounce chunk was copied out
	recAbort               // sender→receiver: the send failed; fail the receive
	recCTS                 // receiver→sender: help copy (split.go)
)

// ringBytes is the size of each ring in a job of npes PEs: 1 MiB per
// receiver shared by its senders, within [2 KiB, 64 KiB].
func ringBytes(npes int) uint64 {
	b := uint64(ringBudget) / uint64(npes)
	b = 1 << (bits.Len64(b) - 1) // power of two below
	return min(max(b, minRingBytes), maxRingBytes)
}

// msgArea is the messaging area of every control block (core places it on
// a 128-byte boundary). Registered when the package is initialised, as
// core requires, before any layout is computed.
var msgArea = core.RegisterArea("msg", msgAreaSize)

// msgAreaSize is the bytes of each control block reserved for messages.
func msgAreaSize(npes int) uint64 {
	return ringsOff(npes) + uint64(npes)*ringBytes(npes)
}

// ringsOff is the offset of the first ring in the message area.
func ringsOff(npes int) uint64 { return boxesOff(npes) + uint64(npes)*boxStride }

// boxesOff is the offset of the fast boxes in the message area.
func boxesOff(npes int) uint64 { return splitOff(npes) + splitArea }

// splitOff is the offset of the split slots in the message area.
func splitOff(npes int) uint64 { return lineSize + uint64(npes)*lineSize }

// bell is a PE's doorbell: the futex word its messaging waits sleep on and
// the count of sleepers, on a line of their own.
type bell struct {
	word     atomic.Uint32 // bumped by whoever changes something a sleeper may wait for
	sleepers atomic.Uint32 // processes between announcing a sleep and leaving it
	_        [56]byte
}

func word0(pos, cells uint64, kind uint8) uint64 {
	return uint64(uint32(pos)) | cells<<32 | uint64(kind)<<48
}

func recCells(w0 uint64) uint64 { return w0 >> 32 & 0xffff }
func recKind(w0 uint64) uint8   { return uint8(w0 >> 48) }

// cellsFor is the cells a record with n payload bytes takes.
func cellsFor(n uint64) uint64 { return (recHdrSize + n + cellSize - 1) / cellSize }

// rxRing is the consumer's side of one ring (this PE receives).
type rxRing struct {
	head      *atomic.Uint64 // published read position, for the producer
	data      []byte         // the cells
	mask      uint64         // cells - 1
	pos       uint64         // read position
	published uint64         // the last value stored in head
}

// peek returns word 0 and the byte offset of the record at the read
// position, if the producer has published one.
func (r *rxRing) peek() (w0, off uint64, ok bool) {
	off = (r.pos & r.mask) * cellSize
	w0 = u64At(r.data, off).Load() // acquire: pairs with the producer's store of word 0 (txRing.commit)
	if recKind(w0) == 0 || uint32(w0) != uint32(r.pos) {
		return 0, 0, false
	}
	return w0, off, true
}

// consumed moves the read position past the record with word 0 w0
// (consumer step 2).
func (r *rxRing) consumed(w0 uint64) { r.pos += recCells(w0) }

// release gives the cells read since the last release back to the
// producer (consumer step 3), and reports whether there were any.
func (r *rxRing) release() bool {
	if r.pos == r.published {
		return false
	}
	for p := r.published; p != r.pos; {
		off := (p & r.mask) * cellSize
		w0 := u64At(r.data, off).Load() // a header we read before; the producer cannot have changed it
		n := recCells(w0)
		if recKind(w0) != recSkip {
			for i := uint64(1); i < n; i++ {
				// Plain, like the payload it overwrites: the producer
				// reuses the cell only after the store of head below.
				binary.LittleEndian.PutUint64(r.data[off+i*cellSize:], 0)
			}
		}
		p += n
	}
	r.published = r.pos
	r.head.Store(r.pos) // release: our reads of the cells are done; pairs with the producer's head load (txRing.reserve)
	return true
}

// word returns body word i of the record at off.
func (r *rxRing) word(off uint64, i int) uint64 {
	return binary.LittleEndian.Uint64(r.data[off+recHdrSize+8*uint64(i):])
}

// w1 returns word 1 of the record at off.
func (r *rxRing) w1(off uint64) uint64 { return binary.LittleEndian.Uint64(r.data[off+8:]) }

// txRing is the producer's side of one ring (this PE sends).
type txRing struct {
	head     *atomic.Uint64 // the consumer's published read position
	data     []byte         // the cells, in the receiver's control block
	cells    uint64
	mask     uint64
	tail     uint64 // next position to write
	headSeen uint64 // the last head loaded
	relaxed  bool   // publish with release stores (Layer.relaxed)
}

// reserve makes room for an n-cell record at the tail (producer steps 1,
// 2 and the skip of 3) and returns its byte offset, or false if the ring
// is full.
func (t *txRing) reserve(n uint64) (off uint64, ok bool) {
	var skip uint64
	if idx := t.tail & t.mask; idx+n > t.cells {
		skip = t.cells - idx
	}
	if t.tail+skip+n-t.headSeen > t.cells {
		t.headSeen = t.head.Load() // acquire: pairs with the consumer's store of head (rxRing.release)
		if t.tail+skip+n-t.headSeen > t.cells {
			return 0, false
		}
	}
	if skip > 0 {
		t.commit((t.tail&t.mask)*cellSize, skip, recSkip, 0)
	}
	return (t.tail & t.mask) * cellSize, true
}

// commit publishes the n-cell record at off, whose payload or body is
// written (producer step 4).
func (t *txRing) commit(off, n uint64, kind uint8, w1 uint64) {
	binary.LittleEndian.PutUint64(t.data[off+8:], w1) // plain: published by word 0 below
	// Release: publishes the record; pairs with the consumer's load
	// (rxRing.peek).
	publish(t.relaxed, u64At(t.data, off), word0(t.tail, n, kind))
	t.tail += n
	// After a small record, the line two lines on, exclusive, now: when
	// the producer gets there it writes at once instead of waiting for
	// the consumer's copy (from its last pass over the ring) to be
	// invalidated. The line right after the tail is not asked for: the
	// consumer polls it for the next record.
	if n <= prefetchAfter {
		shmsync.PrefetchW(cellAt(t.data, ((t.tail+prefetchCells)&t.mask)*cellSize))
	}
}

// prefetchCells is how far ahead of its tail a producer asks for a line
// (commit), two lines; prefetchAfter is the largest record, in cells,
// after which it does: a message of up to 64 bytes. A stream of small
// records is held up by each line's transfer; larger ones write whole
// lines in a row, and asking ahead cost 256-byte messages a few percent
// (docs/bench/design-measurements.md).
const (
	prefetchCells = 2 * lineSize / cellSize
	prefetchAfter = 5
)

// publish stores a word that publishes data to another process: a
// release store if relaxed (the sleepers' asymmetric fence stands in for
// the fence between it and the writer's sleepers load: "Waking"), else a
// sequentially consistent one.
func publish(relaxed bool, w *atomic.Uint64, v uint64) {
	if relaxed {
		shmsync.StoreRelease64(w, v)
		return
	}
	w.Store(v)
}

// putBody writes body word i of the record at off (before commit).
func (t *txRing) putBody(off uint64, i int, v uint64) {
	binary.LittleEndian.PutUint64(t.data[off+recHdrSize+8*uint64(i):], v)
}
