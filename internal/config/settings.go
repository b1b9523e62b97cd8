package config

import (
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

// Resolve resolves o against the environment getenv reads. A malformed
// variable is an error (wrapping errs.ErrBadConfig and naming the
// variable) even where o overrides it; Settings then holds what was
// resolved before it.
func Resolve(o Overrides, getenv func(string) string) (Settings, error) {
	var s Settings
	add := func(name, value, source string) { s.Params = append(s.Params, Param{name, value, source}) }
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
			if n, err = ParseSize(v); err != nil {
				return 0, fmt.Errorf("symheap: %s: %w", env, err)
			}
		}
		if field > 0 {
			add(env, strconv.FormatInt(field, 10), "Config."+what)
			return uint64(field), nil
		}
		if v != "" {
			add(env, v, "environment")
			return uint64(n), nil
		}
		add(env, strconv.FormatUint(def, 10), "default")
		return def, nil
	}
	var err error
	if s.Heap, err = size(o.HeapSize, EnvHeap, DefaultHeapSize, "HeapSize"); err != nil {
		return s, err
	}
	if s.Shared, err = size(o.SharedSize, EnvSharedHeap, DefaultSharedSize, "SharedSize"); err != nil {
		return s, err
	}
	switch {
	case o.Allocator != "":
		s.Allocator = o.Allocator
		add(EnvAllocator, o.Allocator, "Config.Allocator")
	case getenv(EnvAllocator) != "":
		s.Allocator = getenv(EnvAllocator)
		add(EnvAllocator, s.Allocator, "environment")
	default:
		add(EnvAllocator, "", "default (highest priority)")
	}
	flag := func(env string, field bool, what string) (bool, error) {
		if field {
			add(env, "1", "Config."+what)
			return true, nil
		}
		v := getenv(env)
		if v == "" {
			add(env, "0", "default")
			return false, nil
		}
		on, ok := ParseYesNo(v)
		if !ok {
			return false, fmt.Errorf("symheap: %s=%q: %w (use 1 or 0, yes or no)", env, v, errs.ErrBadConfig)
		}
		add(env, v, "environment")
		return on, nil
	}
	if s.OffsetMode, err = flag(EnvOffsetMode, o.OffsetMode, "OffsetMode"); err != nil {
		return s, err
	}
	if s.Protect, err = flag(EnvProtect, o.Protect, "Protect"); err != nil {
		return s, err
	}
	dur := func(env string, def time.Duration) (time.Duration, error) {
		v := getenv(env)
		if v == "" {
			add(env, def.String(), "default")
			return def, nil
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("symheap: %s=%q: %w (a positive Go duration such as 30s)", env, v, errs.ErrBadConfig)
		}
		add(env, v, "environment")
		return d, nil
	}
	if s.InitTimeout, err = dur(EnvInitTimeout, DefaultInitTimeout); err != nil {
		return s, err
	}
	if s.PeerTimeout, err = dur(EnvPeerTimeout, DefaultPeerTimeout); err != nil {
		return s, err
	}
	s.MonitorSlack = DefaultMonitorSlack
	if v := getenv(EnvMonitorSlack); v == "" {
		add(EnvMonitorSlack, DefaultMonitorSlack.String(), "default")
	} else {
		d, err := time.ParseDuration(v)
		if v == "0" {
			d, err = 0, nil
		}
		if err != nil || d < 0 || d > MaxMonitorSlack {
			return s, fmt.Errorf("symheap: %s=%q: %w (a Go duration from 0, which leaves the monitor alone, to %v, such as 1ms)", EnvMonitorSlack, v, errs.ErrBadConfig, MaxMonitorSlack)
		}
		s.MonitorSlack = d
		add(EnvMonitorSlack, v, "environment")
	}
	// Switches that are on unless their variable says no.
	for _, sw := range []struct {
		env string
		on  *bool
	}{{EnvSharedSmall, &s.SharedSmall}, {EnvUCXPeerErrors, &s.PeerErrors}} {
		*sw.on = true
		v := getenv(sw.env)
		if v == "" {
			add(sw.env, "1", "default")
			continue
		}
		on, ok := ParseYesNo(v)
		if !ok {
			return s, fmt.Errorf("symheap: %s=%q: %w (use 1 or 0, yes or no)", sw.env, v, errs.ErrBadConfig)
		}
		*sw.on = on
		add(sw.env, v, "environment")
	}
	return s, nil
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
