package symheap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/internal/petest"
)

// Tests of the local shared heap (shared.go). They run on real PEs; each
// PE starts with startPE, which checks the PE's shared heap and closes it
// at the end, or ends the whole job at once if the PE failed (so that no
// PE waits in a barrier for one that will not come).

// startPE initialises this PE for a test and arranges its end.
func startPE(t *testing.T) *PE {
	t.Helper()
	pe, err := Init(Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			fmt.Printf("PE %d failed; ending the job\n", pe.Rank())
			pe.GlobalExit(1)
		}
		if !pe.closed.Load() {
			if err := pe.CheckHeaps(); err != nil {
				t.Errorf("PE %d: heap invariants: %v", pe.Rank(), err)
			}
		}
		if err := pe.Close(); err != nil {
			t.Errorf("PE %d: Close: %v", pe.Rank(), err)
		}
	})
	return pe
}

// need returns v, or panics with err and its caller's position: the PE
// fails, and the launcher stops the others. (It cannot take t: a call
// f(t, g()) with g returning two values is not Go.)
func need[T any](v T, err error) T {
	if err != nil {
		_, file, line, _ := runtime.Caller(1)
		panic(fmt.Sprintf("%s:%d: %v", filepath.Base(file), line, err))
	}
	return v
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func sync2(t *testing.T, pe *PE) {
	t.Helper()
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
}

// record is a plain-data element for shared blocks.
type record struct {
	Seq   int64
	From  int32
	Check uint32
	Data  [5]float64
}

// ptrRecord holds a pointer: the shared heap must refuse it.
type ptrRecord struct {
	N int
	P *int
}

// sharedOpts are the options of the shared heap jobs: a small heap of
// each kind, and the allocator's self-check after every change.
func sharedOpts(extra ...petest.Option) []petest.Option {
	return append([]petest.Option{petest.Heap("8m"), petest.Env("SYMHEAP_SHARED_SIZE=2m", "SYMHEAP_ALLOC_VERIFY=1"),
		petest.Timeout(60 * time.Second)}, extra...)
}

// TestSharedHeap: allocation, visibility at the same address (or through
// SharedPtr in offset mode), ownership, frees by the owner and by others,
// and the counters, in both placement modes.
func TestSharedHeap(t *testing.T) {
	for _, mode := range []string{"same-address", "offset"} {
		t.Run(mode, func(t *testing.T) {
			var opts []petest.Option
			if mode == "offset" {
				opts = append(opts, petest.OffsetMode())
			}
			petest.Run(t, 3, func(t *testing.T) { checkSharedHeap(t, mode) }, sharedOpts(opts...)...)
		})
	}
}

func checkSharedHeap(t *testing.T, mode string) {
	pe := startPE(t)
	me, n := pe.Rank(), pe.Size()
	if (mode == "offset") == pe.SameAddress() {
		t.Fatalf("mode %s but SameAddress() = %v", mode, pe.SameAddress())
	}
	stats := pe.stats
	a0, f0, r0 := stats.SharedAllocs.Load(), stats.SharedFrees.Load(), stats.RemoteFrees.Load()

	// Every PE allocates a block of records, fills it, and publishes its
	// SharedPtr in a symmetric table.
	table := need(Calloc[uint64](pe, n))
	recs := need(SharedAlloc[record](pe, 100))
	if owner, ok := SharedOwner(pe, recs); !ok || owner != me {
		t.Fatalf("SharedOwner of our block: %d, %v", owner, ok)
	}
	if uintptr(unsafe.Pointer(&recs[0]))%unsafe.Alignof(record{}) != 0 {
		t.Fatalf("block at %p is misaligned", &recs[0])
	}
	for i := range recs {
		recs[i] = record{Seq: int64(i), From: int32(me), Check: uint32(i * me)}
	}
	p := need(SharedPtrOf(pe, recs))
	if pe.SameAddress() && uintptr(p) != uintptr(unsafe.Pointer(&recs[0])) {
		t.Fatalf("same-address job: SharedPtr %#x is not the address %p", uint64(p), &recs[0])
	}
	for q := 0; q < n; q++ {
		noErr(t, AtomicSet(pe, &table[me], uint64(p), q))
	}
	sync2(t, pe)

	// Every PE reads its right neighbour's block at its SharedPtr.
	r := (me + 1) % n
	theirs := need(SharedAt[record](pe, SharedPtr(table[r]), 100))
	if owner, ok := SharedOwner(pe, theirs); !ok || owner != r {
		t.Fatalf("SharedOwner of PE %d's block: %d, %v", r, owner, ok)
	}
	for i, x := range theirs {
		if x != (record{Seq: int64(i), From: int32(r), Check: uint32(i * r)}) {
			t.Fatalf("PE %d's record %d reads %+v", r, i, x)
		}
	}
	// Writes through it are seen by the owner.
	theirs[7].Data[2] = float64(me) + 0.5
	sync2(t, pe)
	if got, want := recs[7].Data[2], float64((me+n-1)%n)+0.5; got != want {
		t.Fatalf("left neighbour's write reads %v, want %v", got, want)
	}
	sync2(t, pe)

	// The right neighbour frees our block; we free our own second block.
	mine2 := need(SharedAlloc[int32](pe, 3))
	noErr(t, SharedFree(pe, theirs))
	noErr(t, SharedFree(pe, mine2))
	sync2(t, pe)
	if got := stats.SharedAllocs.Load() - a0; got != 2 {
		t.Errorf("sharedAllocs counted %d, want 2", got)
	}
	if got := stats.SharedFrees.Load() - f0; got != 2 {
		t.Errorf("sharedFree counted %d, want 2", got)
	}
	if got := stats.RemoteFrees.Load() - r0; got != 1 {
		t.Errorf("remoteFrees counted %d, want 1", got)
	}
	if st := pe.ext.shared.pools[me].Stats(); st.Live != 0 {
		t.Errorf("%d blocks still live in our shared heap", st.Live)
	}
	noErr(t, Free(pe, table))

	// Zero elements and empty slices.
	if s, err := SharedAlloc[int64](pe, 0); s != nil || err != nil {
		t.Errorf("SharedAlloc of 0: %v, %v", s, err)
	}
	noErr(t, SharedFree[int64](pe, nil))
	if _, ok := SharedOwner[byte](pe, nil); ok {
		t.Error("SharedOwner(nil) says ok")
	}
	if _, ok := SharedOwner(pe, make([]byte, 8)); ok {
		t.Error("SharedOwner of Go memory says ok")
	}
	sync2(t, pe)
}

// TestSharedErrors: every refusal is clear and changes nothing.
func TestSharedErrors(t *testing.T) {
	petest.Run(t, 2, func(t *testing.T) {
		pe := startPE(t)
		me := pe.Rank()
		pool := pe.ext.shared.pools[me]
		before := pool.Stats()

		// Pointer element types.
		_, err := SharedAlloc[ptrRecord](pe, 1)
		wantIs(t, "SharedAlloc of a pointer type", err, ErrPointerType, "field P")
		_, err = SharedAlloc[string](pe, 1)
		wantIs(t, "SharedAlloc of strings", err, ErrPointerType)
		_, err = SharedAt[*int](pe, 0, 1)
		wantIs(t, "SharedAt of pointers", err, ErrPointerType)
		// Negative and overflowing sizes.
		_, err = SharedAlloc[int64](pe, -1)
		wantIs(t, "SharedAlloc(-1)", err, ErrBadArg)
		_, err = SharedAlloc[[1 << 20]byte](pe, 1<<44)
		wantIs(t, "SharedAlloc overflowing", err, ErrOutOfMemory)
		// Out of memory: names the variable, changes nothing.
		_, err = SharedAlloc[byte](pe, 3<<20)
		wantIs(t, "SharedAlloc beyond the heap", err, ErrOutOfMemory, "SYMHEAP_SHARED_SIZE", "2M per PE")
		if after := pool.Stats(); after.Live != before.Live || after.Free != before.Free {
			t.Errorf("a failed SharedAlloc changed the heap: %+v -> %+v", before, after)
		}

		// Bad frees.
		b := need(SharedAlloc[int64](pe, 16))
		wantIs(t, "SharedFree of an interior slice", SharedFree(pe, b[1:]), ErrBadFree)
		wantIs(t, "SharedFree of Go memory", SharedFree(pe, make([]int64, 4)), ErrBadFree, "ordinary Go memory")
		sym := need(Malloc[int64](pe, 4))
		wantIs(t, "SharedFree of a symmetric block", SharedFree(pe, sym), ErrBadFree, "symmetric heap")
		noErr(t, SharedFree(pe, b[:0])) // a reslice at the start is the block
		mid := pool.Stats()
		wantIs(t, "double SharedFree", SharedFree(pe, b), ErrBadFree)
		if after := pool.Stats(); after.Live != mid.Live || after.Free != mid.Free {
			t.Errorf("a double free changed the heap: %+v -> %+v", mid, after)
		}
		// SharedPtr conversions refuse what is not a shared block.
		_, err = SharedPtrOf(pe, sym)
		wantIs(t, "SharedPtrOf a symmetric block", err, ErrBadArg)
		_, err = SharedAt[int64](pe, 12345, 1)
		wantIs(t, "SharedAt of a stray value", err, ErrBadArg)
		c := need(SharedAlloc[byte](pe, 64))
		cp := need(SharedPtrOf(pe, c))
		_, err = SharedAt[int64](pe, cp+1, 1)
		wantIs(t, "SharedAt misaligned", err, ErrBadArg, "misaligned")
		_, err = SharedAt[byte](pe, cp, int(pe.sp.Lay.SharedSize)+1)
		wantIs(t, "SharedAt past the heap", err, ErrBadArg)
		noErr(t, SharedFree(pe, c))
		sync2(t, pe)
		noErr(t, Free(pe, sym))
		if st := pool.Stats(); st.Live != 0 {
			t.Errorf("%d blocks left", st.Live)
		}
		noErr(t, pe.Close())
		_, err = SharedAlloc[byte](pe, 1)
		wantIs(t, "SharedAlloc after Close", err, ErrClosed)
	}, sharedOpts()...)
}

// wantIs fails t unless err wraps target and mentions every word.
func wantIs(t *testing.T, what string, err, target error, words ...string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want %v", what, err, target)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not mention %q", what, err, w)
		}
	}
}

// TestSharedRemoteFree: PE 0 allocates blocks of random sizes, thousands
// of them, and hands each to PE 1 or PE 2 by message; they check the
// contents and free the blocks into PE 0's heap while PE 0 keeps
// allocating (and freeing some itself). At the end PE 0's heap is empty
// and passes the allocator's full check. Once with every component.
func TestSharedRemoteFree(t *testing.T) {
	for _, comp := range alloc.Names() {
		t.Run(comp, func(t *testing.T) { checkSharedRemoteFree(t, comp) })
	}
}

func checkSharedRemoteFree(t *testing.T, comp string) {
	petest.Run(t, 3, func(t *testing.T) {
		pe := startPE(t)
		const blocks = 3000
		switch pe.Rank() {
		case 0:
			rng := rand.New(rand.NewPCG(1, 2))
			var keep [][]byte
			var msg [24]byte
			for i := 0; i < blocks; i++ {
				n := 1 + rng.IntN(2000)
				b, err := SharedAlloc[byte](pe, n)
				for err != nil {
					// Full: the consumers free what we sent; let them.
					wantIs(t, "SharedAlloc", err, ErrOutOfMemory)
					time.Sleep(time.Millisecond)
					b, err = SharedAlloc[byte](pe, n)
				}
				for j := range b {
					b[j] = byte(i + j)
				}
				if i%5 == 0 {
					keep = append(keep, b) // some we free ourselves
					continue
				}
				binary.LittleEndian.PutUint64(msg[:], uint64(need(SharedPtrOf(pe, b))))
				binary.LittleEndian.PutUint64(msg[8:], uint64(i))
				binary.LittleEndian.PutUint64(msg[16:], uint64(n))
				noErr(t, pe.Send(msg[:], 1+i%2, i%7))
				if len(keep) > 20 {
					noErr(t, SharedFree(pe, keep[0]))
					keep = keep[1:]
				}
			}
			for _, b := range keep {
				noErr(t, SharedFree(pe, b))
			}
			for q := 1; q <= 2; q++ {
				noErr(t, pe.Send(nil, q, 99))
			}
		default:
			var msg [24]byte
			for {
				st := need(pe.Recv(msg[:], 0, AnyTag))
				if st.Tag == 99 {
					break
				}
				i := int(binary.LittleEndian.Uint64(msg[8:]))
				n := int(binary.LittleEndian.Uint64(msg[16:]))
				if st.Count != len(msg) || i%7 != st.Tag || i%2 != pe.Rank()-1 {
					t.Fatalf("message %+v announces block %d", st, i)
				}
				b := need(SharedAt[byte](pe, SharedPtr(binary.LittleEndian.Uint64(msg[:])), n))
				if owner, ok := SharedOwner(pe, b); !ok || owner != 0 {
					t.Fatalf("block from PE 0 owned by %d (%v)", owner, ok)
				}
				for j := range b {
					if b[j] != byte(i+j) {
						t.Fatalf("block %d byte %d reads %d, want %d", i, j, b[j], byte(i+j))
					}
				}
				noErr(t, SharedFree(pe, b))
			}
		}
		sync2(t, pe)
		if pe.Rank() == 0 {
			pool := pe.ext.shared.pools[0]
			if st := pool.Stats(); st.Live != 0 {
				t.Errorf("%d blocks left in PE 0's shared heap", st.Live)
			}
			noErr(t, pool.Check())
		} else if got := pe.stats.RemoteFrees.Load(); got < blocks/3 {
			t.Errorf("PE %d counted %d remote frees", pe.Rank(), got)
		}
		// Any PE can check any heap.
		p0 := need(pe.ext.shared.pool(0))
		noErr(t, p0.Check())
		sync2(t, pe)
		if pe.AllocatorName() != comp {
			t.Errorf("allocator %s, want %s", pe.AllocatorName(), comp)
		}
	}, petest.Heap("8m"), petest.Allocator(comp), petest.Env("SYMHEAP_SHARED_SIZE=1m"), petest.Timeout(120*time.Second))
}
