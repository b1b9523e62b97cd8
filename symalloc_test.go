package symheap

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/petest"
	"github.com/symheap/symheap/memhook"
)

// The PE suite: every check of symmetric allocation, RMA, atomics, waits
// and locks runs on real PEs, in every configuration of peConfigs, with
// one job per configuration (a launch costs far more than a check). The
// checks are collective: every PE runs each of them, in the same order.
// A check that fails on one PE ends that PE at once, and the launcher then
// stops the others, so that they do not wait for it in a barrier.

// peConfig is one configuration of the PE suite.
type peConfig struct {
	n         int
	allocator string // "": the default component
	offset    bool   // forced offset mode
	protect   bool   // protected mode (SYMHEAP_PROTECT=1)
}

func (c peConfig) String() string {
	a := c.allocator
	if a == "" {
		a = "default"
	}
	s := fmt.Sprintf("%s-%dPE", a, c.n)
	if c.offset {
		s += "-offset"
	}
	if c.protect {
		s += "-protect"
	}
	return s
}

// peConfigs: 2, 3, 4 and 8 PEs with the default and the buddy component,
// each PE count once in forced offset mode, and protected mode once.
var peConfigs = []peConfig{
	{n: 2}, {n: 3}, {n: 4}, {n: 8},
	{n: 2, allocator: "buddy"}, {n: 3, allocator: "buddy"}, {n: 4, allocator: "buddy"}, {n: 8, allocator: "buddy"},
	{n: 2, offset: true}, {n: 3, allocator: "buddy", offset: true}, {n: 4, offset: true}, {n: 8, allocator: "buddy", offset: true},
	{n: 3, protect: true},
}

// peCheck is one collective check.
type peCheck struct {
	name string
	fn   func(t *testing.T, pe *PE)
}

// peChecks lists the suite in the order every PE runs it.
func peChecks() []peCheck {
	return []peCheck{
		// symalloc_test.go
		{"MallocFreeGrowing", checkMallocFreeGrowing},
		{"Calloc", checkCalloc},
		{"Realloc", checkRealloc},
		{"Align", checkAlign},
		{"Largest", checkLargest},
		{"RandomFill", checkRandomFill},
		{"Huge", checkHuge},
		{"ZeroLength", checkZeroLength},
		{"Divergence", checkDivergence},
		{"FreeEntryBarrier", checkFreeEntryBarrier},
		{"PointerType", checkPointerType},
		{"Hints", checkHints},
		{"FreeErrors", checkFreeErrors},
		{"ReleaseEvents", checkReleaseEvents},
		{"ReleaseAcross", checkReleaseAcross},
		{"ReleaseCache", checkReleaseCache},
		{"ReleaseIdle", checkReleaseIdle},
		// rma_test.go
		{"PutGet", checkPutGet},
		{"PutGetOverlap", checkPutGetOverlap},
		{"PutGetErrors", checkPutGetErrors},
		{"Strided", checkStrided},
		{"NBIQuiet", checkNBIQuiet},
		{"Ptr", checkPtr},
		{"RMAAllocs", checkRMAAllocs},
		// atomic_test.go
		{"Atomics", checkAtomics},
		{"AtomicErrors", checkAtomicErrors},
		// wait_test.go
		{"WaitRing", checkWaitRing},
		{"WaitPingPong", checkWaitPingPong},
		{"WaitCmp", checkWaitCmp},
		{"WaitPut", checkWaitPut},
		{"WaitSleep", checkWaitSleep},
		{"WaitErrors", checkWaitErrors},
		// lock_test.go
		{"LockCounter", checkLockCounter},
		{"LockFIFO", checkLockFIFO},
		{"TestLock", checkTestLock},
		{"LockErrors", checkLockErrors},
	}
}

// haveComponent skips t when an allocator component is not built in.
func haveComponent(t *testing.T, name string) {
	if name == "" {
		return
	}
	if _, ok := alloc.Lookup(name); !ok {
		t.Skipf("allocator component %q is not registered in this build (have %v)", name, alloc.Names())
	}
}

// TestPESuite runs the suite in every configuration.
func TestPESuite(t *testing.T) {
	for _, cfg := range peConfigs {
		t.Run(cfg.String(), func(t *testing.T) {
			haveComponent(t, cfg.allocator)
			opts := []petest.Option{petest.Heap("16m"), petest.Env("SYMHEAP_SHARED_SIZE=1m", "SYMHEAP_ALLOC_VERIFY=1"),
				petest.Timeout(120 * time.Second)}
			if cfg.allocator != "" {
				opts = append(opts, petest.Allocator(cfg.allocator))
			}
			if cfg.offset {
				opts = append(opts, petest.OffsetMode())
			}
			if cfg.protect {
				opts = append(opts, petest.Env("SYMHEAP_PROTECT=1"))
			}
			petest.Run(t, cfg.n, func(t *testing.T) { runChecks(t, cfg, peChecks()) }, opts...)
		})
	}
}

// runChecks is a PE's side of the suite.
func runChecks(t *testing.T, cfg peConfig, checks []peCheck) {
	pe, err := Init(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if pe.Size() != cfg.n {
		t.Fatalf("job of %d PEs, want %d", pe.Size(), cfg.n)
	}
	if cfg.offset && pe.SameAddress() {
		t.Fatal("SYMHEAP_OFFSET_MODE=1 but the job runs at the same address")
	}
	if pe.Protected() != cfg.protect {
		t.Fatalf("protected mode %v, want %v", pe.Protected(), cfg.protect)
	}
	if cfg.allocator != "" && pe.AllocatorName() != cfg.allocator {
		t.Fatalf("allocator %s, want %s", pe.AllocatorName(), cfg.allocator)
	}
	runCheckList(t, pe, checks)
	if err := pe.Close(); err != nil {
		t.Fatal(err)
	}
}

// runCheckList runs checks on pe in order, each as a subtest, with the
// heap checked empty and consistent after each, and a barrier between.
func runCheckList(t *testing.T, pe *PE, checks []peCheck) {
	for _, c := range checks {
		start := time.Now()
		ok := t.Run(c.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					if f, ok := r.(checkFailure); ok {
						t.Fatal(string(f))
					}
					panic(r)
				}
			}()
			c.fn(t, pe)
			// Every check frees what it allocated: the heap is empty
			// and consistent again.
			if st := pe.ext.sym.heap.Stats(); st.Live != 0 {
				t.Errorf("check left %d live blocks (%d bytes) in the symmetric heap", st.Live, st.InUse)
			}
			if err := pe.ext.sym.heap.Check(); err != nil {
				t.Errorf("heap invariants: %v", err)
			}
		})
		if !ok {
			// The launcher stops the other PEs when this one fails; those
			// already waiting for it get ErrPeerLost.
			fmt.Printf("PE %d: check %s failed; ending the job\n", pe.Rank(), c.name)
			os.Exit(1)
		}
		if err := pe.Barrier(); err != nil {
			t.Fatalf("barrier after %s: %v", c.name, err)
		}
		if pe.Rank() == 0 && testing.Verbose() {
			fmt.Printf("%-18s %v\n", c.name, time.Since(start).Round(time.Millisecond))
		}
	}
}

// Helpers for the checks.

func right(pe *PE) int { return (pe.Rank() + 1) % pe.Size() }
func left(pe *PE) int  { return (pe.Rank() + pe.Size() - 1) % pe.Size() }

func barrier(t *testing.T, pe *PE) {
	t.Helper()
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
}

// must returns v, or fails the check when err is not nil: it panics with
// a checkFailure that runChecks turns into t.Fatal. (It cannot take t: a
// call f(t, g()) with g returning two values is not Go.)
func must[T any](v T, err error) T {
	if err != nil {
		_, file, line, _ := runtime.Caller(1)
		panic(checkFailure(fmt.Sprintf("%s:%d: %v", filepath.Base(file), line, err)))
	}
	return v
}

type checkFailure string

func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantErr fails t unless err wraps target and mentions every word.
func wantErr(t *testing.T, what string, err, target error, words ...string) {
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

// pattern is the byte PE rank writes at index i.
func pattern(rank, i int) byte { return byte(rank*37 + i*7 + i>>8) }

// checkMallocFreeGrowing: repeated Malloc and Free of growing buffers,
// each filled with a pattern that the left neighbour reads back with Get.
func checkMallocFreeGrowing(t *testing.T, pe *PE) {
	me, r := pe.Rank(), right(pe)
	got := make([]byte, 1<<21)
	for n := 1; n <= 1<<21; n = n*2 + 1 {
		s := must(Malloc[byte](pe, n))
		if len(s) != n {
			t.Fatalf("Malloc(%d) gave %d bytes", n, len(s))
		}
		for i := range s {
			s[i] = pattern(me, i)
		}
		barrier(t, pe)
		ok(t, Get(pe, got[:n], s, r))
		for i := 0; i < n; i++ {
			if got[i] != pattern(r, i) {
				t.Fatalf("%d bytes: byte %d of PE %d's copy is %#x, want %#x", n, i, r, got[i], pattern(r, i))
			}
		}
		barrier(t, pe)
		ok(t, Free(pe, s))
	}
}

// checkCalloc: Calloc zero-fills memory that held data before.
func checkCalloc(t *testing.T, pe *PE) {
	for _, n := range []int{1, 100, 4096, 1 << 17} {
		s := must(Malloc[uint64](pe, n))
		for i := range s {
			s[i] = ^uint64(0)
		}
		ok(t, Free(pe, s))
		c := must(Calloc[uint64](pe, n))
		for i, v := range c {
			if v != 0 {
				t.Fatalf("Calloc(%d): element %d is %#x", n, i, v)
			}
		}
		got := make([]uint64, n)
		ok(t, Get(pe, got, c, right(pe)))
		for i, v := range got {
			if v != 0 {
				t.Fatalf("Calloc(%d): element %d of PE %d's copy is %#x", n, i, right(pe), v)
			}
		}
		barrier(t, pe)
		ok(t, Free(pe, c))
	}
	type rec struct {
		A int32
		B [3]float64
	}
	c := must(Calloc[rec](pe, 33))
	for i := range c {
		if c[i] != (rec{}) {
			t.Fatalf("Calloc of structs: element %d is %+v", i, c[i])
		}
	}
	ok(t, Free(pe, c))
}

// checkRealloc: 20 rounds of growth keep the contents, the block stays
// symmetric (a put into it lands in the neighbour's copy), a failed
// Realloc leaves the block intact, shrinking keeps the prefix.
func checkRealloc(t *testing.T, pe *PE) {
	me, r, l := pe.Rank(), right(pe), left(pe)
	val := func(rank, i int) int64 { return int64(rank)<<32 | int64(i) }
	s := must(Realloc[int64](pe, nil, 8))
	for i := range s {
		s[i] = val(me, i)
	}
	for round := 0; round < 20; round++ {
		old := len(s)
		n := old + old/2 + 7
		s = must(Realloc(pe, s, n))
		if len(s) != n {
			t.Fatalf("round %d: Realloc to %d gave %d", round, n, len(s))
		}
		for i := 0; i < old; i++ {
			if s[i] != val(me, i) {
				t.Fatalf("round %d: element %d is %#x after growing to %d, want %#x", round, i, s[i], n, val(me, i))
			}
		}
		for i := old; i < n; i++ {
			s[i] = val(me, i)
		}
	}
	// Symmetric: the last element, put by the left neighbour.
	barrier(t, pe)
	last := len(s) - 1
	ok(t, Put(pe, s[last:], []int64{val(me, -1)}, r))
	barrier(t, pe)
	if s[last] != val(l, -1) {
		t.Fatalf("after Realloc, the put from PE %d into element %d gave %#x", l, last, s[last])
	}
	s[last] = val(me, last)
	barrier(t, pe)
	// A failed Realloc keeps the block.
	_, err := Realloc(pe, s, 1<<40)
	wantErr(t, "Realloc to 8 TiB", err, ErrOutOfMemory, "SHMEM_SYMMETRIC_SIZE")
	for i := range s {
		if s[i] != val(me, i) {
			t.Fatalf("after a failed Realloc element %d is %#x", i, s[i])
		}
	}
	// Shrink.
	s = must(Realloc(pe, s, 5))
	for i := range s {
		if s[i] != val(me, i) {
			t.Fatalf("after shrinking element %d is %#x", i, s[i])
		}
	}
	s, err = Realloc(pe, s, 0)
	if s != nil || err != nil {
		t.Fatalf("Realloc to 0: %v, %v; want nil, nil", s, err)
	}
}

// checkAlign: alignments 2^1 to 2^23 give aligned, symmetric blocks
// (those up to 2^20 held all at once, the larger ones one at a time: a
// 16 MiB heap has room for one 2^23-aligned block only); zero, non-powers
// of two and 2^24 are ErrBadAlign.
func checkAlign(t *testing.T, pe *PE) {
	r := right(pe)
	var blocks [][]int32
	for k := 1; k <= 23; k++ {
		if k > 20 {
			alignOne(t, pe, k)
			continue
		}
		a := uintptr(1) << k
		s := must(Align[int32](pe, a, 2))
		p, _ := core.SliceData(s)
		if uintptr(p)%a != 0 {
			t.Fatalf("Align(%d) gave %p", a, p)
		}
		if !pe.SameAddress() {
			if off, ok := pe.symOff(p, 8); !ok || off%uint64(a) != 0 {
				t.Fatalf("Align(%d): heap offset %#x", a, off)
			}
		}
		s[0], s[1] = int32(k), int32(pe.Rank())
		blocks = append(blocks, s)
	}
	barrier(t, pe)
	got := make([]int32, 2)
	for i, s := range blocks {
		ok(t, Get(pe, got, s, r))
		if got[0] != int32(i+1) || got[1] != int32(r) {
			t.Fatalf("Align(2^%d): PE %d's copy holds %v", i+1, r, got)
		}
	}
	barrier(t, pe)
	for _, s := range blocks {
		ok(t, Free(pe, s))
	}
	for _, a := range []uintptr{0, 3, 24, 1 << 24, 1<<23 + 1} {
		_, err := Align[byte](pe, a, 1)
		wantErr(t, fmt.Sprintf("Align(%d)", a), err, ErrBadAlign)
	}
}

// alignOne allocates one block aligned to 2^k, checks it and frees it.
func alignOne(t *testing.T, pe *PE, k int) {
	a := uintptr(1) << k
	s := must(Align[int64](pe, a, 1))
	if p, _ := core.SliceData(s); uintptr(p)%a != 0 {
		t.Fatalf("Align(%d) gave %p", a, p)
	}
	s[0] = int64(k)
	barrier(t, pe)
	got := []int64{0}
	ok(t, Get(pe, got, s, right(pe)))
	if got[0] != int64(k) {
		t.Fatalf("Align(2^%d): PE %d's copy holds %d", k, right(pe), got[0])
	}
	barrier(t, pe)
	ok(t, Free(pe, s))
}

// checkLargest: on an empty heap the memory available is the heap size
// less the overhead the allocator states. For tlsf and dlmalloc it is one
// block, so the largest allocation is exactly that; buddy's free space is a
// few power-of-two blocks, and Stats.LargestFree says which is largest. In
// both cases: LargestFree succeeds, one byte more is ErrOutOfMemory, and
// allocating the largest free block until none is left takes exactly
// Size - Overhead bytes, after which Malloc(1) is ErrOutOfMemory.
func checkLargest(t *testing.T, pe *PE) {
	st := pe.ext.sym.heap.Stats()
	if st.Live != 0 || st.Size != pe.sp.Lay.HeapSize {
		t.Fatalf("heap not empty or wrong size: %+v (heap %d)", st, pe.sp.Lay.HeapSize)
	}
	avail := st.Size - st.Overhead
	if st.Free != avail {
		t.Fatalf("%s: Free %d on an empty heap, Size-Overhead %d", pe.AllocatorName(), st.Free, avail)
	}
	if pe.AllocatorName() != "buddy" && st.LargestFree != avail {
		t.Fatalf("%s: LargestFree %d on an empty heap, Size-Overhead %d", pe.AllocatorName(), st.LargestFree, avail)
	}
	_, err := Malloc[byte](pe, int(st.LargestFree)+1)
	wantErr(t, fmt.Sprintf("Malloc(largest+1 = %d)", st.LargestFree+1), err, ErrOutOfMemory, "SHMEM_SYMMETRIC_SIZE")
	var blocks [][]byte
	total := uint64(0)
	for cur := pe.ext.sym.heap.Stats(); cur.Free > 0; cur = pe.ext.sym.heap.Stats() {
		if len(blocks) == 64 {
			t.Fatalf("%s: still %d bytes free after 64 allocations of the largest free block", pe.AllocatorName(), cur.Free)
		}
		s := must(Malloc[byte](pe, int(cur.LargestFree)))
		s[0], s[len(s)-1] = 1, byte(pe.Rank())
		blocks = append(blocks, s)
		total += uint64(len(s))
	}
	if total != avail {
		t.Fatalf("%s: allocated %d bytes in %d blocks on an empty heap, want Size-Overhead = %d", pe.AllocatorName(), total, len(blocks), avail)
	}
	barrier(t, pe)
	got := []byte{0}
	big := blocks[0]
	ok(t, Get(pe, got, big[len(big)-1:], right(pe)))
	if got[0] != byte(right(pe)) {
		t.Fatalf("last byte of PE %d's largest block: %d", right(pe), got[0])
	}
	_, err = Malloc[byte](pe, 1)
	wantErr(t, "Malloc(1) on a full heap", err, ErrOutOfMemory)
	barrier(t, pe)
	for _, s := range blocks {
		ok(t, Free(pe, s))
	}
	t.Logf("%s: heap %d, overhead %d, largest allocation %d, all of it in %d blocks", pe.AllocatorName(), st.Size, st.Overhead, st.LargestFree, len(blocks))
}

// checkRandomFill fills the heap to 80 % with random sizes and random
// frees (the same seed on every PE, so the same calls), each block holding
// its number, then checks every block here and a sample on the neighbour.
func checkRandomFill(t *testing.T, pe *PE) {
	rng := rand.New(rand.NewPCG(42, uint64(len(pe.AllocatorName()))))
	type block struct {
		s  []uint64
		id uint64
	}
	var live []block
	size := pe.ext.sym.heap.Stats().Size
	id := uint64(0)
	for pe.ext.sym.heap.Stats().InUse < size*8/10 {
		if len(live) > 0 && rng.IntN(4) == 0 {
			i := rng.IntN(len(live))
			b := live[i]
			for j, v := range b.s {
				if v != b.id<<16|uint64(j) {
					t.Fatalf("block %d element %d is %#x before its free", b.id, j, v)
				}
			}
			ok(t, Free(pe, b.s))
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
			continue
		}
		n := 1 + rng.IntN(4096)
		if rng.IntN(8) == 0 {
			n = 1 + rng.IntN(32768)
		}
		id++
		s, err := Malloc[uint64](pe, n)
		if err != nil {
			st := pe.ext.sym.heap.Stats()
			t.Fatalf("Malloc(%d uint64) at %.1f %% in use: %v (stats %+v)", n, 100*float64(st.InUse)/float64(size), err, st)
		}
		for j := range s {
			s[j] = id<<16 | uint64(j)
		}
		live = append(live, block{s, id})
	}
	barrier(t, pe)
	for k, b := range live {
		if k%7 != 0 {
			continue
		}
		got := make([]uint64, len(b.s))
		ok(t, Get(pe, got, b.s, right(pe)))
		for j, v := range got {
			if v != b.id<<16|uint64(j) {
				t.Fatalf("PE %d's block %d element %d is %#x", right(pe), b.id, j, v)
			}
		}
	}
	barrier(t, pe)
	t.Logf("%d blocks live at %.1f %% in use after %d allocations", len(live), 100*float64(pe.ext.sym.heap.Stats().InUse)/float64(size), id)
	for _, b := range live {
		ok(t, Free(pe, b.s))
	}
}

// checkHuge: requests far beyond the heap fail cleanly on every PE, the
// message naming the variable that raises the heap size.
func checkHuge(t *testing.T, pe *PE) {
	_, err := Malloc[byte](pe, 8e12)
	wantErr(t, "Malloc(8e12)", err, ErrOutOfMemory, "SHMEM_SYMMETRIC_SIZE", "8000000000000")
	_, err = Calloc[int64](pe, 1e12)
	wantErr(t, "Calloc(1e12 int64)", err, ErrOutOfMemory, "SHMEM_SYMMETRIC_SIZE")
	_, err = Malloc[int64](pe, 1<<61)
	wantErr(t, "Malloc(2^61 int64)", err, ErrOutOfMemory)
	_, err = Malloc[int64](pe, -1)
	wantErr(t, "Malloc(-1)", err, ErrBadArg)
	// The heap is still in order.
	s := must(Malloc[byte](pe, 100))
	ok(t, Free(pe, s))
}

// checkZeroLength: zero-length operations do nothing and need no barrier.
func checkZeroLength(t *testing.T, pe *PE) {
	r := right(pe)
	if s, err := Malloc[int64](pe, 0); s != nil || err != nil {
		t.Fatalf("Malloc(0): %v, %v", s, err)
	}
	if s, err := Calloc[int64](pe, 0); s != nil || err != nil {
		t.Fatalf("Calloc(0): %v, %v", s, err)
	}
	if s, err := Align[int64](pe, 64, 0); s != nil || err != nil {
		t.Fatalf("Align(64, 0): %v, %v", s, err)
	}
	if s, err := MallocWithHints[int64](pe, 0, HintAtomicsRemote); s != nil || err != nil {
		t.Fatalf("MallocWithHints(0): %v, %v", s, err)
	}
	if s, err := Realloc[int64](pe, nil, 0); s != nil || err != nil {
		t.Fatalf("Realloc(nil, 0): %v, %v", s, err)
	}
	ok(t, Free[int64](pe, nil))
	// Only PE 0 makes these: they must not wait for the others.
	if pe.Rank() == 0 {
		for i := 0; i < 3; i++ {
			Malloc[byte](pe, 0)
			Free[byte](pe, nil)
		}
	}
	goSlice := []int64{}
	ok(t, Put(pe, goSlice, goSlice, r))
	ok(t, Put[int64](pe, nil, nil, r))
	ok(t, Get[int64](pe, nil, nil, r))
	ok(t, PutNBI(pe, goSlice, nil, r))
	ok(t, GetNBI(pe, goSlice, nil, r))
	ok(t, IPut(pe, goSlice, goSlice, 1, 1, 0, r))
	ok(t, IGet(pe, goSlice, goSlice, 1, 1, 0, r))
	// Zero elements still check the PE.
	wantErr(t, "Put of nothing to PE -1", Put[int64](pe, nil, nil, -1), ErrBadPE)
}

// checkDivergence: PEs that make different collective allocations all get
// ErrDiverged naming the PEs, call numbers and arguments, and the heap is
// left as it was.
func checkDivergence(t *testing.T, pe *PE) {
	me := pe.Rank()
	// Sizes differ.
	_, err := Malloc[byte](pe, 100+me)
	wantErr(t, "Malloc of PE-dependent size", err, ErrDiverged, "PE 0", "PE 1", "call #", "Malloc(100 B", "Malloc(101 B")
	// Calls differ.
	if me == 0 {
		_, err = Calloc[byte](pe, 64)
	} else {
		_, err = Malloc[byte](pe, 64)
	}
	wantErr(t, "Calloc on PE 0, Malloc elsewhere", err, ErrDiverged, "Calloc(64 B", "Malloc(64 B")
	// Alignments differ.
	_, err = Align[byte](pe, uintptr(64)<<min(me, 1), 8)
	wantErr(t, "Align of PE-dependent alignment", err, ErrDiverged, "align 64", "align 128")
	// Frees of different blocks: neither is freed.
	a := must(Malloc[byte](pe, 32))
	b := must(Malloc[byte](pe, 32))
	victim := a
	if me == 1 {
		victim = b
	}
	err = Free(pe, victim)
	wantErr(t, "Free of different blocks", err, ErrDiverged, "Free(offset")
	if st := pe.ext.sym.heap.Stats(); st.Live != 2 {
		t.Fatalf("after a diverged Free, %d blocks live, want 2", st.Live)
	}
	// In step again.
	ok(t, Free(pe, a))
	ok(t, Free(pe, b))
	s := must(Malloc[byte](pe, 10))
	ok(t, Free(pe, s))

	last := pe.Size() - 1
	// Only the last PE differs: every other PE names it.
	_, err = Malloc[byte](pe, 100+boolInt(me == last)*8)
	if me == last {
		wantErr(t, "Malloc of a different size on the last PE only", err, ErrDiverged, "Malloc(108 B", "Malloc(100 B")
	} else {
		wantErr(t, "Malloc of a different size on the last PE only", err, ErrDiverged, fmt.Sprintf("PE %d call #", last), "Malloc(108 B")
	}
	// Same arguments everywhere, but the heaps differ: the last PE holds
	// a block the others do not (taken behind the collective calls'
	// back), so its Malloc returns another offset. The offsets must be
	// compared too.
	var stray alloc.Off
	if me == last {
		stray = must(pe.ext.sym.heap.Alloc(64, 0))
	}
	_, err = Malloc[byte](pe, 64)
	wantErr(t, "Malloc with the same arguments returning different offsets", err, ErrDiverged, "Malloc(64 B", "-> offset")
	if me == last {
		ok(t, pe.ext.sym.heap.Free(stray))
	}
	if st := pe.ext.sym.heap.Stats(); st.Live != 0 {
		t.Fatalf("after a Malloc whose offsets diverged, %d blocks live, want 0", st.Live)
	}
	// Realloc of a PE-dependent size: ErrDiverged, and the block keeps
	// its contents and stays usable.
	r := must(Malloc[byte](pe, 48))
	for i := range r {
		r[i] = byte(i)
	}
	r2, err := Realloc(pe, r, 64+boolInt(me == last)*64)
	wantErr(t, "Realloc of a different size on the last PE only", err, ErrDiverged, "Realloc(offset")
	if r2 != nil {
		r = r2
	}
	for i := range 48 {
		if r[i] != byte(i) {
			t.Fatalf("after a diverged Realloc, byte %d is %d, want %d", i, r[i], byte(i))
		}
	}
	ok(t, Free(pe, r))
	s = must(Malloc[byte](pe, 10))
	ok(t, Free(pe, s))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// checkFreeEntryBarrier: Free begins with a barrier (OpenSHMEM's
// shmem_free): no PE frees its copy of a block before every PE has
// called Free, so a PE may read another PE's copy up to its own call. The
// last PE reads every other PE's copy well after they entered Free.
func checkFreeEntryBarrier(t *testing.T, pe *PE) {
	me, last := pe.Rank(), pe.Size()-1
	for round := range 3 {
		s := must(Malloc[uint64](pe, 8))
		for i := range s {
			s[i] = uint64(me)<<32 | uint64(round*8+i) | 1<<63
		}
		barrier(t, pe)
		if me == last {
			time.Sleep(20 * time.Millisecond) // the others are in Free by now
			got := make([]uint64, len(s))
			for q := range pe.Size() {
				ok(t, Get(pe, got, s, q))
				for i, v := range got {
					if want := uint64(q)<<32 | uint64(round*8+i) | 1<<63; v != want {
						t.Fatalf("round %d: PE %d's copy, word %d, read before this PE's Free: %#x, want %#x (freed before every PE entered Free)", round, q, i, v, want)
					}
				}
			}
		}
		ok(t, Free(pe, s))
	}
}

// checkPointerType: element types holding Go pointers are refused.
func checkPointerType(t *testing.T, pe *PE) {
	type withSlice struct {
		X int
		Y []byte
	}
	type plain struct {
		X int64
		Y [4]float32
	}
	_, err := Malloc[*int](pe, 1)
	wantErr(t, "Malloc[*int]", err, ErrPointerType, "*int")
	_, err = Calloc[string](pe, 1)
	wantErr(t, "Calloc[string]", err, ErrPointerType, "string")
	_, err = Align[withSlice](pe, 64, 1)
	wantErr(t, "Align[struct with a slice]", err, ErrPointerType, "field Y")
	_, err = MallocWithHints[map[int]int](pe, 1, 0)
	wantErr(t, "MallocWithHints[map]", err, ErrPointerType)
	_, err = Realloc[[2]chan int](pe, nil, 1)
	wantErr(t, "Realloc[[2]chan int]", err, ErrPointerType)
	src := []*int{new(int)}
	wantErr(t, "Put[*int]", Put(pe, src, src, 0), ErrPointerType)
	wantErr(t, "Get[*int]", Get(pe, src, src, 0), ErrPointerType)
	wantErr(t, "IPut[*int]", IPut(pe, src, src, 1, 1, 1, 0), ErrPointerType)
	wantErr(t, "PutNBI[string]", PutNBI(pe, []string{""}, []string{""}, 0), ErrPointerType)
	s := must(Malloc[plain](pe, 3))
	ok(t, Free(pe, s))
}

// checkHints: every hint, every combination and unknown bits are accepted;
// the atomics hints give cache-line blocks that atomics work on.
func checkHints(t *testing.T, pe *PE) {
	for _, h := range []Hints{0, HintAtomicsRemote, HintSignalRemote, HintAtomicsRemote | HintSignalRemote, 1 << 7, 1 << 31, 1 << 40, ^Hints(0)} {
		s := must(MallocWithHints[int64](pe, 3, h))
		p, _ := core.SliceData(s)
		if h&(HintAtomicsRemote|HintSignalRemote) != 0 && uintptr(p)%cacheLine != 0 {
			t.Errorf("hints %#x: block at %p not on a cache line", uint64(h), p)
		}
		s[0] = 0
		barrier(t, pe)
		ok(t, AtomicAdd(pe, &s[0], 1, 0))
		barrier(t, pe)
		if pe.Rank() == 0 {
			if v := must(AtomicFetch(pe, &s[0], 0)); v != int64(pe.Size()) {
				t.Errorf("hints %#x: counter %d, want %d", uint64(h), v, pe.Size())
			}
		}
		barrier(t, pe)
		ok(t, Free(pe, s))
	}
}

// checkFreeErrors: frees of foreign memory, double frees and interior
// pointers fail on every PE and change nothing.
func checkFreeErrors(t *testing.T, pe *PE) {
	wantErr(t, "Free of a Go slice", Free(pe, make([]byte, 8)), ErrNotSymmetric)
	s := must(Malloc[byte](pe, 256))
	wantErr(t, "Free of an interior pointer", Free(pe, s[64:]), ErrBadFree)
	ok(t, Free(pe, s))
	wantErr(t, "double Free", Free(pe, s), ErrBadFree)
}

// checkReleaseEvents: symmetric Free and a Realloc that moves publish
// release events for the memory monitor, covering the blocks released.
func checkReleaseEvents(t *testing.T, pe *PE) {
	type event struct {
		k memhook.Kind
		r memhook.Range
	}
	var mu sync.Mutex
	var got []event
	cancel := pe.Monitor().Subscribe(func(k memhook.Kind, r memhook.Range) {
		mu.Lock()
		got = append(got, event{k, r})
		mu.Unlock()
	})
	defer cancel()
	covered := func(k memhook.Kind, s []byte) bool {
		p, n := core.SliceData(s)
		mu.Lock()
		defer mu.Unlock()
		for _, e := range got {
			if e.k == k && e.r.Start <= uintptr(p) && uintptr(p)+uintptr(n) <= e.r.End {
				return true
			}
		}
		return false
	}
	a := must(Malloc[byte](pe, 1000))
	b := must(Malloc[byte](pe, 64)) // keeps a from growing in place
	ok(t, Free(pe, a))
	if !covered(memhook.Free, a) {
		t.Errorf("no Free event covering the freed block; events %v", got)
	}
	c := must(Malloc[byte](pe, 100))
	d := must(Malloc[byte](pe, 64)) // keeps c from growing in place
	old := c
	c = must(Realloc(pe, c, 1<<20))
	if &c[0] == &old[0] {
		t.Fatalf("%s: Realloc grew a block in place past its neighbour", pe.AllocatorName())
	}
	if !covered(memhook.Chunk, old) {
		t.Errorf("no Chunk event covering the moved block; events %v", got)
	}
	ok(t, Free(pe, d))
	ok(t, Free(pe, c))
	ok(t, Free(pe, b))
}

// TestLonePE: without a launcher Init makes a job of one PE, on which
// everything works with itself as the only target; after Close every call
// returns ErrClosed.
func TestLonePE(t *testing.T) {
	if petest.IsChild() || os.Getenv("SYMHEAP_PE") != "" {
		t.Skip("runs outside a job only")
	}
	pe, err := Init(Config{HeapSize: 8 << 20, SharedSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	x := must(Calloc[int64](pe, 4))
	ok(t, Put(pe, x, []int64{1, 2, 3, 0}, 0))
	if v := must(AtomicFetchAdd(pe, &x[0], 10, 0)); v != 1 {
		t.Fatalf("FetchAdd on self: %d", v)
	}
	ok(t, WaitUntil(pe, &x[0], CmpEQ, 11))
	ok(t, pe.SetLock(&x[3]))
	wantErr(t, "Put to PE 1 of 1", Put(pe, x, x, 1), ErrBadPE, "PE 1 does not exist")
	ok(t, pe.ClearLock(&x[3]))
	ok(t, Free(pe, x))
	ok(t, pe.Close())
	ok(t, pe.Close())
	wantErr(t, "Put after Close", Put(pe, x, x, 0), ErrClosed)
	wantErr(t, "Get after Close", Get(pe, x, x, 0), ErrClosed)
	_, err = AtomicFetch(pe, &x[0], 0)
	wantErr(t, "AtomicFetch after Close", err, ErrClosed)
	wantErr(t, "WaitUntil after Close", WaitUntil(pe, &x[0], CmpEQ, 0), ErrClosed)
	wantErr(t, "SetLock after Close", pe.SetLock(&x[3]), ErrClosed)
	_, err = Malloc[int64](pe, 1)
	wantErr(t, "Malloc after Close", err, ErrClosed)
	pe.Quiet()
	pe.Fence()
	if Ptr(pe, x, 0) != nil {
		t.Fatal("Ptr after Close is not nil")
	}
}
