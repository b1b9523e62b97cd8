//go:build linecount

package team

import "testing"

// oldCounts is the line-count model of the barriers the dissemination
// barrier replaced, per PE per barrier, with the PEs arriving one after
// the other (the worst case of a counter: every early PE polls while
// the later ones add). The code is gone; the model follows it:
//
//	go   one counter line in PE 0's block (internal/team before this
//	     change): a PE's add reads and writes the line (1 write, 1 read);
//	     each later add takes it away from the PEs polling it, which read
//	     it again (up to n-1 more reads for the first to arrive); the adds
//	     queue on the line, so the critical path is n transfers, and one
//	     more for the waiters to see the last add.
//	c    capi/coll.c's counter_barrier: a PE adds to the counter of every
//	     other PE (n-1 lines written and read by RMW), then polls its
//	     own, which the others' n-1 adds take away in turn (up to n-1
//	     reads), and takes them off (1 read). n(n-1) RMWs in all; the
//	     last PE's n-1 adds are in sequence, and its last counter's owner
//	     reads it after: n transfers on the critical path.
//
// A team of two used the pair barrier in both languages: one line each
// way, as the dissemination barrier's one round.
func oldCounts(alg string, n int) (writes, reads, path int) {
	if n == 2 {
		return 1, 1, 1
	}
	switch alg {
	case "go":
		return 1, n, n + 1
	case "c":
		return n - 1, 2*(n-1) + 1, n
	}
	panic(alg)
}

// TestLineCountModel runs the real barrier code (simTeams: N goroutines,
// a thread each, over barrier words in this process's memory; real
// processes are TestLineCountPEs in the root package, up to 16) for N =
// 2 .. 256 and checks the dissemination barrier's bound: per PE per
// barrier ⌈log₂ N⌉ lines written that one other PE reads, ⌈log₂ N⌉ lines
// of other PEs read, and a critical path of ⌈log₂ N⌉ transfers. It logs
// the table of docs/bench/scale.md beside the old algorithms' model.
func TestLineCountModel(t *testing.T) {
	const k = 10 // barriers per run
	t.Logf("| N | rounds | new: writes/PE | new: reads/PE | new: critical path | old Go: writes/reads/path | old C: writes/reads/path | old C: lines in all |")
	for _, n := range []int{2, 3, 4, 5, 8, 12, 16, 32, 64, 100, 128, 256} {
		ts := simTeams(n, nil, func() error { return nil })
		runBarriers(t, ts, k)
		r := rounds(n)
		for i, tm := range ts {
			c := tm.LineCounts()
			if c.Barriers != k || c.Writes != k*r || c.Reads != k*r || c.MaxDepth != r || c.Depth != r {
				t.Errorf("N=%d PE %d: %+v over %d barriers; want %d writes and reads per barrier, critical path %d", n, i, c, k, r, r)
			}
		}
		gw, gr, gp := oldCounts("go", n)
		cw, cr, cp := oldCounts("c", n)
		t.Logf("| %d | %d | %d | %d | %d | %d / %d / %d | %d / %d / %d | %d |", n, r, r, r, r, gw, gr, gp, cw, cr, cp, n*cw)
	}
}

// TestLineCountTeamsOfOtherSizes: a split team's barrier runs rounds for
// its own size, not the job's.
func TestLineCountTeamsOfOtherSizes(t *testing.T) {
	for _, n := range []int{3, 6} {
		ts := simTeams(n, nil, func() error { return nil })
		runBarriers(t, ts, 3)
		for i, tm := range ts {
			if c := tm.LineCounts(); c.Writes != 3*rounds(n) {
				t.Errorf("N=%d PE %d: %+v", n, i, c)
			}
		}
	}
}

// TestLineCountAgree: the collective allocation's agreement (agree.go),
// N = 2 to 256 members in this process: per member and phase ⌈log₂ N⌉
// lines written and ⌈log₂ N⌉ read, and a critical path of ⌈log₂ N⌉
// transfers, where the records it replaced had every PE read N-1 record
// lines per phase (each line read by N-1 PEs).
func TestLineCountAgree(t *testing.T) {
	for _, n := range []int{2, 3, 4, 8, 16, 32, 64, 128, 256} {
		const k = 6
		l, as := simAgree(n, nil)
		rec := func(i, s int) [AgreeWords]uint64 { return [AgreeWords]uint64{uint64(s), 1} }
		runAgree(t, l, as, k, rec)
		r := rounds(n)
		for i, a := range as {
			if c := a.lc.c; c.Calls != k || c.Writes != k*r || c.Reads != k*r || c.MaxDepth != r {
				t.Fatalf("%d members, member %d: %+v; want %d phases, %d lines written and read, path %d",
					n, i, c, k, k*r, r)
			}
		}
		t.Logf("%d members: per phase %d lines written, %d read, path %d (the records: %d read)", n, r, r, r, n-1)
	}
}
