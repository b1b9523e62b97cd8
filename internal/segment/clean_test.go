package segment

import (
	"os"
	"testing"

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
