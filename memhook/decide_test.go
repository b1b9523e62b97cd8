package memhook

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/symheap/symheap/internal/errs"
)

// TestDecideTable checks every cell: 4 × 4 settings × network present or
// not × disabled or not. The expected value is written as the issue states
// the table, independently of Decide's code.
func TestDecideTable(t *testing.T) {
	settings := []Setting{Unset, Yes, No, Auto}
	cells := 0
	for _, lp := range settings {
		for _, pp := range settings {
			for _, net := range []bool{false, true} {
				for _, dis := range []bool{false, true} {
					cells++
					var want bool
					switch {
					case dis:
						want = false
					case lp == Yes || pp == Yes:
						want = true
					case lp == No && pp == No, lp == No && pp == Unset, lp == Unset && pp == No:
						want = false
					default:
						want = net
					}
					d := Decide(Inputs{LeavePinned: lp, LeavePinnedPipeline: pp, Network: net, NetworkWhy: "test", Disabled: dis})
					name := fmt.Sprintf("lp=%s pp=%s net=%v disabled=%v", lp, pp, net, dis)
					if d.Enabled != want {
						t.Errorf("%s: enabled %v, want %v (%s)", name, d.Enabled, want, d.Reason)
					}
					if d.Reason == "" {
						t.Errorf("%s: no reason", name)
					}
					wantWarn := dis && (lp == Yes || pp == Yes)
					if (d.Warning != "") != wantWarn {
						t.Errorf("%s: warning %q", name, d.Warning)
					}
				}
			}
		}
	}
	if cells != 64 {
		t.Fatalf("%d cells", cells)
	}
}

func TestParseSetting(t *testing.T) {
	for in, want := range map[string]Setting{
		"": Unset, "yes": Yes, "YES": Yes, "1": Yes, "true": Yes, "on": Yes,
		"no": No, "0": No, "false": No, " off ": No, "auto": Auto, "-1": Auto,
	} {
		got, err := ParseSetting(in)
		if err != nil || got != want {
			t.Errorf("ParseSetting(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseSetting("maybe"); !errors.Is(err, errs.ErrBadConfig) {
		t.Errorf("ParseSetting(maybe): %v", err)
	}
}

func TestInputsFromEnv(t *testing.T) {
	t.Setenv(EnvLeavePinned, "no")
	t.Setenv(EnvLeavePinnedPipeline, "")
	t.Setenv(EnvDisable, "")
	in, err := InputsFromEnv(Unset, Unset)
	if err != nil {
		t.Fatal(err)
	}
	if in.LeavePinned != No || in.LeavePinnedPipeline != Unset || in.Disabled {
		t.Errorf("inputs %+v", in)
	}
	if Decide(in).Enabled {
		t.Errorf("no + unset should be off")
	}
	// Configuration wins over the environment.
	in, _ = InputsFromEnv(Yes, Unset)
	if in.LeavePinned != Yes || !Decide(in).Enabled {
		t.Errorf("configured yes: %+v", in)
	}
	t.Setenv(EnvDisable, "1")
	in, _ = InputsFromEnv(Yes, Unset)
	if d := Decide(in); d.Enabled || d.Warning == "" {
		t.Errorf("disabled with yes: %+v", d)
	}
	t.Setenv(EnvLeavePinnedPipeline, "sometimes")
	if _, err := InputsFromEnv(Unset, Unset); !errors.Is(err, errs.ErrBadConfig) || !strings.Contains(err.Error(), EnvLeavePinnedPipeline) {
		t.Errorf("malformed value: %v", err)
	}
}

func TestDetectNetwork(t *testing.T) {
	dir := t.TempDir()
	if ok, why := DetectNetwork(dir); ok {
		t.Errorf("empty sysfs: found %s", why)
	}
	if err := os.MkdirAll(dir+"/infiniband/mlx5_0", 0o755); err != nil {
		t.Fatal(err)
	}
	if ok, why := DetectNetwork(dir); !ok || !strings.Contains(why, "mlx5_0") {
		t.Errorf("with a device: %v %s", ok, why)
	}
	ok, why := DetectNetwork("/sys/class")
	t.Logf("this machine: OS-bypass network %v (%s)", ok, why)
}

func TestSupportWarning(t *testing.T) {
	on := Decision{Enabled: true, Reason: "requested"}
	if w := SupportWarning(on, FlagFree|FlagChunk|FlagMunmap); w != "" {
		t.Errorf("full support warned: %s", w)
	}
	if w := SupportWarning(Decision{}, 0); w != "" {
		t.Errorf("caching off warned: %s", w)
	}
	w := SupportWarning(on, FlagFree|FlagChunk)
	if !strings.Contains(w, "MUNMAP") || strings.Contains(w, "FREE (") {
		t.Errorf("warning: %s", w)
	}
	m := New()
	var buf bytes.Buffer
	if !m.WarnUnsupported(&buf, on) { // no self-test: no flags
		t.Errorf("no warning printed")
	}
	if m.WarnUnsupported(&buf, on) {
		t.Errorf("warning printed twice")
	}
	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Errorf("%d lines printed: %q", n, buf.String())
	}
}
