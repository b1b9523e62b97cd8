package symheap

import (
	"fmt"
	"runtime"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/internal/unix"
)

// Report is what symheap info prints: what this build offers and what it
// would choose on this machine.
type Report struct {
	Version       string
	GoVersion     string
	Components    []ComponentInfo
	ChosenReason  string
	Params        []Param
	ParamError    string `json:",omitempty"`
	SameAddress   string // filled by the caller that can start processes
	MemoryMonitor string
	ShmTotal      uint64
	ShmFree       uint64
	Memlock       string
	KernelCopy    string
}

// ComponentInfo is one allocator component.
type ComponentInfo struct {
	Name     string
	Priority int
	Probe    string // "accepts" or why it refuses the configured heap
	Chosen   bool
}

// Describe gathers the report for Config cfg resolved against the
// environment. It starts no job.
func Describe(cfg Config) Report {
	r := Report{Version: Version, GoVersion: runtime.Version()}
	set, err := resolve(cfg, getenv)
	r.Params = set.params
	if err != nil {
		r.ParamError = err.Error()
	}
	chosen, reason, err := alloc.Select(set.allocator, set.heap)
	if err != nil {
		r.ChosenReason = err.Error()
	} else {
		r.ChosenReason = reason
	}
	for _, c := range alloc.Components() {
		ci := ComponentInfo{Name: c.Name, Priority: c.Priority, Probe: "accepts", Chosen: c.Name == chosen.Name}
		if c.Probe != nil {
			if err := c.Probe(set.heap); err != nil {
				ci.Probe = "refuses: " + err.Error()
			}
		}
		r.Components = append(r.Components, ci)
	}
	r.ShmTotal, r.ShmFree, _ = unix.FreeSpace(unix.ShmDir)
	if cur, max, err := unix.Rlimit(unix.RlimitMemlock); err == nil {
		r.Memlock = fmt.Sprintf("%s soft, %s hard", limitString(cur), limitString(max))
	}
	r.KernelCopy = kernelCopyProbe()
	r.MemoryMonitor = memoryMonitorReport()
	r.SameAddress = "not probed"
	return r
}

func limitString(v uint64) string {
	if v == unix.RlimInfinity {
		return "unlimited"
	}
	return fmt.Sprintf("%d bytes", v)
}

// kernelCopyProbe tries process_vm_readv on this process.
func kernelCopyProbe() string {
	src := []byte("probe")
	dst := make([]byte, len(src))
	if _, err := unix.ProcessVMRead(unix.Getpid(), dst, unix.AddrOf(src)); err != nil {
		return "refused (" + err.Error() + "): messages from ordinary memory use the bounce buffer"
	}
	return "available: messages from ordinary memory take one copy through the kernel"
}
