package symheap

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/msg"
	"github.com/symheap/symheap/internal/petest"
	"github.com/symheap/symheap/internal/release"
	"github.com/symheap/symheap/internal/shmsync"
	"github.com/symheap/symheap/memhook"
	"github.com/symheap/symheap/rcache"
)

// Release events across PEs: a block released by one PE reaches the
// monitor of every other PE before that PE's next lookup (Monitor.Sync),
// whatever heap it lies in (package release). The checks run in the PE
// suite; in each, the PEs that watch are not the PE that releases.

// eventLog subscribes to a PE's monitor and records what it hears.
type eventLog struct {
	mu     sync.Mutex
	got    []memhook.Range
	kinds  []memhook.Kind
	cancel func()
}

func watchEvents(pe *PE) *eventLog {
	l := &eventLog{}
	l.cancel = pe.Monitor().Subscribe(func(k memhook.Kind, r memhook.Range) {
		l.mu.Lock()
		l.got = append(l.got, r)
		l.kinds = append(l.kinds, k)
		l.mu.Unlock()
	})
	return l
}

// covered syncs the monitor, then reports whether some event of kind k
// (any kind if 0) covers [addr, addr+n).
func (l *eventLog) covered(pe *PE, k memhook.Kind, addr uintptr, n uint64) bool {
	pe.Monitor().Sync()
	l.mu.Lock()
	defer l.mu.Unlock()
	want := memhook.Range{Start: addr, End: addr + uintptr(n)}
	for i, r := range l.got {
		if (k == 0 || l.kinds[i] == k) && r.Contains(want) {
			return true
		}
	}
	return false
}

func (l *eventLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprint(l.got)
}

// copyAddr returns the address, in this PE, of PE q's copy of the
// symmetric block s.
func copyAddr[T any](pe *PE, s []T, q int) (uintptr, uint64) {
	p, n := core.SliceData(s)
	off, _, ok := pe.sp.HeapOffset(p, n)
	if !ok {
		panic(checkFailure("copyAddr: not symmetric"))
	}
	return uintptr(pe.sp.ViewAddr(q, core.HeapOff(off))), n
}

// shareOff makes PE owner's value v known to every PE (through a
// symmetric word).
func shareOff(t *testing.T, pe *PE, owner int, v uint64) uint64 {
	t.Helper()
	x := must(Calloc[uint64](pe, 1))
	if pe.Rank() == owner {
		x[0] = v
	}
	barrier(t, pe)
	got := make([]uint64, 1)
	ok(t, Get(pe, got, x, owner))
	ok(t, Free(pe, x))
	return got[0]
}

// checkReleaseAcross: symmetric Free and Realloc, and SharedFree by the
// owner and by another PE, reach the monitors of the PEs that did not
// make the release.
func checkReleaseAcross(t *testing.T, pe *PE) {
	me, n := pe.Rank(), pe.Size()
	ev := watchEvents(pe)
	defer ev.cancel()

	// Symmetric Free: every PE frees its own copy; each hears of the
	// others' copies too.
	a := must(Malloc[byte](pe, 1000))
	keep := must(Malloc[byte](pe, 64)) // a does not grow in place below
	ok(t, Free(pe, a))
	for q := range n {
		if addr, size := copyAddr(pe, a, q); !ev.covered(pe, memhook.Free, addr, size) {
			t.Errorf("no Free event for PE %d's copy of a freed symmetric block at %#x; events %v", q, addr, ev)
		}
	}
	// Symmetric Realloc that moves the block: Chunk events for every
	// PE's old copy.
	c := must(Malloc[byte](pe, 100))
	fence := must(Malloc[byte](pe, 64))
	old := c
	c = must(Realloc(pe, c, 1<<16))
	for q := range n {
		if addr, size := copyAddr(pe, old, q); !ev.covered(pe, memhook.Chunk, addr, size) {
			t.Errorf("no Chunk event for PE %d's copy of a moved symmetric block at %#x; events %v", q, addr, ev)
		}
	}
	ok(t, Free(pe, c))
	ok(t, Free(pe, fence))
	ok(t, Free(pe, keep))

	// SharedFree by the owner (PE 0), heard by the others.
	var off uint64
	if me == 0 {
		off = must(pe.ext.shared.alloc(512, 16))
	}
	off = shareOff(t, pe, 0, off)
	if me == 0 {
		ok(t, pe.ext.shared.free(0, off))
	}
	barrier(t, pe)
	if addr := uintptr(pe.sp.SharedAddr(0, core.SharedOff(off))); me != 0 && !ev.covered(pe, memhook.Free, addr, 512) {
		t.Errorf("no Free event for PE 0's shared block at %#x that PE 0 freed; events %v", addr, ev)
	}
	// SharedFree by another PE (the last) of PE 0's block, heard by every
	// PE, the owner included.
	last := n - 1
	if me == 0 {
		off = must(pe.ext.shared.alloc(768, 16))
	}
	off = shareOff(t, pe, 0, off)
	if me == last {
		ok(t, pe.ext.shared.free(0, off))
	}
	barrier(t, pe)
	if addr := uintptr(pe.sp.SharedAddr(0, core.SharedOff(off))); !ev.covered(pe, memhook.Free, addr, 768) {
		t.Errorf("no Free event for PE 0's shared block at %#x that PE %d freed; events %v", addr, last, ev)
	}
	barrier(t, pe)
}

// checkReleaseCache is the case a user meets: PE 0 registers a block of
// its local shared heap in its registration cache, another PE frees it,
// and PE 0's next lookup of the range must not be a hit.
func checkReleaseCache(t *testing.T, pe *PE) {
	me, last := pe.Rank(), pe.Size()-1
	var off uint64
	if me == 0 {
		off = must(pe.ext.shared.alloc(8192, 4096))
	}
	off = shareOff(t, pe, 0, off)
	rng := rcache.Range{Start: uintptr(pe.sp.SharedAddr(0, core.SharedOff(off))), End: uintptr(pe.sp.SharedAddr(0, core.SharedOff(off))) + 8192}
	var rc *rcache.Cache
	var before rcache.Stats
	if me == 0 {
		rc = must(pe.RegistrationCache())
		e := must(rc.Get(rng, 1))
		rc.Put(e)
		before = rc.Stats()
	}
	barrier(t, pe)
	if me == last {
		ok(t, pe.ext.shared.free(0, off))
	}
	barrier(t, pe)
	if me == 0 {
		e := must(rc.Get(rng, 1))
		rc.Put(e)
		after := rc.Stats()
		if after.Hits != before.Hits || after.Invalidations == before.Invalidations {
			t.Errorf("lookup of a shared block PE %d freed: hits %d -> %d, invalidations %d -> %d; want no hit and an invalidation",
				last, before.Hits, after.Hits, before.Invalidations, after.Invalidations)
		}
		// The range is free memory now: drop the fresh registration.
		rc.Invalidate(rng)
	}
	barrier(t, pe)
}

// checkReleaseIdle: a PE whose monitor listens but never syncs holds up
// nobody (the releasing PE never sleeps in a wait while it releases). PE 0 releases many more blocks than a ring holds while the
// others sit in a barrier; their next Sync then hears of everything (the
// overflow event covers the whole segment).
func checkReleaseIdle(t *testing.T, pe *PE) {
	me := pe.Rank()
	ev := watchEvents(pe)
	defer ev.cancel()
	barrier(t, pe)
	var first uint64
	if me == 0 {
		// Held up by nobody: no wait of this PE's sleeps while it
		// releases (a release that waited for the listeners would).
		var sleeps atomic.Int64
		restore := shmsync.TraceSleeps(func(shmsync.Sleep) { sleeps.Add(1) })
		for i := range 3 * release.Slots {
			off := must(pe.ext.shared.alloc(64, 16))
			if i == 0 {
				first = off
			}
			ok(t, pe.ext.shared.free(0, off))
		}
		restore()
		if n := sleeps.Load(); n != 0 {
			t.Errorf("%d shared alloc+free pairs with idle listeners slept %d times waiting", 3*release.Slots, n)
		}
	}
	first = shareOff(t, pe, 0, first)
	if addr := uintptr(pe.sp.SharedAddr(0, core.SharedOff(first))); !ev.covered(pe, 0, addr, 64) {
		t.Errorf("PE %d: no event covering PE 0's first freed block at %#x after an overflow; events %v", me, addr, ev)
	}
	barrier(t, pe)
}

// TestReleaseBounce: a bounce buffer that carried a message is freed by
// the sender into its shared heap; the receiver, which read the message
// out of it, hears of the release.
func TestReleaseBounce(t *testing.T) {
	petest.Run(t, 2, func(t *testing.T) {
		pe, err := Init(Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer pe.Close()
		ev := watchEvents(pe)
		defer ev.cancel()
		buf := make([]byte, 256<<10) // Go memory: neither heap, so a bounce buffer
		if pe.Rank() == 0 {
			ok(t, pe.Send(buf, 1, 7))
		} else {
			_, err := pe.Recv(buf, 0, 7)
			ok(t, err)
		}
		barrier(t, pe)
		if pe.sp.Stats(0).MsgBounce.Load() == 0 {
			t.Fatal("the message did not go through a bounce buffer")
		}
		// Some Free event must lie in PE 0's shared heap, at least a
		// chunk long.
		shared := uintptr(pe.sp.SharedAddr(0, core.SharedOff(0)))
		pe.Monitor().Sync()
		ev.mu.Lock()
		defer ev.mu.Unlock()
		for i, r := range ev.got {
			if ev.kinds[i] == memhook.Free && r.Start >= shared && r.End <= shared+uintptr(pe.sp.Lay.SharedSize) && r.Len() >= msg.MinBounceChunk {
				return
			}
		}
		t.Errorf("PE %d: no Free event of a bounce buffer in PE 0's shared heap; events %v", pe.Rank(), ev.got)
	}, petest.Heap("4m"), petest.Env("SYMHEAP_SHARED_SIZE=4m", "SYMHEAP_MSG_NOKERNEL=1"))
}
