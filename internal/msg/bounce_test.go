package msg

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/segment"
)

// Tests of the bounce buffers' handling (xfer.go, "Bounce buffers") on a
// lone PE sending to itself over a real segment, with a Runtime whose
// shared heap is a bump allocator the test controls. The root package's
// tests run every path between real PEs.

// testRuntime is a Runtime over one PE's segment. Its shared heap hands
// out the first cap bytes, and takes back only the block handed out last
// (enough for a transfer at a time).
type testRuntime struct {
	seg *segment.Segment

	mu      sync.Mutex
	next    uint64 // bytes handed out
	cap     uint64
	allocs  int
	frees   int
	freeErr error  // FreeBounce's answer
	called  func() // run at the start of AllocBounce and FreeBounce
}

func (rt *testRuntime) Check() error               { return nil }
func (rt *testRuntime) CheckPeers(pes []int) error { return rt.seg.CheckPeers(pes) }
func (rt *testRuntime) Alive(p int) bool           { return rt.seg.Alive(p) }
func (rt *testRuntime) Pid(p int) int              { return rt.seg.Pid(p) }

func (rt *testRuntime) SleepFenced(_ *atomic.Uint32, cond func() bool, check func() error) error {
	for !cond() {
		time.Sleep(50 * time.Microsecond)
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func (rt *testRuntime) AllocBounce(size, align uint64) (core.SharedOff, error) {
	if rt.called != nil {
		rt.called()
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	off := (rt.next + align - 1) &^ (align - 1)
	if off+size > rt.cap {
		return 0, fmt.Errorf("test heap: %d bytes at %d of %d: %w", size, off, rt.cap, errs.ErrOutOfMemory)
	}
	rt.next = off + size
	rt.allocs++
	return core.SharedOff(off), nil
}

func (rt *testRuntime) FreeBounce(off core.SharedOff) error {
	if rt.called != nil {
		rt.called()
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.frees++
	if rt.freeErr != nil {
		return rt.freeErr
	}
	if uint64(off) < rt.next {
		rt.next = uint64(off)
	}
	return nil
}

// bounceLayer makes a Layer of a lone PE that sends every large message
// through bounce buffers from a shared heap of heapCap bytes.
func bounceLayer(t *testing.T, heapCap uint64) (*Layer, *testRuntime) {
	t.Helper()
	const shared = 8 << 20
	seg, err := segment.Open(segment.Params{
		Job:  fmt.Sprintf("msgtest-%d-%d", os.Getpid(), time.Now().UnixNano()),
		NPEs: 1, HeapSize: 1 << 20, SharedSize: shared, CBSize: core.CBSize(1), Allocator: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := seg.Close(); err != nil {
			t.Error(err)
		}
	})
	rt := &testRuntime{seg: seg, cap: min(heapCap, shared)}
	sp := core.NewSpace(seg, 0, 1)
	var l Layer
	err = l.Init(rt, Config{Space: sp, Stats: sp.Stats(0),
		Settings: Settings{Eager: DefaultEagerLimit, EagerShared: DefaultSharedEagerLimit, AllBounce: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return &l, rt
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i%251) + seed
	}
	return b
}

// TestBounceOutsideLock: a bounce send allocates and frees its buffer
// with the messaging lock released. Each call of AllocBounce and
// FreeBounce has another goroutine take the lock; were it held, that
// goroutine would wait until the call returned, and the call times out
// waiting for it.
func TestBounceOutsideLock(t *testing.T) {
	l, rt := bounceLayer(t, 8<<20)
	var locked atomic.Int32
	rt.called = func() {
		done := make(chan struct{})
		go func() {
			l.Counters() // takes the lock
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			locked.Add(1)
		}
	}
	for _, n := range []int{DefaultEagerLimit + 1, 1 << 20, 3<<20 + 5} {
		out := pattern(n, byte(n))
		s, err := l.Isend(out, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		in := make([]byte, n)
		st, err := l.Recv(in, 0, 1)
		if err != nil || st != (Status{0, 1, n}) {
			t.Fatalf("%d bytes: Recv: %+v, %v", n, st, err)
		}
		if !bytes.Equal(in, out) {
			t.Fatalf("%d bytes: the message arrived corrupt", n)
		}
		if _, err := s.Wait(); err != nil {
			t.Fatalf("%d bytes: send: %v", n, err)
		}
	}
	if n := locked.Load(); n != 0 {
		t.Errorf("%d calls of AllocBounce or FreeBounce with the messaging lock held", n)
	}
	if rt.allocs != 3 || rt.frees != 3 {
		t.Errorf("%d buffers allocated, %d freed, want 3 and 3", rt.allocs, rt.frees)
	}
	if b := l.stats.MsgBounce.Load(); b != 3 {
		t.Errorf("%d bounce sends counted, want 3", b)
	}
}

// TestBounceFreeError: a bounce buffer whose free fails (the heap's
// metadata was overwritten) ends the send that used it with the error;
// the message itself was delivered. A failed send's buffer whose free
// fails breaks the layer: every wait fails with the error.
func TestBounceFreeError(t *testing.T) {
	l, rt := bounceLayer(t, 8<<20)
	rt.freeErr = fmt.Errorf("test heap: a header was overwritten: %w", errs.ErrBadFree)
	out := pattern(1<<20, 3)
	s, err := l.Isend(out, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	in := make([]byte, len(out))
	if _, err := l.Recv(in, 0, 2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(in, out) {
		t.Fatal("the message arrived corrupt")
	}
	_, err = s.Wait()
	if !errors.Is(err, errs.ErrBadFree) {
		t.Fatalf("send whose buffer could not be freed: %v, want ErrBadFree", err)
	}
	t.Logf("send: %v", err)

	// A send that fails holding its buffer (as a failed liveness check
	// fails it), whose free fails too.
	s, err = l.Isend(out, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	l.fail(s, errs.ErrPeerLost)
	if _, err := s.Wait(); !errors.Is(err, errs.ErrPeerLost) {
		t.Fatalf("failed send: %v", err)
	}
	r, err := l.Irecv(in, 0, 99)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Wait(); !errors.Is(err, errs.ErrBadFree) {
		t.Fatalf("a receive after a failed free: %v, want the free's error", err)
	}
}

// TestBounceWaitsForRoom: with room for one transfer's buffer, a second
// bounce send waits for the first to end and free its buffer, then goes.
func TestBounceWaitsForRoom(t *testing.T) {
	l, rt := bounceLayer(t, 1<<20)
	a, b := pattern(1<<20, 5), pattern(1<<20, 6)
	sa, err := l.Isend(a, 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := l.Isend(b, 0, 5)
	if err != nil {
		t.Fatal(err)
	}
	l.lock.Lock()
	waiting := len(l.noSlab)
	l.lock.Unlock()
	if waiting != 1 {
		t.Fatalf("%d sends wait for room, want 1", waiting)
	}
	for i, want := range [][]byte{a, b} {
		in := make([]byte, len(want))
		if _, err := l.Recv(in, 0, 4+i); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(in, want) {
			t.Fatalf("message %d arrived corrupt", i)
		}
	}
	for _, s := range []*Request{sa, sb} {
		if _, err := s.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if rt.allocs != 2 || rt.frees != 2 {
		t.Errorf("%d buffers allocated, %d freed, want 2 and 2", rt.allocs, rt.frees)
	}
}

// TestBounceNoRoom: with no room at all, a bounce send fails with
// ErrOutOfMemory naming SYMHEAP_SHARED_SIZE, and so does the receive it
// had matched.
func TestBounceNoRoom(t *testing.T) {
	l, rt := bounceLayer(t, 1<<10)
	out := pattern(1<<20, 7)
	r, err := l.Irecv(make([]byte, len(out)), 0, 6)
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.Isend(out, 0, 6)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Wait(); !errors.Is(err, errs.ErrOutOfMemory) || !strings.Contains(err.Error(), "SYMHEAP_SHARED_SIZE") {
		t.Fatalf("send: %v, want ErrOutOfMemory naming SYMHEAP_SHARED_SIZE", err)
	}
	if _, err := r.Wait(); !errors.Is(err, errs.ErrOutOfMemory) {
		t.Fatalf("receive: %v, want ErrOutOfMemory", err)
	}
	if rt.allocs != 0 || rt.frees != 0 {
		t.Errorf("%d buffers allocated, %d freed, want none", rt.allocs, rt.frees)
	}
}
