package alloc_test

import (
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

func TestLockSleepsAndWakes(t *testing.T) {
	la, lb, _ := sharedLock(t)
	if err := la.Lock(1, nil); err != nil {
		t.Fatal(err)
	}
	got := make(chan time.Time, 1)
	done := make(chan struct{})
	// Cleanups run last-in first-out: this one, before the unmapping.
	t.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		if err := lb.Lock(2, nil); err != nil {
			t.Error(err)
			return
		}
		got <- time.Now()
		lb.Unlock(2)
	}()
	time.Sleep(120 * time.Millisecond) // past the spin, into FutexWait
	released := time.Now()
	if err := la.Unlock(1); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-got:
		if d := at.Sub(released); d > 40*time.Millisecond {
			t.Errorf("waiter took %v after the unlock: the wake-up was lost (it waited for its timeout)", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter never got the lock")
	}
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
	start := time.Now()
	err := lb.Lock(1, func(holder uint32) bool { return holder != 7 })
	if !errors.Is(err, errs.ErrPeerLost) {
		t.Fatalf("Lock with a dead holder: %v, want ErrPeerLost", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("noticing the dead holder took %v", d)
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
