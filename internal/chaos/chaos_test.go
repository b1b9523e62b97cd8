package chaos

import (
	"context"
	"os"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestChaosShort is the short form of the campaign that make test runs:
// a few SIGKILL runs and a few SIGSTOP runs. CHAOS_RUNS sets the number of
// each. SYMHEAP_CHAOS_SEED replays the campaigns of a seed that an earlier
// run logged (a CI failure); without it the seed comes from the clock.
func TestChaosShort(t *testing.T) {
	runs := 6
	if v, err := strconv.Atoi(os.Getenv("CHAOS_RUNS")); err == nil {
		runs = v
	}
	if testing.Short() {
		runs = 2
	}
	seed := NewSeed()
	if v := os.Getenv("SYMHEAP_CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil || s == 0 {
			t.Fatalf("SYMHEAP_CHAOS_SEED=%q: want a seed as logged by an earlier run (a non-zero integer)", v)
		}
		seed = s
	}
	// Logged first, so that it is there whatever fails after it (a build,
	// a hang that the test timeout ends).
	replay := "SYMHEAP_CHAOS_SEED=" + strconv.FormatUint(seed, 10) + " go test -run TestChaosShort ./internal/chaos"
	t.Logf("chaos seed %d (replay: %s)", seed, replay)
	dir := t.TempDir()
	if err := Build(dir); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	for _, stop := range []bool{false, true} {
		name := "kill-9"
		if stop {
			name = "kill-STOP"
		}
		t.Run(name, func(t *testing.T) {
			t.Logf("seed %d, %d runs", seed, runs)
			r, err := Run(context.Background(), Config{Runs: runs, Stop: stop, PeerTimeout: time.Second, Bin: dir,
				Seed: seed, Log: testLog{t}})
			if err != nil {
				t.Fatal(err) // names the seed and the run
			}
			t.Log(r.String())
			// What the bound on the time was meant to catch is checked
			// by its cause: a job that never ended (Hung), a PE left
			// alive, a segment left, a zero status. Jobs merely slower
			// than their bound are logged (TOO-SLOW lines above).
			if r.Defects() != 0 {
				t.Errorf("campaign of seed %d failed (replay: %s):\n%s", seed, replay, r)
			}
		})
	}
}

// TestPlan: a seed plans the same jobs every time, whatever the number of
// runs asked for (a replay may stop at the failing run), and another seed
// plans other jobs. This is what makes a logged seed worth having.
func TestPlan(t *testing.T) {
	for _, stop := range []bool{false, true} {
		a, b := Plan(42, 200, stop), Plan(42, 200, stop)
		if !slices.Equal(a, b) {
			t.Errorf("stop=%v: seed 42 planned two campaigns:\n%v\n%v", stop, a, b)
		}
		if short := Plan(42, 17, stop); !slices.Equal(short, a[:17]) {
			t.Errorf("stop=%v: 17 runs of seed 42 are not the first 17 of 200:\n%v\n%v", stop, short, a[:17])
		}
		if c := Plan(43, 200, stop); slices.Equal(a, c) {
			t.Errorf("stop=%v: seeds 42 and 43 planned the same campaign", stop)
		}
		want := syscall.SIGKILL
		if stop {
			want = syscall.SIGSTOP
		}
		for i, j := range a {
			if j.PEs < 2 || j.PEs > 8 || j.Victim < 0 || j.Victim >= j.PEs || j.Delay < 20*time.Millisecond ||
				j.Delay >= 420*time.Millisecond || j.Signal != want {
				t.Errorf("stop=%v: run %d planned as %+v", stop, i+1, j)
			}
		}
	}
	// The two fault kinds of one seed take different streams.
	if k, s := Plan(42, 50, false), Plan(42, 50, true); slices.EqualFunc(k, s, func(x, y Job) bool {
		return x.PEs == y.PEs && x.Victim == y.Victim && x.Delay == y.Delay
	}) {
		t.Error("the kill and the stop campaign of seed 42 fault the same PEs at the same moments")
	}
	if len(Plan(1, 0, false)) != 0 || len(Plan(1, -1, false)) != 0 {
		t.Error("a campaign of no runs planned jobs")
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}

// TestBound: a run's bound follows the peer timeout the campaign sets
// (SIGSTOP runs only: a killed PE is seen at once) and grows by its steps
// times the scheduling delay measured in the run, nothing fixed besides
// Slack.
func TestBound(t *testing.T) {
	late := 7 * time.Millisecond
	for _, pt := range []time.Duration{time.Second, 5 * time.Second} {
		stop := Config{Stop: true, PeerTimeout: pt}
		if got, want := stop.Bound(0), pt+Slack; got != want {
			t.Errorf("SIGSTOP, peer timeout %v, idle: bound %v, want %v", pt, got, want)
		}
		if got, want := stop.Bound(late), pt+Slack+StopSteps*late; got != want {
			t.Errorf("SIGSTOP, peer timeout %v, %v late: bound %v, want %v", pt, late, got, want)
		}
		kill := Config{PeerTimeout: pt}
		if got, want := kill.Bound(late), Slack+KillSteps*late; got != want {
			t.Errorf("SIGKILL, peer timeout %v, %v late: bound %v, want %v", pt, late, got, want)
		}
	}
	if d := lateness(3); d < 0 {
		t.Errorf("lateness %v: a sleep woke before its time", d)
	}
}
