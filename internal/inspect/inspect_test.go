package inspect_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/internal/config"
	"github.com/symheap/symheap/internal/inspect"
	"github.com/symheap/symheap/internal/petest"
)

// TestLiveJob: what symheap stat reads of a live job of two PEs (each PE
// looks at the job through its own read-only attachment, between
// barriers that keep the figures still): the job's header, every PE's
// counters and heap figures, a heap map that covers the heap, the job in
// the list of this user's jobs, and the team ids in use.
func TestLiveJob(t *testing.T) {
	petest.Run(t, 2, func(t *testing.T) {
		pe, err := symheap.Init(symheap.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer pe.Close()
		keep := make([][]int64, 3)
		for i := range keep {
			if keep[i], err = symheap.Malloc[int64](pe, 1024*(i+1)); err != nil {
				t.Fatal(err)
			}
		}
		if err := symheap.Free(pe, keep[1]); err != nil {
			t.Fatal(err)
		}
		sh, err := symheap.SharedAlloc[byte](pe, 4096)
		if err != nil {
			t.Fatal(err)
		}
		team, err := pe.World().Split(0, 1, pe.Size())
		if err != nil {
			t.Fatal(err)
		}
		if err := pe.Barrier(); err != nil {
			t.Fatal(err)
		}

		v, err := inspect.Open(pe.Job())
		if err != nil {
			t.Fatal(err)
		}
		ji := v.Info()
		if ji.Job != pe.Job() || ji.NPEs != pe.Size() || len(ji.PEs) != pe.Size() || ji.Allocator != pe.AllocatorName() ||
			ji.SameAddress != pe.SameAddress() {
			t.Fatalf("Info: %+v", ji)
		}
		for _, p := range ji.PEs {
			if !p.Alive || p.State != "attached" || p.SymAllocs != 3 || p.SymFrees != 1 || p.SharedAllocs != 1 ||
				p.Heap.InUse < 4096*8 || p.Shared.InUse < 4096 {
				t.Errorf("PE %d: %+v", p.Rank, p)
			}
		}
		for _, shared := range []bool{false, true} {
			blocks, size, err := v.HeapMap(pe.Rank(), shared)
			if err != nil || size == 0 || len(blocks) == 0 {
				t.Fatalf("HeapMap(shared=%v): %d blocks of a %d-byte heap, %v", shared, len(blocks), size, err)
			}
			used := 0
			for i, b := range blocks {
				if b.Off+b.Size > size || i > 0 && b.Off < blocks[i-1].Off+blocks[i-1].Size {
					t.Errorf("HeapMap(shared=%v): block %d %+v overlaps or leaves the heap of %d bytes", shared, i, b, size)
				}
				if b.Used {
					used++
				}
			}
			if want := map[bool]int{false: 2, true: 1}[shared]; used < want {
				t.Errorf("HeapMap(shared=%v): %d used blocks, want at least %d", shared, used, want)
			}
		}
		if _, _, err := v.HeapMap(pe.Size(), false); !errors.Is(err, symheap.ErrBadPE) {
			t.Errorf("HeapMap of PE %d: %v, want ErrBadPE", pe.Size(), err)
		}
		if n := v.TeamsInUse(); n != 2 {
			t.Errorf("TeamsInUse with one split team: %d, want 2", n)
		}
		list, err := inspect.ListJobs()
		if err != nil {
			t.Fatal(err)
		}
		listed := false
		for _, e := range list {
			listed = listed || e.Job == pe.Job() && !e.Stale && e.NPEs == pe.Size()
		}
		if !listed {
			t.Errorf("ListJobs does not list the live job %s: %+v", pe.Job(), list)
		}

		if err := team.Destroy(); err != nil {
			t.Fatal(err)
		}
		if err := pe.Barrier(); err != nil {
			t.Fatal(err)
		}
		if n := v.TeamsInUse(); n != 1 {
			t.Errorf("TeamsInUse after Destroy: %d, want 1", n)
		}
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
		if err := symheap.SharedFree(pe, sh); err != nil {
			t.Fatal(err)
		}
		if err := pe.Barrier(); err != nil {
			t.Fatal(err)
		}
	}, petest.Heap("4m"), petest.Env(config.EnvSharedHeap+"=1m"))
}

// TestOpenMissing: a job that does not exist is an error that names it.
func TestOpenMissing(t *testing.T) {
	if _, err := inspect.Open("no-such-job-inspect-test"); err == nil || !strings.Contains(err.Error(), "no-such-job-inspect-test") {
		t.Errorf("Open of a missing job: %v", err)
	}
}

// TestDescribe: the report of symheap info lists every component with
// exactly one chosen, every setting with its source, and a malformed
// setting as ParamError rather than a failure.
func TestDescribe(t *testing.T) {
	t.Setenv(config.EnvHeap, "8m")
	r := inspect.Describe()
	chosen := 0
	for _, c := range r.Components {
		if c.Chosen {
			chosen++
		}
	}
	if r.Version != symheap.Version || len(r.Components) < 3 || chosen != 1 || r.ChosenReason == "" || r.ParamError != "" {
		t.Errorf("Describe: %+v", r)
	}
	if len(r.Params) == 0 || r.Params[0] != (config.Param{Name: config.EnvHeap, Value: "8m", Source: "environment"}) {
		t.Errorf("Describe: params %+v, want %s=8m from the environment first", r.Params, config.EnvHeap)
	}
	t.Setenv(config.EnvHeap, "8 megabytes")
	if r := inspect.Describe(); !strings.Contains(r.ParamError, config.EnvHeap) {
		t.Errorf("Describe with a malformed %s: ParamError %q", config.EnvHeap, r.ParamError)
	}
}
