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
	DefaultHeapSize   = 256 << 20
	DefaultSharedSize = 64 << 20
)

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

// Param is one resolved setting and where its value came from.
type Param struct {
	Name, Value, Source string
}

// settings is Config resolved against the environment.
type settings struct {
	heap, shared uint64
	allocator    string
	offsetMode   bool
	protect      bool
	initTimeout  time.Duration
	peerTimeout  time.Duration
	params       []Param
}

func resolve(cfg Config, getenv func(string) string) (settings, error) {
	var s settings
	size := func(field int64, env string, def uint64, what string) (uint64, error) {
		if field < 0 {
			return 0, fmt.Errorf("symheap: Config.%s = %d: %w (must be >= 0; 0 means the default)", what, field, errs.ErrBadConfig)
		}
		v := getenv(env)
		var n int64
		if v != "" {
			// A malformed variable is an error even where Config
			// overrides it: it says the job is set up wrongly.
			var err error
			if n, err = config.ParseSize(v); err != nil {
				return 0, fmt.Errorf("symheap: %s: %w", env, err)
			}
		}
		if field > 0 {
			s.params = append(s.params, Param{env, strconv.FormatInt(field, 10), "Config." + what})
			return uint64(field), nil
		}
		if v != "" {
			s.params = append(s.params, Param{env, v, "environment"})
			return uint64(n), nil
		}
		s.params = append(s.params, Param{env, strconv.FormatUint(def, 10), "default"})
		return def, nil
	}
	var err error
	if s.heap, err = size(cfg.HeapSize, "SHMEM_SYMMETRIC_SIZE", DefaultHeapSize, "HeapSize"); err != nil {
		return s, err
	}
	if s.shared, err = size(cfg.SharedSize, "SYMHEAP_SHARED_SIZE", DefaultSharedSize, "SharedSize"); err != nil {
		return s, err
	}
	switch {
	case cfg.Allocator != "":
		s.allocator = cfg.Allocator
		s.params = append(s.params, Param{"SYMHEAP_ALLOCATOR", cfg.Allocator, "Config.Allocator"})
	case getenv("SYMHEAP_ALLOCATOR") != "":
		s.allocator = getenv("SYMHEAP_ALLOCATOR")
		s.params = append(s.params, Param{"SYMHEAP_ALLOCATOR", s.allocator, "environment"})
	default:
		s.params = append(s.params, Param{"SYMHEAP_ALLOCATOR", "", "default (highest priority)"})
	}
	b := func(env string, field bool, what string) (bool, error) {
		if field {
			s.params = append(s.params, Param{env, "1", "Config." + what})
			return true, nil
		}
		switch v := getenv(env); v {
		case "":
			s.params = append(s.params, Param{env, "0", "default"})
			return false, nil
		case "1", "true", "yes", "on":
			s.params = append(s.params, Param{env, v, "environment"})
			return true, nil
		case "0", "false", "no", "off":
			s.params = append(s.params, Param{env, v, "environment"})
			return false, nil
		default:
			return false, fmt.Errorf("symheap: %s=%q: %w (use 1 or 0)", env, v, errs.ErrBadConfig)
		}
	}
	if s.offsetMode, err = b("SYMHEAP_OFFSET_MODE", cfg.OffsetMode, "OffsetMode"); err != nil {
		return s, err
	}
	if s.protect, err = b("SYMHEAP_PROTECT", cfg.Protect, "Protect"); err != nil {
		return s, err
	}
	dur := func(env string, def time.Duration) (time.Duration, error) {
		v := getenv(env)
		if v == "" {
			s.params = append(s.params, Param{env, def.String(), "default"})
			return def, nil
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("symheap: %s=%q: %w (a positive Go duration such as 30s)", env, v, errs.ErrBadConfig)
		}
		s.params = append(s.params, Param{env, v, "environment"})
		return d, nil
	}
	if s.initTimeout, err = dur("SYMHEAP_INIT_TIMEOUT", 30*time.Second); err != nil {
		return s, err
	}
	if s.peerTimeout, err = dur("SYMHEAP_PEER_TIMEOUT", 10*time.Second); err != nil {
		return s, err
	}
	return s, nil
}

var getenv = os.Getenv
