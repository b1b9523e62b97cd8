package rcache

import (
	"fmt"
	"sort"

	"github.com/symheap/symheap/alloc"
)

// A first-fit allocator component for tests only, registered under
// "firstfit-test" at the lowest priority, so that this package's tests run
// whatever components the rest of the module has finished. Its metadata lives
// in Go memory (tests need no cross-process access).

func init() {
	alloc.Register(alloc.Component{
		Name:     "firstfit-test",
		Priority: -1000,
		Format:   func(mem []byte) (alloc.Allocator, error) { return newFirstFit(mem), nil },
		Attach:   func(mem []byte) (alloc.Allocator, error) { return nil, fmt.Errorf("firstfit-test: no attach") },
	})
}

type ffBlock struct{ off, size uint64 }

type firstFit struct {
	mem  []byte
	free []ffBlock         // sorted by offset, coalesced
	used map[uint64]uint64 // offset → size
}

func newFirstFit(mem []byte) *firstFit {
	return &firstFit{mem: mem, free: []ffBlock{{0, uint64(len(mem))}}, used: map[uint64]uint64{}}
}

func (f *firstFit) Name() string { return "firstfit-test" }

func roundUp(n, a uint64) uint64 { return (n + a - 1) &^ (a - 1) }

func (f *firstFit) Alloc(size, align uint64) (alloc.Off, error) {
	align, err := alloc.CheckAlign(align)
	if err != nil {
		return 0, err
	}
	size = roundUp(max(size, 1), alloc.MinAlign)
	for i, b := range f.free {
		start := roundUp(b.off, align)
		if start+size > b.off+b.size {
			continue
		}
		f.free = append(f.free[:i], f.free[i+1:]...)
		if start > b.off {
			f.insertFree(ffBlock{b.off, start - b.off})
		}
		if end := start + size; end < b.off+b.size {
			f.insertFree(ffBlock{end, b.off + b.size - end})
		}
		f.used[start] = size
		return alloc.Off(start), nil
	}
	return 0, alloc.ErrOutOfMemory
}

func (f *firstFit) insertFree(nb ffBlock) {
	i := sort.Search(len(f.free), func(i int) bool { return f.free[i].off > nb.off })
	f.free = append(f.free, ffBlock{})
	copy(f.free[i+1:], f.free[i:])
	f.free[i] = nb
	// Coalesce with the neighbours.
	if i+1 < len(f.free) && f.free[i].off+f.free[i].size == f.free[i+1].off {
		f.free[i].size += f.free[i+1].size
		f.free = append(f.free[:i+1], f.free[i+2:]...)
	}
	if i > 0 && f.free[i-1].off+f.free[i-1].size == f.free[i].off {
		f.free[i-1].size += f.free[i].size
		f.free = append(f.free[:i], f.free[i+1:]...)
	}
}

func (f *firstFit) Free(off alloc.Off) error {
	size, ok := f.used[uint64(off)]
	if !ok {
		return alloc.ErrBadFree
	}
	delete(f.used, uint64(off))
	f.insertFree(ffBlock{uint64(off), size})
	return nil
}

func (f *firstFit) Realloc(off alloc.Off, size uint64) (alloc.Off, error) {
	old, ok := f.used[uint64(off)]
	if !ok {
		return 0, alloc.ErrBadFree
	}
	size = roundUp(max(size, 1), alloc.MinAlign)
	if size <= old {
		if size < old {
			f.used[uint64(off)] = size
			f.insertFree(ffBlock{uint64(off) + size, old - size})
		}
		return off, nil
	}
	n, err := f.Alloc(size, 0)
	if err != nil {
		return 0, err
	}
	copy(f.mem[n:uint64(n)+old], f.mem[off:uint64(off)+old])
	f.Free(off)
	return n, nil
}

func (f *firstFit) UsableSize(off alloc.Off) (uint64, error) {
	size, ok := f.used[uint64(off)]
	if !ok {
		return 0, alloc.ErrBadFree
	}
	return size, nil
}

func (f *firstFit) Stats() alloc.Stats { return alloc.Stats{Size: uint64(len(f.mem))} }
func (f *firstFit) Check() error       { return nil }
func (f *firstFit) Walk(fn func(off alloc.Off, size uint64, used bool) bool) error {
	return nil
}
