package launch

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/symheap/symheap/internal/config"
	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/segment"
)

// Options describe one job. The zero value of every field but N is usable.
type Options struct {
	// N is the number of PEs, at least 1.
	N int
	// Heap, when not empty, is passed to every PE as SHMEM_SYMMETRIC_SIZE.
	// It must be a size in config.ParseSize syntax ("512m").
	Heap string
	// Allocator, when not empty, is passed as SYMHEAP_ALLOCATOR.
	Allocator string
	// Timeout, when positive, bounds the whole job: once it has passed,
	// every PE is stopped and Wait reports ErrTimeout.
	Timeout time.Duration
	// Grace is how long a PE has between its stop signal and SIGKILL when
	// the job is stopped; 0 means 500 ms.
	Grace time.Duration
	// StopSignal is the signal that stops the PEs still running when the
	// job is stopped (a PE failed, the timeout passed, the context was
	// cancelled, or Stop); 0 means SIGTERM. SIGQUIT makes Go PEs print
	// their goroutines' stacks as they end, which shows where a PE that
	// held the job up was waiting.
	StopSignal syscall.Signal
	// Tag prefixes every output line with "[pe N] ".
	Tag bool
	// Env holds extra "KEY=value" entries for every PE.
	Env []string
	// Stdout and Stderr receive the PEs' output; nil discards it.
	Stdout, Stderr io.Writer
	// Dir is the working directory of the PEs and of the build of a Go
	// package; "" is the launcher's.
	Dir string
	// Job is the job id; "" generates a fresh one.
	Job string
	// BuildFlags are extra arguments for `go build` when the program is a
	// Go package (for example "-race").
	BuildFlags []string
	// PeerTimeout is how long the PEs left once every other PE has
	// exited may all stay stopped (SIGSTOP: state T) before the launcher
	// kills them and ends the job (ErrStalled); 0 means the peer timeout
	// the PEs themselves use, SYMHEAP_PEER_TIMEOUT as Env or the
	// launcher's environment sets it, else 10 s.
	PeerTimeout time.Duration
}

// DefaultGrace is the time a stopped PE has between its stop signal and
// SIGKILL.
const DefaultGrace = 500 * time.Millisecond

// MaxPEs bounds Options.N: the most PEs one job's segment holds, the
// bound Init applies (internal/segment.MaxPEs). A job beyond it is refused
// before anything starts, rather than every PE failing in Init.
const MaxPEs = segment.MaxPEs

func (o *Options) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("launch: %w: %s", errs.ErrBadConfig, fmt.Sprintf(format, args...))
	}
	if o.N < 1 || o.N > MaxPEs {
		return bad("number of PEs %d: want 1 to %d (the most one job's segment holds)", o.N, MaxPEs)
	}
	if o.Heap != "" {
		switch n, err := config.ParseSize(o.Heap); {
		case err != nil:
			return fmt.Errorf("launch: heap: %w", err)
		case n == 0:
			return bad("heap %q: the symmetric heap must not be empty", o.Heap)
		case n > config.MaxHeapSize:
			return bad("heap %q: at most %s per PE", o.Heap, config.FormatSize(config.MaxHeapSize))
		}
	}
	if o.Timeout < 0 || o.Grace < 0 || o.PeerTimeout < 0 {
		return bad("negative timeout %v, grace %v or peer timeout %v", o.Timeout, o.Grace, o.PeerTimeout)
	}
	switch o.StopSignal {
	case 0, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGINT, syscall.SIGHUP:
	default:
		return bad("stop signal %v: want SIGTERM, SIGQUIT, SIGINT or SIGHUP", o.StopSignal)
	}
	for _, kv := range o.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.ContainsRune(kv, 0) {
			return bad("environment entry %q: want KEY=value", kv)
		}
	}
	if strings.ContainsRune(o.Job, 0) || strings.ContainsRune(o.Allocator, 0) {
		return bad("NUL byte in job id or allocator name")
	}
	return nil
}

// NewJobID returns a fresh job id: "j", the launcher's pid, "-" and 12
// random hex digits. Ids of concurrent jobs differ, and none is a prefix
// of another followed by '-' or '.', which the clean-up of /dev/shm relies
// on.
func NewJobID() string {
	var b [6]byte
	rand.Read(b[:]) // never fails (crypto/rand since Go 1.24)
	return "j" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// scrubbedPrefixes and scrubbedNames are the inherited variables by which
// other launchers (Open MPI, PMI, PMIx, Slurm) or an outer symheap job
// describe a job. They are removed from every PE's environment so that a
// nested launch never joins the outer job.
var (
	scrubbedPrefixes = []string{"OMPI_COMM_WORLD_", "PMI_", "PMIX_"}
	scrubbedNames    = []string{"SLURM_PROCID", "SLURM_NTASKS", config.EnvJob, config.EnvPE, config.EnvNPES, config.EnvLauncher}
)

func scrubbed(key string) bool {
	for _, p := range scrubbedPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	for _, n := range scrubbedNames {
		if key == n {
			return true
		}
	}
	return false
}

// baseEnv is the environment shared by every PE of the job: inherited
// minus scrubbed, then o.Env, then heap and allocator, then the job id.
// The rank is added per PE by peEnv.
func baseEnv(inherited []string, o *Options, job string) []string {
	env := make([]string, 0, len(inherited)+len(o.Env)+5)
	for _, kv := range inherited {
		k, _, _ := strings.Cut(kv, "=")
		if !scrubbed(k) {
			env = append(env, kv)
		}
	}
	env = append(env, o.Env...)
	if o.Heap != "" {
		env = append(env, config.EnvHeap+"="+o.Heap)
	}
	if o.Allocator != "" {
		env = append(env, config.EnvAllocator+"="+o.Allocator)
	}
	env = append(env, config.EnvJob+"="+job, config.EnvNPES+"="+strconv.Itoa(o.N),
		config.EnvLauncher+"="+strconv.Itoa(os.Getpid()))
	return env
}

// lookup reads a variable of env as peEnv leaves it: the last entry of a
// key wins.
func lookup(env []string) func(string) string {
	return func(key string) string {
		for i := len(env) - 1; i >= 0; i-- {
			if k, v, _ := strings.Cut(env[i], "="); k == key {
				return v
			}
		}
		return ""
	}
}

// peEnv adds the rank to base and removes duplicate keys, keeping the last
// value of each at the position of its first appearance.
func peEnv(base []string, rank int) []string {
	all := append(base[:len(base):len(base)], config.EnvPE+"="+strconv.Itoa(rank))
	index := make(map[string]int, len(all))
	out := make([]string, 0, len(all))
	for _, kv := range all {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := index[k]; ok {
			out[i] = kv
			continue
		}
		index[k] = len(out)
		out = append(out, kv)
	}
	return out
}
