package symheap_test

import (
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/internal/petest"
	"github.com/symheap/symheap/internal/unix"
)

// TestMonitorSlack: in a job with as many PEs as cores, Init gives the Go
// runtime's monitor thread the timer slack of SYMHEAP_MONITOR_SLACK (1 ms
// by default), and Close puts the old one back; with
// SYMHEAP_MONITOR_SLACK=0 Init leaves it alone. Without CAP_SYS_NICE the
// kernel refuses the change, and Init goes on without it.
func TestMonitorSlack(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("setting another thread's timer slack needs CAP_SYS_NICE (root here)")
	}
	n := max(runtime.NumCPU(), 2)
	if n > 8 {
		t.Skipf("a job of as many PEs as CPUs (%d) is too big for this test", n)
	}
	for _, c := range []struct {
		env  string
		want time.Duration // 0: unchanged
	}{{"", time.Millisecond}, {"SYMHEAP_MONITOR_SLACK=2500us", 2500 * time.Microsecond}, {"SYMHEAP_MONITOR_SLACK=0", 0}} {
		t.Run(c.env, func(t *testing.T) {
			opts := []petest.Option{petest.Heap("2m"), petest.Env("SYMHEAP_SHARED_SIZE=1m")}
			if c.env != "" {
				opts = append(opts, petest.Env(c.env))
			}
			petest.Run(t, n, func(t *testing.T) {
				// Busy before looking, as Init is: the monitor then
				// sleeps in nanosleep, where MonitorThread finds it.
				for t0 := time.Now(); time.Since(t0) < 10*time.Millisecond; {
				}
				tid, ok := unix.MonitorThread()
				if !ok {
					t.Fatal("monitor thread not found")
				}
				before, err := unix.ThreadTimerSlack(tid)
				if err != nil {
					t.Fatal(err)
				}
				pe, err := symheap.Init(symheap.Config{})
				if err != nil {
					t.Fatal(err)
				}
				during, err := unix.ThreadTimerSlack(tid)
				if err != nil {
					t.Fatal(err)
				}
				if want := c.want; want == 0 && during != before || want != 0 && during != want {
					t.Errorf("monitor's timer slack after Init: %v (before: %v), want %v (0: unchanged)", during, before, want)
				}
				if err := pe.Close(); err != nil {
					t.Fatal(err)
				}
				if after, err := unix.ThreadTimerSlack(tid); err != nil || after != before {
					t.Errorf("monitor's timer slack after Close: %v, %v; want %v as before Init", after, err, before)
				}
			}, opts...)
		})
	}
}
