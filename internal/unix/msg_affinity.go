package unix

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// PinProcess binds every thread of this process to one CPU: the n-th
// (modulo their number) of the CPUs the process may run on. Threads the Go
// runtime starts later inherit the binding from the thread that starts
// them. It is for benchmarks, which compare with launchers that bind their
// ranks to cores (mpirun does by default). It returns the CPU chosen.
func PinProcess(n int) (int, error) {
	cpu, err := HomeCPU(n)
	if err != nil {
		return -1, err
	}
	var one unix.CPUSet
	one.Set(cpu)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return -1, err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &one); err != nil && err != unix.ESRCH {
			return -1, fmt.Errorf("sched_setaffinity(%d, CPU %d): %w", tid, cpu, err)
		}
	}
	return cpu, nil
}

// Nudge moves the calling thread onto the n-th (modulo their number) of
// the CPUs this process may run on, then lets it run on all of them
// again: a placement, not a binding. The kernel migrates a thread at once
// when its CPU leaves its mask, and then leaves it where it is until its
// load balancer decides otherwise. It is for a PE that found its peer
// running on its own core while another core was free (shmsync,
// "Placement"): the kernel places a woken process beside its waker, and
// two processes that poll and yield look too light to its balancer to be
// parted again.
func Nudge(n int) error {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		return fmt.Errorf("sched_getaffinity: %w", err)
	}
	count := allowed.Count()
	if count < 2 {
		return nil
	}
	cpu := nthCPU(&allowed, n%count)
	var one unix.CPUSet
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		return fmt.Errorf("sched_setaffinity(CPU %d): %w", cpu, err)
	}
	if err := unix.SchedSetaffinity(0, &allowed); err != nil {
		return fmt.Errorf("sched_setaffinity(every allowed CPU): %w", err)
	}
	return nil
}

// nthCPU returns the i-th CPU (from 0, in increasing order) of set, or -1
// when set has no more than i. It allocates nothing: Nudge runs inside
// waits whose callers promise no allocation.
func nthCPU(set *unix.CPUSet, i int) int {
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			if i == 0 {
				return c
			}
			i--
		}
	}
	return -1
}

// HomeCPU returns the n-th (modulo their number) of the CPUs this process
// may run on: the CPU that Nudge moves it to, and the one PinProcess binds
// it to. A process bound to one CPU gets that CPU. It is where a PE is
// expected to run, which the barrier's topology-aware order reads
// (internal/team, "Topology").
func HomeCPU(n int) (int, error) {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		return -1, fmt.Errorf("sched_getaffinity: %w", err)
	}
	count := allowed.Count()
	if count == 0 {
		return -1, fmt.Errorf("sched_getaffinity: no CPU allowed")
	}
	return nthCPU(&allowed, n%count), nil
}
