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
