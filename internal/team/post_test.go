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
// A lost wake-up shows as a sleep that ran its slice out and then found
// the publication (shmsync.TimedOutEnds), whatever the scheduler does:
// a publisher held up for a whole slice only makes the sleeper sleep
// again, and is woken from that sleep.
func TestPublishWakesSleeper(t *testing.T) {
	l := &Layer{relaxed: unix.MembarrierRegister() == nil}
	if !l.relaxed {
		t.Log("membarrier is not available: publications are sequentially consistent stores")
	}
	// Where the global fence cannot be had the sleeper polls in short
	// slices (sleepOnPost), and a store seen at a slice's end is by
	// design: nothing to count then.
	count := !l.relaxed || unix.MembarrierGlobal() == nil
	var pl postLine
	before := shmsync.TimedOutEnds()
	for i := uint32(1); i <= 10; i++ {
		woke := make(chan struct{})
		go func() {
			defer close(woke)
			err := l.sleepOnPost(&pl, func() bool { return reached(pl.seq.Load(), i) }, nil)
			if err != nil {
				t.Error(err)
			}
		}()
		// Let the sleeper announce itself and, most often, reach its futex.
		for pl.sleepers.Load() == 0 {
			runtime.Gosched()
		}
		time.Sleep(2 * time.Millisecond)
		l.publish(&pl, i)
		<-woke
		if pl.sleepers.Load() != 0 {
			t.Errorf("publication %d: sleepers %d after the wait, want 0", i, pl.sleepers.Load())
		}
	}
	if lost := shmsync.TimedOutEnds() - before; count && lost != 0 {
		t.Errorf("%d of 10 sleepers saw their publication only when their sleep slice ran out: wake-ups were lost", lost)
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
