package symheap

import (
	"fmt"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/msg"
	"github.com/symheap/symheap/internal/petest"
)

// Tests of the small-message rate work: released requests (Release) and
// their reuse, the allocation-free window, and ring records that share a
// cache line (16-byte ring cells: queue.go).

// TestMsgRelease runs windows of Isends against windows of Irecvs, each
// request waited for and released, with sizes for the box, the ring (one
// and several cells) and the large paths, and two tags. Per tag the
// messages must arrive intact and in order; requests released after an
// eager message must come back from later Isends and Irecvs (reuse), and
// requests of large messages never (their tables may still name them).
func TestMsgRelease(t *testing.T) {
	sizes := []int{0, 1, 8, msg.BoxMax, 24, 100, 1000, 70000}
	petest.Run(t, 2, func(t *testing.T) {
		pe := startPE(t)
		peer := 1 - pe.Rank()
		const windows, w = 40, 32
		bufs := make([][]byte, w)
		for i := range bufs {
			bufs[i] = make([]byte, 70000)
		}
		released := map[*Request]bool{} // released after an eager message
		large := map[*Request]bool{}    // released after a large one
		reused := 0
		seq := [2]int{} // per tag: the next message number
		var ack [4]byte
		for n := range windows {
			reqs := make([]*Request, w)
			for i := range reqs {
				k := n*w + i
				size, tag := sizes[k%len(sizes)], k%3%2
				if pe.Rank() == 0 {
					b := bufs[i][:size]
					fillMsg(b, uint64(k))
					reqs[i] = need(pe.Isend(b, peer, tag))
				} else {
					reqs[i] = need(pe.Irecv(bufs[i], peer, tag))
				}
				switch r := reqs[i]; {
				case large[r]:
					t.Fatalf("window %d, request %d: a request released after a large message came back", n, i)
				case released[r]:
					delete(released, r)
					reused++
				}
			}
			for i, r := range reqs {
				k := n*w + i
				size := sizes[k%len(sizes)]
				st := need(r.Wait())
				if pe.Rank() == 1 {
					// Irecvs with one tag match that tag's messages in the
					// order they were sent; the window posts them in order.
					tag := k % 3 % 2
					if st.Source != 0 || st.Tag != tag || st.Count != size {
						t.Fatalf("window %d, request %d: status %+v, want %d bytes with tag %d", n, i, st, size, tag)
					}
					checkMsg(t, fmt.Sprintf("window %d, request %d (tag %d, number %d)", n, i, tag, seq[tag]), bufs[i][:size], uint64(k))
					seq[tag]++
				}
				noErr(t, r.Release())
				if size > pe.EagerLimit() { // the buffers are ordinary memory
					large[r] = true
				} else {
					released[r] = true
				}
			}
			if pe.Rank() == 0 {
				need(pe.Recv(ack[:], peer, 3))
			} else {
				noErr(t, pe.Send(ack[:], peer, 3))
			}
		}
		if reused < windows*w/2 {
			t.Errorf("%d of %d requests were reused ones, want most", reused, windows*w)
		}
		sync2(t, pe)
	}, msgOpts()...)
}

// TestMsgReleaseErrors: Release of a request that is not done, of one
// released before, and of nil fail with ErrBadArg and change nothing: the
// pending receive still gets its message.
func TestMsgReleaseErrors(t *testing.T) {
	petest.Run(t, 2, func(t *testing.T) {
		pe := startPE(t)
		var r *Request
		wantIs(t, "Release of nil", r.Release(), ErrBadArg)
		if pe.Rank() == 1 {
			buf := make([]byte, 8)
			r := need(pe.Irecv(buf, 0, 5))
			wantIs(t, "Release of a pending Irecv", r.Release(), ErrBadArg, "not done")
			sync2(t, pe) // PE 0 sends
			st := need(r.Wait())
			if st != (Status{0, 5, 8}) {
				t.Fatalf("status %+v after a refused Release", st)
			}
			checkMsg(t, "message after a refused Release", buf, 5)
			noErr(t, r.Release())
			wantIs(t, "second Release", r.Release(), ErrBadArg, "released before")
		} else {
			b := make([]byte, 8)
			fillMsg(b, 5)
			sync2(t, pe)
			s := need(pe.Isend(b, 1, 5))
			need(s.Wait())
			noErr(t, s.Release())
			wantIs(t, "second Release of a send", s.Release(), ErrBadArg, "released before")
		}
		sync2(t, pe)
	}, msgOpts()...)
}

// TestMsgWaitAll: windows of Isends against Irecvs finished by WaitAll,
// which must give every request's status, clear the slice, release the
// requests (later windows get them back) and allocate nothing once warm.
// A result slice too short is refused before anything changes; a
// receive that fails (a buffer too short: ErrTruncated) is named by its
// index while the rest of the window is still released, and its message
// stays queued for a later receive.
func TestMsgWaitAll(t *testing.T) {
	petest.Run(t, 2, func(t *testing.T) {
		pe := startPE(t)
		peer := 1 - pe.Rank()
		const w = 16
		bufs := make([][]byte, w)
		for i := range bufs {
			bufs[i] = make([]byte, 64)
		}
		reqs := make([]*Request, w)
		sts := make([]Status, w)
		seen := map[*Request]bool{}
		reused := 0
		var ack [4]byte
		window := func(n int, check bool) {
			for i := range reqs {
				if pe.Rank() == 0 {
					b := bufs[i][:8+i]
					fillMsg(b, uint64(n*w+i))
					reqs[i] = need(pe.Isend(b, peer, 4))
				} else {
					reqs[i] = need(pe.Irecv(bufs[i], peer, 4))
				}
				if seen[reqs[i]] {
					reused++
				}
				seen[reqs[i]] = true
			}
			noErr(t, WaitAll(reqs, sts))
			for i, r := range reqs {
				if r != nil {
					t.Fatalf("window %d: WaitAll left request %d in the slice", n, i)
				}
				if pe.Rank() == 1 {
					if sts[i] != (Status{0, 4, 8 + i}) {
						t.Fatalf("window %d, request %d: status %+v, want %d bytes from PE 0 with tag 4", n, i, sts[i], 8+i)
					}
					if check { // fmt allocates: not in the measured windows
						checkMsg(t, fmt.Sprintf("window %d, message %d", n, i), bufs[i][:8+i], uint64(n*w+i))
					}
				}
			}
			if pe.Rank() == 0 {
				need(pe.Recv(ack[:], peer, 3))
			} else {
				noErr(t, pe.Send(ack[:], peer, 3))
			}
		}
		for n := range 4 {
			window(n, true)
		}
		if reused == 0 {
			t.Errorf("no request came back after WaitAll released it")
		}
		n := 4
		if a := petest.AllocsPerRun(3, 20, func() { window(n, false); n++ }); a.PerRun != 0 {
			t.Errorf("a window finished by WaitAll: %v, want none", a)
		}

		// A result slice too short: refused, nothing waited for or released.
		if pe.Rank() == 1 {
			r := need(pe.Irecv(bufs[0], peer, 6))
			rs := []*Request{r, nil}
			wantIs(t, "WaitAll with one Status for two", WaitAll(rs, sts[:1]), ErrBadArg, "room for 1")
			if rs[0] != r {
				t.Fatal("a refused WaitAll changed the slice")
			}
			sync2(t, pe) // PE 0 sends
			noErr(t, WaitAll(rs, sts[:2]))
			if sts[0] != (Status{0, 6, 8}) {
				t.Fatalf("status %+v after a refused WaitAll", sts[0])
			}
			checkMsg(t, "message after a refused WaitAll", bufs[0][:8], 6)
		} else {
			b := make([]byte, 8)
			fillMsg(b, 6)
			sync2(t, pe)
			noErr(t, pe.Send(b, peer, 6))
		}
		sync2(t, pe)

		// A failing receive in the window: named, the others released.
		if pe.Rank() == 1 {
			short := make([]byte, 4)
			rs := []*Request{need(pe.Irecv(bufs[0], peer, 7)), need(pe.Irecv(short, peer, 8)), need(pe.Irecv(bufs[2], peer, 9))}
			sync2(t, pe) // PE 0 sends
			wantIs(t, "WaitAll with a short buffer", WaitAll(rs, sts[:3]), ErrTruncated, "request 1 of 3")
			if sts[0] != (Status{0, 7, 8}) || sts[2] != (Status{0, 9, 8}) || sts[1].Count != 8 {
				t.Fatalf("statuses %+v", sts[:3])
			}
			st := need(pe.Recv(bufs[1], peer, 8)) // the truncated message stays queued
			if st != (Status{0, 8, 8}) {
				t.Fatalf("status %+v of the message a short buffer refused", st)
			}
			checkMsg(t, "message a short buffer refused", bufs[1][:8], 8)
		} else {
			b := make([]byte, 8)
			sync2(t, pe)
			for _, tag := range []int{7, 8, 9} {
				fillMsg(b, uint64(tag))
				noErr(t, pe.Send(b, peer, tag))
			}
		}
		sync2(t, pe)
	}, msgOpts()...)
}

// TestMsgWindowAllocs: a window of 64 Isends against 64 Irecvs of 8 bytes,
// each request waited for and released, then an acknowledgement,
// allocates nothing once the first window has sized the free list and
// the queues (petest.AllocsPerRun: the fewest of 3 tries of 50 windows,
// the runtime's own allocations left out).
func TestMsgWindowAllocs(t *testing.T) {
	petest.Run(t, 2, func(t *testing.T) {
		pe := startPE(t)
		peer := 1 - pe.Rank()
		sbuf, rbuf := make([]byte, 8), make([]byte, 8)
		reqs := make([]*Request, 64)
		var ack [4]byte
		window := func() {
			for i := range reqs {
				if pe.Rank() == 0 {
					reqs[i] = need(pe.Isend(sbuf, peer, 2))
				} else {
					reqs[i] = need(pe.Irecv(rbuf, peer, 2))
				}
			}
			for _, r := range reqs {
				need(r.Wait())
				noErr(t, r.Release())
			}
			if pe.Rank() == 0 {
				need(pe.Recv(ack[:], peer, 3))
			} else {
				noErr(t, pe.Send(ack[:], peer, 3))
			}
		}
		// Both PEs run the same number of windows (AllocsPerRun runs the
		// function once more than asked in each try, to warm up).
		if a := petest.AllocsPerRun(3, 50, window); a.PerRun != 0 {
			t.Errorf("a window of 64 released requests: %v, want none", a)
		}
		sync2(t, pe)
	}, msgOpts()...)
}

// TestMsgSharedLines: small eager messages take two 16-byte ring cells,
// so two of them share a cache line, and the receiver polls a position
// in the middle of a line. The sender sends them one at a time while the
// receiver waits long enough to fall asleep on its doorbell, then in
// bursts that fill lines at once, with sizes that end records at every
// cell of a line; each must arrive intact and in order, with no stale
// record read in between.
func TestMsgSharedLines(t *testing.T) {
	sizes := []int{1, 8, 17, 24, 33, 40, 3, 49}
	petest.Run(t, 2, func(t *testing.T) {
		pe := startPE(t)
		const rounds = 6
		if pe.Rank() == 0 {
			for n := range rounds {
				for i, size := range sizes {
					b := make([]byte, size)
					fillMsg(b, uint64(n*100+i))
					if n%2 == 0 {
						// One at a time: the receiver is asleep by the time
						// each arrives.
						time.Sleep(3 * time.Millisecond)
					}
					r := need(pe.Isend(b, 1, 4))
					need(r.Wait())
					noErr(t, r.Release())
				}
			}
		} else {
			bufs := make([][]byte, len(sizes))
			for i := range bufs {
				bufs[i] = make([]byte, 64)
			}
			for n := range rounds {
				reqs := make([]*Request, len(sizes))
				for i := range sizes {
					reqs[i] = need(pe.Irecv(bufs[i], 0, 4))
				}
				for i, r := range reqs {
					st := need(r.Wait())
					if st != (Status{0, 4, sizes[i]}) {
						t.Fatalf("round %d, message %d: status %+v, want %d bytes", n, i, st, sizes[i])
					}
					checkMsg(t, fmt.Sprintf("round %d, message %d", n, i), bufs[i][:sizes[i]], uint64(n*100+i))
					noErr(t, r.Release())
				}
			}
		}
		sync2(t, pe)
	}, msgOpts()...)
}
