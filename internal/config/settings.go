package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/symheap/symheap/internal/errs"
)

// Version is symheap's version (symheap.Version; symheap info prints it).
const Version = "0.1.0"

// Defaults of the settings that Resolve falls back to.
const (
	DefaultHeapSize    = 256 << 20
	DefaultSharedSize  = 64 << 20
	DefaultInitTimeout = 30 * time.Second
	DefaultPeerTimeout = 10 * time.Second
	// DefaultMonitorSlack is the Go runtime monitor thread's timer slack
	// on a node with no core to spare (shmsync.QuietMonitor).
	DefaultMonitorSlack = time.Millisecond
	// MaxMonitorSlack bounds SYMHEAP_MONITOR_SLACK: the monitor also
	// preempts goroutines that run for 10 ms.
	MaxMonitorSlack = 5 * time.Millisecond
)

// Environment variables of the settings that only the runtime reads (the
// job contract's are in env.go).
const (
	// EnvProtect, when set, maps other PEs' symmetric heaps read-only.
	EnvProtect = "SYMHEAP_PROTECT"
	// EnvInitTimeout bounds Init's wait for the other PEs (a Go duration).
	EnvInitTimeout = "SYMHEAP_INIT_TIMEOUT"
	// EnvPeerTimeout is how long a PE that stopped answering is waited
	// for (a Go duration).
	EnvPeerTimeout = "SYMHEAP_PEER_TIMEOUT"
	// EnvMonitorSlack is the timer slack given to the Go runtime's
	// monitor thread on a node with no core to spare (a Go duration; 0
	// leaves it alone).
	EnvMonitorSlack = "SYMHEAP_MONITOR_SLACK"
)

// Overrides are the fields of symheap.Config, which take precedence over
// the environment. Their zero values leave a setting to the environment.
type Overrides struct {
	HeapSize   int64
	SharedSize int64
	Allocator  string
	OffsetMode bool
	Protect    bool
}

// Param is one resolved setting and where its value came from: "default",
// "environment" or the Config field that set it.
type Param struct {
	Name, Value, Source string
}

// Settings are Overrides resolved against the environment: what Init uses,
// and what symheap info reports.
type Settings struct {
	Heap, Shared uint64 // bytes of each PE's symmetric and local shared heap
	Allocator    string // "": the highest-priority component that accepts the heap
	OffsetMode   bool
	Protect      bool
	InitTimeout  time.Duration
	PeerTimeout  time.Duration
	MonitorSlack time.Duration // the runtime monitor thread's timer slack where no core is spare; 0: left alone
	SharedSmall  bool          // the local shared heap's small-block front end (on unless SYMHEAP_SHARED_SMALL=0)
	PeerErrors   bool          // UCX's peer error handling on the endpoints to other nodes (on unless SYMHEAP_UCX_PEER_ERRORS=0)
	Params       []Param       // every setting above, in this order, with its source
}

// MaxHeapSize bounds each of a PE's two heaps (symmetric and local
// shared): 64 TiB, far beyond any node's memory and far below the sums of
// the segment's layout overflowing. The segment's layout enforces it too
// (internal/segment.ComputeLayout); Resolve refuses a setting above it
// first, naming the variable.
const MaxHeapSize = 1 << 46

// Sources of a Param besides the Config field that set it.
const (
	SourceDefault     = "default"
	SourceEnvironment = "environment"
	// SourceMalformed marks a variable Resolve refused: its Value is the
	// variable's text, and the setting took its default.
	SourceMalformed = "environment, refused (see the error)"
)

// Resolve resolves o against the environment getenv reads. A malformed
// variable is an error (wrapping errs.ErrBadConfig and naming the
// variable) even where o overrides it. Resolve goes on past a refused
// variable, so that Settings.Params lists every setting, a refused one
// with its text and SourceMalformed (symheap info shows them all); the
// refused setting takes its default, and the error joins one error per
// refused variable.
func Resolve(o Overrides, getenv func(string) string) (Settings, error) {
	var s Settings
	var errv []error
	add := func(name, value, source string) { s.Params = append(s.Params, Param{name, value, source}) }
	refuse := func(env, v string, err error) {
		add(env, v, SourceMalformed)
		errv = append(errv, err)
	}
	// size resolves a heap size. what is the Config field; empty is what
	// to say when the size is 0, or "" when 0 is allowed.
	size := func(field int64, env string, def uint64, what, empty string) uint64 {
		if field < 0 || field > MaxHeapSize {
			errv = append(errv, fmt.Errorf("symheap: Config.%s = %d: %w (want 0, which means the default, to %s)", what, field, errs.ErrBadConfig, FormatSize(MaxHeapSize)))
			field = 0 // listed below with the source that takes over
		}
		v := getenv(env)
		var n int64
		if v != "" {
			// A malformed variable is an error even where Config
			// overrides it: it says the job is set up wrongly.
			var err error
			switch n, err = ParseSize(v); {
			case err != nil:
				refuse(env, v, fmt.Errorf("symheap: %s: %w", env, err))
				return def
			case n == 0 && empty != "":
				refuse(env, v, fmt.Errorf("symheap: %s=%q: %w (%s; unset it for the default, %s)", env, v, errs.ErrBadConfig, empty, FormatSize(int64(def))))
				return def
			case n > MaxHeapSize:
				refuse(env, v, fmt.Errorf("symheap: %s=%q: %w (at most %s per PE)", env, v, errs.ErrBadConfig, FormatSize(MaxHeapSize)))
				return def
			}
		}
		if field > 0 {
			add(env, strconv.FormatInt(field, 10), "Config."+what)
			return uint64(field)
		}
		if v != "" {
			add(env, v, SourceEnvironment)
			return uint64(n)
		}
		add(env, strconv.FormatUint(def, 10), SourceDefault)
		return def
	}
	s.Heap = size(o.HeapSize, EnvHeap, DefaultHeapSize, "HeapSize", "the symmetric heap must not be empty")
	// A local shared heap of 0 bytes is allowed: the PE then has none.
	s.Shared = size(o.SharedSize, EnvSharedHeap, DefaultSharedSize, "SharedSize", "")
	switch {
	case o.Allocator != "":
		s.Allocator = o.Allocator
		add(EnvAllocator, o.Allocator, "Config.Allocator")
	case getenv(EnvAllocator) != "":
		s.Allocator = getenv(EnvAllocator)
		add(EnvAllocator, s.Allocator, SourceEnvironment)
	default:
		add(EnvAllocator, "", "default (highest priority)")
	}
	flag := func(env string, field bool, what string) bool {
		if field {
			add(env, "1", "Config."+what)
			return true
		}
		v := getenv(env)
		if v == "" {
			add(env, "0", SourceDefault)
			return false
		}
		on, ok := ParseYesNo(v)
		if !ok {
			refuse(env, v, fmt.Errorf("symheap: %s=%q: %w (use 1 or 0, yes or no)", env, v, errs.ErrBadConfig))
			return false
		}
		add(env, v, SourceEnvironment)
		return on
	}
	s.OffsetMode = flag(EnvOffsetMode, o.OffsetMode, "OffsetMode")
	s.Protect = flag(EnvProtect, o.Protect, "Protect")
	dur := func(env string, def time.Duration) time.Duration {
		v := getenv(env)
		if v == "" {
			add(env, def.String(), SourceDefault)
			return def
		}
		d, err := parseTimeout(env, v)
		if err != nil {
			refuse(env, v, err)
			return def
		}
		add(env, v, SourceEnvironment)
		return d
	}
	s.InitTimeout = dur(EnvInitTimeout, DefaultInitTimeout)
	s.PeerTimeout = dur(EnvPeerTimeout, DefaultPeerTimeout)
	s.MonitorSlack = DefaultMonitorSlack
	if v := getenv(EnvMonitorSlack); v == "" {
		add(EnvMonitorSlack, DefaultMonitorSlack.String(), SourceDefault)
	} else {
		d, err := time.ParseDuration(v)
		if v == "0" {
			d, err = 0, nil
		}
		if err != nil || d < 0 || d > MaxMonitorSlack {
			refuse(EnvMonitorSlack, v, fmt.Errorf("symheap: %s=%q: %w (a Go duration from 0, which leaves the monitor alone, to %v, such as 1ms)", EnvMonitorSlack, v, errs.ErrBadConfig, MaxMonitorSlack))
		} else {
			s.MonitorSlack = d
			add(EnvMonitorSlack, v, SourceEnvironment)
		}
	}
	// Switches that are on unless their variable says no.
	for _, sw := range []struct {
		env string
		on  *bool
	}{{EnvSharedSmall, &s.SharedSmall}, {EnvUCXPeerErrors, &s.PeerErrors}} {
		*sw.on = true
		v := getenv(sw.env)
		if v == "" {
			add(sw.env, "1", SourceDefault)
			continue
		}
		on, ok := ParseYesNo(v)
		if !ok {
			refuse(sw.env, v, fmt.Errorf("symheap: %s=%q: %w (use 1 or 0, yes or no)", sw.env, v, errs.ErrBadConfig))
			continue
		}
		*sw.on = on
		add(sw.env, v, SourceEnvironment)
	}
	return s, errors.Join(errv...)
}

// parseTimeout reads a positive Go duration from variable env.
func parseTimeout(env, v string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("symheap: %s=%q: %w (a positive Go duration such as 30s)", env, v, errs.ErrBadConfig)
	}
	return d, nil
}

// PeerTimeout is the peer timeout (SYMHEAP_PEER_TIMEOUT) that the PEs of
// a job whose environment getenv reads will resolve, for the launcher,
// which ends a job whose last PEs have stayed stopped that long. The
// error names the variable.
func PeerTimeout(getenv func(string) string) (time.Duration, error) {
	v := getenv(EnvPeerTimeout)
	if v == "" {
		return DefaultPeerTimeout, nil
	}
	return parseTimeout(EnvPeerTimeout, v)
}

// Environment variables read by the layers themselves: the memory monitor
// (memhook), messaging (internal/msg), and the invariant checkers.
const (
	EnvLeavePinned         = "SYMHEAP_LEAVE_PINNED"          // registration caching: yes, no, auto
	EnvLeavePinnedPipeline = "SYMHEAP_LEAVE_PINNED_PIPELINE" // the same for the pipelined protocol
	EnvMemhookDisable      = "SYMHEAP_MEMHOOK_DISABLE"       // yes: this PE's memory monitor is off
	EnvMsgEager            = "SYMHEAP_MSG_EAGER"             // eager limit, ordinary send buffers
	EnvMsgEagerShared      = "SYMHEAP_MSG_EAGER_SHARED"      // eager limit, send buffers in the segment
	EnvMsgSplit            = "SYMHEAP_MSG_SPLIT"             // messages this large are copied by both PEs
	EnvMsgNoKernel         = "SYMHEAP_MSG_NOKERNEL"          // yes: never process_vm_readv
	EnvMsgBounce           = "SYMHEAP_MSG_BOUNCE"            // yes: every large message through bounce buffers
	EnvAllocVerify         = "SYMHEAP_ALLOC_VERIFY"          // any value: allocator invariants after every change
	EnvRCacheVerify        = "SYMHEAP_RCACHE_VERIFY"         // any value: cache invariants after every change
)

// ParseYesNo reads a yes/no setting in any of its usual spellings, in any
// case: yes/no, y/n, 1/0, true/false, on/off. ok is false for anything
// else (the empty string included). Every yes/no setting of symheap is
// read with it.
func ParseYesNo(v string) (on, ok bool) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "yes", "y", "1", "true", "on":
		return true, true
	case "no", "n", "0", "false", "off":
		return false, true
	}
	return false, false
}
