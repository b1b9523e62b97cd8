package symheap

import (
	"testing"
	"time"

	"github.com/symheap/symheap/internal/core"
)

// checkLockCounter: a counter on PE 0, read and written with Get and Put
// (not atomics) under the lock, ends at the number of increments; two
// locks are independent; the lock word returns to zero.
func checkLockCounter(t *testing.T, pe *PE) {
	locks := must(Calloc[int64](pe, 2))
	count := must(Calloc[int64](pe, 2))
	const k = 30
	for i := 0; i < k; i++ {
		for j := range 2 {
			ok(t, pe.SetLock(&locks[j]))
			v := []int64{0}
			ok(t, Get(pe, v, count[j:j+1], 0))
			if j == 0 && i%3 == 0 {
				time.Sleep(50 * time.Microsecond) // widen the window a broken lock would show
			}
			v[0]++
			ok(t, Put(pe, count[j:j+1], v, 0))
			ok(t, pe.ClearLock(&locks[j]))
		}
	}
	barrier(t, pe)
	if pe.Rank() == 0 {
		for j := range 2 {
			if count[j] != int64(k*pe.Size()) {
				t.Fatalf("counter %d under the lock: %d, want %d", j, count[j], k*pe.Size())
			}
			if locks[j] != 0 {
				t.Fatalf("lock %d word %#x after every PE released it, want 0", j, locks[j])
			}
		}
	}
	barrier(t, pe)
	ok(t, Free(pe, count))
	ok(t, Free(pe, locks))
}

// checkLockFIFO: PE 0 holds the lock while PEs 1, 2, ... ask for it one
// after the other; they get it in that order.
func checkLockFIFO(t *testing.T, pe *PE) {
	me, n := pe.Rank(), pe.Size()
	lock := must(Calloc[int64](pe, 1))
	log := must(Calloc[int64](pe, n+1)) // on PE 0: [next index, ranks...]
	word, err := remoteWord(pe, &lock[0], 0, "test")
	ok(t, err)
	tickets := func() uint64 { return lockNext(uint64(core.Load(word))) }
	if me == 0 {
		ok(t, pe.SetLock(&lock[0]))
	}
	barrier(t, pe)
	if me > 0 {
		// Wait until the PEs before us hold tickets, then take ours.
		for tickets() != uint64(me) {
			time.Sleep(100 * time.Microsecond)
		}
		ok(t, pe.SetLock(&lock[0]))
	} else {
		for tickets() != uint64(n) {
			time.Sleep(100 * time.Microsecond)
		}
	}
	i := must(AtomicFetchAdd(pe, &log[0], 1, 0))
	ok(t, AtomicSet(pe, &log[1+i], int64(me), 0))
	ok(t, pe.ClearLock(&lock[0]))
	barrier(t, pe)
	if me == 0 {
		for i := 0; i < n; i++ {
			if log[1+i] != int64(i) {
				t.Fatalf("acquisition order %v, want 0, 1, ..., %d", log[1:], n-1)
			}
		}
		if lock[0] != 0 {
			t.Fatalf("lock word %#x after use", lock[0])
		}
	}
	barrier(t, pe)
	ok(t, Free(pe, log))
	ok(t, Free(pe, lock))
}

// checkTestLock: TestLock takes a free lock only, and never waits.
func checkTestLock(t *testing.T, pe *PE) {
	me, n := pe.Rank(), pe.Size()
	lock := must(Calloc[int64](pe, 1))
	if me == 0 {
		if got := must(pe.TestLock(&lock[0])); !got {
			t.Fatal("TestLock of a free lock failed")
		}
		if got := must(pe.TestLock(&lock[0])); got {
			t.Fatal("TestLock of a lock this PE holds succeeded")
		}
	}
	barrier(t, pe)
	if me != 0 {
		if got := must(pe.TestLock(&lock[0])); got {
			t.Fatal("TestLock of a lock PE 0 holds succeeded")
		}
	}
	barrier(t, pe)
	if me == 0 {
		ok(t, pe.ClearLock(&lock[0]))
	}
	barrier(t, pe)
	// In turn, each PE takes the free lock with TestLock.
	for p := 0; p < n; p++ {
		if me == p {
			if got := must(pe.TestLock(&lock[0])); !got {
				t.Fatalf("PE %d: TestLock of a free lock failed", me)
			}
			ok(t, pe.ClearLock(&lock[0]))
		}
		barrier(t, pe)
	}
	// All at once: exactly one wins.
	won := must(Calloc[int64](pe, 1))
	if got := must(pe.TestLock(&lock[0])); got {
		ok(t, AtomicAdd(pe, &won[0], 1, 0))
		barrier(t, pe)
		ok(t, pe.ClearLock(&lock[0]))
	} else {
		barrier(t, pe)
	}
	barrier(t, pe)
	if me == 0 && won[0] != 1 {
		t.Fatalf("%d PEs took the lock with TestLock at once", won[0])
	}
	barrier(t, pe)
	ok(t, Free(pe, won))
	ok(t, Free(pe, lock))
}

// checkLockErrors: non-symmetric and misaligned locks, ClearLock by a PE
// that does not hold the lock, SetLock by one that does.
func checkLockErrors(t *testing.T, pe *PE) {
	me := pe.Rank()
	lock := must(Calloc[int64](pe, 2))
	var goVar int64
	wantErr(t, "SetLock on a Go variable", pe.SetLock(&goVar), ErrNotSymmetric)
	_, err := pe.TestLock(&goVar)
	wantErr(t, "TestLock on a Go variable", err, ErrNotSymmetric)
	p, _ := core.SliceData(lock)
	off, _ := pe.symOff(p, 8)
	mis := &core.SliceAt[int64](pe.sp.HeapAddr(me, core.HeapOff(off+4)), 1)[0]
	wantErr(t, "SetLock misaligned", pe.SetLock(mis), ErrBadAlign)
	wantErr(t, "ClearLock of a free lock", pe.ClearLock(&lock[0]), ErrBadArg, "no PE holds it")
	barrier(t, pe)
	if me == 0 {
		ok(t, pe.SetLock(&lock[0]))
		wantErr(t, "SetLock twice", pe.SetLock(&lock[0]), ErrBadArg, "already holds")
	}
	barrier(t, pe)
	if me != 0 {
		wantErr(t, "ClearLock of PE 0's lock", pe.ClearLock(&lock[0]), ErrBadArg, "PE 0 holds it")
	}
	barrier(t, pe)
	if me == 0 {
		ok(t, pe.ClearLock(&lock[0]))
	}
	barrier(t, pe)
	ok(t, Free(pe, lock))
}
