package symheap_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/internal/petest"
)

// divergeTimeout bounds each job here: the PEs must find the divergence
// themselves, long before it (a hang fails the test with every PE's stack).
var divergeOpts = append(small[:len(small):len(small)], petest.Timeout(60*time.Second))

// wantDiverged fails unless err wraps ErrDiverged and says each of parts.
func wantDiverged(t *testing.T, what string, err error, parts ...string) {
	t.Helper()
	if !errors.Is(err, symheap.ErrDiverged) {
		t.Fatalf("%s: %v, want ErrDiverged", what, err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %q does not say %q", what, err, p)
		}
	}
	if n := strings.Count(err.Error(), "symheap:"); n != 1 {
		t.Errorf("%s: %q says symheap: %d times, want once", what, err, n)
	}
}

// TestDivergedCallsFail: PEs that make different collective calls, or
// where one reaches Close while the others wait in a collective, fail on
// every PE with one message naming each PE's call, instead of waiting
// for ever; after that, Free and Close return at once.
func TestDivergedCallsFail(t *testing.T) {
	// 2 PEs exchange allocation records flat; 6 run the agreement
	// (internal/team, agree.go): both must find the other call.
	for _, n := range []int{2, 6} {
		t.Run(fmt.Sprintf("Malloc-against-Barrier/%dPE", n), func(t *testing.T) { mallocAgainstBarrier(t, n) })
	}
	t.Run("Close-against-Barrier", func(t *testing.T) {
		// The ordinary error path: one PE returns early, its deferred
		// Close runs while the others wait in a Barrier.
		petest.Run(t, 3, func(t *testing.T) {
			pe, err := symheap.Init(symheap.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if err := pe.Barrier(); err != nil { // world call #1
				t.Fatal(err)
			}
			if pe.Rank() == 1 {
				err := pe.Close()
				wantDiverged(t, "Close on PE 1 while the others wait in a Barrier", err,
					"Close on PE 1 met Barrier (call #2) on PE ")
				return
			}
			err = pe.Barrier()
			wantDiverged(t, "Barrier while PE 1 is in Close", err, fmt.Sprintf("Barrier (call #2) on PE %d met Close on PE 1", pe.Rank()))
			if err := pe.Close(); !errors.Is(err, symheap.ErrDiverged) {
				t.Errorf("Close after the divergence: %v, want ErrDiverged", err)
			}
		}, divergeOpts...)
	})
	t.Run("team-Sync-against-Broadcast", func(t *testing.T) {
		petest.Run(t, 3, func(t *testing.T) {
			pe, err := symheap.Init(symheap.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer pe.Close()
			buf, err := symheap.Malloc[int64](pe, 64) // above the post lines' size
			if err != nil {
				t.Fatal(err)
			}
			team, err := pe.World().Split(0, 1, 2) // PEs 0 and 1
			if err != nil {
				t.Fatal(err)
			}
			if team == nil {
				return // PE 2 waits in Close for the others, which fail and leave
			}
			if pe.Rank() == 0 {
				err = team.Sync()
			} else {
				err = symheap.Broadcast(team, buf, buf, 0)
			}
			wantDiverged(t, "Sync against Broadcast on a team", err, "Sync (call #1 on team ", "Broadcast (call #1 on team ")
		}, divergeOpts...)
	})
}

// mallocAgainstBarrier: PE 0 calls Malloc where the other n-1 PEs call
// Barrier; every PE gets ErrDiverged naming PE 0's Malloc and a Barrier.
func mallocAgainstBarrier(t *testing.T, n int) {
	petest.Run(t, n, func(t *testing.T) {
		pe, err := symheap.Init(symheap.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer pe.Close()
		x, err := symheap.Malloc[int64](pe, 8) // world call #1
		if err != nil {
			t.Fatal(err)
		}
		if pe.Rank() == 0 {
			_, err = symheap.Malloc[byte](pe, 64)
		} else {
			err = pe.Barrier()
		}
		wantDiverged(t, "Malloc on PE 0, Barrier on the others", err,
			"Barrier (call #2) on PE ", "Malloc of 64 B (call #2) on PE 0", "same collective calls in the same order")
		// Every later collective call says so at once, Free and
		// Close included.
		wantDiverged(t, "Free after the divergence", symheap.Free(pe, x), "Free: ", "call #2")
		wantDiverged(t, "Barrier after the divergence", pe.Barrier(), "Barrier: ", "call #2")
		wantDiverged(t, "Close after the divergence", pe.Close(), "Close: ", "call #2")
	}, divergeOpts...)
}

// TestDivergedArgsFail: PEs that make the same collective call with
// different sizes take different paths (post lines, scratch buffers, a
// tree of copies, the source read in place) and would wait for ever for
// each other, or meet another call's steps. The PE with the odd size
// fails with ErrDiverged naming its call and what it met (the others'
// call of other sizes, or the call they went on to, met in a barrier:
// internal/calls, "Arguments"); the others fail too, in that call or the
// next, with ErrDiverged or, once that PE has closed, ErrPeerLost.
func TestDivergedArgsFail(t *testing.T) {
	const big = 1000 // int64 elements: 8000 B, past the post lines and scratch buffers
	for _, c := range []struct {
		name string
		n    int
		call func(pe *symheap.PE, buf []int64, k int) error
	}{
		{"Broadcast", 2, func(pe *symheap.PE, buf []int64, k int) error {
			return symheap.Broadcast(pe.World(), buf[:k], buf[big:big+k], 0)
		}},
		{"Broadcast-6PE", 6, func(pe *symheap.PE, buf []int64, k int) error {
			return symheap.Broadcast(pe.World(), buf[:k], buf[big:big+k], 0)
		}},
		{"Reduce", 2, func(pe *symheap.PE, buf []int64, k int) error {
			return symheap.Reduce(pe.World(), buf[:k], buf[big:big+k], symheap.OpSum)
		}},
		{"Reduce-6PE", 6, func(pe *symheap.PE, buf []int64, k int) error {
			return symheap.Reduce(pe.World(), buf[:k], buf[big:big+k], symheap.OpSum)
		}},
		{"FCollect", 2, func(pe *symheap.PE, buf []int64, k int) error {
			return symheap.FCollect(pe.World(), buf[:k*pe.Size()], buf[big*pe.Size():big*pe.Size()+k])
		}},
		// The same steps whatever the size: only the records tell.
		{"AllToAll", 2, func(pe *symheap.PE, buf []int64, k int) error {
			n := k * pe.Size()
			return symheap.AllToAll(pe.World(), buf[:n], buf[big*pe.Size():big*pe.Size()+n])
		}},
		{"AllToAll-3PE", 3, func(pe *symheap.PE, buf []int64, k int) error {
			n := k * pe.Size()
			return symheap.AllToAll(pe.World(), buf[:n], buf[big*pe.Size():big*pe.Size()+n])
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			petest.Run(t, c.n, func(t *testing.T) {
				pe, err := symheap.Init(symheap.Config{})
				if err != nil {
					t.Fatal(err)
				}
				defer pe.Close()
				buf, err := symheap.Malloc[int64](pe, 2*pe.Size()*big) // world call #1
				if err != nil {
					t.Fatal(err)
				}
				k := 1
				if pe.Rank() == 1 {
					k = big
				}
				err = c.call(pe, buf, k) // world call #2
				if err == nil {
					err = pe.Barrier() // its part done without PE 1's: the next call meets it
				}
				if pe.Rank() == 1 {
					kind, _, _ := strings.Cut(c.name, "-")
					bytes := 8 * big
					if kind == "AllToAll" {
						bytes *= pe.Size() // its record's size is the whole source, a block for each PE
					}
					wantDiverged(t, c.name+" of 8000 B against 8 B", err, fmt.Sprintf("%s of %d B", kind, bytes), "(call #2) on PE 1 met ")
					return
				}
				if !errors.Is(err, symheap.ErrDiverged) && !errors.Is(err, symheap.ErrPeerLost) {
					t.Fatalf("%s of 8 B against 8000 B on PE 1, and a Barrier: %v, want ErrDiverged or ErrPeerLost", c.name, err)
				}
			}, divergeOpts...)
		})
	}
}
