package symheap

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/msg"
	"github.com/symheap/symheap/internal/petest"
	"github.com/symheap/symheap/internal/shmsync"
	"github.com/symheap/symheap/internal/unix"
)

// Tests of message passing (msg.go, msg_queue.go, msg_xfer.go), on real
// PEs, for every path: eager, single copy from the segment, single copy by
// process_vm_readv, and bounce buffers (forced by SYMHEAP_MSG_BOUNCE or
// SYMHEAP_MSG_NOKERNEL, and reached by a refused process_vm_readv).

// fillMsg writes message seed's bytes into b: a pattern whose period (251)
// divides no chunk size, with every 4 KiB block stamped with its number
// and the seed, so that a piece lost, repeated or moved is caught.
func fillMsg(b []byte, seed uint64) {
	n := min(len(b), 4096)
	for i := 0; i < n; i++ {
		b[i] = byte(seed*131 + uint64(i%251)*7)
	}
	for done := n; done < len(b); done *= 2 {
		copy(b[done:], b[:done])
	}
	for k := 0; k+16 <= len(b); k += 4096 {
		binary.LittleEndian.PutUint64(b[k:], seed)
		binary.LittleEndian.PutUint64(b[k+8:], uint64(k))
	}
}

var (
	wantMu  sync.Mutex
	wantBuf []byte // checkMsg's expected bytes, reused
)

// checkMsg verifies that b holds message seed, reporting the first byte
// that does not.
func checkMsg(t *testing.T, what string, b []byte, seed uint64) {
	t.Helper()
	wantMu.Lock()
	defer wantMu.Unlock()
	if len(wantBuf) < len(b) {
		wantBuf = make([]byte, len(b))
	}
	want := wantBuf[:len(b)]
	fillMsg(want, seed)
	if bytes.Equal(b, want) {
		return
	}
	i := 0
	for i < len(b) && b[i] == want[i] {
		i++
	}
	t.Fatalf("%s: %d bytes, byte %d is %#x, want %#x", what, len(b), i, b[i], want[i])
}

// pingSizes are every power of two from 1 B to max, zero, odd sizes and
// the sizes around the eager limit and the bounce chunk.
func pingSizes(pe *PE, max int) []int {
	s := []int{0, 3, 7, 47, 48, 49, 63, 65, 1000, 4093, 100003, 1<<20 + 7, 3<<20 + 5}
	for n := 1; n <= max; n *= 2 {
		s = append(s, n)
	}
	for _, e := range []int{pe.EagerLimit(), pe.SharedEagerLimit()} {
		s = append(s, e-1, e, e+1)
	}
	s = append(s, msg.BounceChunk-1, msg.BounceChunk+1, msg.BounceSlots*msg.BounceChunk+3)
	slices.Sort(s)
	return slices.Compact(slices.DeleteFunc(s, func(n int) bool { return n > max }))
}

// msgOpts are the options of the message jobs. The local shared heap holds
// the 64 MiB send buffers of the segment path (pingpong sets its own).
func msgOpts(extra ...petest.Option) []petest.Option {
	return append([]petest.Option{petest.Heap("8m"), petest.Env("SYMHEAP_SHARED_SIZE=4m"),
		petest.Timeout(120 * time.Second)}, extra...)
}

// TestMsgPingPong sends every size from 0 B to 64 MiB there and back
// between two PEs, on each path, and checks the contents and that each
// message took the path it should (the sender's counters).
func TestMsgPingPong(t *testing.T) {
	cases := []struct {
		name       string
		shared     bool     // send buffers in the local shared heap
		recvShared bool     // receive buffers too
		env        []string // settings
		large      string   // the path of messages above the eager limit
		noWrite    bool     // process_vm_writev refused: the split's orphan chunks
	}{
		{"kernel", false, false, nil, "kernel", false},
		{"kernel-nosplit", false, false, []string{"SYMHEAP_MSG_SPLIT=0"}, "kernel", false},
		{"kernel-nowrite", false, false, nil, "kernel", true},
		{"segment", true, false, nil, "segment", false},
		{"segment-both", true, true, nil, "segment", false},
		{"segment-nosplit", true, true, []string{"SYMHEAP_MSG_SPLIT=0"}, "segment", false},
		{"bounce", true, false, []string{"SYMHEAP_MSG_BOUNCE=1"}, "bounce", false},
		{"nokernel", false, false, []string{"SYMHEAP_MSG_NOKERNEL=1"}, "bounce", false},
		{"segment-offset", true, true, []string{"SYMHEAP_OFFSET_MODE=1"}, "segment", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Every size up to 64 MiB on each path; the variants of a
			// path up to 8 MiB (past several split and bounce chunks).
			max := 64 << 20
			switch {
			case testing.Short() || strings.HasSuffix(c.name, "offset"):
				max = 4 << 20
			case strings.Contains(c.name, "-"):
				max = 8 << 20
			}
			shared := "4m"
			if c.shared {
				shared = fmt.Sprintf("%dm", max>>20+8)
			}
			if c.recvShared {
				shared = fmt.Sprintf("%dm", 2*(max>>20)+8)
			}
			env := append([]string{"SYMHEAP_SHARED_SIZE=" + shared}, c.env...)
			petest.Run(t, 2, func(t *testing.T) {
				pe := startPE(t)
				peer := 1 - pe.Rank()
				sizes := pingSizes(pe, max)
				stats := pe.stats
				before := [4]uint64{stats.MsgEager.Load(), stats.MsgSingleCopy.Load(), stats.MsgKernel.Load(), stats.MsgBounce.Load()}
				var sendBuf []byte
				if c.shared {
					sendBuf = need(SharedAlloc[byte](pe, max))
				} else {
					sendBuf = make([]byte, max)
				}
				recvBuf := make([]byte, max+1)
				if c.recvShared {
					recvBuf = need(SharedAlloc[byte](pe, max+1))
				}
				if c.noWrite {
					msg.WriteTo = func(int, []byte, uintptr) error { return unix.EPERM }
				}
				for _, n := range sizes {
					out := sendBuf[:n]
					fillMsg(out, uint64(n*2+pe.Rank()))
					ping := func() {
						noErr(t, pe.Send(out, peer, n%1000))
					}
					pong := func() {
						st := need(pe.Recv(recvBuf, peer, n%1000))
						if st != (Status{peer, n % 1000, n}) {
							t.Fatalf("size %d: status %+v", n, st)
						}
						checkMsg(t, fmt.Sprintf("size %d from PE %d", n, peer), recvBuf[:n], uint64(n*2+peer))
					}
					if pe.Rank() == 0 {
						ping()
						pong()
					} else {
						pong()
						ping()
					}
				}
				var eager, large uint64
				limit := pe.EagerLimit()
				if c.shared {
					limit = pe.SharedEagerLimit()
				}
				for _, n := range sizes {
					if n <= limit {
						eager++
					} else {
						large++
					}
				}
				got := [4]uint64{stats.MsgEager.Load() - before[0], stats.MsgSingleCopy.Load() - before[1],
					stats.MsgKernel.Load() - before[2], stats.MsgBounce.Load() - before[3]}
				want := [4]uint64{eager, 0, 0, 0}
				want[map[string]int{"segment": 1, "kernel": 2, "bounce": 3}[c.large]] = large
				if got != want {
					t.Errorf("paths counted (eager, segment, kernel, bounce) %v, want %v", got, want)
				}
				// Split copies: the sender, waiting in Send, copies part of
				// large single-copy messages when it is on a CPU in time
				// (TestMsgSplit makes sure it is).
				counts := pe.ext.msg.Counters()
				helped, orphans := counts.Helped, counts.Orphans
				t.Logf("PE %d: copied %d bytes for the receiver; %d orphan chunks", pe.Rank(), helped, orphans)
				if split := c.large != "bounce" && !slices.Contains(c.env, "SYMHEAP_MSG_SPLIT=0"); !split && helped != 0 {
					t.Errorf("the sender helped copy %d bytes without split copies", helped)
				}
				if c.shared {
					noErr(t, SharedFree(pe, sendBuf))
				}
				if c.recvShared {
					noErr(t, SharedFree(pe, recvBuf))
				}
				sync2(t, pe)
			}, msgOpts(petest.Env(env...))...)
		})
	}
}

// TestMsgSplit: the receiver's reads are slowed down (a hook sleeps in
// process_vm_readv), so the waiting sender claims most chunks of a large
// message: into a receive buffer in the shared heap (a plain copy), into
// ordinary memory (process_vm_writev), and with process_vm_writev refused
// (the chunk the sender claimed goes back to the receiver as an orphan).
func TestMsgSplit(t *testing.T) {
	for _, c := range []string{"shared", "ordinary", "nowrite"} {
		t.Run(c, func(t *testing.T) {
			petest.Run(t, 2, func(t *testing.T) {
				pe := startPE(t)
				ms := &pe.ext.msg
				// Chunks of 256 KiB, and of 64 KiB below 1 MiB, each
				// size ending in a partial chunk.
				for _, n := range []int{4<<20 + 3, 300<<10 + 5} {
					if pe.Rank() == 1 {
						buf := make([]byte, n)
						if c == "shared" {
							buf = need(SharedAlloc[byte](pe, n))
						}
						read := msg.ReadFrom
						msg.ReadFrom = func(pid int, dst []byte, src uintptr) error {
							time.Sleep(20 * time.Millisecond)
							return read(pid, dst, src)
						}
						orphans := ms.Counters().Orphans
						st := need(pe.Recv(buf, 0, 0))
						msg.ReadFrom = read
						if st.Count != n {
							t.Fatalf("status %+v", st)
						}
						checkMsg(t, "split message", buf, 77)
						if got := ms.Counters().Orphans - orphans; c == "nowrite" && got != 1 {
							t.Errorf("%d B: %d orphan chunks, want 1", n, got)
						}
						if c == "shared" {
							noErr(t, SharedFree(pe, buf))
						}
					} else {
						write := msg.WriteTo
						if c == "nowrite" {
							msg.WriteTo = func(int, []byte, uintptr) error { return unix.EPERM }
						}
						buf := make([]byte, n)
						fillMsg(buf, 77)
						helped := ms.Counters().Helped
						noErr(t, pe.Send(buf, 1, 0))
						msg.WriteTo = write
						want := uint64(n / 2)
						if c == "nowrite" {
							want = 0
						}
						if got := ms.Counters().Helped - helped; got < want {
							t.Errorf("the sender copied %d bytes of %d, want at least %d", got, n, want)
						}
					}
					sync2(t, pe)
				}
			}, msgOpts(petest.Env("SYMHEAP_SHARED_SIZE=8m"))...)
		})
	}
}

// TestMsgSplitWindow: a window of more large messages than there are
// split slots (splitSlots, 16), all announced before the receiver looks
// (it posts its receives, both PEs pass a barrier, the sender sends, both
// pass another, so that the receiver's first drain of its ring matches
// them all), is still copied by both PEs. The receiver's reads and the
// sender's writes are slowed down, the writes more, so that the receiver
// is through its chunks of each message while the sender still copies
// its last one: each message then holds its slot when the receiver moves
// on, and the messages past the sixteenth find a slot only because the
// receiver takes back those of the earlier ones, which are done by then.
func TestMsgSplitWindow(t *testing.T) {
	const window, n = 40, 1<<20 + 7
	petest.Run(t, 2, func(t *testing.T) {
		pe := startPE(t)
		ms := &pe.ext.msg
		reqs := make([]*Request, window)
		buf := make([]byte, n)
		if pe.Rank() == 1 {
			read := msg.ReadFrom
			msg.ReadFrom = func(pid int, dst []byte, src uintptr) error {
				time.Sleep(500 * time.Microsecond)
				return read(pid, dst, src)
			}
			c0 := ms.Counters()
			for i := range reqs {
				reqs[i] = need(pe.Irecv(buf, 0, i))
			}
			sync2(t, pe)
			sync2(t, pe)
			for i, r := range reqs {
				if st := need(r.Wait()); st.Count != n || st.Tag != i {
					t.Fatalf("message %d: status %+v", i, st)
				}
			}
			msg.ReadFrom = read
			checkMsg(t, "split message", buf, 5)
			c := ms.Counters()
			if splits, noSlot := c.Splits-c0.Splits, c.NoSlot-c0.NoSlot; splits != window || noSlot != 0 {
				t.Errorf("%d of %d messages split, %d found no split slot; want all split", splits, window, noSlot)
			}
		} else {
			write := msg.WriteTo
			msg.WriteTo = func(pid int, src []byte, dst uintptr) error {
				time.Sleep(700 * time.Microsecond)
				return write(pid, src, dst)
			}
			fillMsg(buf, 5)
			sync2(t, pe)
			for i := range reqs {
				reqs[i] = need(pe.Isend(buf, 1, i))
			}
			sync2(t, pe)
			for _, r := range reqs {
				need(r.Wait())
			}
			msg.WriteTo = write
		}
		sync2(t, pe)
	}, msgOpts()...)
}

// TestMsgKernelRefused: when process_vm_readv is refused (simulated in
// the receiver as EPERM), the receiver answers NACK, the message arrives
// through bounce buffers, and the sender sends the next ones to that PE by
// bounce buffers at once.
func TestMsgKernelRefused(t *testing.T) {
	petest.Run(t, 2, func(t *testing.T) {
		pe := startPE(t)
		const n = 3<<20 + 11
		buf := make([]byte, n)
		stats := pe.stats
		if pe.Rank() == 1 {
			msg.ReadFrom = func(int, []byte, uintptr) error { return unix.EPERM }
			for i := range 3 {
				st := need(pe.Recv(buf, 0, i))
				if st.Count != n {
					t.Fatalf("status %+v", st)
				}
				checkMsg(t, "bounced message", buf, uint64(i))
			}
		} else {
			for i := range 3 {
				fillMsg(buf, uint64(i))
				noErr(t, pe.Send(buf, 1, i))
				if !pe.ext.msg.KernelRefused(1) {
					t.Fatal("the NACK did not mark PE 1 as refusing process_vm_readv")
				}
			}
			if b, k := stats.MsgBounce.Load(), stats.MsgKernel.Load(); b != 3 || k != 0 {
				t.Errorf("bounce %d kernel %d, want 3 and 0", b, k)
			}
		}
		sync2(t, pe)
	}, msgOpts()...)
}

// TestMsgNoBounceRoom: with no local shared heap and process_vm_readv
// off, a large message has no way to go: the send fails with
// ErrOutOfMemory naming SYMHEAP_SHARED_SIZE, and so does the receive
// (the sender aborts it); eager messages still work.
func TestMsgNoBounceRoom(t *testing.T) {
	petest.Run(t, 2, func(t *testing.T) {
		pe := startPE(t)
		big := make([]byte, 1<<20)
		if pe.Rank() == 0 {
			err := pe.Send(big, 1, 0)
			wantIs(t, "large Send without bounce room", err, ErrOutOfMemory, "SYMHEAP_SHARED_SIZE")
			noErr(t, pe.Send(big[:10], 1, 1))
		} else {
			_, err := pe.Recv(big, 0, 0)
			wantIs(t, "Recv of an aborted message", err, ErrOutOfMemory, "PE 0")
			st := need(pe.Recv(big, 0, 1))
			if st.Count != 10 {
				t.Fatalf("status %+v", st)
			}
		}
		sync2(t, pe)
	}, petest.Heap("8m"), petest.Env("SYMHEAP_SHARED_SIZE=0", "SYMHEAP_MSG_NOKERNEL=1"))
}

// TestMsgAbortedWhileUnexpected: a large message its sender aborts (no
// bounce room) before any receive matched it keeps its place: the
// receive that matches it fails with ErrOutOfMemory naming the sender,
// and the sender's next message with the same tag goes to the next
// receive, not to that one.
func TestMsgAbortedWhileUnexpected(t *testing.T) {
	petest.Run(t, 2, func(t *testing.T) {
		pe := startPE(t)
		big := make([]byte, 1<<20)
		if pe.Rank() == 0 {
			err := pe.Send(big, 1, 0)
			wantIs(t, "large Send without bounce room", err, ErrOutOfMemory, "SYMHEAP_SHARED_SIZE")
			noErr(t, pe.Send([]byte("second"), 1, 0))
			noErr(t, pe.Send([]byte("x"), 1, 1))
		} else {
			// Tag 1 comes last: receiving it first takes the aborted
			// message and the second one in as unexpected.
			st := need(pe.Recv(big, 0, 1))
			if st.Count != 1 {
				t.Fatalf("tag 1: status %+v", st)
			}
			_, err := pe.Recv(big, 0, 0)
			wantIs(t, "Recv matching the aborted message", err, ErrOutOfMemory, "PE 0")
			st = need(pe.Recv(big, 0, 0))
			if got := string(big[:st.Count]); got != "second" {
				t.Fatalf("the Recv after the aborted message got %q, want %q", got, "second")
			}
		}
		sync2(t, pe)
	}, petest.Heap("8m"), petest.Env("SYMHEAP_SHARED_SIZE=0", "SYMHEAP_MSG_NOKERNEL=1"))
}

// TestMsgAllToAll: every PE sends every other PE (and itself) a stream of
// messages of mixed sizes and tags, and receives them all with AnySource
// and AnyTag; each (sender, tag) stream arrives in order and intact.
func TestMsgAllToAll(t *testing.T) {
	for name, env := range map[string]string{"default": "", "bounce": "SYMHEAP_MSG_BOUNCE=1"} {
		t.Run(name, func(t *testing.T) {
			petest.Run(t, 4, func(t *testing.T) {
				pe := startPE(t)
				me, n := pe.Rank(), pe.Size()
				const perDest = 60
				sizes := []int{0, 8, 100, pe.EagerLimit(), pe.EagerLimit() + 1, 70000, 300000}
				// Message k from s to d: tag k%3, size sizes[k%len], seed (s, d, k).
				seed := func(s, d, k int) uint64 { return uint64(s<<24 | d<<16 | k) }
				var reqs []*Request
				for k := 0; k < perDest; k++ {
					for d := 0; d < n; d++ {
						b := make([]byte, sizes[k%len(sizes)])
						fillMsg(b, seed(me, d, k))
						if len(b) >= 8 {
							binary.LittleEndian.PutUint64(b[len(b)-8:], uint64(k)) // the last word: k
						}
						reqs = append(reqs, need(pe.Isend(b, d, k%3)))
					}
				}
				next := make([][3]int, n) // per sender and tag: the next k expected
				for s := range next {
					next[s] = [3]int{0, 1, 2}
				}
				buf := make([]byte, 300000)
				for range perDest * n {
					st := need(pe.Recv(buf, AnySource, AnyTag))
					k := next[st.Source][st.Tag]
					next[st.Source][st.Tag] += 3
					if st.Count != sizes[k%len(sizes)] {
						t.Fatalf("from PE %d tag %d: message %d has %d bytes, want %d (overtaken?)", st.Source, st.Tag, k, st.Count, sizes[k%len(sizes)])
					}
					msg := buf[:st.Count]
					if len(msg) >= 8 {
						if got := binary.LittleEndian.Uint64(msg[len(msg)-8:]); got != uint64(k) {
							t.Fatalf("from PE %d tag %d: got message %d, want %d", st.Source, st.Tag, got, k)
						}
						binary.LittleEndian.PutUint64(msg[len(msg)-8:], 0)
						want := make([]byte, len(msg))
						fillMsg(want, seed(st.Source, me, k))
						binary.LittleEndian.PutUint64(want[len(want)-8:], 0)
						if !bytes.Equal(msg, want) {
							t.Fatalf("from PE %d tag %d: message %d corrupt", st.Source, st.Tag, k)
						}
					}
				}
				for _, r := range reqs {
					need(r.Wait())
				}
				sync2(t, pe)
			}, msgOpts(petest.Env(env))...)
		})
	}
}

// TestMsgOrdering: many outstanding Isends of mixed sizes (so that rings
// fill, records wait in the backlog, and large messages are still being
// copied when small ones behind them arrive), received by Irecvs posted
// by tag in an order of their own; every (sender, tag) stream stays in
// order, and Test drives progress as well as Wait.
func TestMsgOrdering(t *testing.T) {
	petest.Run(t, 3, func(t *testing.T) {
		pe := startPE(t)
		const count = 1500
		sizeOf := func(i int) int { return []int{16, 3000, 20000, 200}[i%4] }
		if pe.Rank() != 0 {
			// Senders: PE 1 and PE 2, every message at once.
			var reqs []*Request
			bufs := make([][]byte, count)
			for i := range count {
				bufs[i] = make([]byte, sizeOf(i))
				fillMsg(bufs[i], uint64(pe.Rank()<<20|i))
				reqs = append(reqs, need(pe.Isend(bufs[i], 0, i%5)))
			}
			for i, r := range reqs {
				if st := need(r.Wait()); st != (Status{pe.Rank(), i % 5, sizeOf(i)}) {
					t.Fatalf("send %d: status %+v", i, st)
				}
			}
		} else {
			// Receiver: per sender and tag, post in order; drive with Test.
			type slot struct {
				r      *Request
				src, i int
				buf    []byte
			}
			var pending []slot
			rng := rand.New(rand.NewPCG(3, 4))
			order := rng.Perm(5)
			for _, tag := range order {
				for src := 1; src <= 2; src++ {
					for i := tag; i < count; i += 5 {
						b := make([]byte, 20000)
						pending = append(pending, slot{need(pe.Irecv(b, src, tag)), src, i, b})
					}
				}
			}
			for len(pending) > 0 {
				rest := pending[:0]
				for _, p := range pending {
					done, st, err := p.r.Test()
					noErr(t, err)
					if !done {
						rest = append(rest, p)
						continue
					}
					if st.Source != p.src || st.Tag != p.i%5 || st.Count != sizeOf(p.i) {
						t.Fatalf("receive for message %d of PE %d: status %+v", p.i, p.src, st)
					}
					checkMsg(t, fmt.Sprintf("message %d of PE %d", p.i, p.src), p.buf[:st.Count], uint64(p.src<<20|p.i))
				}
				pending = rest
			}
		}
		sync2(t, pe)
	}, msgOpts()...)
}

// TestMsgTruncated: a receive too short for the message ends with
// ErrTruncated and the message's real size, and the message stays queued
// for the next receive: for eager and large messages, unexpected ones and
// ones that meet a posted receive.
func TestMsgTruncated(t *testing.T) {
	petest.Run(t, 2, func(t *testing.T) {
		pe := startPE(t)
		sizes := []int{100, pe.EagerLimit() + 1, 1 << 20}
		if pe.Rank() == 0 {
			for i, n := range sizes {
				b := make([]byte, n)
				fillMsg(b, uint64(i))
				noErr(t, pe.Send(b, 1, 7))
			}
			sync2(t, pe)
			// Second round: the receiver has posted short receives first.
			sync2(t, pe)
			for i, n := range sizes {
				b := make([]byte, n)
				fillMsg(b, uint64(10+i))
				r := need(pe.Isend(b, 1, 8))
				need(r.Wait())
			}
		} else {
			for i, n := range sizes {
				short := make([]byte, n-1)
				st, err := pe.Recv(short, 0, 7)
				wantIs(t, "short Recv", err, ErrTruncated, fmt.Sprint(n))
				if st != (Status{0, 7, n}) {
					t.Fatalf("truncated status %+v, want count %d", st, n)
				}
				// Again, with AnyTag: still the same message.
				st, err = pe.Recv(short[:1], AnySource, AnyTag)
				wantIs(t, "short Recv again", err, ErrTruncated)
				if st.Count != n {
					t.Fatalf("truncated status %+v", st)
				}
				full := make([]byte, n+10)
				st = need(pe.Recv(full, 0, 7))
				if st.Count != n {
					t.Fatalf("status %+v", st)
				}
				checkMsg(t, "message after truncation", full[:n], uint64(i))
			}
			sync2(t, pe)
			short := need(pe.Irecv(make([]byte, 10), 0, 8))
			sync2(t, pe)
			_, err := short.Wait()
			wantIs(t, "posted short Irecv", err, ErrTruncated)
			for i, n := range sizes {
				full := make([]byte, n)
				st := need(pe.Recv(full, 0, 8))
				if st.Count != n {
					t.Fatalf("status %+v", st)
				}
				checkMsg(t, "message after a posted truncation", full, uint64(10+i))
			}
		}
		sync2(t, pe)
	}, msgOpts()...)
}

// TestMsgSelf: a PE sends to itself, on every path, also with the message
// sent before the receive is posted.
func TestMsgSelf(t *testing.T) {
	petest.Run(t, 1, func(t *testing.T) {
		pe := startPE(t)
		sb := need(SharedAlloc[byte](pe, 2<<20))
		for _, n := range []int{0, 9, pe.EagerLimit() + 1, 2 << 20} {
			for _, src := range [][]byte{make([]byte, n), sb[:n]} {
				fillMsg(src, uint64(n))
				s := need(pe.Isend(src, 0, 1))
				got := make([]byte, n)
				st := need(pe.Recv(got, 0, AnyTag))
				if st != (Status{0, 1, n}) {
					t.Fatalf("status %+v", st)
				}
				checkMsg(t, "to self", got, uint64(n))
				need(s.Wait())
			}
		}
		// Eager messages beyond the ring's room, all sent before any
		// receive: the backlog and the drain into the unexpected queue.
		var reqs []*Request
		for i := range 500 {
			b := make([]byte, 1000)
			fillMsg(b, uint64(i))
			reqs = append(reqs, need(pe.Isend(b, 0, 2)))
		}
		for i := range 500 {
			got := make([]byte, 1000)
			need(pe.Recv(got, AnySource, 2))
			checkMsg(t, "queued to self", got, uint64(i))
		}
		for _, r := range reqs {
			need(r.Wait())
		}
		noErr(t, SharedFree(pe, sb))
	}, msgOpts()...)
}

// TestMsgErrors: bad arguments are refused with clear errors.
func TestMsgErrors(t *testing.T) {
	petest.Run(t, 2, func(t *testing.T) {
		pe := startPE(t)
		wantIs(t, "Send to PE 2", pe.Send(nil, 2, 0), ErrBadPE, "PE 2")
		wantIs(t, "Send to PE -1", pe.Send(nil, -1, 0), ErrBadPE)
		wantIs(t, "Send with tag -1", pe.Send(nil, 1, AnyTag), ErrBadArg, "tag")
		_, err := pe.Isend(nil, 0, MaxTag+1)
		wantIs(t, "Isend with a tag too large", err, ErrBadArg)
		_, err = pe.Recv(nil, 5, 0)
		wantIs(t, "Recv from PE 5", err, ErrBadPE)
		_, err = pe.Irecv(nil, 0, -2)
		wantIs(t, "Irecv with tag -2", err, ErrBadArg)
		var r *Request
		_, err = r.Wait()
		wantIs(t, "Wait on nil", err, ErrBadArg)
		_, _, err = r.Test()
		wantIs(t, "Test on nil", err, ErrBadArg)
		// A receive that never completes is fine to leave behind at Close.
		need(pe.Irecv(make([]byte, 1), 1-pe.Rank(), 12345))
		sync2(t, pe)
		noErr(t, pe.Close())
		wantIs(t, "Send after Close", pe.Send(nil, 0, 0), ErrClosed)
		_, err = pe.Recv(nil, 0, 0)
		wantIs(t, "Recv after Close", err, ErrClosed)
	}, msgOpts()...)
}

// TestMsgPeerLost: a PE dies abruptly while the others wait for its
// messages: a blocking Recv from it and a Recv from AnySource get
// ErrPeerLost at the first liveness check after its death, as does a
// large Send to it and, once its death is known, an eager Send to it.
func TestMsgPeerLost(t *testing.T) {
	petest.Run(t, 4, func(t *testing.T) {
		pe, err := Init(Config{})
		noErr(t, err)
		// The survivors count themselves done here (on PE 0, which lives),
		// and none closes before all are: a PE that closes is gone too,
		// and a Recv from AnySource could name it instead of the dead PE.
		done, err := Calloc[int64](pe, 1)
		noErr(t, err)
		sync2(t, pe)
		const dead = 3
		var start time.Time
		// The liveness checks a wait made once the dead PE's token was
		// gone: the first must end the wait (time would not tell, on a
		// loaded machine, a late check from a lost one).
		var goneAtCheck atomic.Int32
		defer shmsync.TraceSleeps(func(s shmsync.Sleep) {
			if s.Check && !pe.seg.Alive(dead) {
				goneAtCheck.Add(1)
			}
		})()
		lost := func(what string, err error) {
			t.Helper()
			wantIs(t, what, err, ErrPeerLost, fmt.Sprintf("PE %d", dead))
			if n := goneAtCheck.Swap(0); n > 1 {
				t.Errorf("%s: the wait ran %d liveness checks after PE %d's token was gone; the first must end it", what, n, dead)
			}
			t.Logf("PE %d: %s: ErrPeerLost after %v", pe.Rank(), what, time.Since(start).Round(time.Millisecond))
		}
		switch pe.Rank() {
		case dead:
			time.Sleep(200 * time.Millisecond)
			petest.Exit(0) // without Close, in the middle of the job
		case 0:
			start = time.Now()
			_, err := pe.Recv(make([]byte, 8), dead, 0)
			lost("Recv from the dead PE", err)
			start = time.Now()
			lost("eager Send to the dead PE", pe.Send(make([]byte, 8), dead, 0))
		case 1:
			start = time.Now()
			_, err := pe.Recv(make([]byte, 8), AnySource, AnyTag)
			lost("Recv from AnySource", err)
		case 2:
			start = time.Now()
			err := pe.Send(make([]byte, 1<<20), dead, 0) // large: waits for the receiver
			if err == nil {
				t.Fatal("large Send to a PE that never receives returned nil")
			}
			lost("large Send to the dead PE", err)
		}
		noErr(t, AtomicAdd(pe, &done[0], 1, 0))
		for {
			n, err := AtomicFetch(pe, &done[0], 0)
			noErr(t, err)
			if n == int64(pe.Size()-1) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		pe.Close() // its barrier fails: a PE is gone
	}, msgOpts()...)
}

// TestMsgOversubscribed: 8 PEs on however few cores pass tokens around a
// ring; the waits sleep instead of spinning, so the job finishes quickly
// and does not burn CPU while PEs wait.
func TestMsgOversubscribed(t *testing.T) {
	petest.Run(t, 8, func(t *testing.T) {
		pe := startPE(t)
		me, n := pe.Rank(), pe.Size()
		const rounds = 200
		tok := make([]byte, 8)
		start := time.Now()
		for i := range rounds {
			if me == 0 {
				binary.LittleEndian.PutUint64(tok, uint64(i))
				noErr(t, pe.Send(tok, 1, 0))
				need(pe.Recv(tok, n-1, 0))
				if binary.LittleEndian.Uint64(tok) != uint64(i)+uint64(n-1) {
					t.Fatalf("round %d: token %d", i, binary.LittleEndian.Uint64(tok))
				}
			} else {
				need(pe.Recv(tok, me-1, 0))
				binary.LittleEndian.PutUint64(tok, binary.LittleEndian.Uint64(tok)+1)
				noErr(t, pe.Send(tok, (me+1)%n, 0))
			}
		}
		// A long idle wait: PE 0 waits 300 ms for a message; it must
		// sleep, not spin.
		cpu0 := cpuUsed()
		if me == 0 {
			need(pe.Recv(tok, 1, 1))
			if used := cpuUsed() - cpu0; used > 150*time.Millisecond {
				t.Errorf("a 300 ms wait used %v of CPU", used)
			}
		} else if me == 1 {
			time.Sleep(300 * time.Millisecond)
			noErr(t, pe.Send(tok, 0, 1))
		}
		t.Logf("PE %d: %d rounds of an %d-PE ring on %d CPUs in %v", me, rounds, n, runtime.NumCPU(), time.Since(start).Round(time.Millisecond))
		sync2(t, pe)
	}, msgOpts()...)
}

// cpuUsed is the CPU time this process has used.
func cpuUsed() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestMsgConcurrent: goroutines of one PE send and receive at once (PE 0
// sends first, PE 1 receives first: a large Send waits for its receive).
func TestMsgConcurrent(t *testing.T) {
	petest.Run(t, 2, func(t *testing.T) {
		pe := startPE(t)
		peer := 1 - pe.Rank()
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 200 {
					n := []int{5, 5000, 50000}[i%3]
					b := make([]byte, n)
					fillMsg(b, uint64(g<<16|i))
					got := make([]byte, n)
					send := func() error { return pe.Send(b, peer, g) }
					recv := func() error { _, err := pe.Recv(got, peer, g); return err }
					steps := []func() error{send, recv}
					if pe.Rank() == 1 {
						steps[0], steps[1] = recv, send
					}
					for _, step := range steps {
						if err := step(); err != nil {
							errs <- err
							return
						}
					}
					if !bytes.Equal(got, b) {
						errs <- fmt.Errorf("goroutine %d message %d corrupt", g, i)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		sync2(t, pe)
	}, msgOpts()...)
}

// TestPipelineExample runs examples/pipeline under shrun, as a user would.
func TestPipelineExample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds shrun and the example")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build shrun and the example: %v", err)
	}
	dir := t.TempDir()
	build := exec.Command(goTool, "build", "-o", dir, "./cmd/shrun", "./examples/pipeline")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, mode := range []string{"0", "1"} {
		cmd := exec.Command(filepath.Join(dir, "shrun"), "-n", "4", "--heap", "8m", "--timeout", "60s", filepath.Join(dir, "pipeline"))
		cmd.Env = append(os.Environ(), "SYMHEAP_SHARED_SIZE=4m", "SYMHEAP_OFFSET_MODE="+mode)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("shrun -n 4 pipeline (offset mode %s): %v\n%s", mode, err, out)
		}
		if !strings.Contains(string(out), "pipeline: ok") {
			t.Fatalf("pipeline printed no verdict:\n%s", out)
		}
		t.Logf("offset mode %s:\n%s", mode, out)
	}
}

// TestMsgStreamWindows runs BenchmarkMsg's stream pattern: windows of 64
// Isends against 64 Irecvs, then a 4-byte acknowledgement, for sizes that
// go through the box, one ring cell, and more cells than a window leaves
// room for (so Isends find the ring full, and room again, as they post).
// Every Isend and Irecv must return a request, and every message must
// arrive intact.
func TestMsgStreamWindows(t *testing.T) {
	petest.Run(t, 2, func(t *testing.T) {
		pe := startPE(t)
		peer := 1 - pe.Rank()
		for _, size := range []int{8, 512, pe.EagerLimit(), 16 << 10} {
			windows := 300
			if size > 1024 {
				windows = 60
			}
			sbufs, rbufs := make([][]byte, 64), make([][]byte, 64)
			for i := range sbufs {
				sbufs[i], rbufs[i] = make([]byte, size), make([]byte, size)
				fillMsg(sbufs[i], uint64(size+i))
			}
			reqs := make([]*Request, 64)
			var ack [4]byte
			for n := range windows {
				for i := range reqs {
					var err error
					if pe.Rank() == 0 {
						reqs[i], err = pe.Isend(sbufs[i], peer, 2)
					} else {
						reqs[i], err = pe.Irecv(rbufs[i], peer, 2)
					}
					noErr(t, err)
					if reqs[i] == nil {
						t.Fatalf("size %d, window %d, message %d: nil request", size, n, i)
					}
				}
				for i, r := range reqs {
					st := need(r.Wait())
					if pe.Rank() == 1 {
						if st != (Status{0, 2, size}) {
							t.Fatalf("size %d, window %d, message %d: status %+v", size, n, i, st)
						}
						checkMsg(t, fmt.Sprintf("size %d, window %d, message %d", size, n, i), rbufs[i], uint64(size+i))
					}
				}
				if pe.Rank() == 0 {
					need(pe.Recv(ack[:], peer, 3))
				} else {
					noErr(t, pe.Send(ack[:], peer, 3))
				}
			}
			sync2(t, pe)
		}
	}, msgOpts()...)
}
