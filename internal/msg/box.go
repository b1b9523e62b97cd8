package msg

import "encoding/binary"

// Fast boxes: one cache line per pair of PEs, shared by both directions,
// for the smallest messages (queue.go's design comment says why and
// how they keep order with the rings).
//
// # Layout (boxStride bytes per pair, in the lower PE's message area)
//
// The pair {a, b}, a < b, owns the line at boxesOff + b*boxStride of a's
// message area. Its first 32 bytes are a's slot (a→b), the next 32 b's
// (b→a); each slot is written by its owner only:
//
//	word 0   (published) sent | got<<16 | ringPos<<32
//	         sent: box messages the owner has sent in this slot (uint16)
//	         got: box messages the owner has consumed from the other slot
//	         ringPos: the owner's ring tail towards the other PE when it
//	         wrote its latest message (uint32)
//	word 1   tag | length<<32
//	+16..31  payload (at most BoxMax bytes)
//
// A slot holds a message of the other PE's to consume iff its sent is one
// more than what that PE has consumed (boxPair.got); it is free for its
// owner iff the other slot's got equals its own sent.

const (
	BoxMax    = 16  // the largest message a box carries
	boxSlot   = 32  // bytes of a slot
	boxStride = 128 // bytes between pairs' lines: a pair of lines, which CPUs prefetch together
)

// boxPair is this PE's side of its box with one peer. Guarded by
// Layer.lock.
type boxPair struct {
	line   []byte // the pair's line; nil for the PE itself (no box)
	mine   uint64 // offset of the slot this PE writes
	theirs uint64 // offset of the slot the peer writes
	sent   uint16 // messages this PE has put in its slot
	got    uint16 // messages this PE has consumed from the peer's slot
	acked  uint16 // got as last published in this PE's slot
	pos    uint32 // ringPos of this PE's latest message
	// busy: the last look at the peer's slot (free, or pending in a
	// receive's poll) found this PE's latest message not taken. A send
	// then goes to the ring without looking again: in a stream of sends
	// the box is mostly taken, and each look would pull the line from
	// the receiver, which writes it. The next poll of the peer's slot,
	// which every receive and wait makes, looks for it.
	busy bool
	// wrote: this PE put a message into its slot after its last look at
	// the peer's; a receive from the peer then waits before its first
	// look (fast.go, "Quiet").
	wrote bool
}

// boxOf returns the line of the box between PEs p and q (p != q) and the
// offset in it of p's slot, given each PE's message area.
func boxOf(area func(int) []byte, npes, p, q int) (line []byte, mine uint64) {
	lo, hi := min(p, q), max(p, q)
	o := boxesOff(npes) + uint64(hi)*boxStride
	line = area(lo)[o : o+lineSize : o+lineSize]
	if p == hi {
		mine = boxSlot
	}
	return line, mine
}

// free reports whether this PE may write a message into its slot: the
// peer has consumed every one before it.
func (b *boxPair) free() bool {
	w := u64At(b.line, b.theirs).Load() // acquire: pairs with the peer's publishing store of its word 0 (ack), made after it read our payload
	b.busy = uint16(w>>16) != b.sent
	return !b.busy
}

// put writes a message into this PE's slot and publishes it, carrying the
// acknowledgement of the peer's messages consumed so far. ringPos is this
// PE's ring tail towards the peer. The caller has checked free.
func (b *boxPair) put(tag int, payload []byte, ringPos uint64, relaxed bool) {
	binary.LittleEndian.PutUint64(b.line[b.mine+8:], uint64(uint32(tag))|uint64(len(payload))<<32) // plain: published by word 0
	copySmall(b.line[b.mine+16:b.mine+boxSlot], payload)                                           // plain: published by word 0
	b.sent++
	b.pos = uint32(ringPos)
	b.acked = b.got
	b.wrote = true
	// Release: publishes the message (and our reads of the peer's last
	// one, now acknowledged); pairs with the peer's load in pending and
	// free.
	publish(relaxed, u64At(b.line, b.mine), b.word0())
}

// word0 is this PE's slot word 0 for its current state.
func (b *boxPair) word0() uint64 {
	return uint64(b.sent) | uint64(b.got)<<16 | uint64(b.pos)<<32
}

// pending reports whether the peer's slot holds a message for this PE that
// comes next in order, given that the ring from the peer has been read up
// to position pos: its word 0, and whether the message may be taken now.
// A message the peer wrote when its ring tail was ahead of pos comes after
// the ring records in between (they are published already: see
// queue.go, "Fast boxes"). Call it after peeking the ring.
func (b *boxPair) pending(pos uint64) (w0 uint64, ready, ok bool) {
	if b.line == nil {
		return 0, false, false
	}
	w0 = u64At(b.line, b.theirs).Load() // acquire: pairs with the peer's publishing store (put)
	b.busy = uint16(w0>>16) != b.sent
	b.wrote = false
	if uint16(w0) != b.got+1 {
		return 0, false, false
	}
	return w0, int32(uint32(pos)-uint32(w0>>32)) >= 0, true
}

// msg returns the tag and the payload of the message in the peer's slot;
// bad if its length is out of range (the memory was overwritten). The
// payload is a view of the slot, valid until taken.
func (b *boxPair) msg() (tag int, payload []byte, bad bool) {
	w1 := binary.LittleEndian.Uint64(b.line[b.theirs+8:]) // plain: published by word 0, loaded before
	n := w1 >> 32
	if n > BoxMax {
		return 0, nil, true
	}
	return int(uint32(w1)), b.line[b.theirs+16 : b.theirs+16+n], false
}

// ack publishes how many of the peer's messages this PE has consumed, if
// that changed since the last time, so that the peer may use its slot
// again.
func (b *boxPair) ack(relaxed bool) {
	if b.line == nil || b.acked == b.got {
		return
	}
	b.acked = b.got
	// Release: our reads of the peer's payload are done; pairs with the
	// peer's load in free.
	publish(relaxed, u64At(b.line, b.mine), b.word0())
}

// copySmall is copy for the payloads of boxes: an empty one costs
// nothing and one of 8 bytes (a word, the commonest) moves as one load
// and one store, without memmove's call, which costs more than it looks
// on the path of a ping-pong.
func copySmall(dst, src []byte) {
	switch {
	case len(src) == 0:
	case len(src) == 8 && len(dst) >= 8:
		binary.LittleEndian.PutUint64(dst, binary.LittleEndian.Uint64(src))
	default:
		copy(dst, src)
	}
}
