package mutate

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const sample = `# a comment
== first
file  a/b.go
pkg   ./a ./c
run   ^TestX$|TestY/sub
race  yes
why   breaks
why   the thing.
-- original
	if x {
		return 1
	}
-- replacement
	return 2
-- end

# between mutants
== second.one
file b.go
pkg  .
run  TestZ
race no
-- original
a := f(x) // # not a comment, and "-- end" is fine inside a line
-- replacement
-- end
`

func TestParse(t *testing.T) {
	ms, err := Parse(strings.NewReader(sample), "sample")
	if err != nil {
		t.Fatal(err)
	}
	want := []Mutant{{
		Name: "first", File: "a/b.go", Pkgs: []string{"./a", "./c"}, Run: "^TestX$|TestY/sub", Race: true,
		Why: "breaks the thing.", Line: 2,
		Original:    "\tif x {\n\t\treturn 1\n\t}",
		Replacement: "\treturn 2",
	}, {
		Name: "second.one", File: "b.go", Pkgs: []string{"."}, Run: "TestZ", Race: false, Line: 18,
		Original:    `a := f(x) // # not a comment, and "-- end" is fine inside a line`,
		Replacement: "",
	}}
	if len(ms) != len(want) {
		t.Fatalf("got %d mutants, want %d: %+v", len(ms), len(want), ms)
	}
	for i := range want {
		if !mutantEqual(ms[i], want[i]) {
			t.Errorf("mutant %d:\n got %+v\nwant %+v", i, ms[i], want[i])
		}
	}
	if got := ms[0].Selection().Args("9m"); !slices.Equal(got, []string{"test", "-count=1", "-race", "-timeout=9m", "-run", "^TestX$|TestY/sub", "./a", "./c"}) {
		t.Errorf("Args = %q", got)
	}
	if got, want := ms[1].Selection().String(), "go test -count=1 -run 'TestZ' ."; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

func mutantEqual(a, b Mutant) bool {
	return a.Name == b.Name && a.File == b.File && a.Original == b.Original && a.Replacement == b.Replacement &&
		slices.Equal(a.Pkgs, b.Pkgs) && a.Run == b.Run && a.Race == b.Race && a.Why == b.Why && a.Line == b.Line
}

func TestParseErrors(t *testing.T) {
	const ok = "== m\nfile f.go\npkg .\nrun T\nrace no\n-- original\nx\n-- replacement\ny\n-- end\n"
	for _, tc := range []struct {
		name, in string
		want     []string // substrings of the error
	}{
		{"empty", "# nothing\n", []string{"no mutants"}},
		{"outside", "file f.go\n" + ok, []string{"sample:1:", "outside a mutant"}},
		{"missing keys", "== m\n-- original\nx\n-- replacement\ny\n-- end\n",
			[]string{`sample:1: mutant m: no "file"`, `no "pkg"`, `no "run"`, `no "race"`}},
		{"no original", "== m\nfile f.go\npkg .\nrun T\nrace no\n", []string{`no "-- original"`}},
		{"duplicate", ok + ok, []string{"sample:11: mutant m already defined at line 1"}},
		{"bad race", strings.Replace(ok, "race no", "race maybe", 1), []string{"sample:5:", `race "maybe"`}},
		{"bad run", strings.Replace(ok, "run T", "run (", 1), []string{"sample:4:", "missing closing )"}},
		{"empty run", strings.Replace(ok, "run T", "run", 1), []string{"run is empty"}},
		{"no pkg", strings.Replace(ok, "pkg .", "pkg", 1), []string{"pkg names no package"}},
		{"twice", strings.Replace(ok, "pkg .", "pkg .\npkg ./x", 1), []string{`a second "pkg"`}},
		{"unknown key", strings.Replace(ok, "pkg .", "pkg .\nrcae no", 1), []string{`unknown key "rcae"`}},
		{"bad name", strings.Replace(ok, "== m", "== a b", 1), []string{`mutant name "a b"`}},
		{"absolute file", strings.Replace(ok, "file f.go", "file /etc/f.go", 1), []string{"inside the module"}},
		{"escaping file", strings.Replace(ok, "file f.go", "file ../f.go", 1), []string{"inside the module"}},
		{"no replacement", "== m\nfile f.go\npkg .\nrun T\nrace no\n-- original\nx\n", []string{`without a "-- replacement"`}},
		{"no end", strings.TrimSuffix(ok, "-- end\n"), []string{`sample:8: mutant m: "-- replacement" without a "-- end"`}},
		{"empty original", strings.Replace(ok, "-- original\nx\n", "-- original\n\t\n", 1), []string{"original text is empty"}},
		{"no change", strings.Replace(ok, "y\n-- end", "x\n-- end", 1), []string{"replacement equals the original"}},
		{"bad marker", strings.Replace(ok, "-- original", "-- orig", 1), []string{`"-- orig": want "-- original"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.in), "sample")
			if err == nil {
				t.Fatalf("Parse accepted:\n%s", tc.in)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestApply(t *testing.T) {
	m := Mutant{Name: "m", File: "f.go", Line: 7, Original: "b := 2\n\tc := 3", Replacement: "b := 20"}
	src := "package p\n\nfunc f() {\n\ta := 1\n\tb := 2\n\tc := 3\n}\n"
	out, line, err := Apply([]byte(src), m)
	if err != nil {
		t.Fatal(err)
	}
	if want := "package p\n\nfunc f() {\n\ta := 1\n\tb := 20\n}\n"; string(out) != want {
		t.Errorf("Apply:\n%s\nwant\n%s", out, want)
	}
	if line != 5 {
		t.Errorf("line %d, want 5", line)
	}

	// Not found: stale, naming the mutant, the file and where to fix it.
	_, _, err = Apply([]byte("package p\n"), m)
	if !errors.Is(err, ErrStale) || !strings.Contains(err.Error(), "mutant m: f.go") || !strings.Contains(err.Error(), "line 7") {
		t.Errorf("text not found: %v, want ErrStale naming the mutant, its file and its line", err)
	}
	// Whitespace counts: the same text with spaces for tabs is not found.
	_, _, err = Apply([]byte(strings.ReplaceAll(src, "\t", "    ")), m)
	if !errors.Is(err, ErrStale) {
		t.Errorf("text with other indentation: %v, want ErrStale", err)
	}
	// Twice: ambiguous, naming both lines.
	twice := src + "func g() {\n\tb := 2\n\tc := 3\n}\n"
	_, _, err = Apply([]byte(twice), m)
	if !errors.Is(err, ErrAmbiguous) || !strings.Contains(err.Error(), "2 times, at lines 5, 9") {
		t.Errorf("text found twice: %v, want ErrAmbiguous at lines 5 and 9", err)
	}
	// Overlapping occurrences count too.
	_, _, err = Apply([]byte("aaa"), Mutant{Name: "o", Original: "aa", Replacement: "b"})
	if err == nil {
		t.Errorf("overlapping occurrences: applied")
	}
}

func TestTreeApplyRestore(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "f.go")
	os.MkdirAll(filepath.Dir(path), 0o755)
	orig := []byte("package p\n\nconst x = 1\n")
	if err := os.WriteFile(path, orig, 0o640); err != nil {
		t.Fatal(err)
	}
	tree := &Tree{Dir: dir}
	m := Mutant{Name: "m", File: "sub/f.go", Original: "x = 1", Replacement: "x = 2"}
	line, err := tree.Apply(m)
	if err != nil || line != 3 {
		t.Fatalf("Apply = %d, %v; want line 3", line, err)
	}
	if b, _ := os.ReadFile(path); string(b) != "package p\n\nconst x = 2\n" {
		t.Errorf("mutated file:\n%s", b)
	}
	if _, err := tree.Apply(m); err == nil {
		t.Errorf("second Apply without Restore succeeded")
	}
	if err := tree.Restore(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, orig) {
		t.Errorf("restored file:\n%s", b)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("restored mode %v, want 0640", fi.Mode().Perm())
	}
	// A stale mutant leaves the file alone and nothing to restore.
	if _, err := tree.Apply(Mutant{Name: "s", File: "sub/f.go", Original: "y = 1", Replacement: "y = 2"}); !errors.Is(err, ErrStale) {
		t.Errorf("stale Apply: %v", err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, orig) {
		t.Errorf("file after a stale Apply:\n%s", b)
	}
	if tree.undo != nil {
		t.Errorf("a stale Apply left something to restore")
	}
	if _, err := tree.Apply(Mutant{Name: "n", File: "nope.go", Original: "x", Replacement: "y"}); !os.IsNotExist(errors.Unwrap(err)) {
		t.Errorf("Apply to a missing file: %v", err)
	}
}

func TestCopyTree(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git binary: GitFiles cannot be tested")
	}
	src := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	write := func(name, data string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(src, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	write(".gitignore", "/ignored.txt\n", 0o644)
	write("go.mod", "module m\n", 0o644)
	write("a/tracked.go", "package a\n", 0o644)
	write("gone.go", "package m\n", 0o644)
	write("run.sh", "#!/bin/sh\n", 0o755)
	git("add", ".")
	write("a/tracked.go", "package a // edited, not committed\n", 0o644)
	os.Remove(filepath.Join(src, "gone.go"))
	write("untracked.go", "package m\n", 0o644)
	write("ignored.txt", "x", 0o644)
	write(".bin/tool", "x", 0o755)            // excluded even if not ignored
	write("bench/peers/bin/peer", "x", 0o755) // likewise
	os.Symlink("a/tracked.go", filepath.Join(src, "link.go"))

	files, err := GitFiles(src)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".gitignore", "a/tracked.go", "go.mod", "gone.go", "link.go", "run.sh", "untracked.go"}
	if !slices.Equal(files, want) {
		t.Errorf("GitFiles = %q, want %q", files, want)
	}
	dst := t.TempDir()
	_, n, err := CopyTree(src, dst, files)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(want)-1 {
		t.Errorf("copied %d files, want %d (all but the deleted one)", n, len(want)-1)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "a", "tracked.go")); string(b) != "package a // edited, not committed\n" {
		t.Errorf("copy of an edited file: %q", b)
	}
	if fi, err := os.Stat(filepath.Join(dst, "run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("copy of an executable: %v, %v", fi, err)
	}
	if target, err := os.Readlink(filepath.Join(dst, "link.go")); err != nil || target != "a/tracked.go" {
		t.Errorf("copy of a symlink: %q, %v", target, err)
	}
	for _, f := range []string{"gone.go", "ignored.txt", ".bin", "bench", ".git"} {
		if _, err := os.Lstat(filepath.Join(dst, f)); err == nil {
			t.Errorf("%s copied", f)
		}
	}
}

func TestClassify(t *testing.T) {
	exit := errors.New("exit status 1")
	for _, tc := range []struct {
		name   string
		out    string
		exit   error
		want   Outcome
		failed []string
		ran    []string
	}{
		{"passed", "ok  \tm/a\t0.1s\n", nil, Passed, nil, []string{"m/a"}},
		{"some tests", "ok  \tm/a\t0.1s [no tests to run]\n?   \tm/b\t[no test files]\nok  \tm/c\t1.0s\n", nil, Passed, nil, []string{"m/c"}},
		{"no tests", "ok  \tm/a\t0.1s [no tests to run]\n?   \tm/b\t[no test files]\n", nil, Passed, nil, nil},
		{"failed and passed", "--- FAIL: TestA (0.00s)\nFAIL\nFAIL\tm/a\t0.1s\nok  \tm/b\t0.2s\n", exit, Failed, []string{"TestA"}, []string{"m/b"}},
		{"build failed", "# m/a\na/x.go:3:2: undefined: y\nFAIL\tm/a [build failed]\nFAIL\n", exit, BuildFailed, nil, nil},
		{"vet failed", "# m/a\n# [m/a]\na/x.go:3:2: fmt.Sprintf format %d has arg s of wrong type string\nFAIL\tm/a [build failed]\n", exit, BuildFailed, nil, nil},
		{"build failed in one of two", "--- FAIL: TestA (0.00s)\nFAIL\nFAIL\tm/a\t0.1s\nFAIL\tm/b [build failed]\n", exit, BuildFailed, nil, nil},
		{"setup failed", "FAIL\tm/a [setup failed]\n", exit, BuildFailed, nil, nil},
		{"go list error", "no required module provides package ./nope\n", exit, BuildFailed, nil, nil},
		{"subtests", "--- FAIL: TestA (1.00s)\n    --- FAIL: TestA/x (0.00s)\n        a_test.go:9: bad\n    --- FAIL: TestA/y (0.00s)\n" +
			"--- FAIL: TestB (0.00s)\nFAIL\nFAIL\tm/a\t1.2s\nFAIL\n", exit, Failed, []string{"TestA/x", "TestA/y", "TestB"}, nil},
		{"PE output", "--- FAIL: TestP (2.00s)\n    --- FAIL: TestP/cfg (1.00s)\n        p_test.go:1: petest: output:\n" +
			"            [pe 0] --- FAIL: TestP/cfg/Check (0.00s)\n            [pe 1] --- FAIL: TestP/cfg/Check (0.00s)\nFAIL\nFAIL\tm\t2.1s\n",
			exit, Failed, []string{"TestP/cfg/Check"}, nil},
		{"timeout", "panic: test timed out after 9m0s\n\trunning tests:\n\t\tTestHang (9m0s)\n\t\tTestHang/sub (8m59s)\n\ngoroutine 1 [running]:\nFAIL\tm\t540.1s\nFAIL\n",
			exit, Failed, []string{"TestHang/sub (timed out)"}, nil},
		{"panic without a name", "panic: boom\n\ngoroutine 7 [running]:\nFAIL\tm/a\t0.1s\nFAIL\n", exit, Failed, []string{"package m/a (no test named)"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, failed, ran := Classify([]byte(tc.out), tc.exit)
			if got != tc.want || !slices.Equal(failed, tc.failed) || !slices.Equal(ran, tc.ran) {
				t.Errorf("Classify = %v, %q, %q; want %v, %q, %q", got, failed, ran, tc.want, tc.failed, tc.ran)
			}
		})
	}
}

func TestSelect(t *testing.T) {
	ms := []Mutant{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	got, err := Select(ms, []string{"c", "a"})
	if err != nil || len(got) != 2 || got[0].Name != "a" || got[1].Name != "c" {
		t.Errorf("Select(c, a) = %v, %v; want a, c in the file's order", got, err)
	}
	if got, _ := Select(ms, nil); len(got) != 3 {
		t.Errorf("Select() = %v, want all", got)
	}
	if _, err := Select(ms, []string{"a", "x"}); err == nil || !strings.Contains(err.Error(), "no mutant named x (have a, b, c)") {
		t.Errorf("Select(a, x): %v", err)
	}
}

// TestMutantsFile: the committed mutants parse, and each still applies to
// the code (its original text occurs exactly once), so that a change that
// moves mutated code is noticed by the tests, not only by make mutate.
func TestMutantsFile(t *testing.T) {
	ms, err := ParseFile("mutants.txt")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join("..", "..")
	for _, m := range ms {
		if _, err := Locate(root, m); err != nil {
			t.Errorf("%v (fix internal/mutate/mutants.txt)", err)
		}
	}
}
