package symheap

import (
	"encoding/binary"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/far"
	"github.com/symheap/symheap/internal/petest"
)

// The matrix of messages across nodes (check "msgmatrix"): each PE and
// its partner on the other node (rank^2 in a job of 2×2 PEs) exchange
// messages of every size that crosses a protocol boundary, one size
// below, at and above it, in every way a program may post and wait for
// them:
//
//   - sizes: 0 B, 1 B, every boundary ±1 (symheap's own fast receive,
//     far.FastMax; UCX's eager short, eager copy and zero-copy, rendezvous
//     and fragment sizes, read from the live endpoint and from UCX 1.13's
//     defaults over TCP), and 16 KiB to 64 MiB;
//   - the receive posted before the send or after it (a handshake makes
//     sure of it), with a window of 64 outstanding each way;
//   - blocking and non-blocking calls, waiting on the send first or on
//     the receive first, Test instead of Wait, WaitAll;
//   - a specific source, AnySource, AnyTag.
//
// TestCluster runs it with UCX's peer error handling and
// TestClusterNoPeerErrors without (SYMHEAP_UCX_PEER_ERRORS=0); their
// protocols differ, and the matrix takes each mode's boundaries from its
// endpoint. Each job loops over all the cases (some 400, a few seconds).
//
// Every message's bytes are a pattern of its sender, case, index and
// size, checked whole at the receiver along with its status, and the
// receive buffer is a little longer than the message: the bytes past it
// must stay as they were. A case during which this PE fills or checks no
// message for matrixCaseLimit is a hang: its PE prints the case (and its
// goroutines) on a line starting with matrixHang, and exits, which ends
// the job; clusterFailure lifts that line into the test's failure. The
// limit is a hang detector, not a timing assertion: a case that moves,
// however slowly (under -race on a loaded machine 64 MiB each way can
// take longer than the limit), is not taken for one.

// matrixHang starts the line a PE prints when a case hangs.
const matrixHang = "MSGMATRIX HANG:"

// matrixCaseLimit is how long a case may go without a message filled or
// checked before it is taken to hang.
const matrixCaseLimit = 30 * time.Second

// matrixMoves counts the messages this PE has filled or checked: the
// watchdog's sign that a case is moving.
var matrixMoves atomic.Int64

// matrixWindow is the number of messages outstanding each way in the
// window cases.
const matrixWindow = 64

// matrixSlack is how much longer than the message a receive buffer is.
const matrixSlack = 7

// ucxDefaultBounds are the sizes at which UCX 1.13 over TCP, with its
// default settings, hands a tagged message from one protocol to the next
// (ucx_info -e, -d, -c): eager short to eager zero-copy (8185), the
// rendezvous without and with peer error handling (8192, 20553), the
// socket's send-vector threshold (2 KiB), TCP's short and copy fragment
// (8 KiB), its zero-copy fragment and receive segment (64 KiB), the
// rendezvous of blocking sends (256 KiB) and the rendezvous pipeline's
// fragment (512 KiB). Whether a printed size is the last of one protocol
// or the first of the next, ±1 covers both sides. The live endpoint's own
// (matrixBounds) are added to them.
var ucxDefaultBounds = []int{2 << 10, 8185, 8 << 10, 20553, 64 << 10, 256 << 10, 512 << 10}

// tagSendLine finds the tag_send line of ucp_ep_print_info's output,
// "tag_send: 0..<egr/short>..8185..<egr/zcopy>..20553..<rndv>..(inf)".
var tagSendLine = regexp.MustCompile(`(?m)^#?\s*tag_send:\s*(.*)$`)

// matrixBounds returns the sizes at which the endpoint to peer changes
// protocol, from its tag_send line, and the line itself.
func matrixBounds(t *testing.T, pe *PE, peer int) ([]int, string) {
	info, err := pe.far.Describe(peer)
	if err != nil {
		t.Fatalf("endpoint to PE %d: %v", peer, err)
	}
	m := tagSendLine.FindStringSubmatch(info)
	if m == nil {
		t.Logf("PE %d: no tag_send line in the transport's description of its way to PE %d (UCX's endpoint has one), only UCX's default sizes are covered: %s", pe.Rank(), peer, info)
		return nil, ""
	}
	var b []int
	for _, f := range regexp.MustCompile(`\.\.(\d+)\.\.`).FindAllStringSubmatch(m[1], -1) {
		if n, err := strconv.Atoi(f[1]); err == nil && n > 0 {
			b = append(b, n)
		}
	}
	return b, m[0]
}

// matrixSizes is every size the matrix sends: 0, 1, each boundary ±1
// (up to 64 MiB), and the sizes people send, up to 64 MiB.
func matrixSizes(bounds []int) []int {
	s := []int{0, 1, 16 << 10, 32 << 10, 1 << 20, 4 << 20, 64 << 20}
	for _, b := range append(append([]int{far.FastMax}, ucxDefaultBounds...), bounds...) {
		for _, n := range []int{b - 1, b, b + 1} {
			if n >= 0 && n <= 64<<20 {
				s = append(s, n)
			}
		}
	}
	slices.Sort(s)
	return slices.Compact(s)
}

// windowSizes are the sizes of the window cases: one of each protocol
// (64 outstanding of each, at most 64 MiB each way).
var windowSizes = []int{0, 1, far.FastMax + 1, 8186, 8193, 20554, 64<<10 + 1, 1 << 20}

// matrix is one PE's side of the matrix.
type matrix struct {
	t          *testing.T
	pe         *PE
	me, peer   int
	send, recv []byte // arenas: message i of a window at i*stride
	stride     int
	tag        int    // the current case's tag (one per case)
	name       string // the current case, for messages
	msgs       int
	bytes      int64
	errs       int // messages found wrong (the first few are reported)
}

// fail reports a wrong message and goes on, so that the partner is not
// left waiting for the rest of the case; past the first few it only
// counts them.
func (m *matrix) fail(format string, args ...any) {
	m.t.Helper()
	if m.errs++; m.errs <= 10 {
		m.t.Errorf(m.name+": "+format, args...)
	}
}

// A matrixMode is one way of posting and waiting for an exchange of
// messages of n bytes with the partner; it checks what it received
// (m.got).
type matrixMode struct {
	name string
	run  func(m *matrix, n int)
}

var matrixModes = []matrixMode{
	// The standard exchange: receive, send, wait on the send, then on
	// the receive (issue 36: a rendezvous hung here).
	{"irecv,isend;wait-send,wait-recv", func(m *matrix, n int) {
		r := m.irecv(0, n, m.peer, m.tag)
		s := m.isend(0, n)
		m.wait(s, -1, 0)
		m.wait(r, n, 0)
	}},
	{"irecv,isend;wait-recv,wait-send", func(m *matrix, n int) {
		r := m.irecv(0, n, m.peer, m.tag)
		s := m.isend(0, n)
		m.wait(r, n, 0)
		m.wait(s, -1, 0)
	}},
	{"isend,irecv;wait-send,wait-recv", func(m *matrix, n int) {
		s := m.isend(0, n)
		r := m.irecv(0, n, m.peer, m.tag)
		m.wait(s, -1, 0)
		m.wait(r, n, 0)
	}},
	{"isend,irecv;wait-recv,wait-send", func(m *matrix, n int) {
		s := m.isend(0, n)
		r := m.irecv(0, n, m.peer, m.tag)
		m.wait(r, n, 0)
		m.wait(s, -1, 0)
	}},
	// Blocking send between a posted receive and its wait.
	{"irecv,send;wait-recv", func(m *matrix, n int) {
		r := m.irecv(0, n, m.peer, m.tag)
		m.blockingSend(0, n)
		m.wait(r, n, 0)
	}},
	// Blocking receive between a send and its wait.
	{"isend,recv;wait-send", func(m *matrix, n int) {
		s := m.isend(0, n)
		m.blockingRecv(0, n, m.peer, m.tag)
		m.wait(s, -1, 0)
	}},
	// Blocking both ways: the lower rank sends first (the other order
	// on both would be a program that may deadlock above the eager
	// size, in MPI as here).
	{"send,recv|recv,send", func(m *matrix, n int) {
		if m.me < m.peer {
			m.blockingSend(0, n)
			m.blockingRecv(0, n, m.peer, m.tag)
		} else {
			m.blockingRecv(0, n, m.peer, m.tag)
			m.blockingSend(0, n)
		}
	}},
	{"irecv(any),isend;wait-send,wait-recv", func(m *matrix, n int) {
		r := m.irecv(0, n, AnySource, m.tag)
		s := m.isend(0, n)
		m.wait(s, -1, 0)
		m.wait(r, n, 0)
	}},
	{"isend,recv(any,anytag);wait-send", func(m *matrix, n int) {
		s := m.isend(0, n)
		m.blockingRecv(0, n, AnySource, AnyTag)
		m.wait(s, -1, 0)
	}},
	// Test in a loop instead of Wait.
	{"irecv,isend;test-both", func(m *matrix, n int) {
		r := m.irecv(0, n, m.peer, m.tag)
		s := m.isend(0, n)
		m.testUntil([]*Request{s, r}, []int{-1, n})
	}},
	// The receive surely posted before the message left: the partner
	// sends only once it has heard that it was.
	{"irecv,handshake,isend;wait-send,wait-recv", func(m *matrix, n int) {
		r := m.irecv(0, n, m.peer, m.tag)
		m.handshake()
		s := m.isend(0, n)
		m.wait(s, -1, 0)
		m.wait(r, n, 0)
	}},
	// The receive posted once the message is there: the partner's
	// handshake leaves after its message, on the same connection.
	{"isend,handshake,irecv;wait-recv,wait-send", func(m *matrix, n int) {
		s := m.isend(0, n)
		m.handshake()
		r := m.irecv(0, n, m.peer, m.tag)
		m.wait(r, n, 0)
		m.wait(s, -1, 0)
	}},
}

// windowModes move matrixWindow messages each way with one tag; the
// receives get them in posting order whatever order they are waited in.
var windowModes = []matrixMode{
	{"64×irecv,64×isend;wait-sends,wait-recvs", func(m *matrix, n int) {
		rs := m.irecvs(n, m.peer)
		ss := m.isends(n)
		for i, s := range ss {
			m.wait(s, -1, i)
		}
		for i, r := range rs {
			m.wait(r, n, i)
		}
	}},
	{"64×isend,64×irecv;wait-recvs-reversed,wait-sends", func(m *matrix, n int) {
		ss := m.isends(n)
		rs := m.irecvs(n, m.peer)
		for i := len(rs) - 1; i >= 0; i-- {
			m.wait(rs[i], n, i)
		}
		for i, s := range ss {
			m.wait(s, -1, i)
		}
	}},
	{"64×irecv(any),64×isend;waitall", func(m *matrix, n int) {
		rs := m.irecvs(n, AnySource)
		ss := m.isends(n)
		all := append(slices.Clone(rs), ss...)
		sts := make([]Status, len(all))
		if err := WaitAll(all, sts); err != nil {
			m.t.Fatalf("%s: WaitAll: %v", m.name, err)
		}
		for i := range rs {
			m.got(i, n, sts[i])
		}
	}},
}

// checkClusterMessageMatrix runs the matrix with the PE's partner on the
// other node.
func checkClusterMessageMatrix(t *testing.T, pe *PE) {
	me := pe.Rank()
	peer := me ^ 2
	if pe.Size() != 4 || (pe.Node(peer) == pe.Node(me)) {
		t.Fatalf("msgmatrix needs 2 nodes of 2 PEs (PE %d of %d, partner %d on this node: %v)", me, pe.Size(), peer, (pe.Node(peer) == pe.Node(me)))
	}
	bounds, line := matrixBounds(t, pe, peer)
	sizes := matrixSizes(bounds)
	if petest.Race {
		// Under -race every copy is checked byte range by byte range: the
		// matrix's 1.1 GB per PE took 84 s over TCP (4 s without). The
		// sizes up to 1 MiB cover every protocol boundary; the build
		// without -race runs the rest.
		for len(sizes) > 0 && sizes[len(sizes)-1] > 1<<20 {
			sizes = sizes[:len(sizes)-1]
		}
	}
	stride := (windowSizes[len(windowSizes)-1] + matrixSlack + 63) &^ 63
	arena := max(sizes[len(sizes)-1], matrixWindow*stride) + matrixSlack
	m := &matrix{t: t, pe: pe, me: me, peer: peer, send: make([]byte, arena), recv: make([]byte, arena), stride: stride}
	cases := 0
	run := func(mode matrixMode, n int) {
		cases++
		m.tag = 1000 + cases
		m.name = fmt.Sprintf("case %d (%s, %d B, tag %d, PE %d with PE %d, peer errors %v)", cases, mode.name, n, m.tag, me, peer, pe.set.peerErrors)
		// Deferred: a case that fails (t.Fatal) must not be taken for a
		// hang while the PE closes.
		defer m.watchdog()()
		mode.run(m, n)
	}
	for _, mode := range matrixModes {
		for _, n := range sizes {
			run(mode, n)
		}
	}
	for _, mode := range windowModes {
		for _, n := range windowSizes {
			run(mode, n)
		}
	}
	if m.errs > 0 {
		t.Errorf("PE %d: %d wrong messages from PE %d in the message matrix", me, m.errs, peer)
	}
	t.Logf("PE %d: message matrix with PE %d: %d cases, %d messages received, %d bytes; %d sizes %v; endpoint %s",
		me, peer, cases, m.msgs, m.bytes, len(sizes), sizes, line)
}

// watchdog ends the process, naming the case, if it has not returned
// the stop function within matrixCaseLimit (see the top).
func (m *matrix) watchdog() (stop func()) { return hangWatchdog(m.name) }

// hangWatchdog ends the process, printing name on a line that starts
// with matrixHang (which clusterFailure lifts into the test's failure)
// and every goroutine's stack, if matrixMoves stands still for
// matrixCaseLimit before the stop function is called.
func hangWatchdog(name string) (stop func()) {
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(matrixCaseLimit)
		defer tick.Stop()
		last := matrixMoves.Load()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if now := matrixMoves.Load(); now != last {
				last = now
				continue
			}
			buf := make([]byte, 1<<16)
			buf = buf[:runtime.Stack(buf, true)]
			fmt.Fprintf(os.Stderr, "%s %s filled or checked no message for %v (if the partner failed first, its error is above)\n%s\n", matrixHang, name, matrixCaseLimit, buf)
			os.Exit(3)
		}
	}()
	return func() { close(done) }
}

// handshake: each side tells the other it got here, and waits to hear
// the same (one byte each way, on the case's tag + 1 << 20).
func (m *matrix) handshake() {
	if err := m.pe.Send([]byte{1}, m.peer, m.tag+1<<20); err != nil {
		m.t.Fatalf("%s: handshake Send: %v", m.name, err)
	}
	if _, err := m.pe.Recv(make([]byte, 1), m.peer, m.tag+1<<20); err != nil {
		m.t.Fatalf("%s: handshake Recv: %v", m.name, err)
	}
}

// sendBuf is message i's send buffer, filled with its pattern.
func (m *matrix) sendBuf(i, n int) []byte {
	b := m.send[i*m.stride : i*m.stride+n]
	fillPattern(b, m.me, m.tag, i)
	return b
}

// recvBuf is message i's receive buffer, n+matrixSlack long, its slack
// set to a value got checks stays.
func (m *matrix) recvBuf(i, n int) []byte {
	b := m.recv[i*m.stride : i*m.stride+n+matrixSlack]
	for j := n; j < len(b); j++ {
		b[j] = 0xa5
	}
	return b
}

func (m *matrix) isend(i, n int) *Request {
	r, err := m.pe.Isend(m.sendBuf(i, n), m.peer, m.tag)
	if err != nil {
		m.t.Fatalf("%s: Isend %d: %v", m.name, i, err)
	}
	return r
}

func (m *matrix) irecv(i, n, src, tag int) *Request {
	r, err := m.pe.Irecv(m.recvBuf(i, n), src, tag)
	if err != nil {
		m.t.Fatalf("%s: Irecv %d: %v", m.name, i, err)
	}
	return r
}

func (m *matrix) isends(n int) []*Request {
	rs := make([]*Request, matrixWindow)
	for i := range rs {
		rs[i] = m.isend(i, n)
	}
	return rs
}

func (m *matrix) irecvs(n, src int) []*Request {
	rs := make([]*Request, matrixWindow)
	for i := range rs {
		rs[i] = m.irecv(i, n, src, m.tag)
	}
	return rs
}

func (m *matrix) blockingSend(i, n int) {
	if err := m.pe.Send(m.sendBuf(i, n), m.peer, m.tag); err != nil {
		m.t.Fatalf("%s: Send: %v", m.name, err)
	}
}

func (m *matrix) blockingRecv(i, n, src, tag int) {
	st, err := m.pe.Recv(m.recvBuf(i, n), src, tag)
	if err != nil {
		m.t.Fatalf("%s: Recv: %v", m.name, err)
	}
	m.got(i, n, st)
}

// wait waits for a send (n < 0) or for receive i of n bytes, and checks
// the latter.
func (m *matrix) wait(r *Request, n, i int) {
	st, err := r.Wait()
	if err != nil {
		m.t.Fatalf("%s: Wait for message %d: %v", m.name, i, err)
	}
	if n >= 0 {
		m.got(i, n, st)
	}
}

// testUntil calls Test on each request until all are done; n as wait's.
func (m *matrix) testUntil(rs []*Request, n []int) {
	done := make([]bool, len(rs))
	for left := len(rs); left > 0; runtime.Gosched() {
		for k, r := range rs {
			if done[k] {
				continue
			}
			ok, st, err := r.Test()
			if err != nil {
				m.t.Fatalf("%s: Test of request %d: %v", m.name, k, err)
			}
			if ok {
				done[k] = true
				left--
				if n[k] >= 0 {
					m.got(0, n[k], st)
				}
			}
		}
	}
}

// got checks receive i of n bytes: its status, its bytes, and that its
// buffer's slack is untouched.
func (m *matrix) got(i, n int, st Status) {
	m.t.Helper()
	if st.Source != m.peer || st.Tag != m.tag || st.Count != n {
		m.fail("message %d: status %+v, want source %d, tag %d, %d B", i, st, m.peer, m.tag, n)
		return
	}
	b := m.recv[i*m.stride : i*m.stride+n+matrixSlack]
	if off := checkPattern(b[:n], m.peer, m.tag, i); off >= 0 {
		what := "no message of the case"
		for j := range matrixWindow {
			if checkPattern(b[:n], m.peer, m.tag, j) < 0 {
				what = fmt.Sprintf("message %d (out of order)", j)
			}
		}
		m.fail("message %d: byte %d of %d differs from what PE %d sent (%#x): the buffer holds %s", i, off, n, m.peer, b[off], what)
	}
	for j := n; j < len(b); j++ {
		if b[j] != 0xa5 {
			m.fail("message %d of %d B wrote byte %d of its buffer, past its end", i, n, j)
			break
		}
	}
	m.msgs++
	m.bytes += int64(n)
}

// fillPattern fills b with message i of the case with tag from PE src:
// eight bytes at a time of a hash of (src, tag, i, len(b), offset), so
// that a message in the wrong buffer, a stale one or a shifted one
// differs.
func fillPattern(b []byte, src, tag, i int) {
	matrixMoves.Add(1)
	seed := patternSeed(len(b), src, tag, i)
	k := 0
	for ; k+8 <= len(b); k += 8 {
		binary.LittleEndian.PutUint64(b[k:], mix64(seed+uint64(k)))
	}
	if k < len(b) {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], mix64(seed+uint64(k)))
		copy(b[k:], w[:])
	}
}

// checkPattern returns the offset of the first byte of b that is not
// fillPattern's, or -1.
func checkPattern(b []byte, src, tag, i int) int {
	matrixMoves.Add(1)
	seed := patternSeed(len(b), src, tag, i)
	k := 0
	for ; k+8 <= len(b); k += 8 {
		if binary.LittleEndian.Uint64(b[k:]) != mix64(seed+uint64(k)) {
			break
		}
	}
	var w [8]byte
	for ; k < len(b); k++ {
		if k%8 == 0 {
			binary.LittleEndian.PutUint64(w[:], mix64(seed+uint64(k)))
		}
		if b[k] != w[k%8] {
			return k
		}
	}
	return -1
}

func patternSeed(n, src, tag, i int) uint64 {
	return mix64(uint64(src)<<56 ^ uint64(tag)<<32 ^ uint64(i)<<24 ^ uint64(n))
}

// mix64 is SplitMix64's finaliser.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// The progress rule across nodes (check "msgprogress"): a receive that a
// PE has posted is matched while the PE waits in a call that is not a
// message call, so that a sender that waits for it completes. Every PE
// takes part in each case, in one of three roles:
//
//   - the receiver posts Irecv (from its partner, or from AnySource),
//     then enters the case's collective call, and only after it waits
//     for the receive and checks the message;
//   - the sender calls Send, which above UCX's rendezvous threshold (and
//     for internal/msg's large messages) returns only once the receiver
//     has posted the receive, then enters the same collective call;
//   - a PE with no message just enters the collective call.
//
// The collective calls: Barrier, the Sync of a team made by Split that
// spans both nodes, and a collective allocation (Malloc, whose records
// cross nodes through the leaders). The pairs: across nodes (PE p and
// p^2), each node receiving in turn; and within a node (PE p and p^1, a
// receive from AnySource, which waits in the same queue as receives from
// other nodes). Sizes: an eager message, one just above the rendezvous
// threshold (64 KiB), and 4 MiB. Were receives matched only by their
// PE's message calls, the receiver would wait in the collective call for
// the sender, and the sender in Send for the receiver: each case runs
// under the matrix's watchdog, which names it if it hangs.
func checkClusterMsgProgress(t *testing.T, pe *PE) {
	me, n := pe.Rank(), pe.Size()
	if n != 4 || pe.Nodes() != 2 || pe.Node(me^2) == pe.Node(me) || pe.Node(me^1) != pe.Node(me) {
		t.Fatalf("msgprogress needs 2 nodes of 2 PEs, PE p's partners p^1 on its node and p^2 on the other (PE %d of %d)", me, n)
	}
	all, err := pe.World().Split(0, 1, n)
	if err != nil {
		t.Fatal(err)
	}
	waits := []struct {
		name string
		call func() error
	}{
		{"Barrier", pe.Barrier},
		{"Sync of a team across nodes", all.Sync},
		{"Malloc", func() error {
			x, err := Malloc[int64](pe, 8)
			if err != nil {
				return err
			}
			x[0] = int64(me) // the allocation is usable
			return Free(pe, x)
		}},
	}
	type pairing struct {
		name      string
		receiver  func(p int) bool // PE p receives
		partner   func(p int) int  // the PE it pairs with
		anySource bool
	}
	var pairings []pairing
	for recvNode := range 2 {
		for _, anySrc := range []bool{false, true} {
			pairings = append(pairings, pairing{
				name:      fmt.Sprintf("node %d receives from node %d", recvNode, 1-recvNode),
				receiver:  func(p int) bool { return pe.Node(p) == recvNode },
				partner:   func(p int) int { return p ^ 2 },
				anySource: anySrc,
			})
		}
	}
	pairings = append(pairings, pairing{
		name:      "within each node, the even PE receives from the odd one",
		receiver:  func(p int) bool { return p%2 == 0 },
		partner:   func(p int) int { return p ^ 1 },
		anySource: true,
	})
	sizes := []int{1 << 10, 64 << 10, 4 << 20}
	sendBuf, recvBuf := make([]byte, sizes[len(sizes)-1]), make([]byte, sizes[len(sizes)-1]+matrixSlack)
	cases := 0
	for _, w := range waits {
		for _, pr := range pairings {
			for _, size := range sizes {
				cases++
				tag := 5000 + cases
				src, how := pr.partner(me), "from it"
				if pr.anySource {
					src, how = AnySource, "from AnySource"
				}
				role := fmt.Sprintf("PE %d posted a receive of %d B %s before %s and PE %d sent to it, then entered %s",
					pr.partner(me), size, how, w.name, me, w.name)
				if pr.receiver(me) {
					role = fmt.Sprintf("PE %d posted a receive of %d B %s before %s, PE %d sent to it, then entered %s",
						me, size, how, w.name, pr.partner(me), w.name)
				}
				name := fmt.Sprintf("msgprogress case %d at PE %d (%s: %s)", cases, me, pr.name, role)
				stop := hangWatchdog(name)
				var req *Request
				if pr.receiver(me) {
					b := recvBuf[:size+matrixSlack]
					for i := size; i < len(b); i++ {
						b[i] = 0xa5
					}
					if req, err = pe.Irecv(b, src, tag); err != nil {
						t.Fatalf("%s: Irecv: %v", name, err)
					}
				} else {
					b := sendBuf[:size]
					fillPattern(b, me, tag, 0)
					if err := pe.Send(b, pr.partner(me), tag); err != nil {
						t.Fatalf("%s: Send to PE %d: %v", name, pr.partner(me), err)
					}
				}
				if err := w.call(); err != nil {
					t.Fatalf("%s: %s: %v", name, w.name, err)
				}
				if req != nil {
					st, err := req.Wait()
					if err != nil {
						t.Fatalf("%s: Wait: %v", name, err)
					}
					from := pr.partner(me)
					b := recvBuf[:size+matrixSlack]
					if st.Source != from || st.Tag != tag || st.Count != size {
						t.Errorf("%s: status %+v, want source %d, tag %d, %d B", name, st, from, tag, size)
					} else if off := checkPattern(b[:size], from, tag, 0); off >= 0 {
						t.Errorf("%s: byte %d of %d differs from what PE %d sent", name, off, size, from)
					}
					for i := size; i < len(b); i++ {
						if b[i] != 0xa5 {
							t.Errorf("%s: the message wrote byte %d of its buffer, past its end", name, i)
							break
						}
					}
				}
				stop()
				if t.Failed() {
					return
				}
			}
		}
	}
	if err := all.Destroy(); err != nil {
		t.Fatal(err)
	}
	t.Logf("PE %d: %d cases of a receive posted before a collective call", me, cases)
}
