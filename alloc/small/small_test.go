package small_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/alloc/alloctest"
	"github.com/symheap/symheap/alloc/small"
	"github.com/symheap/symheap/alloc/tlsf"
)

// component is the front end over tlsf as an alloc.Component, for the
// conformance suite and the fuzz target. Attach finds the header as the
// first block of the region (Format allocates it first); the runtime is
// told its offset instead.
func component() alloc.Component {
	return alloc.Component{
		Name: tlsf.Name,
		Format: func(mem []byte) (alloc.Allocator, error) {
			in, err := tlsf.Format(mem)
			if err != nil {
				return nil, err
			}
			return small.Format(in, mem, nil)
		},
		Attach: func(mem []byte) (alloc.Allocator, error) {
			in, err := tlsf.Attach(mem)
			if err != nil {
				return nil, err
			}
			first := alloc.Off(0)
			found := false
			in.Walk(func(off alloc.Off, size uint64, used bool) bool {
				if used {
					// The block's user offset: the first 16-aligned one
					// inside it that is a live block.
					for o := (uint64(off) + 15) &^ 15; o < uint64(off)+size; o += 16 {
						if _, err := in.UsableSize(alloc.Off(o)); err == nil {
							first, found = alloc.Off(o), true
							break
						}
					}
				}
				return !used
			})
			if !found {
				return nil, fmt.Errorf("no header block")
			}
			return small.Attach(in, mem, first, nil)
		},
	}
}

// The conformance suite runs on one P: the front end hands out offsets
// from the spans of the P it runs on, so its offsets are deterministic
// only while the goroutine stays on one P (the suite's Determinism test).
func onOneP(t testing.TB) {
	prev := runtime.GOMAXPROCS(1)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

func TestConformance(t *testing.T) {
	onOneP(t)
	alloctest.Run(t, component())
}

func FuzzOps(f *testing.F) {
	onOneP(f)
	alloctest.Fuzz(f, component())
}
