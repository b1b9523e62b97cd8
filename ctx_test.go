package symheap

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/calls"
	"github.com/symheap/symheap/internal/config"
	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/petest"
	"github.com/symheap/symheap/internal/segment"
	"github.com/symheap/symheap/internal/shmsync"
	"github.com/symheap/symheap/internal/unix"
)

// The bounded calls (ctx.go): each test ends a call's wait by cancelling
// its context (once the call is known to wait: its ticket taken, its
// collective call published, its sleep announced) or by a deadline, and
// checks the error and the state the call leaves, never how long anything
// took. petest checks that no segment is left in /dev/shm.

var ctxOpts = []petest.Option{petest.Heap("8m"), petest.Env("SYMHEAP_SHARED_SIZE=1m"), petest.Timeout(60 * time.Second)}

// ctxEnd is how a test ends a bounded call's wait: by cancel, which the
// test calls once the call waits, or by a deadline.
type ctxEnd struct {
	name string
	want error // what the call's error wraps
}

var ctxEnds = []ctxEnd{{"cancel", context.Canceled}, {"deadline", context.DeadlineExceeded}}

// waitingCtx returns the context of a bounded call: with e.want ==
// context.Canceled one that is cancelled as soon as waiting() reports the
// call waits, else one whose deadline is d away. stop ends the goroutine
// that watches waiting.
func waitingCtx(e ctxEnd, d time.Duration, waiting func() bool) (ctx context.Context, stop func()) {
	if e.want == context.DeadlineExceeded {
		return context.WithTimeout(context.Background(), d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for !waiting() && ctx.Err() == nil {
			time.Sleep(100 * time.Microsecond)
		}
		cancel()
	}()
	return ctx, cancel
}

// wantCtxErr fails t unless err wraps e.want and target (if not nil),
// mentions every word, and says "symheap:" once.
func wantCtxErr(t *testing.T, what string, err error, e ctxEnd, target error, words ...string) {
	t.Helper()
	wantErr(t, what, err, e.want, words...)
	t.Logf("%s: %v", what, err)
	if target != nil && !errors.Is(err, target) {
		t.Errorf("%s: %v does not wrap %v", what, err, target)
	}
	if n := strings.Count(err.Error(), "symheap:"); n != 1 {
		t.Errorf("%s: %q says symheap: %d times, want once", what, err, n)
	}
	if n := strings.Count(err.Error(), e.want.Error()); n != 1 {
		t.Errorf("%s: %q says %q %d times, want once", what, err, e.want, n)
	}
}

// inCall reports whether pe is in a collective call of kind k.
func inCall(pe *PE, k calls.Kind) func() bool {
	return func() bool { w := pe.calls.Own().Load(); return w.InCall() && w.Kind() == k }
}

// TestBarrierCtxCancel: PE 0's BarrierCtx ends while PE 1 waits in a
// Barrier and PE 2 has not come yet. PE 0 gets the context's error (and
// ErrDiverged), and its later collectives and Free fail at once naming the
// cancelled call; PE 1's Barrier ends with ErrDiverged naming it instead
// of hanging; PE 2, let in by PE 1 afterwards, finds its Barrier complete
// (PE 0's and PE 1's arrivals were counted) or broken, and its next one
// broken; every Close releases the job.
func TestBarrierCtxCancel(t *testing.T) {
	for _, e := range ctxEnds {
		t.Run(e.name, func(t *testing.T) {
			petest.Run(t, 3, func(t *testing.T) {
				pe, err := Init(Config{})
				if err != nil {
					t.Fatal(err)
				}
				flag := must(Calloc[int64](pe, 2)) // world call #1; [0]: go on, [1]: PE 2 is done
				switch pe.Rank() {
				case 0:
					ctx, stop := waitingCtx(e, 500*time.Millisecond, inCall(pe, calls.Barrier))
					defer stop()
					err := BarrierCtx(ctx, pe) // world call #2
					wantCtxErr(t, "BarrierCtx", err, e, ErrDiverged, "Barrier (call #2) on PE 0 was cancelled", "Close every PE")
					wantCtxErr(t, "Free after the cancel", Free(pe, flag), e, ErrDiverged, "Free: ", "Barrier (call #2) on PE 0 was cancelled")
					wantCtxErr(t, "Barrier after the cancel", pe.Barrier(), e, ErrDiverged, "Barrier: ", "call #2")
					wantCtxErr(t, "BarrierCtx after the cancel", BarrierCtx(context.Background(), pe), e, ErrDiverged, "call #2")
					// One-sided access still works: wait for PE 2, the last,
					// to be done before leaving (a PE that leaves ends the
					// others' WaitUntil with ErrPeerLost).
					ok(t, WaitUntil(pe, &flag[1], CmpEQ, 1))
				case 1:
					err := pe.Barrier()
					wantErr(t, "Barrier while PE 0 cancels its own", err, ErrDiverged,
						"Barrier (call #2) on PE 1 met Barrier (call #2) on PE 0, which was cancelled there")
					ok(t, AtomicSet(pe, &flag[0], 1, 2)) // PE 2 may come now
					ok(t, WaitUntil(pe, &flag[1], CmpEQ, 1))
				case 2:
					ok(t, WaitUntil(pe, &flag[0], CmpEQ, 1))
					if err := pe.Barrier(); err != nil {
						wantErr(t, "PE 2's Barrier #2", err, ErrDiverged, "on PE 0, which was cancelled there")
					}
					err := pe.Barrier()
					wantErr(t, "PE 2's Barrier #3", err, ErrDiverged, "on PE 0, which was cancelled there")
					// PE 1 first: PE 0 leaves once it sees its flag, and a
					// PE still waiting then would find it gone.
					ok(t, AtomicSet(pe, &flag[1], 1, 1))
					ok(t, AtomicSet(pe, &flag[1], 1, 0))
				}
				wantErr(t, "Close", pe.Close(), ErrDiverged, "cancelled")
			}, ctxOpts...)
		})
	}
}

// TestSyncCtxCancel: the same on a team of two (a pair barrier): PE 0's
// Team.SyncCtx ends while PE 1 computes; PE 1's Sync finds PE 0's arrival
// or the cancel, and its next collective fails naming the cancelled Sync.
func TestSyncCtxCancel(t *testing.T) {
	for _, e := range ctxEnds {
		t.Run(e.name, func(t *testing.T) {
			petest.Run(t, 2, func(t *testing.T) {
				pe, err := Init(Config{})
				if err != nil {
					t.Fatal(err)
				}
				defer pe.Close()
				flag := must(Calloc[int64](pe, 1)) // world call #1
				world := pe.World()
				if pe.Rank() == 0 {
					ctx, stop := waitingCtx(e, 500*time.Millisecond, inCall(pe, calls.Sync))
					defer stop()
					err := world.SyncCtx(ctx) // world call #2
					wantCtxErr(t, "SyncCtx", err, e, ErrDiverged, "Sync (call #2) on PE 0 was cancelled")
					wantCtxErr(t, "Sync after the cancel", world.Sync(), e, ErrDiverged, "Sync: ")
					ok(t, AtomicSet(pe, &flag[0], 1, 1))
					return
				}
				ok(t, WaitUntil(pe, &flag[0], CmpEQ, 1))
				if err := world.Sync(); err != nil {
					wantErr(t, "PE 1's Sync #2", err, ErrDiverged, "which was cancelled there")
				}
				err = pe.Barrier()
				wantErr(t, "PE 1's Barrier #3", err, ErrDiverged, "met Sync (call #2) on PE 0, which was cancelled there")
			}, ctxOpts...)
		})
	}
}

// TestWaitUntilCtxCancel: a WaitUntilCtx that ends changes nothing: the
// variable is as it was, a later WaitUntil sees PE 1's write, and the
// collectives work.
func TestWaitUntilCtxCancel(t *testing.T) {
	for _, e := range ctxEnds {
		t.Run(e.name, func(t *testing.T) {
			petest.Run(t, 2, func(t *testing.T) {
				pe, err := Init(Config{})
				if err != nil {
					t.Fatal(err)
				}
				defer pe.Close()
				x := must(Calloc[int64](pe, 1))
				if pe.Rank() == 0 {
					asleep := func() bool { return pe.ctl[0].sig.sleepers.Load() != 0 } // seq-cst; the waiter's W1
					ctx, stop := waitingCtx(e, 100*time.Millisecond, asleep)
					defer stop()
					// The liveness checks the wait made once the context
					// had ended (the tracer runs between a sleep and its
					// check): the first must end it, so the end is seen
					// within a slice. Judged by the sleeps, not the clock.
					word := &pe.ctl[0].sig.word
					var late int
					untrace := shmsync.TraceSleeps(func(s shmsync.Sleep) {
						if s.Word == word && s.Check && ctx.Err() != nil {
							late++
						}
					})
					err := WaitUntilCtx(ctx, pe, &x[0], CmpEQ, 1)
					untrace()
					wantCtxErr(t, "WaitUntilCtx", err, e, nil, "PE 0 waiting until its variable at", "== 1")
					if late > 1 {
						t.Errorf("the wait ran %d liveness checks after its context ended; the first must end it", late)
					}
					if v := core.Load(&x[0]); v != 0 {
						t.Fatalf("the variable after the cancel: %d, want 0", v)
					}
				}
				barrier(t, pe) // not broken
				if pe.Rank() == 1 {
					ok(t, AtomicSet(pe, &x[0], 1, 0))
				} else {
					ok(t, WaitUntil(pe, &x[0], CmpEQ, 1))
					// Satisfied: a done context does not stop it.
					done, cancel := context.WithCancel(context.Background())
					cancel()
					ok(t, WaitUntilCtx(done, pe, &x[0], CmpEQ, 1))
				}
				barrier(t, pe)
			}, ctxOpts...)
		})
	}
}

// TestRecvCtxCancel: a RecvCtx that ends takes no message: the next two
// messages of its source and tag go, in order, to the receives after it.
// A message that has arrived is received even with a done context.
func TestRecvCtxCancel(t *testing.T) {
	for _, e := range ctxEnds {
		for _, src := range []int{1, AnySource} {
			name := e.name + "-one-source"
			if src == AnySource {
				name = e.name + "-any-source"
			}
			t.Run(name, func(t *testing.T) {
				petest.Run(t, 2, func(t *testing.T) {
					pe, err := Init(Config{})
					if err != nil {
						t.Fatal(err)
					}
					defer pe.Close()
					go1 := must(Calloc[int64](pe, 1))
					big := bytes.Repeat([]byte("m2"), pe.EagerLimit()) // the large path
					if pe.Rank() == 0 {
						buf := make([]byte, len(big))
						asleep := func() bool { return sleepersOn(pe) }
						ctx, stop := waitingCtx(e, 100*time.Millisecond, asleep)
						defer stop()
						_, err := RecvCtx(ctx, pe, buf, src, 7)
						wantCtxErr(t, "RecvCtx", err, e, nil, "Recv from ", "tag 7", "no message was taken")
						ok(t, AtomicSet(pe, &go1[0], 1, 1)) // PE 1 may send
						for _, want := range []string{"m1", string(big)} {
							st, err := pe.Recv(buf, src, 7)
							ok(t, err)
							if got := string(buf[:st.Count]); got != want {
								t.Fatalf("Recv after the cancelled RecvCtx: %.8q (%d bytes), want %.8q (%d bytes)", got, len(got), want, len(want))
							}
						}
						// Arrived already: taken even with a done context.
						barrier(t, pe)
						done, cancel := context.WithCancel(context.Background())
						cancel()
						st, err := RecvCtx(done, pe, buf, src, 8)
						ok(t, err)
						if got := string(buf[:st.Count]); got != "m3" {
							t.Fatalf("RecvCtx with a done context and a message there: %q, want m3", got)
						}
						return
					}
					ok(t, WaitUntil(pe, &go1[0], CmpEQ, 1))
					ok(t, pe.Send([]byte("m1"), 0, 7))
					ok(t, pe.Send(big, 0, 7))
					ok(t, pe.Send([]byte("m3"), 0, 8))
					barrier(t, pe)
				}, ctxOpts...)
			})
		}
	}
}

// sleepersOn reports whether a goroutine of pe sleeps on its doorbell.
func sleepersOn(pe *PE) bool { return pe.ext.msg.Sleepers() != 0 }

// TestRequestWaitCtx: a WaitCtx that ends leaves its request pending, a
// receive's and a large send's alike: Test says not done, and a later
// Wait completes it.
func TestRequestWaitCtx(t *testing.T) {
	for _, e := range ctxEnds {
		t.Run(e.name, func(t *testing.T) {
			petest.Run(t, 2, func(t *testing.T) {
				pe, err := Init(Config{})
				if err != nil {
					t.Fatal(err)
				}
				defer pe.Close()
				flag := must(Calloc[int64](pe, 1))
				big := bytes.Repeat([]byte("L"), 4*pe.EagerLimit())
				buf := make([]byte, len(big))
				asleep := func() bool { return sleepersOn(pe) }
				if pe.Rank() == 0 {
					r, err := pe.Irecv(buf, 1, 9)
					ok(t, err)
					ctx, stop := waitingCtx(e, 100*time.Millisecond, asleep)
					defer stop()
					_, err = r.WaitCtx(ctx)
					wantCtxErr(t, "WaitCtx of an Irecv", err, e, nil, "receive from PE 1 with tag 9", "still pending")
					if done, _, err := r.Test(); done || err != nil {
						t.Fatalf("Test after WaitCtx ended: done %v, %v; want pending", done, err)
					}
					ok(t, AtomicSet(pe, &flag[0], 1, 1)) // PE 1 may send
					st, err := r.Wait()
					ok(t, err)
					if st.Count != 2 || string(buf[:2]) != "hi" {
						t.Fatalf("Wait after WaitCtx: %+v %q, want hi", st, buf[:st.Count])
					}
					ok(t, WaitUntil(pe, &flag[0], CmpEQ, 2)) // PE 1's large Isend is pending
					st, err = pe.Recv(buf, 1, 10)
					ok(t, err)
					if st.Count != len(big) || !bytes.Equal(buf, big) {
						t.Fatalf("Recv of the large message: %d bytes, want %d", st.Count, len(big))
					}
					return
				}
				ok(t, WaitUntil(pe, &flag[0], CmpEQ, 1))
				ok(t, pe.Send([]byte("hi"), 0, 9))
				r, err := pe.Isend(big, 0, 10) // not received before PE 0 knows of it
				ok(t, err)
				ctx, stop := waitingCtx(e, 100*time.Millisecond, asleep)
				defer stop()
				_, err = r.WaitCtx(ctx)
				wantCtxErr(t, "WaitCtx of a large Isend", err, e, nil, "send to PE 0 with tag 10", "still pending")
				ok(t, AtomicSet(pe, &flag[0], 2, 0))
				st, err := r.Wait()
				ok(t, err)
				if st.Count != len(big) {
					t.Fatalf("the large Isend's Wait: %+v", st)
				}
				ok(t, r.Release())
			}, ctxOpts...)
		})
	}
}

// TestSetLockCtxCancel: PE 0 holds the lock; PE 1's SetLockCtx ends while
// it waits with a ticket; PE 2 then queues behind that ticket. PE 1 does
// not hold the lock (its ClearLock is refused), PE 2 gets it once PE 0
// clears it (PE 1's abandoned ticket is passed on), PE 1 can take it
// again, and the lock's word ends at zero.
func TestSetLockCtxCancel(t *testing.T) {
	for _, e := range ctxEnds {
		t.Run(e.name, func(t *testing.T) {
			petest.Run(t, 3, func(t *testing.T) {
				pe, err := Init(Config{})
				if err != nil {
					t.Fatal(err)
				}
				defer pe.Close()
				l := must(Calloc[int64](pe, 1))
				flag := must(Calloc[int64](pe, 1))
				next := func() uint64 { return lockNext(uint64(must(AtomicFetch(pe, &l[0], 0)))) }
				if pe.Rank() == 0 {
					ok(t, pe.SetLock(&l[0])) // ticket 0
				}
				barrier(t, pe)
				switch pe.Rank() {
				case 0:
					ok(t, WaitUntil(pe, &flag[0], CmpGE, 1)) // PE 1's SetLockCtx is over
					// PE 2 waits with the last ticket: 2 behind PE 1's
					// abandoned 1, or 1 if the deadline came before PE 1
					// took one (flag 2).
					want := uint64(3)
					if core.Load(&flag[0]) == 2 {
						want = 2
					}
					for next() < want {
						time.Sleep(100 * time.Microsecond)
					}
					ok(t, pe.ClearLock(&l[0]))
				case 1:
					ctx, stop := waitingCtx(e, 300*time.Millisecond, func() bool { return next() >= 2 })
					defer stop()
					err := SetLockCtx(ctx, pe, &l[0])
					wantCtxErr(t, "SetLockCtx", err, e, nil, "SetLock at ", "on PE 1")
					wantErr(t, "ClearLock after the cancel", pe.ClearLock(&l[0]), ErrBadArg, "only the holder may clear")
					ok(t, AtomicSet(pe, &flag[0], 1, 2)) // PE 2 may queue
					took := int64(1)
					if strings.Contains(err.Error(), "not begun") {
						took = 2
					}
					ok(t, AtomicSet(pe, &flag[0], took, 0))
				case 2:
					ok(t, WaitUntil(pe, &flag[0], CmpEQ, 1))
					ok(t, pe.SetLock(&l[0]))
					ok(t, pe.ClearLock(&l[0]))
				}
				barrier(t, pe)
				if pe.Rank() == 1 { // usable by PE 1 again
					ok(t, pe.SetLock(&l[0]))
					ok(t, pe.ClearLock(&l[0]))
				}
				barrier(t, pe)
				if pe.Rank() == 0 && l[0] != 0 {
					t.Fatalf("the lock's word at the end: %#x, want 0", l[0])
				}
			}, ctxOpts...)
		})
	}
}

// TestInitCtxCancel: PE 0's InitCtx ends while it waits for PE 1, which
// never calls Init: it returns the context's error and leaves no segment.
func TestInitCtxCancel(t *testing.T) {
	for _, e := range ctxEnds {
		t.Run(e.name, func(t *testing.T) {
			petest.Run(t, 2, func(t *testing.T) {
				if petest.Rank() != 0 {
					return // never joins
				}
				path := segment.Path(unix.Getuid(), os.Getenv(config.EnvJob))
				made := func() bool { _, err := os.Stat(path); return err == nil }
				ctx, stop := waitingCtx(e, 300*time.Millisecond, made)
				defer stop()
				pe, err := InitCtx(ctx, Config{})
				if err == nil {
					pe.Close()
					t.Fatal("InitCtx without PE 1: no error")
				}
				wantCtxErr(t, "InitCtx", err, e, nil, "Init")
				if made() {
					t.Fatalf("%s is left after the cancelled InitCtx", path)
				}
			}, ctxOpts...)
		})
	}
}

// TestCtxMisuse: a nil context is ErrBadArg, with no panic; a context
// done before a collective call begins leaves the PE's collectives
// working.
func TestCtxMisuse(t *testing.T) {
	if petest.IsChild() || os.Getenv("SYMHEAP_PE") != "" {
		t.Skip("runs outside a job only")
	}
	//lint:ignore SA1012 a nil context is the misuse under test
	if _, err := InitCtx(nil, Config{}); !errors.Is(err, ErrBadArg) {
		t.Fatalf("InitCtx(nil): %v, want ErrBadArg", err)
	}
	pe, err := InitCtx(context.Background(), Config{HeapSize: 2 << 20, SharedSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer pe.Close()
	x := must(Calloc[int64](pe, 1))
	var nilCtx context.Context
	buf := make([]byte, 8)
	for name, err := range map[string]error{
		"BarrierCtx":   BarrierCtx(nilCtx, pe),
		"SyncCtx":      pe.World().SyncCtx(nilCtx),
		"WaitUntilCtx": WaitUntilCtx(nilCtx, pe, &x[0], CmpEQ, 0),
		"SetLockCtx":   SetLockCtx(nilCtx, pe, &x[0]),
		"RecvCtx":      func() error { _, err := RecvCtx(nilCtx, pe, buf, 0, 0); return err }(),
		"WaitCtx":      func() error { _, err := (&Request{}).WaitCtx(nilCtx); return err }(),
	} {
		wantErr(t, name+" with a nil context", err, ErrBadArg, "nil context")
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	wantErr(t, "BarrierCtx with a done context", BarrierCtx(done, pe), context.Canceled, "not begun")
	if errors.Is(BarrierCtx(done, pe), ErrDiverged) {
		t.Fatal("BarrierCtx with a done context broke the collectives")
	}
	ok(t, pe.Barrier())
	ok(t, BarrierCtx(context.Background(), pe))
	ok(t, pe.World().SyncCtx(context.Background()))
	ok(t, Free(pe, x))
}
