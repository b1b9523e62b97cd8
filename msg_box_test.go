package symheap

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/msg"
	"github.com/symheap/symheap/internal/petest"
	"github.com/symheap/symheap/internal/shmsync"
)

// Tests of the fast boxes (msg_box.go) on real PEs: their order with the
// rings, truncation, a sender that dies.

// boxed returns the messages this PE has sent through fast boxes, and
// through the rings and boxes together.
func boxed(pe *PE) (box, eager uint64) {
	return pe.ext.msg.Counters().Boxed, pe.stats.MsgEager.Load()
}

// TestMsgBoxOrdering: two senders stream messages of random sizes to one
// receiver, with many Isends outstanding and now and then a blocking Send:
// most of at most msg.BoxMax bytes (a fast box when it is free, else the
// ring), the rest larger (the ring, or the large paths). The receiver
// takes them with windows of posted Irecvs, with receives that come late
// (unexpected messages), with AnySource and AnyTag. Per sender and tag
// they must arrive in order and intact, and both the boxes and the rings
// must have been used.
func TestMsgBoxOrdering(t *testing.T) {
	const (
		count = 3000
		tags  = 3
	)
	sizeOf := func(src, i int) int {
		r := rand.New(rand.NewPCG(uint64(src), uint64(i)))
		switch k := r.IntN(100); {
		case k < 75:
			return r.IntN(msg.BoxMax + 1)
		case k < 97:
			return msg.BoxMax + 1 + r.IntN(1000)
		case k < 99:
			return 3000 + r.IntN(3000)
		default:
			return 100000
		}
	}
	petest.Run(t, 3, func(t *testing.T) {
		pe := startPE(t)
		if pe.Rank() != 0 {
			src := pe.Rank()
			var reqs []*Request
			for i := range count {
				b := make([]byte, sizeOf(src, i))
				fillMsg(b, uint64(src<<20|i))
				if i%50 == 0 && len(b) <= pe.EagerLimit() {
					// Blocking, but not waiting for a receive: a window of
					// the receiver's may wait for a later message.
					noErr(t, pe.Send(b, 0, i%tags))
					continue
				}
				reqs = append(reqs, need(pe.Isend(b, 0, i%tags)))
				switch {
				case i%500 == 0:
					time.Sleep(time.Millisecond) // the receiver catches up, or comes late
				case i%8 == 0:
					// Pause: the receiver may drain the ring and give the
					// box back, so the next small message may take it.
					time.Sleep(20 * time.Microsecond)
				}
			}
			for _, r := range reqs {
				need(r.Wait())
			}
			box, eager := boxed(pe)
			t.Logf("PE %d: %d messages through the box, %d through the ring", src, box, eager-box)
			if box == 0 || eager == box {
				t.Errorf("PE %d sent %d of %d eager messages through the box: want both paths used", src, box, eager)
			}
		} else {
			next := [3][tags]int{}
			for s := 1; s <= 2; s++ {
				for tag := range tags {
					next[s][tag] = tag
				}
			}
			got := func(st Status, b []byte) {
				t.Helper()
				if st.Source < 1 || st.Source > 2 || st.Tag < 0 || st.Tag >= tags {
					t.Fatalf("status %+v", st)
				}
				i := next[st.Source][st.Tag]
				next[st.Source][st.Tag] += tags
				if want := sizeOf(st.Source, i); st.Count != want {
					t.Fatalf("message %d of PE %d with tag %d: %d bytes, want %d (out of order)", i, st.Source, st.Tag, st.Count, want)
				}
				checkMsg(t, fmt.Sprintf("message %d of PE %d", i, st.Source), b[:st.Count], uint64(st.Source<<20|i))
			}
			rng := rand.New(rand.NewPCG(5, 6))
			left := 2 * count
			for left > 0 {
				switch k := rng.IntN(10); {
				case k < 3: // one blocking receive, of anything
					b := make([]byte, 100000)
					got(need(pe.Recv(b, AnySource, AnyTag)), b)
					left--
				case k < 9: // a window of posted receives
					w := min(left, 1+rng.IntN(64))
					src, tag := AnySource, AnyTag
					if rng.IntN(2) == 0 {
						tag = rng.IntN(tags)
						src = 1 + rng.IntN(2)
						// Only as many as that sender still has with that tag.
						w = min(w, (count-next[src][tag]+tags-1)/tags)
						if w == 0 {
							continue
						}
					}
					reqs := make([]*Request, w)
					bufs := make([][]byte, w)
					for j := range reqs {
						bufs[j] = make([]byte, 100000)
						reqs[j] = need(pe.Irecv(bufs[j], src, tag))
					}
					for j, r := range reqs {
						got(need(r.Wait()), bufs[j])
					}
					left -= w
				default: // come late: messages wait as unexpected
					time.Sleep(time.Millisecond)
				}
			}
		}
		sync2(t, pe)
	}, msgOpts()...)
}

// TestMsgBoxTruncated: a receive too short for a message that came through
// the box ends with ErrTruncated and the message's size, and the message
// stays queued, both when it arrived first and when the short receive was
// posted first.
func TestMsgBoxTruncated(t *testing.T) {
	petest.Run(t, 2, func(t *testing.T) {
		pe := startPE(t)
		const n = msg.BoxMax
		if pe.Rank() == 0 {
			for round := range 2 {
				sync2(t, pe) // round 1: the receiver has posted its short receive
				b := make([]byte, n)
				fillMsg(b, uint64(round))
				noErr(t, pe.Send(b, 1, 7+round))
				if box, _ := boxed(pe); box != uint64(round+1) {
					t.Errorf("round %d: %d messages through the box, want %d", round, box, round+1)
				}
				sync2(t, pe)
			}
		} else {
			// Round 0: the message arrives first.
			sync2(t, pe)
			sync2(t, pe)
			st, err := pe.Recv(make([]byte, n-1), 0, 7)
			wantIs(t, "short Recv", err, ErrTruncated, fmt.Sprint(n))
			if st != (Status{0, 7, n}) {
				t.Fatalf("truncated status %+v", st)
			}
			st, err = pe.Recv(nil, AnySource, AnyTag)
			wantIs(t, "empty Recv", err, ErrTruncated)
			if st.Count != n {
				t.Fatalf("truncated status %+v", st)
			}
			full := make([]byte, n)
			if st = need(pe.Recv(full, 0, 7)); st != (Status{0, 7, n}) {
				t.Fatalf("status %+v", st)
			}
			checkMsg(t, "box message after truncation", full, 0)
			// Round 1: the short receive is posted first; this Irecv's
			// progress also gives the box back to PE 0.
			short := need(pe.Irecv(make([]byte, 3), 0, 8))
			sync2(t, pe)
			sync2(t, pe)
			st, err = short.Wait()
			wantIs(t, "posted short Irecv", err, ErrTruncated)
			if st.Count != n {
				t.Fatalf("truncated status %+v", st)
			}
			if st = need(pe.Recv(full, 0, 8)); st.Count != n {
				t.Fatalf("status %+v", st)
			}
			checkMsg(t, "box message after a posted truncation", full, 1)
		}
		sync2(t, pe)
	}, msgOpts()...)
}

// TestMsgBoxPeerLost: messages a PE sent through the box and the ring
// before it died are still delivered, in order; the receive after them
// ends with ErrPeerLost at the first liveness check after the death (the
// checks are counted, as in TestMsgPeerLost), as does a send to the dead
// PE.
func TestMsgBoxPeerLost(t *testing.T) {
	petest.Run(t, 2, func(t *testing.T) {
		pe, err := Init(Config{})
		noErr(t, err)
		sizes := []int{8, 100, 8, 0}
		if pe.Rank() == 0 {
			for i, n := range sizes {
				b := make([]byte, n)
				fillMsg(b, uint64(i))
				noErr(t, pe.Send(b, 1, 3))
			}
			if box, _ := boxed(pe); box != 1 {
				t.Errorf("%d messages through the box, want 1 (the receiver has not taken the first)", box)
			}
			sync2(t, pe)
			petest.Exit(0) // without Close, in the middle of the job
		}
		sync2(t, pe)
		time.Sleep(200 * time.Millisecond)
		for i, n := range sizes {
			b := make([]byte, 128)
			st := need(pe.Recv(b, 0, AnyTag))
			if st != (Status{0, 3, n}) {
				t.Fatalf("message %d: status %+v, want %d bytes", i, st, n)
			}
			checkMsg(t, fmt.Sprintf("message %d", i), b[:n], uint64(i))
		}
		// The liveness checks a wait made once PE 0's token was gone:
		// the first must end the wait (time would not tell, on a loaded
		// machine, a late check from a lost one).
		var goneAtCheck atomic.Int32
		defer shmsync.TraceSleeps(func(s shmsync.Sleep) {
			if s.Check && !pe.seg.Alive(0) {
				goneAtCheck.Add(1)
			}
		})()
		start := time.Now()
		_, err = pe.Recv(make([]byte, 8), 0, AnyTag)
		wantIs(t, "Recv from the dead PE", err, ErrPeerLost, "PE 0")
		t.Logf("Recv: ErrPeerLost after %v", time.Since(start))
		if n := goneAtCheck.Swap(0); n > 1 {
			t.Errorf("Recv from the dead PE ran %d liveness checks after PE 0's token was gone; the first must end it", n)
		}
		err2 := pe.Send(make([]byte, 8), 0, 0)
		wantIs(t, "box Send to the dead PE", err2, ErrPeerLost, "PE 0")
		if n := goneAtCheck.Swap(0); n > 1 {
			t.Errorf("box Send to the dead PE ran %d liveness checks after PE 0's token was gone; the first must end it", n)
		}
		pe.Close() // its barrier fails: a PE is gone
	}, msgOpts()...)
}

// TestMsgFastRecv drives the fast path of Recv (msg_fast.go) against the
// general one: a sender streams messages of every kind (box, one and
// several ring cells, the large paths) with two tags, blocking and not;
// the receiver takes batches of twenty with Recv from that sender, one
// batch in the order they were sent, the next tag 1 first and then tag 0,
// now and then with AnyTag, now and then after a pause that lets the
// sender run ahead. Per tag the messages must come
// intact and in order, and both paths must have served receives.
func TestMsgFastRecv(t *testing.T) {
	const (
		count = 4000
		batch = 20
	)
	sizeOf := func(i int) int {
		r := rand.New(rand.NewPCG(7, uint64(i)))
		switch k := r.IntN(200); {
		case k < 120:
			return r.IntN(msg.BoxMax + 1)
		case k < 185:
			return msg.BoxMax + 1 + r.IntN(1000)
		case k < 198:
			return 1000 + r.IntN(3000) // several cells
		default:
			return 70000 // large
		}
	}
	petest.Run(t, 2, func(t *testing.T) {
		pe := startPE(t)
		if pe.Rank() == 1 {
			var reqs []*Request
			for i := range count {
				if i%batch == 0 && i > 0 {
					need(pe.Recv(nil, 0, 2)) // the receiver took the batch before last
				}
				b := make([]byte, sizeOf(i))
				fillMsg(b, uint64(i))
				if i%3 == 0 || len(b) > pe.EagerLimit() {
					// Not blocking: a large Send waits for its receive,
					// and the receiver takes tag 1 first.
					reqs = append(reqs, need(pe.Isend(b, 0, i%2)))
					continue
				}
				noErr(t, pe.Send(b, 0, i%2))
			}
			for _, r := range reqs {
				need(r.Wait())
			}
		} else {
			buf := make([]byte, 70000)
			recv := func(i, tag int) {
				t.Helper()
				st := need(pe.Recv(buf, 1, tag))
				if st.Source != 1 || st.Count != sizeOf(i) || st.Tag != i%2 {
					t.Fatalf("message %d: status %+v, want %d bytes with tag %d", i, st, sizeOf(i), i%2)
				}
				checkMsg(t, fmt.Sprintf("message %d", i), buf[:st.Count], uint64(i))
			}
			for first := 0; first < count; first += batch {
				if first%200 == 0 {
					time.Sleep(time.Millisecond) // the sender runs a batch ahead
				}
				if first+batch < count {
					noErr(t, pe.Send(nil, 1, 2)) // the sender may go on with the next batch
				}
				if first/batch%2 == 0 {
					// In order: the next message is always the one asked
					// for (now and then with AnyTag).
					for i := first; i < first+batch; i++ {
						tag := i % 2
						if i%7 == 0 {
							tag = AnyTag
						}
						recv(i, tag)
					}
					continue
				}
				// Tag 1 first: the tag 0 messages wait as unexpected.
				for _, tag := range []int{1, 0} {
					for i := first + tag; i < first+batch; i += 2 {
						if tag == 0 && i%7 == 0 {
							tag = AnyTag // the oldest message left: this one
						}
						recv(i, tag)
					}
				}
			}
			fast := pe.ext.msg.Counters().FastRecvs
			t.Logf("%d of %d receives on the fast path", fast, count)
			if fast == 0 || fast == count {
				t.Errorf("%d of %d receives on the fast path: want both paths used", fast, count)
			}
		}
		sync2(t, pe)
	}, msgOpts()...)
}
