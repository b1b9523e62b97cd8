package chaos

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// TestChaosShort is the short form of the campaign that make test runs:
// a few SIGKILL runs and a few SIGSTOP runs. CHAOS_RUNS sets the number of
// each.
func TestChaosShort(t *testing.T) {
	runs := 6
	if v, err := strconv.Atoi(os.Getenv("CHAOS_RUNS")); err == nil {
		runs = v
	}
	if testing.Short() {
		runs = 2
	}
	dir := t.TempDir()
	if err := Build(dir); err != nil {
		t.Fatal(err)
	}
	for _, stop := range []bool{false, true} {
		name := "kill-9"
		if stop {
			name = "kill-STOP"
		}
		t.Run(name, func(t *testing.T) {
			r, err := Run(context.Background(), Config{Runs: runs, Stop: stop, PeerTimeout: time.Second, Bin: dir,
				Seed: uint64(time.Now().UnixNano()), Log: testLog{t}})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(r.String())
			if !r.OK() {
				t.Errorf("campaign failed:\n%s", r)
			}
		})
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}
