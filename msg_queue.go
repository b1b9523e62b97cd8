package symheap

import (
	"encoding/binary"
	"math/bits"
	"sync/atomic"
)

// Message queues: one lock-free single-producer single-consumer ring per
// ordered pair of PEs, in the receiver's control block.
//
// # Layout of the message area (msgAreaOff in every PE's control block)
//
//	+0                          the receiver's doorbell (bell), its own line
//	+64 + s*64                  head: cells the receiver has consumed from
//	                            sender s's ring, its own line (written by the
//	                            receiver, read by sender s when it runs out
//	                            of room)
//	+64 + n*64                  the split slots (msg_split.go)
//	+64 + n*64 + splitArea
//	    + s*ringBytes           the cells of sender s's ring
//
// A ring is ringBytes/64 cells of 64 bytes (a power of two). Positions
// count cells from 0 and never wrap (uint64); cell = position mod cells.
// A record occupies whole, contiguous cells:
//
//	word 0   (atomic) stamp: uint32(position) | cells<<32 | kind<<48
//	word 1   kind-specific (eager: tag | length<<32)
//	+16 ..   payload (eager) or body words (control records)
//
// Word 0 is written last by the producer, with an atomic store, and read
// first by the consumer, with an atomic load; it publishes the rest of the
// record, which is plain data (like the payload of a message). A record
// that would straddle the ring's end is preceded by a skip record that
// fills the cells up to the end. So a small message is one cache line that
// crosses from the sender's core to the receiver's: the receiver polls the
// very word that publishes the data.
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
// # Consumer (receiver), during progress
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
// # Waking
//
// Sleepers are announced on the receiver's bell (shmsync.WaitWord); a
// producer rings only when the bell's sleeper count is non-zero, so the
// busy path makes no syscall and touches no line the consumer writes.
//
// # Cost, and what was tried
//
// A small message moves one line (its cell) from the sender's core to the
// receiver's; a ping-pong alternates two lines, one per direction. On the
// two-vCPU machine this was tuned on, with the PEs on a CPU each, a bare
// exchange of two lines takes ~145 ns per half round trip, this ring
// protocol alone ~150 ns, and Send/Recv ~185 ns. Three things cost more
// and are avoided above: the producer clearing the cell after its record
// (the consumer's next poll then misses on a line the producer holds:
// ~380 ns), the consumer storing head after every record (a fence on the
// way back to the caller), and atomic stores for anything but word 0 (each
// waits for the line).
//
// One line shared by both directions bounces in ~55 ns, so per-pair "fast
// boxes" (two 32-byte slots in one line, sequence numbers to keep order
// with the ring, the ack piggybacked on the reply) were built and
// measured: ~115 ns for the bare exchange and ~200 ns through Send/Recv,
// no better than the ring. The receiver, polling the line, takes it back
// between the sender's stores of the payload and of the publishing word,
// so the line crosses twice per message (~70 ns with the payload stores
// removed). Without a wider atomic store than Go offers, the fast boxes
// did not pay for their bookkeeping and were taken out.

const (
	cellSize   = 64
	recHdrSize = 16
	recBody    = cellSize - recHdrSize // body bytes of a one-cell control record

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
	recCTS                 // receiver→sender: help copy (msg_split.go)
)

// ringBytes is the size of each ring in a job of npes PEs: 1 MiB per
// receiver shared by its senders, within [2 KiB, 64 KiB].
func ringBytes(npes int) uint64 {
	b := uint64(ringBudget) / uint64(npes)
	b = 1 << (bits.Len64(b) - 1) // power of two below
	return min(max(b, minRingBytes), maxRingBytes)
}

// msgAreaSize is the bytes of each control block reserved for messages
// (one spare line lets the area start on a cache line).
func msgAreaSize(npes int) uint64 {
	return cellSize + ringsOff(npes) + uint64(npes)*ringBytes(npes)
}

// ringsOff is the offset of the first ring in the message area.
func ringsOff(npes int) uint64 { return splitOff(npes) + splitArea }

// splitOff is the offset of the split slots in the message area.
func splitOff(npes int) uint64 { return cellSize + uint64(npes)*cellSize }

// msgAreaStart is the offset of the (line-aligned) message area in a
// control block.
func msgAreaStart(npes int) uint64 {
	return (msgAreaOff(npes) + cellSize - 1) &^ (cellSize - 1)
}

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
	seen      uint64         // the last value stored in msgState.seen
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
	u64At(t.data, off).Store(word0(t.tail, n, kind))  // release: publishes the record; pairs with the consumer's load (rxRing.peek)
	t.tail += n
}

// putBody writes body word i of the record at off (before commit).
func (t *txRing) putBody(off uint64, i int, v uint64) {
	binary.LittleEndian.PutUint64(t.data[off+recHdrSize+8*uint64(i):], v)
}
