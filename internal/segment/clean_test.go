package segment

import (
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/unix"
)

func TestListCleanInspect(t *testing.T) {
	liveJob, staleJob := testJob(t), testJob(t)+"x"
	t.Cleanup(func() { os.Remove(Path(unix.Getuid(), staleJob)) })
	live := openAll(t, liveJob, 2, nil)
	defer live[0].Close()
	defer live[1].Close()
	stale := openAll(t, staleJob, 1, nil)[0]
	die(stale)

	list, err := List(unix.Getuid())
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]Entry{}
	for _, e := range list {
		found[e.Job] = e
	}
	if e := found[liveJob]; e.Stale || len(e.Alive) != 2 || e.NPEs != 2 {
		t.Errorf("live job listed as %+v", e)
	}
	if e := found[staleJob]; !e.Stale {
		t.Errorf("stale job listed as %+v", e)
	}
	removed, err := Clean(unix.Getuid())
	if err != nil {
		t.Fatal(err)
	}
	gotStale := false
	for _, e := range removed {
		if e.Job == liveJob {
			t.Fatal("Clean removed a live job")
		}
		gotStale = gotStale || e.Job == staleJob
	}
	if !gotStale {
		t.Error("Clean did not remove the stale job")
	}
	if _, err := os.Stat(live[0].Path()); err != nil {
		t.Errorf("live segment gone: %v", err)
	}

	// Inspect sees the live job's memory and liveness, and changes nothing.
	live[1].Heap(1)[64] = 77
	in, err := Inspect(liveJob)
	if err != nil {
		t.Fatal(err)
	}
	if in.Heap(1)[64] != 77 || !in.Alive(0) || !in.Alive(1) || in.NPEs() != 2 {
		t.Errorf("Inspect: heap byte %d, alive %v %v, npes %d", in.Heap(1)[64], in.Alive(0), in.Alive(1), in.NPEs())
	}
	in.Close()
	if _, err := os.Stat(live[0].Path()); err != nil {
		t.Errorf("Inspect's Close removed the segment: %v", err)
	}
}

// TestSweep: a new job's creator removes the segments dead jobs left
// (finished by their creator, no lock held, every PE's process ended,
// made SweepAge ago or more), and nothing else: not a live job's, not one
// whose PE's process still runs (a PE that "died" inside this test
// process), not a half-made one, not one made just now.
func TestSweep(t *testing.T) {
	uid := unix.Getuid()
	liveJob, deadJob, runningJob, halfJob, youngJob := testJob(t), testJob(t)+"d", testJob(t)+"r", testJob(t)+"h", testJob(t)+"y"
	t.Cleanup(func() {
		for _, j := range []string{deadJob, runningJob, halfJob, youngJob} {
			os.Remove(Path(uid, j))
		}
	})
	live := openAll(t, liveJob, 2, nil)
	defer live[0].Close()
	defer live[1].Close()

	// A dead job: its only PE recorded the pid of a process that has ended.
	child := exec.Command(os.Args[0], "-test.run=^$")
	if err := child.Run(); err != nil {
		t.Fatal(err)
	}
	dead := openAll(t, deadJob, 1, nil)[0]
	dead.h.pes[0].pid.Store(uint64(child.Process.Pid))
	die(dead)
	// A job whose PE is gone from the segment but whose process runs.
	running := openAll(t, runningJob, 1, nil)[0]
	die(running)
	// A half-made segment: its creator died before publishing it.
	half := openAll(t, halfJob, 1, nil)[0]
	half.h.state.Store(stateInit)
	half.h.pes[0].pid.Store(uint64(child.Process.Pid))
	die(half)

	// A dead job made just now: left for SweepAge.
	young := openAll(t, youngJob, 1, nil)[0]
	young.h.pes[0].pid.Store(uint64(child.Process.Pid))
	die(young)
	// The others were made long ago.
	long := time.Now().Add(-2 * SweepAge)
	for _, j := range []string{deadJob, runningJob, halfJob} {
		if err := os.Chtimes(Path(uid, j), long, long); err != nil {
			t.Fatal(err)
		}
	}

	// The next job's creator sweeps.
	next := openAll(t, testJob(t), 1, nil)[0]
	next.Close()

	if _, err := os.Stat(Path(uid, deadJob)); !os.IsNotExist(err) {
		t.Errorf("the dead job's segment survived the sweep: %v", err)
	}
	if _, err := os.Stat(Path(uid, youngJob)); err != nil {
		t.Errorf("the sweep removed a dead job's segment made just now: %v", err)
	}
	// Short of space, a creator would remove it too (Sweep(uid, 0), which
	// is not called here: it would sweep other tests' young dead jobs).
	list, err := List(uid)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list, func(e Entry) bool { return e.Job == youngJob })
	if i < 0 {
		t.Fatal("the young dead job's segment is not listed")
	}
	if e := list[i]; !e.Stale || !e.sweepable(0) || e.sweepable(SweepAge) {
		t.Errorf("the young dead job's segment: %+v; want stale, swept short of space only", e)
	}
	for _, j := range []string{liveJob, runningJob, halfJob} {
		if _, err := os.Stat(Path(uid, j)); err != nil {
			t.Errorf("the sweep removed %s: %v", j, err)
		}
	}
}
