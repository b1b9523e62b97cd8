package symheap

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/symheap/symheap/internal/config"
	"github.com/symheap/symheap/internal/errs"
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
		id := l.id()
		if id == "" || id[len(id)-1] == '-' {
			return job{}, fmt.Errorf("symheap: %s variables give no job id: %w", l.name, errs.ErrBadConfig)
		}
		return job{id: id, rank: rank, npes: npes, source: l.name}, nil
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
	return s, err
}

var getenv = os.Getenv
