// Package ctest runs the C library's tests (capi/tests/run.sh, make
// test-c) from go test, on a libsymheap built from this tree, so that the
// mutants of internal/mutate/mutants.txt can name C tests:
//
//	go test -run '^TestC$/^bounds$' ./capi/tests/ctest
//
// TestC builds shrun, symcc, symheap and libsymheap.so (and libsymheap.a
// for the suites and malloc) into a temporary directory and runs one group of run.sh
// per subtest (exports, suites, place, errors, bounds, malloc, stat). It runs only when asked for by name (-run): make
// test runs the same tests once through make test-c, and go test ./...
// should not build the C library twice more (with and without -race).
package ctest

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// groups are run.sh's groups, in its order.
var groups = []string{"exports", "suites", "place", "errors", "bounds", "malloc", "stat"}

func TestC(t *testing.T) {
	if f := flag.Lookup("test.run"); f == nil || f.Value.String() == "" {
		t.Skip("runs only when named (go test -run TestC ./capi/tests/ctest); make test-c runs these tests")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		if _, err := exec.LookPath("cc"); err != nil {
			t.Skip("no C compiler (gcc or cc): the C library cannot be built")
		}
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found above the package: %v", err)
	}
	bin := t.TempDir()
	build := func(t *testing.T, args ...string) {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %v: %v\n%s", args, err, out)
		}
	}
	build(t, "build", "-o", bin+string(filepath.Separator), "./cmd/shrun", "./cmd/symcc", "./cmd/symheap")
	build(t, "build", "-buildmode=c-shared", "-tags", "symheap_capi",
		"-ldflags=-extldflags=-Wl,--version-script="+filepath.Join(root, "capi", "libsymheap.map"),
		"-o", filepath.Join(bin, "libsymheap.so"), "./capi")
	for _, g := range groups {
		t.Run(g, func(t *testing.T) {
			if g == "suites" || g == "malloc" {
				// One program is linked with the static library.
				build(t, "build", "-buildmode=c-archive", "-tags", "symheap_capi",
					"-o", filepath.Join(bin, "libsymheap.a"), "./capi")
			}
			cmd := exec.Command("bash", filepath.Join(root, "capi", "tests", "run.sh"), bin, g)
			cmd.Dir = root
			// symcc looks for the headers beside or above its own
			// directory; ours is a temporary one.
			cmd.Env = append(os.Environ(), "SYMHEAP_INCLUDE="+filepath.Join(root, "include"))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("run.sh %s: %v\n%s", g, err, out)
			}
			t.Logf("run.sh %s:\n%s", g, out)
		})
	}
}
