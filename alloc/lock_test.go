package alloc_test

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/symheap/symheap/alloc"
	_ "github.com/symheap/symheap/alloc/all"
	"github.com/symheap/symheap/alloc/alloctest"
	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/shmsync"
)

// sharedLock returns a Lock over a word of a shared mapping (a memfd) and
// a second Lock over the same word seen through another mapping.
func sharedLock(t *testing.T) (*alloc.Lock, *alloc.Lock, *uint64) {
	a, b := alloctest.NewSharedRegion(t, 4096)
	la, err := alloc.LockAt(a, 64)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := alloc.LockAt(b, 64)
	if err != nil {
		t.Fatal(err)
	}
	return la, lb, alloctest.Word64(a, 128)
}

func TestLockExclusion(t *testing.T) {
	la, lb, counter := sharedLock(t)
	const workers, rounds = 4, 2000
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		l := la
		if w%2 == 1 {
			l = lb // the other mapping: the futex must not be private
		}
		wg.Add(1)
		go func(id uint32) {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				if err := l.Lock(id, nil); err != nil {
					t.Error(err)
					return
				}
				// A non-atomic read-modify-write, safe only under the lock.
				v := atomic.LoadUint64(counter)
				if i%100 == 0 {
					time.Sleep(10 * time.Microsecond) // let others pile up and sleep
				}
				atomic.StoreUint64(counter, v+1)
				if err := l.Unlock(id); err != nil {
					t.Error(err)
					return
				}
			}
		}(uint32(w))
	}
	wg.Wait()
	if got := atomic.LoadUint64(counter); got != workers*rounds {
		t.Fatalf("counter %d, want %d: lost updates", got, workers*rounds)
	}
	if _, held := la.Holder(); held {
		t.Fatal("lock still held after everyone unlocked")
	}
}

// TestLockSleepsAndWakes: a waiter that went to sleep on a held lock is
// woken by the unlock. A lost wake-up is counted, not timed (shmsync's
// "Lost wake-ups"): a sleep of the waiter that ran its slice out although
// the unlock, wake-up included, had returned before the sleep's deadline
// lost it. A slow wake-up on a loaded machine is not a lost one.
func TestLockSleepsAndWakes(t *testing.T) {
	a, b := alloctest.NewSharedRegion(t, 4096)
	la, err := alloc.LockAt(a, 64)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := alloc.LockAt(b, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := la.Lock(1, nil); err != nil {
		t.Fatal(err)
	}
	// Only the waiter below sleeps on a futex in this test.
	var mu sync.Mutex
	var sleeps []shmsync.Sleep
	t.Cleanup(shmsync.TraceSleeps(func(s shmsync.Sleep) {
		mu.Lock()
		sleeps = append(sleeps, s)
		mu.Unlock()
	}))
	got := make(chan struct{}, 1)
	done := make(chan struct{})
	// Cleanups run last-in first-out: this one, before the unmapping.
	t.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		if err := lb.Lock(2, nil); err != nil {
			t.Error(err)
			return
		}
		got <- struct{}{}
		lb.Unlock(2)
	}()
	// Past the spin, into FutexWait: the waiter has set the waiters bit
	// (it sets it just before it sleeps).
	for lockWord(a, 64)&(1<<31) == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := la.Unlock(1); err != nil {
		t.Fatal(err)
	}
	unlocked := shmsync.Monotonic() // the unlock and its wake-up have returned
	<-got                           // a waiter never woken meets the test's timeout
	<-done
	mu.Lock()
	defer mu.Unlock()
	lost, timedOut := 0, 0
	for _, s := range sleeps {
		if s.TimedOut {
			timedOut++
		}
		if s.Missed(unlocked) {
			lost++
		}
	}
	t.Logf("the waiter slept %d times, %d ran their slice out, %d lost the unlock's wake-up", len(sleeps), timedOut, lost)
	if lost != 0 {
		t.Errorf("%d sleeps of the waiter ran their slice out although the unlock had woken them before it ended: the wake-up was lost", lost)
	}
}

// lockWord reads the 32-bit lock word at off in mem atomically, through
// the 64-bit word that holds it (alloctest gives 64-bit views).
func lockWord(mem []byte, off uint64) uint32 {
	v := atomic.LoadUint64(alloctest.Word64(mem, off))
	if binary.NativeEndian.Uint16([]byte{1, 0}) == 1 { // little-endian: the word at off is the low half
		return uint32(v)
	}
	return uint32(v >> 32)
}

func TestLockUncontendedLeavesNoWaiterFlag(t *testing.T) {
	mem := alloctest.NewRegion(t, 4096)
	l, err := alloc.LockAt(mem, 0)
	if err != nil {
		t.Fatal(err)
	}
	word := alloctest.Word64(mem, 0)
	if err := l.Lock(41, nil); err != nil {
		t.Fatal(err)
	}
	if v := atomic.LoadUint64(word) & 0xffffffff; v != 42 {
		t.Fatalf("locked word %#x, want holder id+1 = 42 and no waiters bit", v)
	}
	if id, held := l.Holder(); !held || id != 41 {
		t.Fatalf("Holder() = %d, %v", id, held)
	}
	if l.TryLock(3) {
		t.Fatal("TryLock succeeded on a held lock")
	}
	if err := l.Unlock(3); !errors.Is(err, errs.ErrBadArg) {
		t.Fatalf("Unlock by a non-holder: %v, want ErrBadArg", err)
	}
	if err := l.Unlock(41); err != nil {
		t.Fatal(err)
	}
	if v := atomic.LoadUint64(word); v != 0 {
		t.Fatalf("unlocked word %#x", v)
	}
	if err := l.Lock(alloc.MaxLockID+1, nil); !errors.Is(err, errs.ErrBadArg) {
		t.Fatalf("Lock with id above MaxLockID: %v", err)
	}
	if _, err := alloc.LockAt(mem, 2); err == nil {
		t.Fatal("LockAt a misaligned offset succeeded")
	}
}

func TestLockDeadHolder(t *testing.T) {
	la, lb, _ := sharedLock(t)
	if err := la.Lock(7, nil); err != nil { // holder 7 "dies" holding it
		t.Fatal(err)
	}
	// Counted, not timed: the first liveness question that finds the
	// holder dead must end the wait (a hang meets the test's timeout).
	var asked, dead atomic.Int32
	err := lb.Lock(1, func(holder uint32) bool {
		asked.Add(1)
		if holder != 7 {
			return true
		}
		dead.Add(1)
		return false
	})
	if !errors.Is(err, errs.ErrPeerLost) {
		t.Fatalf("Lock with a dead holder: %v, want ErrPeerLost", err)
	}
	if n := dead.Load(); n != 1 {
		t.Errorf("Lock asked about the dead holder %d times (%d questions in all); the first answer must end the wait", n, asked.Load())
	}
}

// TestLockedGoroutines shares one heap between goroutines through Locked,
// each with its own holder id, and checks the heap afterwards.
func TestLockedGoroutines(t *testing.T) {
	for _, c := range alloc.Components() {
		t.Run(c.Name, func(t *testing.T) {
			mem := alloctest.NewRegion(t, 4<<20)
			a, err := c.Format(mem)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for g := 0; g < 4; g++ {
				l, err := alloc.NewLocked(a, uint32(g), nil)
				if err != nil {
					t.Fatal(err)
				}
				wg.Add(1)
				go func(seed uint64) {
					defer wg.Done()
					r := rand.New(rand.NewPCG(seed, 1))
					var live []alloc.Off
					for i := 0; i < 500; i++ {
						if len(live) > 0 && r.IntN(2) == 0 {
							j := r.IntN(len(live))
							if err := l.Free(live[j]); err != nil {
								t.Error(err)
								return
							}
							live = append(live[:j], live[j+1:]...)
							continue
						}
						off, err := l.Alloc(16+r.Uint64N(2000), 0)
						if err != nil {
							t.Error(err)
							return
						}
						live = append(live, off)
					}
					for _, off := range live {
						if err := l.Free(off); err != nil {
							t.Error(err)
						}
					}
				}(uint64(g))
			}
			wg.Wait()
			if err := a.Check(); err != nil {
				t.Fatal(err)
			}
			if st := a.Stats(); st.Live != 0 || st.Allocs != st.Frees {
				t.Fatalf("after every goroutine freed everything: %+v", st)
			}
		})
	}
}
