package unix

import (
	"runtime"
	"testing"
)

// TestCPUListLen checks the parsing of the kernel's CPU lists.
func TestCPUListLen(t *testing.T) {
	for s, want := range map[string]int{
		"0": 1, "0-3": 4, "0-3,6": 5, "0-3,6,8-9": 7, "5-5": 1,
		"": 0, "x": 0, "3-1": 0, "0-": 0, "-1": 0, "0,,1": 0,
	} {
		if got := cpuListLen(s); got != want {
			t.Errorf("cpuListLen(%q) = %d, want %d", s, got, want)
		}
	}
}

// TestOnlineCPUs checks that the online CPUs are at least those this
// process may run on.
func TestOnlineCPUs(t *testing.T) {
	if n := OnlineCPUs(); n < runtime.NumCPU() {
		t.Fatalf("OnlineCPUs() = %d, fewer than runtime.NumCPU() = %d", n, runtime.NumCPU())
	}
}
