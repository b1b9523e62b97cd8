package inspect

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/internal/config"
	"github.com/symheap/symheap/internal/unix"
	"github.com/symheap/symheap/memhook"
)

// Report is what symheap info prints: what this build offers and what it
// would choose on this machine.
type Report struct {
	Version       string
	GoVersion     string
	Components    []ComponentInfo
	ChosenReason  string
	Params        []config.Param
	ParamError    string `json:",omitempty"`
	SameAddress   string // filled by the caller that can start processes
	MemoryMonitor string
	CHooks        string // the C library's self-test; filled by the caller that can build and start a C program
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

// Describe gathers the report for the settings Init would resolve from
// the environment with a zero Config. It starts no job.
func Describe() Report {
	r := Report{Version: config.Version, GoVersion: runtime.Version()}
	set, err := config.Resolve(config.Overrides{}, os.Getenv)
	r.Params = set.Params
	if err != nil {
		r.ParamError = err.Error()
	}
	// The memory monitor's settings, which memhook reads itself at Init.
	for _, c := range []struct{ name, def string }{
		{memhook.EnvLeavePinned, "auto"}, {memhook.EnvLeavePinnedPipeline, "auto"}, {memhook.EnvDisable, "no"},
	} {
		if v := os.Getenv(c.name); v != "" {
			r.Params = append(r.Params, config.Param{Name: c.name, Value: v, Source: "environment"})
		} else {
			r.Params = append(r.Params, config.Param{Name: c.name, Value: c.def, Source: "default"})
		}
	}
	chosen, reason, err := alloc.Select(set.Allocator, set.Heap)
	if err != nil {
		r.ChosenReason = err.Error()
	} else {
		r.ChosenReason = reason
	}
	for _, c := range alloc.Components() {
		ci := ComponentInfo{Name: c.Name, Priority: c.Priority, Probe: "accepts", Chosen: c.Name == chosen.Name}
		if c.Probe != nil {
			if err := c.Probe(set.Heap); err != nil {
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

// memoryMonitorReport runs the monitor's self-test in this process and
// describes what it can see, and the caching decision.
func memoryMonitorReport() string {
	m := memhook.New()
	defer m.Close()
	res := m.SelfTest(nil)
	var b strings.Builder
	b.WriteString(strings.TrimPrefix(strings.TrimSpace(res.String()), "memory monitor: "))
	if in, err := memhook.InputsFromEnv(memhook.Unset, memhook.Unset); err != nil {
		fmt.Fprintf(&b, "\n  caching: %v", err)
	} else {
		d := memhook.Decide(in)
		state := "off"
		if d.Enabled {
			state = "on"
		}
		fmt.Fprintf(&b, "\n  registration caching: %s, %s", state, d.Reason)
	}
	return b.String()
}
