// Package nettest is the conformance suite of transport.Net: Run checks,
// through the interface only, what every transport must do (as
// testing/fstest.TestFS does for file systems), so that the layers above
// can be written once against the interface.
//
// Each subtest opens the Nets it needs with the caller's open function:
// n Nets of one job, Net i being rank i, each having registered
//
//   - region 0 of HeapSize bytes and region 1 of ControlSize bytes, both
//     zero;
//   - region 2, empty;
//
// with Config.Timeout 0 (or long), Config.Announced and Config.Lost nil.
// open must close them when its test ends (t.Cleanup); Close must be
// idempotent, as a subtest closes Nets itself. While a subtest runs, a
// goroutine per Net calls Sleep in a loop, as the runtime's progress
// goroutine does, unless the subtest says otherwise.
package nettest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/transport"
)

// The regions every Net given to Run has registered.
const (
	HeapSize    = 2 << 20 // region 0
	ControlSize = 4096    // region 1
)

// Open opens n Nets of one job (see the package doc).
type Open func(t *testing.T, n int) []transport.Net

// guard is how long a subtest waits for something that must happen
// before it declares it will not: a bound for a hang, not a measure of
// speed.
const guard = 2 * time.Minute

// Run runs the conformance suite against the transport open opens.
func Run(t *testing.T, open Open) {
	tests := []struct {
		name string
		n    int
		f    func(t *testing.T, nets []transport.Net)
	}{
		{"PutGet", 3, testPutGet},
		{"PutGetSelf", 1, testPutGetSelf},
		{"OutOfRange", 2, testOutOfRange},
		{"AMO", 2, testAMO},
		{"FetchAddAll", 4, testFetchAddAll},
		{"NBIFlush", 2, testNBIFlush},
		{"TagMask", 2, testTagMask},
		{"Wildcard", 3, testWildcard},
		{"SenderOrder", 2, testSenderOrder},
		{"EarliestArrived", 3, testEarliestArrived},
		{"TooBig", 2, testTooBig},
		{"NonBlocking", 2, testNonBlocking},
		{"Probe", 2, testProbe},
		{"RecvMatchNone", 1, testRecvMatchNone},
		{"MessageSizes", 2, testMessageSizes},
		{"SelfMessage", 1, testSelfMessage},
		{"Outstanding", 2, testOutstanding},
		{"WatchAnnounce", 3, testWatchAnnounce},
		{"SleepAfterPut", 2, testSleepAfterPut},
		{"Describe", 2, testDescribe},
		{"Close", 2, testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nets := open(t, tc.n)
			if len(nets) != tc.n {
				t.Fatalf("open(%d) gave %d Nets", tc.n, len(nets))
			}
			if tc.name == "SleepAfterPut" {
				progress(t, nets[:1]) // the test is net 1's only Sleep
			} else {
				progress(t, nets)
			}
			tc.f(t, nets)
		})
	}
}

// progress runs a progress goroutine per Net until the test ends.
func progress(t *testing.T, nets []transport.Net) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, n := range nets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				n.Sleep(time.Millisecond)
			}
		}()
	}
	// Registered after open's cleanup: runs before it, so the goroutines
	// end before the Nets close.
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
	})
}

func fill(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// get reads n bytes at off of peer's region r through net.
func get(t *testing.T, net transport.Net, peer int, r transport.Region, off uint64, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	must(t, fmt.Sprintf("Get(%d bytes at %d of region %d of peer %d)", n, off, r, peer), net.Get(b, peer, r, off))
	return b
}

func testPutGet(t *testing.T, nets []transport.Net) {
	for i, size := range []int{0, 1, 8, 4096, 1 << 20} {
		for _, r := range []transport.Region{transport.RegionHeap, transport.RegionControl} {
			limit := HeapSize
			if r == transport.RegionControl {
				limit = ControlSize
			}
			if size > limit {
				continue
			}
			off := uint64(limit-size) / 2
			data := fill(uint64(i), size)
			must(t, "Put", nets[0].Put(1, r, off, data, false))
			must(t, "Flush", nets[0].Flush())
			if got := get(t, nets[0], 1, r, off, size); !bytes.Equal(got, data) {
				t.Fatalf("%d bytes put to region %d of peer 1 read back differently", size, r)
			}
			// A third PE sees them too.
			if got := get(t, nets[2], 1, r, off, size); !bytes.Equal(got, data) {
				t.Fatalf("%d bytes put to region %d of peer 1 by peer 0 read differently by peer 2", size, r)
			}
		}
	}
	// The last byte of the heap, and a get of nothing at the end.
	must(t, "Put at the end", nets[1].Put(0, 0, HeapSize-1, []byte{0x5a}, false))
	must(t, "Flush", nets[1].Flush())
	if got := get(t, nets[1], 0, 0, HeapSize-1, 1); got[0] != 0x5a {
		t.Fatalf("last byte of the heap: %#x, want 0x5a", got[0])
	}
	must(t, "Get of 0 bytes at the end", nets[1].Get(nil, 0, 0, HeapSize))
}

func testPutGetSelf(t *testing.T, nets []transport.Net) {
	for i, size := range []int{0, 1, 8, 4096, 1 << 20} {
		data := fill(uint64(100+i), size)
		must(t, "Put to self", nets[0].Put(0, 0, 64, data, false))
		must(t, "Flush", nets[0].Flush())
		if got := get(t, nets[0], 0, 0, 64, size); !bytes.Equal(got, data) {
			t.Fatalf("%d bytes put to self read back differently", size)
		}
	}
	old, err := nets[0].Atomic(transport.AMOFetchAdd, 0, 1, 8, 8, 5, 0)
	must(t, "fetch-add on self", err)
	if old != 0 {
		t.Fatalf("fetch-add on a zero word of self returned %d", old)
	}
	if v, err := nets[0].Atomic(transport.AMOFetch, 0, 1, 8, 8, 0, 0); err != nil || v != 5 {
		t.Fatalf("fetch on self: %d, %v; want 5", v, err)
	}
}

func testOutOfRange(t *testing.T, nets []transport.Net) {
	n := nets[0]
	pattern := fill(9, 64)
	must(t, "Put", n.Put(1, 0, HeapSize-64, pattern, false))
	must(t, "Put", n.Put(1, 1, 0, pattern, false))
	must(t, "Flush", n.Flush())
	// errOf is the error of a call, or else of the Flush after it (an
	// operation without reply may be refused there).
	errOf := func(err error) error {
		if err != nil {
			return err
		}
		return n.Flush()
	}
	cases := []struct {
		what string
		err  func() error
	}{
		{"Put past the heap's end", func() error { return errOf(n.Put(1, 0, HeapSize-4, make([]byte, 8), false)) }},
		{"nbi Put past the heap's end", func() error { return errOf(n.Put(1, 0, HeapSize-4, make([]byte, 8), true)) }},
		{"Put at a huge offset", func() error { return errOf(n.Put(1, 0, 1<<63, make([]byte, 1), false)) }},
		{"Put with an offset that wraps", func() error { return errOf(n.Put(1, 0, ^uint64(0)-2, make([]byte, 8), false)) }},
		{"Put to region 2 (empty)", func() error { return errOf(n.Put(1, 2, 0, make([]byte, 1), false)) }},
		{"Put to region 7 (none)", func() error { return errOf(n.Put(1, 7, 0, make([]byte, 1), false)) }},
		{"Put to region -1", func() error { return errOf(n.Put(1, -1, 0, make([]byte, 1), false)) }},
		{"Get past the control region's end", func() error { return n.Get(make([]byte, 8), 1, 1, ControlSize-4) }},
		{"Get from region 2 (empty)", func() error { return n.Get(make([]byte, 1), 1, 2, 0) }},
		{"Get from region 7 (none)", func() error { return n.Get(make([]byte, 1), 1, 7, 0) }},
		{"misaligned fetch-add", func() error {
			_, err := n.Atomic(transport.AMOFetchAdd, 1, 0, HeapSize-61, 8, 1, 0)
			return err
		}},
		{"misaligned add", func() error {
			_, err := n.Atomic(transport.AMOAdd, 1, 0, HeapSize-62, 4, 1, 0)
			return errOf(err)
		}},
		{"atomic on 2 bytes", func() error {
			_, err := n.Atomic(transport.AMOFetchAdd, 1, 0, HeapSize-64, 2, 1, 0)
			return err
		}},
		{"atomic past the end", func() error {
			_, err := n.Atomic(transport.AMOSwap, 1, 1, ControlSize, 8, 1, 0)
			return err
		}},
		{"atomic op 0", func() error {
			_, err := n.Atomic(0, 1, 0, HeapSize-64, 8, 1, 0)
			return errOf(err)
		}},
		{"atomic op 200", func() error {
			_, err := n.Atomic(200, 1, 0, HeapSize-64, 8, 1, 0)
			return errOf(err)
		}},
		{"Put to peer 2 (none)", func() error { return n.Put(2, 0, 0, make([]byte, 1), false) }},
		{"Get from peer -1", func() error { return n.Get(make([]byte, 1), -1, 0, 0) }},
	}
	for _, c := range cases {
		if err := c.err(); err == nil {
			t.Errorf("%s: no error", c.what)
		}
	}
	// Nothing changed, and the Net still works.
	must(t, "Flush after the refusals", errors.Join(n.Flush(), n.Flush()))
	if got := get(t, n, 1, 0, HeapSize-64, 64); !bytes.Equal(got, pattern) {
		t.Errorf("the heap's last 64 bytes changed:\n got %x\nwant %x", got, pattern)
	}
	if got := get(t, n, 1, 1, 0, 64); !bytes.Equal(got, pattern) {
		t.Errorf("the control region's first 64 bytes changed")
	}
}

// amoCase is an atomic with its known result on a word holding init.
type amoCase struct {
	op        transport.AMO
	init      uint64
	v, cmp    uint64
	old, want uint64 // the result (fetching ops) and the word after
}

func amoCases(size int) []amoCase {
	m := ^uint64(0)
	if size == 4 {
		m = 0xffffffff
	}
	a, b := uint64(0x0123456789abcdef)&m, uint64(0xf0f0f0f00ff00ff0)&m
	return []amoCase{
		{transport.AMOFetch, a, 0, 0, a, a},
		{transport.AMOSet, a, b, 0, a, b},
		{transport.AMOSwap, a, b, 0, a, b},
		{transport.AMOCompareSwap, a, b, a, a, b},     // matches: swapped
		{transport.AMOCompareSwap, a, b, a + 1, a, a}, // does not: unchanged
		{transport.AMOFetchAdd, a, b, 0, a, (a + b) & m},
		{transport.AMOFetchAdd, m, 2, 0, m, 1}, // wraps
		{transport.AMOFetchAnd, a, b, 0, a, a & b},
		{transport.AMOFetchOr, a, b, 0, a, a | b},
		{transport.AMOFetchXor, a, b, 0, a, a ^ b},
		{transport.AMOAdd, a, b, 0, 0, (a + b) & m},
		{transport.AMOAnd, a, b, 0, 0, a & b},
		{transport.AMOOr, a, b, 0, 0, a | b},
		{transport.AMOXor, a, b, 0, 0, a ^ b},
	}
}

func testAMO(t *testing.T, nets []transport.Net) {
	n := nets[0]
	const off = 256 // the word; the 8 bytes on each side are a sentinel
	sentinel := bytes.Repeat([]byte{0xa5}, 24)
	for _, size := range []int{4, 8} {
		for _, c := range amoCases(size) {
			word := make([]byte, 24)
			copy(word, sentinel)
			if size == 4 {
				binary.LittleEndian.PutUint32(word[8:], uint32(c.init))
			} else {
				binary.LittleEndian.PutUint64(word[8:], c.init)
			}
			must(t, "Put", n.Put(1, 0, off-8, word, false))
			must(t, "Flush", n.Flush())
			old, err := n.Atomic(c.op, 1, 0, off, size, c.v, c.cmp)
			must(t, fmt.Sprintf("atomic %d on %d bytes", c.op, size), err)
			must(t, "Flush", n.Flush())
			if old != c.old { // 0 for the non-fetching ops
				t.Errorf("atomic %d on %d bytes of %#x with %#x, %#x: returned %#x, want %#x", c.op, size, c.init, c.v, c.cmp, old, c.old)
			}
			got := get(t, n, 1, 0, off-8, 24)
			var v uint64
			if size == 4 {
				v = uint64(binary.LittleEndian.Uint32(got[8:]))
			} else {
				v = binary.LittleEndian.Uint64(got[8:])
			}
			if v != c.want {
				t.Errorf("atomic %d on %d bytes of %#x with %#x, %#x: word %#x, want %#x", c.op, size, c.init, c.v, c.cmp, v, c.want)
			}
			if !bytes.Equal(got[:8], sentinel[:8]) || !bytes.Equal(got[8+size:], sentinel[8+size:]) {
				t.Errorf("atomic %d on %d bytes changed the bytes beside its word: %x", c.op, size, got)
			}
		}
	}
}

func testFetchAddAll(t *testing.T, nets []transport.Net) {
	const each = 200
	const off = 512
	olds := make([][]uint64, len(nets))
	var wg sync.WaitGroup
	errs := make([]error, len(nets))
	for i, n := range nets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				old, err := n.Atomic(transport.AMOFetchAdd, 0, 0, off, 8, 1, 0)
				if err != nil {
					errs[i] = err
					return
				}
				olds[i] = append(olds[i], old)
				// A 4-byte counter beside it, by the non-fetching add.
				if _, err := n.Atomic(transport.AMOAdd, 0, 0, off+8, 4, 1, 0); err != nil {
					errs[i] = err
					return
				}
			}
			errs[i] = n.Flush()
		}()
	}
	wg.Wait()
	must(t, "fetch-adds", errors.Join(errs...))
	all := slices.Concat(olds...)
	slices.Sort(all)
	for i, v := range all {
		if v != uint64(i) {
			t.Fatalf("the fetch-adds of %d PEs returned %d as the %d-th smallest value: not each of 0..%d once", len(nets), v, i, len(all)-1)
		}
	}
	got := get(t, nets[1], 0, 0, off, 12)
	if v := binary.LittleEndian.Uint64(got); v != uint64(len(nets)*each) {
		t.Fatalf("counter %d after %d fetch-adds", v, len(nets)*each)
	}
	if v := binary.LittleEndian.Uint32(got[8:]); v != uint32(len(nets)*each) {
		t.Fatalf("4-byte counter %d after %d adds", v, len(nets)*each)
	}
}

func testNBIFlush(t *testing.T, nets []transport.Net) {
	n := nets[0]
	bufs := make([][]byte, 16)
	for i := range bufs {
		bufs[i] = fill(uint64(i), 4096+i)
		must(t, "nbi Put", n.Put(1, 0, uint64(i)*8192, bufs[i], true))
		_, err := n.Atomic(transport.AMOAdd, 1, 1, 0, 8, uint64(i), 0)
		must(t, "add", err)
		_, err = n.Atomic(transport.AMOOr, 1, 1, 8, 4, 1<<i, 0)
		must(t, "or", err)
	}
	must(t, "Fence", n.Fence())
	must(t, "Flush", n.Flush())
	for i := range bufs {
		if got := get(t, nets[1], 1, 0, uint64(i)*8192, len(bufs[i])); !bytes.Equal(got, bufs[i]) {
			t.Fatalf("nbi put %d not visible after Flush", i)
		}
	}
	got := get(t, nets[1], 1, 1, 0, 12)
	if v := binary.LittleEndian.Uint64(got); v != 120 {
		t.Fatalf("sum of the adds %d, want 120", v)
	}
	if v := binary.LittleEndian.Uint32(got[8:]); v != 0xffff {
		t.Fatalf("or of the bits %#x, want 0xffff", v)
	}
	// Fence orders a put after a put: the later value wins.
	for i := range 50 {
		must(t, "Put", n.Put(1, 0, 0, []byte{byte(i)}, true))
		must(t, "Fence", n.Fence())
	}
	must(t, "Flush", n.Flush())
	if got := get(t, n, 1, 0, 0, 1); got[0] != 49 {
		t.Fatalf("after 50 fenced puts the byte is %d, want 49", got[0])
	}
}

// recv receives a message with a buffer of size bytes, failing the test
// on error.
func recv(t *testing.T, n transport.Net, size int, tag, mask uint64, from int) ([]byte, uint64) {
	t.Helper()
	buf := make([]byte, size)
	l, stag, err := n.Recv(buf, tag, mask, from, nil)
	must(t, fmt.Sprintf("Recv(tag %#x mask %#x from %d)", tag, mask, from), err)
	return buf[:l], stag
}

func testTagMask(t *testing.T, nets []transport.Net) {
	a, b := nets[0], nets[1]
	must(t, "Send", a.Send(1, 0x0102, []byte("first"), nil))
	must(t, "Send", a.Send(1, 0x0201, []byte("second"), nil))
	must(t, "Send", a.Send(1, 0x0303, []byte("third"), nil))
	// Agrees on the high byte only: the second.
	if m, stag := recv(t, b, 16, 0x0200, 0xff00, 0); string(m) != "second" || stag != 0x0201 {
		t.Fatalf("mask 0xff00 tag 0x0200 received %q tag %#x", m, stag)
	}
	// The exact tag.
	if m, stag := recv(t, b, 16, 0x0303, ^uint64(0), -1); string(m) != "third" || stag != 0x0303 {
		t.Fatalf("exact tag 0x0303 received %q tag %#x", m, stag)
	}
	if m, _ := recv(t, b, 16, 0, 0, 0); string(m) != "first" {
		t.Fatalf("mask 0 received %q", m)
	}
}

func testWildcard(t *testing.T, nets []transport.Net) {
	// A receive posted before the message arrives takes it.
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 16)
		l, _, err := nets[0].Recv(buf, 0, 0, -1, nil)
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(buf[:l])
	}()
	must(t, "Send", nets[2].Send(0, 77, []byte("any"), nil))
	select {
	case s := <-got:
		if s != "any" {
			t.Fatalf("wildcard receive: %q", s)
		}
	case <-time.After(guard):
		t.Fatal("a posted wildcard receive took nothing")
	}
}

func testSenderOrder(t *testing.T, nets []transport.Net) {
	const count = 300
	done := make(chan error, 1)
	go func() {
		for i := range count {
			size := 8 + i*61%5000
			b := fill(uint64(i), size)
			binary.LittleEndian.PutUint64(b, uint64(i))
			if err := nets[0].Send(1, 5, b, nil); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for i := range count {
		m, _ := recv(t, nets[1], 8192, 5, ^uint64(0), 0)
		if got := binary.LittleEndian.Uint64(m); got != uint64(i) {
			t.Fatalf("message %d received as the %d-th", got, i)
		}
	}
	must(t, "sends", <-done)
}

// arrived waits until n has a message matching tag under mask.
func arrived(t *testing.T, n transport.Net, tag, mask uint64) {
	t.Helper()
	if _, _, err := n.Probe(tag, mask, -1, nil); err != nil {
		t.Fatal(err)
	}
}

func testEarliestArrived(t *testing.T, nets []transport.Net) {
	must(t, "Send", nets[2].Send(0, 0x20, []byte("from 2"), nil))
	arrived(t, nets[0], 0x20, ^uint64(0))
	must(t, "Send", nets[1].Send(0, 0x10, []byte("from 1"), nil))
	arrived(t, nets[0], 0x10, ^uint64(0))
	if stag, _, ok := nets[0].TryProbe(0, 0); !ok || stag != 0x20 {
		t.Fatalf("TryProbe with mask 0: tag %#x, %v; want the earliest, 0x20", stag, ok)
	}
	if m, _ := recv(t, nets[0], 16, 0, 0, -1); string(m) != "from 2" {
		t.Fatalf("earliest arrived: %q, want from 2", m)
	}
	if m, _ := recv(t, nets[0], 16, 0, 0, -1); string(m) != "from 1" {
		t.Fatalf("then: %q, want from 1", m)
	}
}

func testTooBig(t *testing.T, nets []transport.Net) {
	a, b := nets[0], nets[1]
	msg := fill(3, 100)
	must(t, "Send", a.Send(1, 9, msg, nil))
	arrived(t, b, 9, ^uint64(0))
	buf := make([]byte, 200)
	// Too big for max: stays queued.
	out, stag, l, err := b.RecvMatch(buf, 9, ^uint64(0), 50, 0)
	must(t, "RecvMatch", err)
	if out != transport.MatchOther || stag != 9 || l != 100 {
		t.Fatalf("RecvMatch of 100 bytes with max 50: %d, tag %d, %d bytes; want MatchOther, 9, 100", out, stag, l)
	}
	// Too big for the buffer: stays queued.
	out, _, _, err = b.RecvMatch(buf[:99], 9, ^uint64(0), 1000, 0)
	must(t, "RecvMatch", err)
	if out != transport.MatchOther {
		t.Fatalf("RecvMatch of 100 bytes into 99: %d, want MatchOther", out)
	}
	if _, l, ok := b.TryProbe(9, ^uint64(0)); !ok || l != 100 {
		t.Fatalf("the message left by RecvMatch: TryProbe %d bytes, %v", l, ok)
	}
	out, stag, l, err = b.RecvMatch(buf, 9, ^uint64(0), 100, 0)
	must(t, "RecvMatch", err)
	if out != transport.MatchReceived || stag != 9 || l != 100 || !bytes.Equal(buf[:l], msg) {
		t.Fatalf("RecvMatch that fits: %d, tag %d, %d bytes", out, stag, l)
	}
	// Recv into a buffer too short is an error.
	must(t, "Send", a.Send(1, 10, msg, nil))
	if _, _, err := b.Recv(make([]byte, 10), 10, ^uint64(0), 0, nil); err == nil {
		t.Fatal("Recv of 100 bytes into 10: no error")
	}
}

func testNonBlocking(t *testing.T, nets []transport.Net) {
	a, b := nets[0], nets[1]
	for i, size := range []int{0, 10, 100 << 10, 3 << 20} {
		msg := fill(uint64(i), size)
		tag := uint64(1000 + i)
		s, err := a.SendNB(1, tag, msg)
		must(t, "SendNB", err)
		var stag uint64
		var l int
		var ok bool
		deadline := time.Now().Add(guard)
		for {
			if stag, l, ok = b.TryProbe(tag, ^uint64(0)); ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a message of %d bytes never arrived", size)
			}
			b.WaitEvent()
			a.Test(s, 1) // a sender may need to be tested to progress
		}
		if stag != tag || l != size {
			t.Fatalf("TryProbe: tag %d, %d bytes; want %d, %d", stag, l, tag, size)
		}
		buf := make([]byte, l)
		r, err := b.RecvNB(buf, stag)
		must(t, "RecvNB", err)
		for rd, sd := false, false; !rd || !sd; {
			if time.Now().After(deadline) {
				t.Fatalf("a message of %d bytes never completed", size)
			}
			if !rd {
				done, n, err := b.Test(r, 0)
				must(t, "Test of the receive", err)
				if done && n != size {
					t.Fatalf("receive of %d bytes completed with %d", size, n)
				}
				rd = done
			}
			if !sd {
				done, _, err := a.Test(s, 1)
				must(t, "Test of the send", err)
				sd = done
			}
			a.WaitEvent()
		}
		if !bytes.Equal(buf, msg) {
			t.Fatalf("a message of %d bytes arrived changed", size)
		}
	}
}

func testProbe(t *testing.T, nets []transport.Net) {
	if _, _, ok := nets[1].TryProbe(0, 0); ok {
		t.Fatal("TryProbe found a message in a new Net")
	}
	go func() {
		time.Sleep(5 * time.Millisecond)
		nets[0].Send(1, 0xabc, []byte("probed"), nil)
	}()
	stag, l, err := nets[1].Probe(0xa00, 0xf00, 0, nil)
	must(t, "Probe", err)
	if stag != 0xabc || l != 6 {
		t.Fatalf("Probe: tag %#x, %d bytes", stag, l)
	}
	// Left to be received.
	if m, _ := recv(t, nets[1], 6, stag, ^uint64(0), 0); string(m) != "probed" {
		t.Fatalf("received %q", m)
	}
	// A check's error ends a Probe.
	stop := errors.New("stop")
	if _, _, err := nets[1].Probe(1, ^uint64(0), 0, func() error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("Probe with a failing check: %v", err)
	}
	if _, _, err := nets[1].Recv(nil, 1, ^uint64(0), 0, func() error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("Recv with a failing check: %v", err)
	}
}

func testRecvMatchNone(t *testing.T, nets []transport.Net) {
	out, _, _, err := nets[0].RecvMatch(make([]byte, 8), 1, ^uint64(0), 8, 0)
	if err != nil || out != transport.MatchNone {
		t.Fatalf("RecvMatch with nothing sent: %d, %v", out, err)
	}
}

func testMessageSizes(t *testing.T, nets []transport.Net) {
	sizes := []int{0, 1, 7, 8, 4096, 16 << 10, 16<<10 + 1, 65536, 1 << 20, 4 << 20}
	done := make(chan error, 1)
	go func() {
		for i, size := range sizes {
			if err := nets[0].Send(1, uint64(i), fill(uint64(i), size), nil); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for i, size := range sizes {
		m, stag := recv(t, nets[1], 4<<20, uint64(i), ^uint64(0), 0)
		if stag != uint64(i) || !bytes.Equal(m, fill(uint64(i), size)) {
			t.Fatalf("message of %d bytes: received %d bytes, tag %d", size, len(m), stag)
		}
	}
	must(t, "sends", <-done)
}

func testSelfMessage(t *testing.T, nets []transport.Net) {
	for i, size := range []int{0, 5, 1 << 20} {
		msg := fill(uint64(i), size)
		s, err := nets[0].SendNB(0, 42, msg)
		must(t, "SendNB to self", err)
		m, _ := recv(t, nets[0], size, 42, ^uint64(0), 0)
		if !bytes.Equal(m, msg) {
			t.Fatalf("a message of %d bytes to self arrived changed", size)
		}
		for {
			done, _, err := nets[0].Test(s, 0)
			must(t, "Test", err)
			if done {
				break
			}
			nets[0].WaitEvent()
		}
	}
}

func testOutstanding(t *testing.T, nets []transport.Net) {
	const count = 64
	size := func(i int) int { return 1 + i*2039%(80<<10) }
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for me := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, peer := nets[me], 1-me
			var sends, recvs []transport.Req
			bufs := make([][]byte, count)
			for i := range count {
				s, err := n.SendNB(peer, uint64(i), fill(uint64(me*count+i), size(i)))
				if err != nil {
					errs[me] = err
					return
				}
				sends = append(sends, s)
			}
			for i := range count {
				stag, l, err := n.Probe(uint64(i), ^uint64(0), peer, nil)
				if err != nil {
					errs[me] = err
					return
				}
				bufs[i] = make([]byte, l)
				r, err := n.RecvNB(bufs[i], stag)
				if err != nil {
					errs[me] = err
					return
				}
				recvs = append(recvs, r)
			}
			deadline := time.Now().Add(guard)
			for _, r := range slices.Concat(sends, recvs) {
				for {
					done, _, err := n.Test(r, peer)
					if err != nil {
						errs[me] = err
						return
					}
					if done {
						break
					}
					if time.Now().After(deadline) {
						errs[me] = errors.New("requests never completed")
						return
					}
					n.WaitEvent()
				}
			}
			for i, b := range bufs {
				if !bytes.Equal(b, fill(uint64(peer*count+i), size(i))) {
					errs[me] = fmt.Errorf("message %d arrived changed", i)
					return
				}
			}
		}()
	}
	wg.Wait()
	must(t, "64 outstanding each way", errors.Join(errs...))
}

func testWatchAnnounce(t *testing.T, nets []transport.Net) {
	const tag = 0x7700000000000000
	for _, n := range nets[1:] {
		must(t, "Watch", n.Watch(tag, 0xff<<56))
		if _, ok := n.Watched(); ok {
			t.Fatal("Watched before any announcement")
		}
	}
	// Announce makes no connection: to a peer not connected to, nothing
	// goes. Messages from one sender arrive in order, so had the first
	// gone, it would be the one Watched reports.
	nets[0].Announce([]int{1, 2}, tag|5, 0x99, true)
	must(t, "Connect", nets[0].Connect([]int{1, 2}))
	nets[0].Announce([]int{1, 2}, tag|5, 0x1234, true)
	for _, n := range nets[1:] {
		deadline := time.Now().Add(guard)
		for {
			if v, ok := n.Watched(); ok {
				if v != 0x1234 {
					t.Fatalf("Watched: %#x, want 0x1234", v)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("an announcement never arrived")
			}
			n.WaitEvent()
		}
		if v, ok := n.Sleep(time.Hour); !ok || v != 0x1234 {
			t.Fatalf("Sleep after an announcement: %#x, %v", v, ok)
		}
		// Every wait now ends.
		if _, _, err := n.Recv(nil, 1, ^uint64(0), 0, nil); err == nil {
			t.Fatal("Recv after an announcement: no error")
		}
		if err := n.Check(-1); err == nil {
			t.Fatal("Check after an announcement: no error")
		}
	}
	// The announcement was not queued as a message.
	if _, _, ok := nets[1].TryProbe(tag, 0xff<<56); ok {
		t.Fatal("the watched announcement is also in the queue")
	}
}

func testSleepAfterPut(t *testing.T, nets []transport.Net) {
	nets[1].Sleep(0) // what came before
	woke := make(chan struct{})
	go func() {
		nets[1].Sleep(time.Hour)
		close(woke)
	}()
	must(t, "Put", nets[0].Put(1, 0, 0, []byte{1}, false))
	must(t, "Flush", nets[0].Flush())
	select {
	case <-woke:
	case <-time.After(guard):
		t.Fatal("Sleep(an hour) did not return after an incoming put")
	}
	if err := nets[0].Check(1); err != nil {
		t.Fatalf("Check of a live peer: %v", err)
	}
	if p, err := nets[0].Failed(); p >= 0 || err != nil {
		t.Fatalf("Failed with live peers: %d, %v", p, err)
	}
}

func testDescribe(t *testing.T, nets []transport.Net) {
	for p := range 2 {
		s, err := nets[0].Describe(p)
		if err != nil || s == "" {
			t.Fatalf("Describe(%d): %q, %v", p, s, err)
		}
	}
	if _, err := nets[0].Describe(5); err == nil {
		t.Fatal("Describe of peer 5 of 2: no error")
	}
}

func testClose(t *testing.T, nets []transport.Net) {
	n := nets[0]
	must(t, "Put", n.Put(1, 0, 0, []byte{1}, false))
	must(t, "Flush", n.Flush())
	n.Close()
	n.Close()
	b := make([]byte, 8)
	_, aerr := n.Atomic(transport.AMOFetchAdd, 1, 0, 0, 8, 1, 0)
	_, serr := n.SendNB(1, 1, b)
	_, _, rerr := n.Recv(b, 1, ^uint64(0), 1, nil)
	_, _, perr := n.Probe(1, ^uint64(0), 1, nil)
	_, rnberr := n.RecvNB(b, 1)
	_, derr := n.Describe(1)
	for what, err := range map[string]error{
		"Put":      n.Put(1, 0, 0, b, false),
		"nbi Put":  n.Put(1, 0, 0, b, true),
		"Get":      n.Get(b, 1, 0, 0),
		"Atomic":   aerr,
		"Send":     n.Send(1, 1, b, nil),
		"SendNB":   serr,
		"Recv":     rerr,
		"RecvNB":   rnberr,
		"Probe":    perr,
		"Flush":    n.Flush(),
		"Watch":    n.Watch(1, 1),
		"Describe": derr,
	} {
		if err == nil {
			t.Errorf("%s after Close: no error", what)
		}
	}
	// These do not fail, and do not hang or panic.
	n.TryProbe(0, 0)
	n.Progress()
	n.WaitEvent()
	n.Watched()
	n.Check(1)
	n.Failed()
	n.Announce([]int{1}, 1, 1, true)
	n.RecvMatch(b, 0, 0, 8, 1)
	// The peer still works.
	must(t, "Put to self after the peer closed", nets[1].Put(1, 0, 0, []byte{2}, false))
	must(t, "Flush", nets[1].Flush())
}
