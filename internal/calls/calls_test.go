package calls

import (
	"errors"
	"strings"
	"testing"

	"github.com/symheap/symheap/internal/errs"
)

// areas returns n areas in plain memory (the words are the same as in
// shared memory; only the process differs).
func areas(n int) []*Area {
	as := make([]*Area, n)
	for i := range as {
		as[i] = new(Area)
	}
	return as
}

// TestDiverged: each rule of "What counts as divergence", and the cases
// that must not count (a member behind, computing, ahead, or in a call on
// another team).
func TestDiverged(t *testing.T) {
	cases := []struct {
		name string
		// me and q each make the calls listed, in order; the last call
		// of each is left in progress, unless done.
		me, q  []Kind
		qDone  bool
		qClose Kind // Close or Left after q's calls, or None
		want   bool
	}{
		{name: "same call", me: []Kind{Barrier}, q: []Kind{Barrier}},
		{name: "same number, other kind", me: []Kind{Barrier}, q: []Kind{Malloc}, want: true},
		{name: "q behind", me: []Kind{Barrier, Malloc}, q: []Kind{Barrier}},
		{name: "q behind, computing", me: []Kind{Barrier, Malloc}, q: []Kind{Barrier}, qDone: true},
		{name: "q ahead", me: []Kind{Broadcast}, q: []Kind{Broadcast, Malloc}},
		{name: "q in Close without the call", me: []Kind{Barrier, Barrier}, q: []Kind{Barrier}, qDone: true, qClose: Close, want: true},
		{name: "q left without the call", me: []Kind{Barrier, Barrier}, q: []Kind{Barrier}, qDone: true, qClose: Left, want: true},
		{name: "q left after the same call", me: []Kind{Barrier, Broadcast}, q: []Kind{Barrier, Broadcast}, qDone: true, qClose: Left},
		{name: "q left after another kind", me: []Kind{Barrier, Broadcast}, q: []Kind{Barrier, Sync}, qDone: true, qClose: Left, want: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			as := areas(2)
			for _, k := range c.me {
				as[0].Enter(k, 0, 0)
			}
			for _, k := range c.q {
				as[1].Enter(k, 0, 0)
			}
			if c.qDone {
				as[1].Leave()
			}
			if c.qClose != None {
				as[1].SetClose(c.qClose)
			}
			tr := NewTracker(as, 0, nil)
			err := tr.Check(nil)
			if got := err != nil; got != c.want {
				t.Fatalf("Check: %v, want divergence %v", err, c.want)
			}
			if err != nil && !errors.Is(err, errs.ErrDiverged) {
				t.Fatalf("Check: %v does not wrap ErrDiverged", err)
			}
		})
	}
}

// TestCloseMeetsCall: a PE in Close finds a member in a call of the world
// team it never made, and not one in a call it made (behind), nor one in a
// call on another team (that PE's check says it).
func TestCloseMeetsCall(t *testing.T) {
	for _, c := range []struct {
		name       string
		q          []Kind
		team       int
		want       bool
		meBarriers int
	}{
		{"extra world call", []Kind{Barrier, Barrier}, 0, true, 1},
		{"behind", []Kind{Broadcast}, 0, false, 2},
		{"other team", []Kind{Sync, Sync, Sync}, 3, false, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			as := areas(2)
			for range c.meBarriers {
				as[0].Enter(Barrier, 0, 0)
				as[0].Leave()
			}
			as[0].SetClose(Close)
			for _, k := range c.q {
				as[1].Enter(k, c.team, 0)
			}
			err := NewTracker(as, 0, nil).Check(nil)
			if got := err != nil; got != c.want {
				t.Fatalf("Check: %v, want divergence %v", err, c.want)
			}
		})
	}
}

// TestBrokenForGood: after a divergence every Enter returns it, saying
// which call met it, and the word keeps the diverged call (Leave and
// SetClose leave it) with Broken set, for the other PEs and the C library.
func TestBrokenForGood(t *testing.T) {
	as := areas(2)
	tr := NewTracker(as, 0, func(pe int, w Word) string {
		if w.Kind() == Malloc {
			return " of 64 B"
		}
		return ""
	})
	if err := tr.Enter(Barrier, 0, 0); err != nil {
		t.Fatal(err)
	}
	as[1].Enter(Malloc, 0, 0)
	err := tr.Check([]int{1})
	want := "Barrier (call #1) on PE 0 met Malloc of 64 B (call #1) on PE 1"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Check: %v, want %q", err, want)
	}
	tr.Leave()
	tr.SetClose(Left)
	w := as[0].Load()
	if !w.InCall() || w.Kind() != Barrier || uint64(w)&Broken == 0 {
		t.Fatalf("word after the divergence: %s (broken %v), want the Barrier, in a call, broken", Describe(w), uint64(w)&Broken != 0)
	}
	err = tr.Enter(Free, 0, 0)
	if !errors.Is(err, errs.ErrDiverged) || !strings.HasPrefix(err.Error(), "symheap: Free: ") || !strings.Contains(err.Error(), want) {
		t.Fatalf("Enter after the divergence: %v", err)
	}
}

// TestCancelled: a PE whose call was cancelled (Cancel) makes no more
// calls and did not make the cancelled one: the members in that call, in
// a later one, or in Close find it diverged; a member behind it (in a
// call q completed) does not. Every later Enter of the cancelled PE
// returns the error, which wraps the cause and ErrDiverged.
func TestCancelled(t *testing.T) {
	cause := errors.New("the context's end")
	for _, c := range []struct {
		name  string
		me    []Kind // my calls on team 0, the last in progress
		close bool   // then I am in Close
		want  bool
	}{
		{name: "same call", me: []Kind{Barrier, Barrier}, want: true},
		{name: "later call", me: []Kind{Barrier, Barrier, Malloc}, want: true},
		{name: "behind", me: []Kind{Barrier}},
		{name: "in Close", me: []Kind{Barrier, Barrier}, close: true, want: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			as := areas(2)
			q := NewTracker(as, 1, nil)
			for i := range 2 { // q's calls: Barrier #1 done, Barrier #2 cancelled
				if err := q.Enter(Barrier, 0, 0); err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					q.Leave()
				}
			}
			kept := q.Cancel(cause)
			q.Leave()
			q.SetClose(Left) // kept out: the word keeps the cancelled call
			if w := as[1].Load(); !w.Cancelled() || uint64(w)&Broken == 0 || !w.InCall() || w.Num() != 2 {
				t.Fatalf("q's word after Cancel: %s, cancelled %v", Describe(w), w.Cancelled())
			}
			if !errors.Is(kept, cause) || !errors.Is(kept, errs.ErrDiverged) || !strings.Contains(kept.Error(), "Barrier (call #2) on PE 1 was cancelled") {
				t.Fatalf("Cancel: %v", kept)
			}
			if err := q.Enter(Free, 0, 0); !errors.Is(err, cause) || !strings.HasPrefix(err.Error(), "symheap: Free: ") {
				t.Fatalf("Enter after Cancel: %v", err)
			}
			for i, k := range c.me {
				as[0].Enter(k, 0, 0)
				if i < len(c.me)-1 {
					as[0].Leave()
				}
			}
			if c.close {
				as[0].Leave()
				as[0].SetClose(Close)
			}
			err := NewTracker(as, 0, nil).Check(nil)
			if got := err != nil; got != c.want {
				t.Fatalf("Check: %v, want divergence %v", err, c.want)
			}
			if err != nil && (!errors.Is(err, errs.ErrDiverged) || !strings.Contains(err.Error(), "on PE 1, which was cancelled there")) {
				t.Fatalf("Check: %v", err)
			}
		})
	}
}

// TestArgsDiffer ("Arguments"): a member that made this PE's call with
// other arguments diverges, whether it is in the call, past it or in
// Close after it; with the same arguments, or none to compare, or a
// record overwritten ArgsDepth calls later, it does not.
func TestArgsDiffer(t *testing.T) {
	a8, a8000 := Args(8, 0), Args(8000, 0)
	for _, c := range []struct {
		name  string
		mine  uint64
		q     func(q *Area)
		want  bool
		inMsg string
	}{
		{"in the call, other sizes", a8000, func(q *Area) { q.Enter(Broadcast, 0, a8) }, true,
			"Broadcast of 8000 B from root 0 (call #1) on PE 0 met Broadcast of 8 B from root 0 (call #1) on PE 1"},
		{"in the call, same sizes", a8000, func(q *Area) { q.Enter(Broadcast, 0, a8000) }, false, ""},
		{"in the call, other root", Args(8, 1), func(q *Area) { q.Enter(Broadcast, 0, a8) }, true, "from root 1"},
		{"past it", a8000, func(q *Area) { q.Enter(Broadcast, 0, a8); q.Leave(); q.Enter(Barrier, 0, 0) }, true,
			"met Broadcast of 8 B from root 0 (call #1) on PE 1, now in Barrier (call #2)"},
		{"past it, same sizes", a8000, func(q *Area) { q.Enter(Broadcast, 0, a8000); q.Leave(); q.Enter(Barrier, 0, 0) }, false, ""},
		{"in Close after it", a8000, func(q *Area) { q.Enter(Broadcast, 0, a8); q.Leave(); q.SetClose(Close) }, true, "same sizes and root"},
		{"past it, another kind", a8000, func(q *Area) { q.Enter(Reduce, 0, a8000); q.Leave(); q.Enter(Barrier, 0, 0) }, true,
			"met Reduce of 8000 B from root 0 (call #1) on PE 1, now in Barrier (call #2)"},
		{"not there yet", a8000, func(q *Area) {}, false, ""},
		{"no arguments", 0, func(q *Area) { q.Enter(Broadcast, 0, a8) }, false, ""},
		{"overwritten", a8000, func(q *Area) {
			q.Enter(Broadcast, 0, a8)
			for range ArgsDepth {
				q.Leave()
				q.Enter(Barrier, 0, 0)
			}
		}, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			as := areas(2)
			as[0].Enter(Broadcast, 0, c.mine)
			c.q(as[1])
			err := NewTracker(as, 0, nil).Check(nil)
			if got := err != nil; got != c.want {
				t.Fatalf("Check: %v, want divergence %v", err, c.want)
			}
			if err != nil && (!errors.Is(err, errs.ErrDiverged) || !strings.Contains(err.Error(), c.inMsg)) {
				t.Fatalf("Check: %q, want ErrDiverged saying %q", err, c.inMsg)
			}
		})
	}
}

// TestBrokenMember: a member whose word says it found a divergence makes
// no more calls: it diverges from a call it never made, from the one it
// found the divergence in, and from Close; not from a call it made whole.
func TestBrokenMember(t *testing.T) {
	for _, c := range []struct {
		name string
		me   func(a *Area)
		q    func(a *Area)
		want bool
	}{
		{"broken in this call", func(a *Area) { a.Enter(Broadcast, 0, 0) }, func(a *Area) { a.Enter(Broadcast, 0, 0) }, true},
		{"broken before this call", func(a *Area) { a.Enter(Barrier, 0, 0); a.Leave(); a.Enter(Barrier, 0, 0) },
			func(a *Area) { a.Enter(Barrier, 0, 0) }, true},
		{"broken after this call", func(a *Area) { a.Enter(Barrier, 0, 0) },
			func(a *Area) { a.Enter(Barrier, 0, 0); a.Leave(); a.Enter(Barrier, 0, 0) }, false},
		{"broken on another team", func(a *Area) { a.Enter(Barrier, 0, 0) },
			func(a *Area) { a.Enter(Barrier, 0, 0); a.Leave(); a.Enter(Sync, 2, 0) }, false},
		{"this PE in Close", func(a *Area) { a.Enter(Barrier, 0, 0); a.Leave(); a.SetClose(Close) },
			func(a *Area) { a.Enter(Barrier, 0, 0) }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			as := areas(2)
			c.me(as[0])
			c.q(as[1])
			NewTracker(as, 1, nil).Adopt(errors.New("a divergence PE 1 found"))
			err := NewTracker(as, 0, nil).Check(nil)
			if got := err != nil; got != c.want {
				t.Fatalf("Check: %v, want divergence %v", err, c.want)
			}
			if err != nil && !strings.Contains(err.Error(), "which found a divergence there") {
				t.Errorf("Check: %q does not say PE 1 found a divergence", err)
			}
		})
	}
}
