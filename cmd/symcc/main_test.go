package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTree makes a library and include directory and points symcc at it.
func fakeTree(t *testing.T) (inc, lib string) {
	d := t.TempDir()
	inc, lib = filepath.Join(d, "include"), filepath.Join(d, "lib")
	for _, f := range []string{filepath.Join(inc, "shmem.h"), filepath.Join(lib, "libsymheap.so")} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("SYMHEAP_INCLUDE", inc)
	t.Setenv("SYMHEAP_LIB", lib)
	t.Setenv("SYMCC_CC", "gcc")
	return inc, lib
}

func showme(t *testing.T, args ...string) string {
	var out strings.Builder
	if code := run(args, &out); code != 0 {
		t.Fatalf("symcc %v: status %d", args, code)
	}
	return strings.TrimSpace(out.String())
}

func TestShowme(t *testing.T) {
	inc, lib := fakeTree(t)
	link := "-L" + lib + " -Wl,-rpath," + lib + " -lsymheap"
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--showme"}, "gcc -I" + inc + " " + link},
		{[]string{"--showme", "-O2", "-o", "p", "p.c"}, "gcc -I" + inc + " -O2 -o p p.c " + link},
		{[]string{"--showme", "-c", "p.c"}, "gcc -I" + inc + " -c p.c"}, // compiling only: no link flags
		{[]string{"--showme:compile"}, "-I" + inc},
		{[]string{"--showme:link"}, link},
		{[]string{"--showme", "--symheap-static", "p.c"}, "gcc -I" + inc + " p.c " + filepath.Join(lib, "libsymheap.a") + " -lpthread -lm -ldl -lresolv"},
	}
	for _, c := range cases {
		if got := showme(t, c.args...); got != c.want {
			t.Errorf("symcc %v:\n got %q\nwant %q", c.args, got, c.want)
		}
	}
}

func TestMissing(t *testing.T) {
	_, lib := fakeTree(t)
	var out strings.Builder
	if code := run([]string{"--showme:bogus"}, &out); code != 2 {
		t.Errorf("an unknown --showme form: status %d, want 2", code)
	}
	if code := run(nil, &out); code != 2 {
		t.Errorf("no arguments: status %d, want 2", code)
	}
	os.Remove(filepath.Join(lib, "libsymheap.so"))
	if code := run([]string{"--showme"}, &out); code != 2 {
		t.Errorf("without libsymheap.so: status %d, want 2", code)
	}
}
