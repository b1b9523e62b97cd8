package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

// pinTo moves every thread of this process to CPU cpu (threads made later
// inherit it from their creator). It calls sched_setaffinity itself:
// golang.org/x/sys/unix is internal/unix's alone, and this command should
// not grow that package.
func pinTo(cpu int) error {
	var set [16]uint64 // a cpu_set_t of 1024 CPUs
	if cpu < 0 || cpu >= 64*len(set) {
		return fmt.Errorf("CPU %d out of range", cpu)
	}
	set[cpu/64] |= 1 << (cpu % 64)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if _, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, uintptr(tid), unsafe.Sizeof(set), uintptr(unsafe.Pointer(&set))); errno != 0 {
			return fmt.Errorf("pin thread %d to CPU %d: %w", tid, cpu, errno)
		}
	}
	return nil
}
