package memhook

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/internal/config"
	"github.com/symheap/symheap/internal/errs"
)

// Environment variables read by InputsFromEnv.
const (
	EnvLeavePinned         = config.EnvLeavePinned
	EnvLeavePinnedPipeline = config.EnvLeavePinnedPipeline
	EnvDisable             = config.EnvMemhookDisable
)

// Setting is a three-valued switch that may also be left unset.
type Setting int8

// Setting values.
const (
	Unset Setting = iota // not given: behaves as Auto, except next to No (see Decide)
	Yes
	No
	Auto
)

func (s Setting) String() string {
	switch s {
	case Unset:
		return "unset"
	case Yes:
		return "yes"
	case No:
		return "no"
	case Auto:
		return "auto"
	}
	return fmt.Sprintf("Setting(%d)", int8(s))
}

// ParseSetting reads yes/no/auto and their usual spellings (1/0/-1,
// true/false, on/off). The empty string is Unset.
func ParseSetting(v string) (Setting, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "":
		return Unset, nil
	case "auto", "-1":
		return Auto, nil
	}
	if on, ok := config.ParseYesNo(v); ok {
		if on {
			return Yes, nil
		}
		return No, nil
	}
	return Unset, fmt.Errorf("%q is not yes, no or auto: %w", v, errs.ErrBadConfig)
}

// Inputs are everything the enable decision depends on.
type Inputs struct {
	LeavePinned         Setting // "leave pinned": cache registrations
	LeavePinnedPipeline Setting // "leave pinned pipeline": the same for the pipelined protocol
	Network             bool    // an OS-bypass network is present
	NetworkWhy          string  // what was found (or looked for), for the reason
	Disabled            bool    // the memory monitor is switched off
}

// Decision is whether registration caching is on, and why.
type Decision struct {
	Enabled bool
	Reason  string
	// Warning is a conflict the user should hear of (a "yes" overridden by
	// the disable switch), or "".
	Warning string
}

// Decide is the enable decision, a pure function of its inputs:
//
//  1. Disabled → off. A "yes" is then overridden, with a warning: caching
//     without release events would use stale registrations.
//  2. Either setting Yes → on.
//  3. Both No, or one No and the other Unset → off.
//  4. Otherwise (auto) → on exactly when an OS-bypass network is present.
func Decide(in Inputs) Decision {
	lp, pp := in.LeavePinned, in.LeavePinnedPipeline
	names := func() string {
		return fmt.Sprintf("leave pinned %s, leave pinned pipeline %s", lp, pp)
	}
	if in.Disabled {
		d := Decision{Reason: "the memory monitor is disabled (" + EnvDisable + ")"}
		if lp == Yes || pp == Yes {
			d.Warning = fmt.Sprintf("symheap: registration caching was requested (%s) but %s switches the memory monitor off; caching stays off, because without release events a cached registration could outlive its memory", names(), EnvDisable)
		}
		return d
	}
	if lp == Yes || pp == Yes {
		return Decision{Enabled: true, Reason: "requested (" + names() + ")"}
	}
	if (lp == No && pp == No) || (lp == No && pp == Unset) || (lp == Unset && pp == No) {
		return Decision{Reason: "refused (" + names() + ")"}
	}
	if in.Network {
		return Decision{Enabled: true, Reason: "auto: an OS-bypass network is present (" + in.NetworkWhy + ")"}
	}
	return Decision{Reason: "auto: no OS-bypass network (" + in.NetworkWhy + ")"}
}

// InputsFromEnv completes the configured settings: an Unset one is read from
// its environment variable. The network is detected with DetectNetwork, and
// the disable switch read from SYMHEAP_MEMHOOK_DISABLE (any "yes" spelling).
// A malformed value is an error naming the variable.
func InputsFromEnv(leavePinned, pipeline Setting) (Inputs, error) {
	in := Inputs{LeavePinned: leavePinned, LeavePinnedPipeline: pipeline}
	for _, v := range []struct {
		name string
		dst  *Setting
	}{{EnvLeavePinned, &in.LeavePinned}, {EnvLeavePinnedPipeline, &in.LeavePinnedPipeline}} {
		if *v.dst != Unset {
			continue
		}
		s, err := ParseSetting(os.Getenv(v.name))
		if err != nil {
			return Inputs{}, fmt.Errorf("symheap: %s: %w", v.name, err)
		}
		*v.dst = s
	}
	dis, err := ParseSetting(os.Getenv(EnvDisable))
	if err != nil || dis == Auto {
		return Inputs{}, fmt.Errorf("symheap: %s=%q: want yes or no: %w", EnvDisable, os.Getenv(EnvDisable), errs.ErrBadConfig)
	}
	in.Disabled = dis == Yes
	in.Network, in.NetworkWhy = DetectNetwork("/sys/class")
	return in, nil
}

// DetectNetwork looks under sysClass (normally /sys/class) for devices of an
// OS-bypass network: RDMA devices (InfiniBand, RoCE, iWARP, EFA all appear
// in infiniband/) and HPE Slingshot (cxi/). It says what it found.
func DetectNetwork(sysClass string) (bool, string) {
	var found []string
	for _, dir := range []string{"infiniband", "cxi"} {
		ents, err := os.ReadDir(sysClass + "/" + dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			found = append(found, dir+"/"+e.Name())
		}
	}
	if len(found) == 0 {
		return false, "no device in " + sysClass + "/infiniband or " + sysClass + "/cxi"
	}
	return true, strings.Join(found, ", ")
}

// SupportWarning returns the warning to print when caching is on but the
// support flags lack an event it relies on (FREE or MUNMAP), or "".
func SupportWarning(d Decision, f Flags) string {
	if !d.Enabled {
		return ""
	}
	var miss []string
	if f&FlagFree == 0 {
		miss = append(miss, "FREE (frees of symheap memory)")
	}
	if f&FlagMunmap == 0 {
		miss = append(miss, "MUNMAP (unmapping of other memory)")
	}
	if len(miss) == 0 {
		return ""
	}
	return fmt.Sprintf("symheap: warning: registration caching is on (%s) but the memory monitor cannot see %s: a cached registration may outlive its memory and transfers may then use the wrong pages; set %s=no to turn caching off",
		d.Reason, strings.Join(miss, " or "), EnvLeavePinned)
}

// WarnUnsupported prints SupportWarning for the flags of the last SelfTest
// to w, at most once per monitor, and returns whether it printed.
func (m *Monitor) WarnUnsupported(w io.Writer, d Decision) bool {
	msg := SupportWarning(d, m.Support())
	if msg == "" {
		return false
	}
	printed := false
	m.warnOnce.Do(func() {
		fmt.Fprintln(w, msg)
		printed = true
	})
	return printed
}

func componentNames() []string { return alloc.Names() }
