package team

import (
	"sync"
	"testing"
	"time"
)

// TestCallLock checks mutual exclusion under contention, including a
// holder that keeps the lock long enough for the waiter to back off to
// sleeping.
func TestCallLock(t *testing.T) {
	var l CallLock
	n := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2000 {
				l.Lock()
				n++
				l.Unlock()
			}
		}()
	}
	wg.Wait()
	if n != 8*2000 {
		t.Fatalf("counted %d under the lock, want %d", n, 8*2000)
	}

	l.Lock()
	got := make(chan time.Time, 1)
	go func() {
		l.Lock()
		got <- time.Now()
		l.Unlock()
	}()
	time.Sleep(20 * time.Millisecond)
	released := time.Now()
	l.Unlock()
	select {
	case at := <-got:
		if at.Before(released) {
			t.Fatal("a waiter took the lock while it was held")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter did not get the lock within 10 s of its release")
	}
}
