package team

import (
	"runtime"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/shmsync"
	"github.com/symheap/symheap/internal/unix"
)

// TestPublishWakesSleeper: a waiter asleep on a post line wakes on the
// publication, which in a process registered for membarrier is a release
// store (no fence between it and the load of sleepers): the sleeper's
// asymmetric fence makes the publisher see it ("Post lines", Sleeping).
// A lost wake-up shows as a wait of a whole sleep slice.
func TestPublishWakesSleeper(t *testing.T) {
	l := &Layer{relaxed: unix.MembarrierRegister() == nil}
	if !l.relaxed {
		t.Log("membarrier is not available: publications are sequentially consistent stores")
	}
	var pl postLine
	for i := uint32(1); i <= 10; i++ {
		woke := make(chan time.Time, 1)
		go func() {
			err := l.sleepOnPost(&pl, func() bool { return reached(pl.seq.Load(), i) }, nil)
			if err != nil {
				t.Error(err)
			}
			woke <- time.Now()
		}()
		// Let the sleeper announce itself and reach its futex.
		for pl.sleepers.Load() == 0 {
			runtime.Gosched()
		}
		time.Sleep(2 * time.Millisecond)
		start := time.Now()
		l.publish(&pl, i)
		if d := (<-woke).Sub(start); d > shmsync.SleepSlice/2 {
			t.Errorf("publication %d woke its sleeper after %v: the wake-up was lost (a sleep slice is %v)", i, d, shmsync.SleepSlice)
		}
		if pl.sleepers.Load() != 0 {
			t.Errorf("publication %d: sleepers %d after the wait, want 0", i, pl.sleepers.Load())
		}
	}
}

// TestLastPost: the base of a team's post lines is the largest sequence
// number they hold, across the wrap of 2^32.
func TestLastPost(t *testing.T) {
	for _, c := range []struct {
		seqs []uint32
		want uint32
	}{
		{[]uint32{0, 0}, 0},
		{[]uint32{5, 9, 7, 8}, 9},
		{[]uint32{^uint32(0) - 1, 2, ^uint32(0), 1}, 2},
	} {
		lines := make([]postLine, len(c.seqs))
		for i, v := range c.seqs {
			lines[i].seq.Store(v)
		}
		if got := lastPost(lines); got != c.want {
			t.Errorf("lastPost(%v) = %d, want %d", c.seqs, got, c.want)
		}
	}
}
