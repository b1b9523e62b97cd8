package symheap

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/internal/config"
	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/segment"
)

// Defaults for Config.
const (
	DefaultHeapSize   = config.DefaultHeapSize   // 256 MiB
	DefaultSharedSize = config.DefaultSharedSize // 64 MiB
)

// Version is symheap's version.
const Version = config.Version

// job is where this process stands in a job, as the environment says.
type job struct {
	id         string
	rank, npes int
	source     string // which launcher's variables were read
	span       span   // what the launcher says of a job on several nodes
	// launched: a launcher started the PE and lives as long as its job
	// (launcher.go watches it): Open MPI's, PMI's, Slurm's, or shrun
	// (package launch, which sets SYMHEAP_LAUNCHER), also through a
	// wrapper. Not a lone PE's parent, nor whoever set SYMHEAP_JOB,
	// SYMHEAP_PE and SYMHEAP_NPES by hand: a script that starts PEs in the
	// background may well exit before they do.
	launched bool
}

// span is what a launcher's variables say about the job beyond this node:
// total PEs, here of them on this node, over nodes nodes (0: not said).
// It is the zero span when the variables say nothing of the kind or the
// job runs on this node only; vars then is "" too.
type span struct {
	total, here, nodes int
	vars               string // the variables that say so
}

// spanOf reads what the launcher whose variables name the job's rank and
// size says of the nodes it runs on: Open MPI's local size, Hydra's
// (MPICH's) MPI_LOCALNRANKS, Slurm's step layout.
func spanOf(launcher string, getenv func(string) string) span {
	num := func(k string) int {
		n, err := strconv.Atoi(strings.TrimSpace(getenv(k)))
		if err != nil || n < 0 {
			return 0
		}
		return n
	}
	var s span
	switch launcher {
	case "Open MPI":
		s = span{total: num("OMPI_COMM_WORLD_SIZE"), here: num("OMPI_COMM_WORLD_LOCAL_SIZE"),
			vars: "Open MPI (OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE)"}
	case "PMI":
		s = span{total: num("PMI_SIZE"), here: num("MPI_LOCALNRANKS"), vars: "the PMI launcher (PMI_SIZE, MPI_LOCALNRANKS)"}
	case "Slurm":
		s = span{total: firstNonZero(num("SLURM_STEP_NUM_TASKS"), num("SLURM_NTASKS")), nodes: num("SLURM_STEP_NUM_NODES"),
			vars: "Slurm (SLURM_NTASKS, SLURM_STEP_NUM_NODES, SLURM_STEP_TASKS_PER_NODE)"}
		if s.nodes > 1 {
			s.here = tasksOnNode(getenv("SLURM_STEP_TASKS_PER_NODE"), num("SLURM_NODEID"))
		}
		if s.nodes > 1 && s.total > 0 {
			return s
		}
	}
	if s.total > 0 && s.here > 0 && s.here < s.total {
		return s
	}
	return span{}
}

// tasksOnNode reads Slurm's tasks per node ("2(x3),1": two tasks on each
// of the first three nodes, one on the fourth) for node number node; 0 if
// it cannot.
func tasksOnNode(perNode string, node int) int {
	for _, part := range strings.Split(perNode, ",") {
		count, rep := part, "1"
		if c, r, ok := strings.Cut(part, "(x"); ok {
			count, rep = c, strings.TrimSuffix(r, ")")
		}
		n, err1 := strconv.Atoi(count)
		k, err2 := strconv.Atoi(rep)
		if err1 != nil || err2 != nil || k < 1 {
			return 0
		}
		if node < k {
			return n
		}
		node -= k
	}
	return 0
}

func firstNonZero(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// jobFromEnv reads the job description: shrun's variables, then Open MPI's,
// PMI's and Slurm's. With none, the process is a job of one.
func jobFromEnv(getenv func(string) string) (job, error) {
	type launcher struct {
		name, rank, size string
		id               func() string
	}
	launchers := []launcher{
		{"shrun", "SYMHEAP_PE", "SYMHEAP_NPES", func() string { return getenv("SYMHEAP_JOB") }},
		{"Open MPI", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", func() string {
			return "ompi-" + first(getenv("OMPI_MCA_ess_base_jobid"), getenv("PMIX_NAMESPACE"))
		}},
		{"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", func() string {
			return "ompi-" + first(getenv("OMPI_MCA_ess_base_jobid"), getenv("PMIX_NAMESPACE"))
		}},
		{"PMI", "PMI_RANK", "PMI_SIZE", func() string {
			return "pmi-" + first(getenv("PMI_JOBID"), getenv("PMIX_NAMESPACE"), strconv.Itoa(os.Getppid()))
		}},
		{"Slurm", "SLURM_PROCID", "SLURM_NTASKS", func() string {
			return "slurm-" + getenv("SLURM_JOB_ID") + "." + first(getenv("SLURM_STEP_ID"), "0")
		}},
	}
	for _, l := range launchers {
		r, n := getenv(l.rank), getenv(l.size)
		if r == "" && n == "" {
			continue
		}
		rank, err1 := strconv.Atoi(r)
		npes, err2 := strconv.Atoi(n)
		if err1 != nil || err2 != nil || npes < 1 || rank < 0 || rank >= npes {
			return job{}, fmt.Errorf("symheap: %s=%q %s=%q: %w (want 0 <= rank < size)", l.rank, r, l.size, n, errs.ErrBadConfig)
		}
		if npes > segment.MaxPEs {
			return job{}, fmt.Errorf("symheap: %s=%d: %w (a job has at most %d PEs: its segment holds no more)", l.size, npes, errs.ErrBadConfig, segment.MaxPEs)
		}
		id := l.id()
		if id == "" || id[len(id)-1] == '-' {
			return job{}, fmt.Errorf("symheap: %s variables give no job id: %w", l.name, errs.ErrBadConfig)
		}
		launched := l.name != "shrun" || getenv(config.EnvLauncher) != ""
		return job{id: id, rank: rank, npes: npes, source: l.name, span: spanOf(l.name, getenv), launched: launched}, nil
	}
	return job{id: fmt.Sprintf("solo-%d-%d", os.Getpid(), time.Now().UnixNano()), rank: 0, npes: 1, source: "none (single PE)"}, nil
}

func first(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// Param is one setting of a PE (PE.Params): the environment variable that
// names it, the value in force and where that value came from ("default",
// "environment" or the Config field that set it).
type Param struct {
	Name, Value, Source string
}

// settings is Config resolved against the environment (config.Resolve).
type settings struct {
	heap, shared uint64
	allocator    string
	offsetMode   bool
	protect      bool
	initTimeout  time.Duration
	peerTimeout  time.Duration
	monitorSlack time.Duration // the runtime monitor thread's timer slack where no core is spare; 0: left alone
	sharedSmall  bool          // the local shared heap's small-block front end
	peerErrors   bool          // UCX's peer error handling on the endpoints to other nodes
	params       []Param
}

func resolve(cfg Config, getenv func(string) string) (settings, error) {
	c, err := config.Resolve(config.Overrides{HeapSize: cfg.HeapSize, SharedSize: cfg.SharedSize,
		Allocator: cfg.Allocator, OffsetMode: cfg.OffsetMode, Protect: cfg.Protect}, getenv)
	s := settings{heap: c.Heap, shared: c.Shared, allocator: c.Allocator, offsetMode: c.OffsetMode,
		protect: c.Protect, initTimeout: c.InitTimeout, peerTimeout: c.PeerTimeout,
		monitorSlack: c.MonitorSlack, sharedSmall: c.SharedSmall, peerErrors: c.PeerErrors}
	for _, p := range c.Params {
		s.params = append(s.params, Param(p))
	}
	if err == nil {
		err = s.checkHeap()
	}
	return s, err
}

// checkHeap makes sure an allocator component takes the symmetric heap,
// so that a heap too small for every component (or for the one named) is
// refused naming the setting that sized it, rather than as an allocator's
// complaint about a region.
func (s settings) checkHeap() error {
	_, _, err := alloc.Select(s.allocator, s.heap)
	if err == nil {
		return nil
	}
	if _, known := alloc.Lookup(s.allocator); s.allocator != "" && !known {
		return fmt.Errorf("symheap: %s: %w", s.origin(config.EnvAllocator), err)
	}
	what := fmt.Sprintf("a symmetric heap of %s per PE (%s)", config.FormatSize(int64(s.heap)), s.origin(config.EnvHeap))
	if s.allocator != "" {
		what += fmt.Sprintf(" with allocator %q (%s)", s.allocator, s.origin(config.EnvAllocator))
	}
	return fmt.Errorf("symheap: %s: %w (set %s to a size the allocator takes, or unset it for the default %s; `symheap info` shows what each component accepts)",
		what, err, config.EnvHeap, config.FormatSize(DefaultHeapSize))
}

// origin says where the setting of variable env came from: "SHMEM_SYMMETRIC_SIZE=4k
// in the environment", "Config.HeapSize", "the default".
func (s settings) origin(env string) string {
	for _, p := range s.params {
		if p.Name != env {
			continue
		}
		switch p.Source {
		case config.SourceEnvironment:
			return fmt.Sprintf("%s=%s in the environment", p.Name, p.Value)
		case config.SourceDefault:
			return "the default"
		}
		return p.Source
	}
	return env
}

var getenv = os.Getenv
