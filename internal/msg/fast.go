package msg

import (
	"runtime"

	"github.com/symheap/symheap/internal/memcopy"
	"github.com/symheap/symheap/internal/shmsync"
)

// The fast path of a blocking receive.
//
// A Recv from one source, when this PE has nothing else under way (no
// unexpected message that matches, no other posted receive, no backlog,
// no split or bounce transfer), takes its message straight from that
// source's box or ring into the caller's buffer: no Request, no posting,
// no progress over every source. It polls only that source, and only while the message it
// finds next is one it can deliver; anything else (a record of another
// kind, another tag, a message longer than the buffer, a box message that
// waits for ring records, contention for the lock, or a wait longer than
// fastPolls polls) sends the receive down the general path, which finds
// the PE's state as the fast path left it. The general path's posting,
// progress and completion cost a large share of a small Send/Recv half
// round trip when measured (docs/bench/design-measurements.md,
// «internal/msg/queue.go, Send/Recv 8 B»).
//
// Why it keeps every guarantee:
//
//   - Matching. With no other posted receive and no unexpected message
//     that matches, the next message from the source that matches is
//     this receive's (another receive would have been posted first and
//     take precedence; a matching unexpected one would be older).
//   - Order. The fast path takes the same record progress would take
//     next from that source: it peeks the ring, then the box, exactly as
//     progress does (queue.go, "Fast boxes"), and takes nothing else.
//     A record it cannot deliver stays where it is.
//   - Progress elsewhere. It returns without draining the other sources,
//     but it never waits long: after fastPolls polls (one, when the PE
//     shares a core) the general path runs, and its spin and sleep make
//     progress everywhere as before.
//   - Acknowledgements. It gives the box back (boxPair.ack) before it
//     polls, so a source that only sends finds its box free.

// # Quiet
//
// A receive from the peer this PE has just put a message to in their
// box does not look at the box for its first Layer.boxQuiet polls (a
// cache-line transfer's worth of time; it still polls the ring). The
// reply cannot come sooner: the peer must first take the line, then
// write its own slot in it. And a look in between costs that write a
// transfer: CPUs that see a line read by one core and then written by the
// next hand it over for writing on the read, so a poll that takes it back
// makes the writer's store fetch it again (what that cost in ping-pongs
// of threads and of symheap's Send/Recv, and how many quiet polls paid:
// docs/bench/design-measurements.md, "fast box Quiet"). A receive that
// comes long after the put waits a transfer's worth of polls for
// nothing, once.

// fastPolls bounds the polls of the fast path before the general path
// takes over (how long they take: docs/bench/design-measurements.md,
// «internal/msg/fast.go, fastPolls»).
const fastPolls = 4096

// recvFast tries the fast path of a blocking receive from source into
// buf. Called with Layer.lock held, which it keeps; ok is false when the
// general path must run.
func (l *Layer) recvFast(buf []byte, source, tag int) (st Status, ok bool) {
	if source < 0 || len(l.posted.s) != 0 || l.queued != 0 ||
		len(l.splitting) != 0 || len(l.noSlab) != 0 || l.broken != nil {
		return Status{}, false
	}
	for _, m := range l.unexp.s {
		if m.src == source && (tag == AnyTag || m.tag == tag) {
			return Status{}, false // an older message matches
		}
	}
	polls := fastPolls
	if l.npes > runtime.NumCPU() {
		polls = 1 // spinning would take the core of the PE we wait for
	}
	r, b := &l.in[source], &l.box[source]
	b.ack(l.relaxed)
	quiet := 0
	if b.wrote && l.boxQuiet < polls {
		quiet = l.boxQuiet // "Quiet"
	}
	for i := 0; i < polls; i++ {
		// The ring first, then the box, as progress does.
		w0, off, has := r.peek()
		var bw0 uint64
		var ready bool
		if i >= quiet || has {
			// A ring record is taken only after a look at the box,
			// whose message may come first.
			bw0, ready, _ = b.pending(r.pos)
		}
		switch {
		case ready:
			t, payload, bad := b.msg()
			if bad || (tag != AnyTag && t != tag) || len(payload) > len(buf) {
				return Status{}, false
			}
			copySmall(buf, payload)
			b.got = uint16(bw0)
			l.fastRecvs++
			return Status{source, t, len(payload)}, true
		case has:
			n := recCells(w0)
			if n == 0 || off/cellSize+n > r.mask+1 {
				return Status{}, false // progress reports the broken ring
			}
			switch recKind(w0) {
			case recSkip:
				r.consumed(w0)
				continue
			case recEager:
				w1 := r.w1(off)
				t, size := int(uint32(w1)), w1>>32
				if recHdrSize+size > n*cellSize || (tag != AnyTag && t != tag) || size > uint64(len(buf)) {
					return Status{}, false
				}
				memcopy.BytesLocal(buf, r.data[off+recHdrSize:off+recHdrSize+size])
				r.consumed(w0)
				if r.pos-r.published >= (r.mask+1)/4 && r.release() {
					l.ring(source) // the sender may wait for room
				}
				l.fastRecvs++
				return Status{source, t, int(size)}, true
			}
			return Status{}, false
		}
		if l.lock.contended() {
			return Status{}, false
		}
		shmsync.Pause()
	}
	return Status{}, false
}
