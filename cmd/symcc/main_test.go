package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/symheap/symheap/internal/config"
)

// fakeTree makes a library and include directory and points symcc at it.
func fakeTree(t *testing.T) (inc, lib string) {
	d := t.TempDir()
	inc, lib = filepath.Join(d, "include"), filepath.Join(d, "lib")
	for _, f := range []string{filepath.Join(inc, "shmem.h"), filepath.Join(lib, "libsymheap.so"), filepath.Join(lib, "libsymheap.a")} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("SYMHEAP_INCLUDE", inc)
	t.Setenv("SYMHEAP_LIB", lib)
	t.Setenv("SYMHEAP_CC", "gcc")
	return inc, lib
}

func lookPath(t *testing.T, name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not in PATH: %v", name, err)
	}
	p, err = filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func showme(t *testing.T, args ...string) string {
	var out, errs strings.Builder
	if code := runAs(langC, args, &out, &errs); code != 0 {
		t.Fatalf("symcc %v: status %d: %s", args, code, errs.String())
	}
	return strings.TrimSpace(out.String())
}

func TestShowme(t *testing.T) {
	inc, lib := fakeTree(t)
	gcc := lookPath(t, "gcc")
	link := "-L" + lib + " -Wl,-rpath," + lib + " -lsymheap"
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--showme"}, gcc + " -I" + inc + " " + link},
		{[]string{"--showme", "-O2", "-o", "p", "p.c"}, gcc + " -I" + inc + " -O2 -o p p.c " + link},
		{[]string{"--showme", "-c", "p.c"}, gcc + " -I" + inc + " -c p.c"}, // compiling only: no link flags
		{[]string{"--showme", "-v"}, gcc + " -I" + inc + " -v"},            // no input: nothing to link
		{[]string{"--showme:compile"}, "-I" + inc},
		{[]string{"--showme:link"}, link},
		{[]string{"--showme:command"}, gcc},
		{[]string{"--showme", "--symheap-static", "p.c"}, gcc + " -I" + inc + " p.c " + filepath.Join(lib, "libsymheap.a") + " -lpthread -lm -ldl -lresolv"},
	}
	for _, c := range cases {
		if got := showme(t, c.args...); got != c.want {
			t.Errorf("symcc %v:\n got %q\nwant %q", c.args, got, c.want)
		}
	}
}

// TestCompilerChoice: the variables in their order, arguments in a
// variable, and symcc itself skipped wherever it is named: through a
// symlink in $CC, as cc first in PATH.
func TestCompilerChoice(t *testing.T) {
	fakeTree(t)
	gcc := lookPath(t, "gcc")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"symcc", "cc", "c++"} {
		if err := os.Symlink(self, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		env  map[string]string
		want string
		skip int
	}{
		{map[string]string{"SYMHEAP_CC": "gcc -std=c11", "CC": "clang"}, gcc + " -std=c11", 0},
		{map[string]string{"SYMHEAP_CC": "", "SYMCC_CC": "gcc"}, gcc, 0},
		{map[string]string{"SYMHEAP_CC": "", "CC": filepath.Join(dir, "symcc")}, "", 2}, // $CC, then cc in PATH: both symcc
		{map[string]string{"SYMHEAP_CC": "", "CC": "symcc"}, "", 2},
		{map[string]string{"SYMHEAP_CC": filepath.Join(dir, "cc"), "CC": "gcc"}, gcc, 1},
	}
	for _, c := range cases {
		t.Run("", func(t *testing.T) {
			t.Setenv("SYMCC_CC", "")
			t.Setenv("CC", "")
			t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			cc, err := choose(langC)
			if err != nil {
				t.Fatal(err)
			}
			if len(cc.skipped) != c.skip {
				t.Errorf("%v: skipped %q, want %d", c.env, cc.skipped, c.skip)
			}
			got := strings.Join(append([]string{cc.path}, cc.args...), " ")
			if c.want == "" { // the first cc-like name in PATH after the skipped ones
				if r, _ := filepath.EvalSymlinks(cc.path); r == self || strings.HasPrefix(cc.path, dir) {
					t.Fatalf("%v: chose %s, symcc itself", c.env, cc.path)
				}
				return
			}
			if got != c.want {
				t.Errorf("%v: chose %q (%s), want %q", c.env, got, cc.from, c.want)
			}
		})
	}
	t.Run("c++", func(t *testing.T) {
		t.Setenv("SYMHEAP_CXX", "")
		t.Setenv("CXX", filepath.Join(dir, "symcc"))
		t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		cc, err := choose(langCXX)
		if err != nil {
			t.Skipf("no C++ compiler: %v", err)
		}
		if len(cc.skipped) != 2 || strings.HasPrefix(cc.path, dir) {
			t.Errorf("symc++ chose %s, skipped %q: want $CXX and c++ skipped", cc.path, cc.skipped)
		}
	})
}

func TestMissing(t *testing.T) {
	_, lib := fakeTree(t)
	var out, errs strings.Builder
	if code := runAs(langC, []string{"--showme:bogus"}, &out, &errs); code != 2 {
		t.Errorf("an unknown --showme form: status %d, want 2", code)
	}
	if code := runAs(langC, nil, &out, &errs); code != 2 {
		t.Errorf("no arguments: status %d, want 2", code)
	}
	t.Setenv("SYMHEAP_CC", "no-such-compiler-here")
	if code := runAs(langC, []string{"--showme"}, &out, &errs); code != 2 || !strings.Contains(errs.String(), "SYMHEAP_CC") {
		t.Errorf("a compiler not in PATH: status %d, %q; want 2 naming the variable", code, errs.String())
	}
	t.Setenv("SYMHEAP_CC", "gcc")
	os.Remove(filepath.Join(lib, "libsymheap.so"))
	if code := runAs(langC, []string{"--showme"}, &out, &errs); code != 2 {
		t.Errorf("without libsymheap.so: status %d, want 2", code)
	}
}

func TestDepthGuard(t *testing.T) {
	fakeTree(t)
	t.Setenv(depthVar, "3")
	var out, errs strings.Builder
	if code := runAs(langC, []string{"p.c"}, &out, &errs); code != 2 || !strings.Contains(errs.String(), "again") {
		t.Errorf("re-entered %d deep: status %d, %q; want 2 and a message", maxDepth, code, errs.String())
	}
}

func TestHelpAndMan(t *testing.T) {
	for _, l := range []lang{langC, langCXX} {
		var out, errs strings.Builder
		if code := runAs(l, []string{"--help"}, &out, &errs); code != 0 || !strings.Contains(out.String(), "--showme:command") {
			t.Errorf("%s --help: status %d, %q", l.name, code, out.String())
		}
		out.Reset()
		if code := runAs(l, []string{"--man"}, &out, &errs); code != 0 ||
			!strings.Contains(out.String(), ".TH \""+strings.ToUpper(l.name)) || !strings.Contains(out.String(), config.Version) {
			t.Errorf("%s --man: status %d, %q", l.name, code, out.String())
		}
	}
}

func TestHasInput(t *testing.T) {
	for args, want := range map[string]bool{
		"-v": false, "--version": false, "-dumpversion": false, "-o p p.c": true, "-o p": false,
		"p.o -lm": true, "-I x -D X -": true, "-x c -": true, "-print-search-dirs": false,
	} {
		if got := hasInput(strings.Fields(args)); got != want {
			t.Errorf("hasInput(%s) = %v, want %v", args, got, want)
		}
	}
}
