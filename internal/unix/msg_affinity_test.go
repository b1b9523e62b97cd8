package unix

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestNthCPU: the i-th set CPU in increasing order, -1 past the last.
func TestNthCPU(t *testing.T) {
	var set unix.CPUSet
	for _, c := range []int{1, 3, 64, 70} {
		set.Set(c)
	}
	for i, want := range []int{1, 3, 64, 70, -1} {
		if got := nthCPU(&set, i); got != want {
			t.Errorf("nthCPU(%d) = %d, want %d", i, got, want)
		}
	}
}

// TestNudgeAllocs: Nudge runs inside the waits of collectives, which
// allocate nothing, so it allocates nothing itself; and it leaves the
// thread free to run on every CPU it could before.
func TestNudgeAllocs(t *testing.T) {
	var before, after unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		t.Skip(err)
	}
	n := 0
	allocs := testing.AllocsPerRun(100, func() {
		if err := Nudge(n); err != nil {
			t.Fatal(err)
		}
		n++
	})
	if allocs != 0 {
		t.Errorf("Nudge allocates %.1f times per call, want none", allocs)
	}
	if err := unix.SchedGetaffinity(0, &after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("CPUs allowed after Nudge: %d, before: %d", after.Count(), before.Count())
	}
}
