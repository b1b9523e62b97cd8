// Package mutate is symheap's mutation-testing runner (go run
// ./internal/mutate/cmd/mutate, make mutate). A mutant is one small edit
// that breaks one invariant the code relies on; each names the tests meant
// to guard that invariant, and the runner checks that they fail with the
// edit in place. A mutant the tests let through (it survives) shows a
// hole in the tests, not in the code.
//
// # The mutants file
//
// The mutants live in mutants.txt beside this file, one block each:
//
//	== NAME
//	file  PATH             the file to edit, relative to the module root
//	pkg   PKG [PKG...]     the packages to test (go test patterns)
//	run   REGEXP           go test -run: the tests expected to catch it
//	race  yes|no           run with -race or without
//	why   TEXT             what the edit breaks (optional, may repeat)
//	-- original
//	exact text of the file, one or more lines, tabs included
//	-- replacement
//	the text that replaces it (may be empty)
//	-- end
//
// Outside the text blocks, blank lines and lines starting with '#' are
// comments. Inside them every line is taken verbatim, joined with '\n'
// (the text ends without a newline). The original must occur exactly once
// in the file: when the code moves, the mutant fails loudly as stale
// instead of silently mutating something else.
//
// # A run
//
//  1. Parse the mutants file and keep the ones asked for (-only).
//  2. Copy the working tree (the files git ls-files -co --exclude-standard
//     lists: tracked and untracked but not ignored, uncommitted edits
//     included) into a scratch directory. Every test runs there, so that
//     the checkout, where others may be editing, is never touched, and
//     one copy serves every mutant (the build cache keys on the
//     directory, so the second build in it is incremental).
//  3. For each distinct test selection (packages, -run, race), run go test
//     once on the unmutated copy: it must pass and run at least one test,
//     or the mutants that use it are not run (a test that fails anyway
//     catches nothing).
//  4. For each mutant: edit the file, run go test, classify the outcome
//     (Result), put the file back.
//  5. Print the report; the scratch directory is removed (unless -keep).
//
// Tests run one at a time: they start real processes and some measure
// time, so running mutants side by side would make them flaky.
package mutate

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// Errors of Apply, for errors.Is.
var (
	// ErrStale: the original text of a mutant is not in its file.
	ErrStale = errors.New("original text not found (stale mutant: the code moved or changed)")
	// ErrAmbiguous: the original text occurs more than once in its file.
	ErrAmbiguous = errors.New("original text occurs more than once (make it longer, so that it is unique)")
)

// Mutant is one edit and the tests that should catch it.
type Mutant struct {
	Name        string
	File        string   // slash-separated, relative to the module root
	Original    string   // occurs exactly once in File
	Replacement string   // replaces Original
	Pkgs        []string // go test package patterns
	Run         string   // go test -run regexp
	Race        bool     // go test -race
	Why         string   // what the edit breaks
	Line        int      // line of the "==" header in the mutants file
}

// Selection is what a mutant runs: the packages, the -run regexp and the
// race flag. Mutants with equal selections share one baseline run.
type Selection struct {
	Pkgs string // space-separated
	Run  string
	Race bool
}

// Selection returns the tests m runs.
func (m Mutant) Selection() Selection {
	return Selection{Pkgs: strings.Join(m.Pkgs, " "), Run: m.Run, Race: m.Race}
}

// Args returns the go test arguments (after "go"). timeout is go test's
// own -timeout: a test that hangs then fails with a stack dump naming the
// running tests, like any other failure.
func (s Selection) Args(timeout string) []string {
	args := []string{"test", "-count=1"}
	if s.Race {
		args = append(args, "-race")
	}
	if timeout != "" {
		args = append(args, "-timeout="+timeout)
	}
	args = append(args, "-run", s.Run)
	return append(args, strings.Fields(s.Pkgs)...)
}

// String returns the selection as a shell command (without -timeout).
func (s Selection) String() string {
	race := ""
	if s.Race {
		race = " -race"
	}
	return fmt.Sprintf("go test -count=1%s -run '%s' %s", race, s.Run, s.Pkgs)
}

// ParseFile reads the mutants file at path.
func ParseFile(path string) ([]Mutant, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f, path)
}

// Parse reads a mutants file (see the package comment); name is used in
// error messages. It reports every error it finds, each with its line.
func Parse(r io.Reader, name string) ([]Mutant, error) {
	var lines []string
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}

	var (
		errs []error
		ms   []Mutant
		cur  *Mutant
		seen = make(map[string]int) // name → line
		keys map[string]bool        // header keys given for cur
	)
	fail := func(line int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s:%d: %s", name, line, fmt.Sprintf(format, args...)))
	}
	// finish checks cur once its block has ended.
	finish := func() {
		if cur == nil {
			return
		}
		for _, k := range []string{"file", "pkg", "run", "race"} {
			if !keys[k] {
				fail(cur.Line, "mutant %s: no %q line", cur.Name, k)
			}
		}
		if !keys["original"] {
			fail(cur.Line, "mutant %s: no \"-- original\" block", cur.Name)
		}
		ms = append(ms, *cur)
		cur = nil
	}
	// block reads the text lines from lines[i] to the next line that is
	// exactly end, and returns the text and the index of that line.
	block := func(i int, end string) (string, int, bool) {
		for j := i; j < len(lines); j++ {
			if lines[j] == end {
				return strings.Join(lines[i:j], "\n"), j, true
			}
		}
		return "", len(lines), false
	}

	for i := 0; i < len(lines); i++ {
		ln := i + 1
		l := strings.TrimRight(lines[i], " \t\r")
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
			continue
		case strings.HasPrefix(l, "== "):
			finish()
			n := strings.TrimSpace(l[3:])
			if !validName(n) {
				fail(ln, "mutant name %q: want letters, digits, '-', '_' and '.' only", n)
			}
			if prev, dup := seen[n]; dup {
				fail(ln, "mutant %s already defined at line %d", n, prev)
			}
			seen[n] = ln
			cur = &Mutant{Name: n, Line: ln}
			keys = make(map[string]bool)
			continue
		}
		if cur == nil {
			fail(ln, "%q outside a mutant (a mutant starts with \"== NAME\")", l)
			continue
		}
		if l == "-- original" {
			if keys["original"] {
				fail(ln, "mutant %s: a second \"-- original\"", cur.Name)
			}
			keys["original"] = true
			orig, j, ok := block(i+1, "-- replacement")
			if !ok {
				fail(ln, "mutant %s: \"-- original\" without a \"-- replacement\" after it", cur.Name)
				i = j
				continue
			}
			repl, k, ok := block(j+1, "-- end")
			if !ok {
				fail(j+1, "mutant %s: \"-- replacement\" without a \"-- end\" after it", cur.Name)
				i = k
				continue
			}
			i = k
			cur.Original, cur.Replacement = orig, repl
			switch {
			case strings.TrimSpace(orig) == "":
				fail(ln, "mutant %s: the original text is empty", cur.Name)
			case orig == repl:
				fail(ln, "mutant %s: the replacement equals the original", cur.Name)
			}
			continue
		}
		if strings.HasPrefix(l, "-- ") {
			fail(ln, "mutant %s: %q: want \"-- original\" (then \"-- replacement\" and \"-- end\")", cur.Name, l)
			continue
		}
		key, val, _ := strings.Cut(l, " ")
		val = strings.TrimSpace(val)
		if keys[key] && key != "why" {
			fail(ln, "mutant %s: a second %q line", cur.Name, key)
		}
		keys[key] = true
		switch key {
		case "file":
			if val == "" || strings.Contains(val, "\\") || strings.HasPrefix(val, "/") || strings.Contains("/"+val+"/", "/../") {
				fail(ln, "mutant %s: file %q: want a slash-separated path inside the module", cur.Name, val)
			}
			cur.File = val
		case "pkg":
			cur.Pkgs = strings.Fields(val)
			if len(cur.Pkgs) == 0 {
				fail(ln, "mutant %s: pkg names no package", cur.Name)
			}
		case "run":
			if val == "" {
				fail(ln, "mutant %s: run is empty (it would run every test)", cur.Name)
			} else if _, err := regexp.Compile(val); err != nil {
				fail(ln, "mutant %s: run %q: %v", cur.Name, val, err)
			}
			cur.Run = val
		case "race":
			switch val {
			case "yes":
				cur.Race = true
			case "no":
				cur.Race = false
			default:
				fail(ln, "mutant %s: race %q: want yes or no", cur.Name, val)
			}
		case "why":
			if cur.Why != "" {
				cur.Why += " "
			}
			cur.Why += val
		default:
			fail(ln, "mutant %s: unknown key %q (want file, pkg, run, race, why or \"-- original\")", cur.Name, key)
		}
	}
	finish()
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("%s: no mutants", name)
	}
	return ms, nil
}

func validName(n string) bool {
	if n == "" {
		return false
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// Apply returns src with m's original text replaced, and the line of src
// where the original starts. The original must occur exactly once: if
// not, the error wraps ErrStale or ErrAmbiguous.
func Apply(src []byte, m Mutant) (out []byte, line int, err error) {
	s := string(src)
	// Every occurrence, overlapping ones included: "aa" occurs twice in
	// "aaa", and either could be the one meant.
	var at []int
	for i := 0; ; {
		j := strings.Index(s[i:], m.Original)
		if j < 0 {
			break
		}
		at = append(at, i+j)
		i += j + 1
	}
	lineOf := func(i int) int { return 1 + strings.Count(s[:i], "\n") }
	switch len(at) {
	case 1:
	case 0:
		return nil, 0, fmt.Errorf("mutant %s: %s: %w; update it in the mutants file (line %d)", m.Name, m.File, ErrStale, m.Line)
	default:
		lines := make([]string, len(at))
		for k, i := range at {
			lines[k] = fmt.Sprint(lineOf(i))
		}
		return nil, 0, fmt.Errorf("mutant %s: %s: %w: %d times, at lines %s", m.Name, m.File, ErrAmbiguous, len(at), strings.Join(lines, ", "))
	}
	i := at[0]
	return []byte(s[:i] + m.Replacement + s[i+len(m.Original):]), lineOf(i), nil
}

// Select returns the mutants named in only (all of them if only is
// empty), in the file's order. An unknown name is an error.
func Select(ms []Mutant, only []string) ([]Mutant, error) {
	if len(only) == 0 {
		return ms, nil
	}
	want := make(map[string]bool)
	for _, n := range only {
		want[n] = true
	}
	var out []Mutant
	for _, m := range ms {
		if want[m.Name] {
			out = append(out, m)
			delete(want, m.Name)
		}
	}
	if len(want) > 0 {
		var unknown, known []string
		for _, n := range only {
			if want[n] {
				unknown = append(unknown, n)
			}
		}
		for _, m := range ms {
			known = append(known, m.Name)
		}
		return nil, fmt.Errorf("no mutant named %s (have %s)", strings.Join(unknown, ", "), strings.Join(known, ", "))
	}
	return out, nil
}
