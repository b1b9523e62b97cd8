package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/errs"
)

func envOf(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

// TestResolve: every setting comes from Config, else the environment, else
// the default, and its Param says which; a malformed variable is refused
// even where Config overrides it, naming the variable.
func TestResolve(t *testing.T) {
	s, err := Resolve(Overrides{}, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s.Heap != DefaultHeapSize || s.Shared != DefaultSharedSize || s.Allocator != "" || s.OffsetMode || s.Protect ||
		s.InitTimeout != DefaultInitTimeout || s.PeerTimeout != DefaultPeerTimeout || s.MonitorSlack != DefaultMonitorSlack || !s.PeerErrors {
		t.Errorf("defaults: %+v", s)
	}
	want := []Param{
		{EnvHeap, "268435456", "default"},
		{EnvSharedHeap, "67108864", "default"},
		{EnvAllocator, "", "default (highest priority)"},
		{EnvOffsetMode, "0", "default"},
		{EnvProtect, "0", "default"},
		{EnvInitTimeout, "30s", "default"},
		{EnvPeerTimeout, "10s", "default"},
		{EnvMonitorSlack, "1ms", "default"},
		{EnvSharedSmall, "1", "default"},
		{EnvUCXPeerErrors, "1", "default"},
	}
	if len(s.Params) != len(want) {
		t.Fatalf("defaults: params %+v, want %+v", s.Params, want)
	}
	for i := range want {
		if s.Params[i] != want[i] {
			t.Errorf("defaults: param %d is %+v, want %+v", i, s.Params[i], want[i])
		}
	}

	env := envOf(map[string]string{EnvHeap: "8m", EnvSharedHeap: "1m", EnvAllocator: "buddy",
		EnvOffsetMode: "yes", EnvProtect: "off", EnvInitTimeout: "5s", EnvMonitorSlack: "0", EnvUCXPeerErrors: "no"})
	s, err = Resolve(Overrides{SharedSize: 4096, Allocator: "tlsf", Protect: true}, env)
	if err != nil {
		t.Fatal(err)
	}
	if s.Heap != 8<<20 || s.Shared != 4096 || s.Allocator != "tlsf" || !s.OffsetMode || !s.Protect || s.InitTimeout != 5*time.Second || s.MonitorSlack != 0 || s.PeerErrors {
		t.Errorf("environment and Config: %+v", s)
	}
	for _, w := range []Param{
		{EnvHeap, "8m", "environment"},
		{EnvSharedHeap, "4096", "Config.SharedSize"},
		{EnvAllocator, "tlsf", "Config.Allocator"},
		{EnvOffsetMode, "yes", "environment"},
		{EnvProtect, "1", "Config.Protect"},
		{EnvInitTimeout, "5s", "environment"},
		{EnvMonitorSlack, "0", "environment"},
		{EnvUCXPeerErrors, "no", "environment"},
	} {
		found := false
		for _, p := range s.Params {
			found = found || p == w
		}
		if !found {
			t.Errorf("params %+v lack %+v", s.Params, w)
		}
	}

	for _, c := range []struct {
		o    Overrides
		env  map[string]string
		name string // the error names it
	}{
		{Overrides{HeapSize: 1 << 20}, map[string]string{EnvHeap: "lots"}, EnvHeap},
		{Overrides{SharedSize: -1}, nil, "Config.SharedSize"},
		{Overrides{}, map[string]string{EnvProtect: "maybe"}, EnvProtect},
		{Overrides{}, map[string]string{EnvPeerTimeout: "-1s"}, EnvPeerTimeout},
		{Overrides{}, map[string]string{EnvMonitorSlack: "1 ms"}, EnvMonitorSlack},
		{Overrides{}, map[string]string{EnvMonitorSlack: "-1ms"}, EnvMonitorSlack},
		{Overrides{}, map[string]string{EnvMonitorSlack: "1h"}, EnvMonitorSlack},
		{Overrides{}, map[string]string{EnvUCXPeerErrors: "sometimes"}, EnvUCXPeerErrors},
	} {
		_, err := Resolve(c.o, envOf(c.env))
		if !errors.Is(err, errs.ErrBadConfig) || !strings.Contains(errText(err), c.name) {
			t.Errorf("Resolve(%+v, %v): %v; want ErrBadConfig naming %s", c.o, c.env, err, c.name)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestParseYesNo: every spelling of yes and no, in any case and with
// spaces around; anything else (the empty string included) is refused.
func TestParseYesNo(t *testing.T) {
	for _, c := range []struct {
		v      string
		on, ok bool
	}{
		{"yes", true, true}, {"Y", true, true}, {"1", true, true}, {"TRUE", true, true}, {" on ", true, true},
		{"no", false, true}, {"n", false, true}, {"0", false, true}, {"False", false, true}, {"off", false, true},
		{"", false, false}, {"auto", false, false}, {"2", false, false}, {"yess", false, false},
	} {
		if on, ok := ParseYesNo(c.v); on != c.on || ok != c.ok {
			t.Errorf("ParseYesNo(%q) = %v, %v; want %v, %v", c.v, on, ok, c.on, c.ok)
		}
	}
}

// TestResolveRefused: a refused variable is listed with its text and
// SourceMalformed, its setting takes the default, resolution goes on past
// it, and the error names every refused variable.
func TestResolveRefused(t *testing.T) {
	s, err := Resolve(Overrides{}, envOf(map[string]string{EnvHeap: "12q", EnvProtect: "maybe", EnvUCXPeerErrors: "no"}))
	if !errors.Is(err, errs.ErrBadConfig) || !strings.Contains(errText(err), EnvHeap) || !strings.Contains(errText(err), EnvProtect) {
		t.Fatalf("two malformed variables: %v; want ErrBadConfig naming both", err)
	}
	if s.Heap != DefaultHeapSize || s.PeerErrors || len(s.Params) != 10 {
		t.Errorf("settings past the refused variables: %+v", s)
	}
	for _, w := range []Param{{EnvHeap, "12q", SourceMalformed}, {EnvProtect, "maybe", SourceMalformed}, {EnvUCXPeerErrors, "no", SourceEnvironment}} {
		found := false
		for _, p := range s.Params {
			found = found || p == w
		}
		if !found {
			t.Errorf("params %+v lack %+v", s.Params, w)
		}
	}
}

// TestResolveSizeBounds: the symmetric heap must not be empty (the local
// shared heap may), and neither may pass MaxHeapSize; each refusal names
// its variable or Config field.
func TestResolveSizeBounds(t *testing.T) {
	for _, c := range []struct {
		o    Overrides
		env  map[string]string
		name string // the error names it; "": no error
	}{
		{Overrides{}, map[string]string{EnvHeap: "0"}, EnvHeap},
		{Overrides{HeapSize: 1 << 20}, map[string]string{EnvHeap: "0"}, EnvHeap},
		{Overrides{}, map[string]string{EnvSharedHeap: "0"}, ""},
		{Overrides{}, map[string]string{EnvHeap: "65t"}, EnvHeap},
		{Overrides{}, map[string]string{EnvHeap: "64t"}, ""},
		{Overrides{}, map[string]string{EnvSharedHeap: "100t"}, EnvSharedHeap},
		{Overrides{HeapSize: MaxHeapSize + 1}, nil, "Config.HeapSize"},
	} {
		_, err := Resolve(c.o, envOf(c.env))
		switch {
		case c.name == "" && err != nil:
			t.Errorf("Resolve(%+v, %v): %v", c.o, c.env, err)
		case c.name != "" && (!errors.Is(err, errs.ErrBadConfig) || !strings.Contains(errText(err), c.name)):
			t.Errorf("Resolve(%+v, %v): %v; want ErrBadConfig naming %s", c.o, c.env, err, c.name)
		}
	}
}

// TestPeerTimeout: the launcher reads the PEs' peer timeout as they do.
func TestPeerTimeout(t *testing.T) {
	if d, err := PeerTimeout(envOf(nil)); d != DefaultPeerTimeout || err != nil {
		t.Errorf("default: %v, %v", d, err)
	}
	if d, err := PeerTimeout(envOf(map[string]string{EnvPeerTimeout: "250ms"})); d != 250*time.Millisecond || err != nil {
		t.Errorf("250ms: %v, %v", d, err)
	}
	if _, err := PeerTimeout(envOf(map[string]string{EnvPeerTimeout: "0s"})); !errors.Is(err, errs.ErrBadConfig) || !strings.Contains(errText(err), EnvPeerTimeout) {
		t.Errorf("0s: %v, want ErrBadConfig naming the variable", err)
	}
}
