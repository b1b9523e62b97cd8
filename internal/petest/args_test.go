package petest

import (
	"flag"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestRunPattern(t *testing.T) {
	for name, want := range map[string]string{
		"TestA":                     "^TestA$",
		"TestA/b_c":                 "^TestA$/^b_c$",
		"TestA/x.y*[z]+(w)?/dup#01": `^TestA$/^x\.y\*\[z\]\+\(w\)\?$/^dup#01$`,
	} {
		got := runPattern(name)
		if got != want {
			t.Errorf("runPattern(%q) = %q, want %q", name, got, want)
		}
		// Each element must match its level exactly, and nothing longer.
		pats := strings.Split(got, "/")
		for i, level := range strings.Split(name, "/") {
			re := regexp.MustCompile(pats[i])
			if !re.MatchString(level) || re.MatchString(level+"x") || re.MatchString("x"+level) {
				t.Errorf("pattern %q and level %q", pats[i], level)
			}
		}
	}
}

func TestChildArgs(t *testing.T) {
	args := childArgs("TestA/b")
	if !slices.Equal(args[:3], []string{"-test.run=^TestA$/^b$", "-test.v", "-test.count=1"}) {
		t.Fatalf("childArgs = %q", args)
	}
	for _, a := range args[3:] {
		if !strings.HasPrefix(a, "-test.short=") && !strings.HasPrefix(a, "-test.gocoverdir=") {
			t.Errorf("childArgs passes %q", a)
		}
	}
	// -test.short passes when set.
	short := flag.Lookup("test.short")
	old := short.Value.String()
	short.Value.Set("true")
	defer short.Value.Set(old)
	if args := childArgs("TestA"); !slices.Contains(args, "-test.short=true") {
		t.Errorf("childArgs with -test.short = %q", args)
	}
}

func TestEnvOption(t *testing.T) {
	var s settings
	Env("", "A=1", "")(&s)
	Heap("8m")(&s)
	if want := []string{"A=1", "SHMEM_SYMMETRIC_SIZE=8m"}; !slices.Equal(s.env, want) {
		t.Errorf("env %q, want %q", s.env, want)
	}
}

func TestChildEnv(t *testing.T) {
	t.Setenv("GORACE", "halt_on_error=1")
	env := childEnv(&settings{env: []string{"A=1"}}, "TestX/y")
	want := []string{"A=1", "SYMHEAP_PETEST=TestX/y", "GORACE=halt_on_error=1 atexit_sleep_ms=0"}
	if !slices.Equal(env, want) {
		t.Errorf("childEnv = %q, want %q", env, want)
	}
	env = childEnv(&settings{env: []string{"GORACE=log_path=/tmp/r"}}, "T")
	if env[len(env)-1] != "GORACE=log_path=/tmp/r atexit_sleep_ms=0" {
		t.Errorf("childEnv = %q", env)
	}
}
