package main

// The machine's floors, measured by the PEs of a bench job themselves
// (worker test "floor"), so that they are taken between the processes,
// and therefore the cores, that the other tests run on, in the same run:
// every section runs a floor job beside ours and the peers', round after
// round (bench_suite.go). What a floor is for each table, and how many
// line transfers each operation needs, is written beside the table
// definitions (floorOf in bench_suite.go) and in docs/bench/floors.md.
//
//   - floor_line: one cache line bounced between PE 0 and PE 1, half a
//     round trip (us). The line is PE 1's copy of a symmetric, 64-byte
//     aligned object; PE 0 reaches it through Ptr. Each side publishes
//     with a release store (a plain MOV on amd64, as a C release store)
//     and polls with an atomic load and PAUSE, as the C ping-pong
//     (bench/peers/csrc/cacheline_pingpong.c) and symheap's own waits do.
//   - floor_rmw: one atomic fetch-add on a line that stays in this core's
//     cache, PE 0 alone (us): what an atomic costs when no line moves.
//   - floor_copy: Go's copy of size bytes from private memory into PE 1's
//     partition, the same buffers again and again (MB/s), PE 0 alone: a
//     put without the API.

import (
	"errors"
	"sync/atomic"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/internal/shmsync"
)

// errNoPtr: the floors need a direct view of PE 1's partition.
var errNoPtr = errors.New("no direct view of PE 1's heap (Ptr returned nil): the floors need PE 1 on this node")

// pingLine is the bounced line: one word and the rest of its 64 bytes.
type pingLine struct {
	v atomic.Uint64
	_ [56]byte
}

func (b *peBench) floor() error {
	if err := b.need2(); err != nil {
		return err
	}
	b.unit("floor_line", "us", "one cache line between PE 0 and PE 1, half round trip")
	lines, err := symheap.Align[pingLine](b.pe, 64, 1)
	if err != nil {
		return err
	}
	// Both PEs use PE 1's copy.
	view := symheap.Ptr(b.pe, lines, 1)
	if view == nil {
		return errNoPtr
	}
	l := &view[0]
	var seq uint64 // the last value this PE stored or answered
	t, err := b.measure(pairMode, 0, func(n int) error {
		for i := 0; i < n; i++ {
			switch b.rank {
			case 0: // store odd, wait for the next even
				shmsync.StoreRelease64(&l.v, seq+1)
				for l.v.Load() != seq+2 { // acquire; pairs with PE 1's release store
					shmsync.Pause()
				}
				seq += 2
			case 1: // wait for odd, answer with the next even
				for l.v.Load() != seq+1 { // acquire; pairs with PE 0's release store
					shmsync.Pause()
				}
				shmsync.StoreRelease64(&l.v, seq+2)
				seq += 2
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	b.result("floor_line", 64, t/2*1e6)

	b.unit("floor_rmw", "us", "atomic fetch-add on a line in this core's cache")
	own := &lines[0].v
	t, err = b.measure(soloMode, 0, func(n int) error {
		for i := 0; i < n; i++ {
			own.Add(1)
		}
		return nil
	})
	if err != nil {
		return err
	}
	b.result("floor_rmw", 8, t*1e6)

	if len(b.p.Sizes) > 0 {
		b.unit("floor_copy", "MB/s", "Go copy from private memory into PE 1's partition, same buffers, 10^6 B/s")
		m := maxSize(b.p.Sizes)
		sym, err := symheap.Malloc[byte](b.pe, int(m))
		if err != nil {
			return err
		}
		dst := symheap.Ptr(b.pe, sym, 1)
		if dst == nil {
			return errNoPtr
		}
		local := touched(m)
		for _, s := range b.p.Sizes {
			if s <= 0 {
				continue
			}
			d, src := dst[:s], local[:s]
			t, err := b.measure(soloMode, s, func(n int) error {
				for i := 0; i < n; i++ {
					copy(d, src)
				}
				return nil
			})
			if err != nil {
				return err
			}
			b.result("floor_copy", s, float64(s)/t/1e6)
		}
		if err := symheap.Free(b.pe, sym); err != nil {
			return err
		}
	}
	return symheap.Free(b.pe, lines)
}
