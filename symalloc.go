package symheap

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"strings"
	"sync"
	"unsafe"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/internal/segment"
)

// Symmetric allocation.
//
// Every PE runs the same deterministic allocator over its own symmetric
// heap with the same sequence of calls, so a symmetric object has the same
// offset in every partition. Each call:
//
//  1. validates its arguments (the same on every PE, so every PE refuses
//     alike, without a barrier);
//  2. for Free and Realloc, records the offset it was given and meets the
//     others at a barrier, so nobody still uses the memory, and compares;
//  3. allocates (or frees) locally and records call number, kind,
//     arguments and resulting offset in its control block;
//  4. meets the others at a barrier and compares every PE's record with
//     its own: any difference returns ErrDiverged on every PE, naming the
//     PEs, the call numbers and the arguments.

// Hints for MallocWithHints: the OpenSHMEM 1.5 bits. Any combination, and
// unknown bits, are accepted; memory from any hint works for every
// operation.
type Hints uint64

const (
	// HintAtomicsRemote: the object will be the target of remote atomics.
	// symheap gives it whole cache lines (64-byte aligned, size rounded up
	// to 64) so that atomics on it never share a line with bulk data.
	HintAtomicsRemote Hints = 1 << 0
	// HintSignalRemote: the object will be used for signals (as the
	// atomics hint).
	HintSignalRemote Hints = 1 << 1
)

const cacheLine = 64

// Call kinds in allocation records.
const (
	callMalloc = iota + 1
	callCalloc
	callAlign
	callHints
	callRealloc
	callFree
)

var callNames = map[uint64]string{callMalloc: "Malloc", callCalloc: "Calloc", callAlign: "Align",
	callHints: "MallocWithHints", callRealloc: "Realloc", callFree: "Free"}

const noOff = math.MaxUint64

// Malloc allocates n elements of T in every PE's symmetric heap. It is
// collective: every PE calls it with the same n in the same order. n == 0
// returns nil at once, without a barrier.
func Malloc[T any](pe *PE, n int) ([]T, error) {
	return symAlloc[T](pe, n, 0, callMalloc, 0)
}

// Calloc is Malloc with the memory zeroed.
func Calloc[T any](pe *PE, n int) ([]T, error) {
	return symAlloc[T](pe, n, 0, callCalloc, 0)
}

// Align is Malloc with the block aligned to align bytes: a power of two up
// to 8 MiB, else ErrBadAlign.
func Align[T any](pe *PE, align uintptr, n int) ([]T, error) {
	if align == 0 || bits.OnesCount64(uint64(align)) != 1 || align > alloc.MaxAlign {
		if err := pe.check(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("symheap: Align(%d): %w (a power of two from 1 to %d)", align, ErrBadAlign, alloc.MaxAlign)
	}
	return symAlloc[T](pe, n, uint64(align), callAlign, 0)
}

// MallocWithHints is Malloc with usage hints (see Hints).
func MallocWithHints[T any](pe *PE, n int, hints Hints) ([]T, error) {
	return symAlloc[T](pe, n, 0, callHints, hints)
}

// Realloc resizes a symmetric block to n elements, collectively. A nil s
// allocates; n == 0 frees and returns nil. The contents are kept up to the
// smaller size. On failure s is intact and still allocated.
func Realloc[T any](pe *PE, s []T, n int) ([]T, error) {
	if s == nil {
		return Malloc[T](pe, n)
	}
	if n == 0 {
		return nil, Free(pe, s)
	}
	if err := pe.check(); err != nil {
		return nil, err
	}
	size, err := elemBytes[T](n)
	if err != nil {
		return nil, err
	}
	p, _ := sliceData(s)
	in, _, ok := pe.heapOffset(p, 1)
	if !ok {
		return nil, fmt.Errorf("symheap: Realloc of %p: %w (not returned by Malloc)", p, ErrNotSymmetric)
	}
	pe.mu.Lock()
	defer pe.mu.Unlock()
	if err := pe.collective(callRealloc, size, 0, in, func() (uint64, error) {
		off, err := pe.heap.Realloc(alloc.Off(in), size)
		return uint64(off), err
	}); err != nil {
		return s, err
	}
	out := pe.ctl[pe.rank].allocRec[pe.ext.rma.seq%2].out.Load()
	return sliceAt[T](pe.heapAddr(pe.rank, out), n), nil
}

// Free releases a symmetric block, collectively: it starts with a barrier,
// so no PE still uses the block. A nil s does nothing.
func Free[T any](pe *PE, s []T) error {
	if err := pe.check(); err != nil {
		return err
	}
	if s == nil {
		return nil
	}
	p, _ := sliceData(s)
	in, _, ok := pe.heapOffset(p, 1)
	if !ok {
		return fmt.Errorf("symheap: Free of %p: %w (not returned by Malloc)", p, ErrNotSymmetric)
	}
	pe.mu.Lock()
	defer pe.mu.Unlock()
	return pe.collective(callFree, 0, 0, in, func() (uint64, error) {
		if err := pe.heap.Free(alloc.Off(in)); err != nil {
			return noOff, err
		}
		return in, nil
	})
}

func symAlloc[T any](pe *PE, n int, align uint64, kind uint64, hints Hints) ([]T, error) {
	if err := pe.check(); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	size, err := elemBytes[T](n)
	if err != nil {
		return nil, err
	}
	if a := alignOf[T](); align < a {
		align = a
	}
	if kind == callHints && hints&(HintAtomicsRemote|HintSignalRemote) != 0 {
		if align < cacheLine {
			align = cacheLine
		}
		size = (size + cacheLine - 1) &^ (cacheLine - 1)
	}
	pe.mu.Lock()
	defer pe.mu.Unlock()
	err = pe.collective(kind, size, align|uint64(hints)<<32, noOff, func() (uint64, error) {
		off, err := pe.heap.Alloc(size, align)
		if err != nil {
			return noOff, err
		}
		if kind == callCalloc {
			clear(unsafe.Slice((*byte)(pe.heapAddr(pe.rank, uint64(off))), size))
		}
		return uint64(off), nil
	})
	if err != nil {
		return nil, err
	}
	out := pe.ctl[pe.rank].allocRec[pe.ext.rma.seq%2].out.Load()
	return sliceAt[T](pe.heapAddr(pe.rank, out), n), nil
}

// collective runs one collective allocation call (steps 2 to 4 above).
// op performs the local part and returns the resulting offset. Called with
// pe.mu held.
func (pe *PE) collective(kind, size, align, in uint64, op func() (uint64, error)) error {
	st := &pe.ext.rma
	st.seq++
	rec := &pe.ctl[pe.rank].allocRec[st.seq%2]
	// Written before the barrier; the other PEs read them after it (the
	// barrier's atomics order these stores before their loads).
	rec.kind.Store(kind)
	rec.size.Store(size)
	rec.align.Store(align)
	rec.in.Store(in)
	rec.out.Store(noOff)
	rec.seq.Store(st.seq)
	if kind == callFree || kind == callRealloc {
		if err := pe.seg.Barrier(); err != nil {
			return err
		}
		if err := pe.compare(st.seq, false); err != nil {
			return err
		}
	}
	out, opErr := op()
	if opErr == nil {
		rec.out.Store(out)
	}
	if kind == callFree {
		if opErr != nil {
			return pe.allocError(kind, size, opErr)
		}
		pe.ctl[pe.rank].stats.symFrees.Add(1)
		return nil
	}
	if err := pe.seg.Barrier(); err != nil {
		return err
	}
	if err := pe.compare(st.seq, true); err != nil {
		if opErr == nil {
			// Undo our part, so a diverged call leaves nothing behind.
			if kind == callRealloc {
				// The old block is gone only if it moved; keep what we have.
			} else {
				pe.heap.Free(alloc.Off(out))
			}
		}
		return err
	}
	if opErr != nil {
		return pe.allocError(kind, size, opErr)
	}
	pe.ctl[pe.rank].stats.symAllocs.Add(1)
	return nil
}

// compare checks every PE's record of call seq against ours.
func (pe *PE) compare(seq uint64, withOut bool) error {
	mine := &pe.ctl[pe.rank].allocRec[seq%2]
	var bad []string
	for p := 0; p < pe.npes; p++ {
		if p == pe.rank {
			continue
		}
		r := &pe.ctl[p].allocRec[seq%2]
		same := r.seq.Load() == mine.seq.Load() && r.kind.Load() == mine.kind.Load() &&
			r.size.Load() == mine.size.Load() && r.align.Load() == mine.align.Load() && r.in.Load() == mine.in.Load()
		if same && withOut {
			same = r.out.Load() == mine.out.Load()
		}
		if !same {
			bad = append(bad, describe(p, r))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("symheap: collective allocation diverged: %s; but %s: %w (every PE must make the same collective allocations in the same order)",
		describe(pe.rank, mine), strings.Join(bad, "; "), ErrDiverged)
}

func describe(p int, r *allocRecord) string {
	s := fmt.Sprintf("PE %d call #%d %s(", p, r.seq.Load(), callNames[r.kind.Load()])
	switch r.kind.Load() {
	case callFree:
		s += fmt.Sprintf("offset %#x)", r.in.Load())
	case callRealloc:
		s += fmt.Sprintf("offset %#x, %d B)", r.in.Load(), r.size.Load())
	default:
		s += fmt.Sprintf("%d B, align %d", r.size.Load(), r.align.Load()&0xffffffff)
		if h := r.align.Load() >> 32; h != 0 {
			s += fmt.Sprintf(", hints %#x", h)
		}
		s += ")"
	}
	if out := r.out.Load(); out != noOff {
		s += fmt.Sprintf(" -> offset %#x", out)
	} else if r.kind.Load() != callFree {
		s += " -> failed"
	}
	return s
}

func (pe *PE) allocError(kind, size uint64, err error) error {
	if errors.Is(err, ErrOutOfMemory) {
		st := pe.heap.Stats()
		return fmt.Errorf("symheap: %s of %d bytes: %w (symmetric heap %s per PE, largest free block %s; raise SHMEM_SYMMETRIC_SIZE or Config.HeapSize)",
			callNames[kind], size, ErrOutOfMemory, segment.FormatSize(pe.lay.HeapSize), segment.FormatSize(st.LargestFree))
	}
	return fmt.Errorf("symheap: %s: %w", callNames[kind], err)
}

// elemBytes is n elements of T in bytes, with the argument checks every
// allocation makes.
func elemBytes[T any](n int) (uint64, error) {
	if n < 0 {
		return 0, fmt.Errorf("symheap: %d elements: %w (must be >= 0)", n, ErrBadArg)
	}
	if err := checkPointerFree[T](); err != nil {
		return 0, err
	}
	sz := sizeOf[T]()
	hi, lo := bits.Mul64(uint64(n), sz)
	if hi != 0 || lo > 1<<62 {
		return 0, fmt.Errorf("symheap: %d elements of %d bytes: %w (request overflows)", n, sz, ErrOutOfMemory)
	}
	return lo, nil
}

var pointerFree sync.Map // reflect.Type -> error (nil when pointer-free)

// checkPointerFree refuses element types that hold Go pointers: shared
// memory is not scanned by the garbage collector.
func checkPointerFree[T any]() error {
	t := reflect.TypeFor[T]()
	if v, ok := pointerFree.Load(t); ok {
		if v == nil {
			return nil
		}
		return v.(error)
	}
	var err error
	if path := pointerPath(t); path != "" {
		err = fmt.Errorf("symheap: element type %v holds a pointer (%s): %w (shared memory may hold only plain data)", t, path, ErrPointerType)
	}
	if err == nil {
		pointerFree.Store(t, nil)
	} else {
		pointerFree.Store(t, err)
	}
	return err
}

// pointerPath names the first pointer-holding part of t, or "".
func pointerPath(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.String, reflect.Interface,
		reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return t.Kind().String()
	case reflect.Array:
		if t.Len() == 0 {
			return ""
		}
		if p := pointerPath(t.Elem()); p != "" {
			return "array of " + p
		}
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if p := pointerPath(t.Field(i).Type); p != "" {
				return "field " + t.Field(i).Name + ": " + p
			}
		}
	}
	return ""
}

// Ptr returns a slice through which this PE can load and store PE
// target's copy of the symmetric object s directly, or nil if target does
// not exist or s is not symmetric.
func Ptr[T any](pe *PE, s []T, target int) []T {
	if pe.check() != nil || target < 0 || target >= pe.npes || s == nil {
		return nil
	}
	p, n := sliceData(s)
	off, _, ok := pe.heapOffset(p, n)
	if !ok {
		return nil
	}
	return sliceAt[T](pe.heapAddr(target, off), len(s))
}
