// Package cabitest runs the C side of the cross-language tests of the
// formats the runtime shares with the C library (internal/cabi): a C
// program from capi/tests, compiled against the generated declarations
// (capi/shmemi_formats.h), reads a buffer the Go side wrote through its
// own types, checks every value, writes its own and hands the buffer
// back, for the Go side to read through its types again.
//
// The tests that use it live with the Go types (the root's control
// block, internal/team's post lines), which are unexported. They skip
// where no C compiler is installed (make capi installs gcc).
package cabitest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Root returns the module's root directory, above the test's package.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("cabitest: no go.mod above the test's directory")
		}
		dir = up
	}
}

// Compiler returns the C compiler, or skips the test naming what is
// missing.
func Compiler(t testing.TB) string {
	t.Helper()
	for _, cc := range []string{"gcc", "cc"} {
		if p, err := exec.LookPath(cc); err == nil {
			return p
		}
	}
	t.Skip("no C compiler (gcc or cc): the C side of the formats cannot be built (make capi installs gcc)")
	return ""
}

// Build compiles srcs (paths from the module root) into a program in a
// temporary directory, with the library's headers on the include path:
// include/, and capi/ after the directories of extra, whose headers
// then take the place of capi's (a test's altered copy of
// shmemi_formats.h).
func Build(t testing.TB, name string, srcs []string, extra ...string) string {
	t.Helper()
	cc := Compiler(t)
	root := Root(t)
	out := filepath.Join(t.TempDir(), name)
	args := []string{"-std=gnu11", "-O1", "-Wall", "-Werror", "-o", out}
	for _, d := range extra {
		args = append(args, "-I", d)
	}
	args = append(args, "-I", filepath.Join(root, "include"), "-I", filepath.Join(root, "capi"))
	for _, s := range srcs {
		args = append(args, filepath.Join(root, s))
	}
	cmd := exec.Command(cc, args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cabitest: %s %s: %v\n%s", cc, strings.Join(args, " "), err, b)
	}
	return out
}

// Altered writes into a temporary directory a copy of the generated
// header capi/<name> changed by edit, and returns the directory, for
// Build's extra: a test shows that its check fails on a format that
// differs.
func Altered(t testing.TB, name string, edit func([]byte) []byte) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Root(t), "capi", name))
	if err != nil {
		t.Fatal(err)
	}
	c := edit(b)
	if bytes.Equal(b, c) {
		t.Fatalf("cabitest: the edit left %s as it was", name)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), c, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Exchange writes b into a file, runs prog with args and the file's
// path, and returns what the file holds when prog has exited with status
// 0; else the error, with prog's output.
func Exchange(t testing.TB, prog string, b []byte, args ...string) ([]byte, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "buf")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prog, append(args, path)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, &Error{Args: args, Err: err, Output: string(out)}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return got, nil
}

// Error is a C side's failure.
type Error struct {
	Args   []string
	Err    error
	Output string
}

func (e *Error) Error() string {
	return "C side " + strings.Join(e.Args, " ") + ": " + e.Err.Error() + "\n" + e.Output
}

// Diff returns the first offset at which got and want differ, and
// whether they do.
func Diff(got, want []byte) (int, bool) {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return i, true
		}
	}
	if len(got) != len(want) {
		return min(len(got), len(want)), true
	}
	return 0, false
}
