package symheap

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/petest"
	"github.com/symheap/symheap/internal/transport"
)

// loopback is a Remote that reaches the other PEs through the segment, as
// a network would reach them: by offset, never by a pointer the caller
// holds. It lets the seam be tested on one node: every PE treats every
// other PE as far, and the operations that route to the Remote must give
// the same results as the direct path.
type loopback struct {
	pe                    *PE
	puts, gets, amos, qts atomic.Int64
	progress              atomic.Int64
}

func (l *loopback) Put(target int, off core.HeapOff, src []byte, nbi bool) error {
	l.puts.Add(1)
	copy(core.Bytes(l.pe.sp.HeapAddr(target, off), uint64(len(src))), src)
	if !nbi {
		l.pe.rma.wake(target)
	}
	return nil
}

func (l *loopback) Get(dst []byte, source int, off core.HeapOff) error {
	l.gets.Add(1)
	copy(dst, core.Bytes(l.pe.sp.HeapAddr(source, off), uint64(len(dst))))
	return nil
}

func (l *loopback) Atomic(op transport.AMO, target int, off core.HeapOff, size int, v, cmp uint64) (uint64, error) {
	l.amos.Add(1)
	p := l.pe.sp.HeapAddr(target, off)
	var old uint64
	if size == 4 {
		old = uint64(amoOn(core.At[uint32](p), op, uint32(v), uint32(cmp)))
	} else {
		old = amoOn(core.At[uint64](p), op, v, cmp)
	}
	if op != transport.AMOFetch {
		l.pe.rma.wake(target)
	}
	return old, nil
}

func amoOn[T uint32 | uint64](w *T, op transport.AMO, v, cmp T) T {
	switch op {
	case transport.AMOFetch:
		return core.Load(w)
	case transport.AMOSet:
		old := core.Load(w)
		core.Store(w, v)
		return old
	case transport.AMOSwap:
		return core.Swap(w, v)
	case transport.AMOCompareSwap:
		return core.CAS(w, cmp, v)
	case transport.AMOFetchAdd, transport.AMOAdd:
		return core.FetchAdd(w, v)
	case transport.AMOFetchAnd, transport.AMOAnd:
		return core.FetchAnd(w, v)
	case transport.AMOFetchOr, transport.AMOOr:
		return core.FetchOr(w, v)
	case transport.AMOFetchXor, transport.AMOXor:
		return core.FetchXor(w, v)
	}
	panic(fmt.Sprintf("loopback: AMO %d", op))
}

func (l *loopback) Fence() error { return l.Quiet() }

func (l *loopback) Quiet() error {
	l.qts.Add(1)
	core.FullFence()
	l.pe.rma.wakeAll()
	return nil
}

func (l *loopback) Progress() { l.progress.Add(1) }

// TestSeamLoopback runs the one-sided checks of the PE suite with every
// other PE far, reached through a loopback Remote: every put, get, atomic
// and wait of the checks takes the seam, and must behave as the direct
// path does.
func TestSeamLoopback(t *testing.T) {
	seamChecks := []string{"PutGet", "PutGetErrors", "Strided", "NBIQuiet", "Atomics", "AtomicErrors",
		"WaitRing", "WaitPingPong", "WaitCmp", "WaitPut", "WaitSleep"}
	petest.Run(t, 3, func(t *testing.T) {
		pe, err := Init(Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer pe.Close()
		loop := &loopback{pe: pe}
		var far []int
		for p := range pe.Size() {
			if p != pe.Rank() {
				far = append(far, p)
			}
		}
		pe.rma.useRemote(&pe.sp, loop, far)
		byName := map[string]peCheck{}
		for _, c := range peChecks() {
			byName[c.name] = c
		}
		var checks []peCheck
		for _, name := range seamChecks {
			c, ok := byName[name]
			if !ok {
				t.Fatalf("no check %q in the PE suite", name)
			}
			checks = append(checks, c)
		}
		runCheckList(t, pe, checks)
		if loop.puts.Load() == 0 || loop.gets.Load() == 0 || loop.amos.Load() == 0 || loop.qts.Load() == 0 {
			t.Errorf("the seam was not taken: puts %d, gets %d, atomics %d, quiets %d",
				loop.puts.Load(), loop.gets.Load(), loop.amos.Load(), loop.qts.Load())
		}
		if lerr := pe.SetLock(new(int64)); pe.Rank() != 0 && !errors.Is(lerr, ErrNotSupported) {
			t.Errorf("SetLock with PE 0 far: %v, want ErrNotSupported", lerr)
		}
	}, petest.Heap("16m"), petest.Env("SYMHEAP_SHARED_SIZE=1m", "SYMHEAP_ALLOC_VERIFY=1"))
}
