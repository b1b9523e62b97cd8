package symheap

import (
	"math/bits"
	"strconv"
	"testing"

	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/segment"
)

// TestLayoutSizes: the structs laid out in shared memory have the sizes
// the layout reserves for them (once compile-time checks in the files
// that imported unsafe). The team area's are checked in internal/team.
func TestLayoutSizes(t *testing.T) {
	if s := core.SizeOf[control](); s > core.ControlSize {
		t.Errorf("control is %d bytes, more than the %d reserved", s, core.ControlSize)
	}
}

// TestControlBlockGrowth: each PE's control block is at most
//
//	fixed + perPE·N + perRound·⌈log₂ N⌉ bytes
//
// for every job size N a segment holds: fixed parts (the team slots, the
// release ring, the message rings' budget of 1 MiB per receiver shared by
// its senders), a line of fast box and a ring head per peer in the message
// area (192 bytes) and the far layer's 8-byte words per PE, and one line
// pair per barrier round and team id. So the node's control blocks grow
// as N², with a small constant, and no area can hold N words per peer or
// a ring of fixed size per peer (at 512 PEs, 8·N² bytes more per PE would
// fail here). From 16 PEs on, where the rings have reached their budget,
// no area may grow from N to 2N PEs by more than the same slope. The
// figures per N are in docs/bench/scale.md ("Control blocks").
func TestControlBlockGrowth(t *testing.T) {
	const (
		fixed    = 1280 << 10 // 1.25 MiB
		perPE    = 256        // bytes per PE of the job, per PE
		perRound = 64 * 128   // a line pair per team id and barrier round
	)
	log2 := func(n int) uint64 { return uint64(bits.Len(uint(n - 1))) }
	for n := 1; n <= segment.MaxPEs; n++ {
		bound := fixed + perPE*uint64(n) + perRound*log2(n)
		if s := core.CBSize(n); s > bound {
			t.Errorf("control block of %d bytes per PE at %d PEs: more than %d + %d·N + %d·⌈log₂ N⌉ = %d", s, n, fixed, perPE, perRound, bound)
		}
	}
	for n := 16; n < segment.MaxPEs; n *= 2 {
		small, big := core.Areas(n), core.Areas(2*n)
		if len(small) != len(big) {
			t.Fatalf("%d areas at %d PEs, %d at %d", len(small), n, len(big), 2*n)
		}
		for i, a := range small {
			if b := big[i]; b.Size > a.Size+perPE*uint64(n)+perRound {
				t.Errorf("area %q: %d bytes per PE at %d PEs, %d at %d: grows by more than %d bytes per PE added and %d per round",
					a.Name, a.Size, n, b.Size, 2*n, perPE, perRound)
			}
		}
	}
}

// TestControlBlockTable prints the control blocks' sizes (go test -v -run
// ControlBlockTable): docs/bench/scale.md's table.
func TestControlBlockTable(t *testing.T) {
	for _, n := range []int{2, 16, 64, 256, 512} {
		line := ""
		for _, a := range core.Areas(n) {
			line += " " + a.Name + "=" + strconv.FormatUint(a.Size, 10)
		}
		cb := core.CBSize(n)
		t.Logf("N=%d per PE %d B (%.1f KiB), node %d B (%.1f MiB):%s", n, cb, float64(cb)/1024, cb*uint64(n), float64(cb*uint64(n))/(1<<20), line)
	}
}
