package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCurrent fails when the committed header or C file differs from what
// the tables generate (run go generate ./capi/gen).
func TestCurrent(t *testing.T) {
	files, err := render()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join("..", "..", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not current: run go generate ./capi/gen", name)
		}
	}
}

// TestEveryPrototypeDefined checks that every routine the header declares
// has a definition, in the generated C file or in the hand-written ones:
// a declared routine without one would be a link error for programs.
func TestEveryPrototypeDefined(t *testing.T) {
	files, err := render()
	if err != nil {
		t.Fatal(err)
	}
	decl := regexp.MustCompile(`(?m)^[a-z_ A-Z0-9*]+?\b(_?[a-z_0-9]+)\((?:[^;]*)\)(?: __attribute__\(\([a-z]+\)\))?;$`)
	var defs strings.Builder
	defs.Write(files["capi/shmem_gen.c"])
	srcs, err := filepath.Glob(filepath.Join("..", "*.c"))
	if err != nil || len(srcs) == 0 {
		t.Fatalf("the library's C files: %v (found %d)", err, len(srcs))
	}
	for _, f := range srcs {
		if filepath.Base(f) == "shmem_gen.c" {
			continue // rendered above
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		defs.Write(b)
	}
	// A definition: a line naming a routine, its parameters, then "{" on
	// that line or the next.
	def := regexp.MustCompile(`(?m)^[a-zA-Z_][^\n;(]*?\b(_?[a-z_0-9]+)\([^;{]*\)\s*\{`)
	defined := map[string]bool{}
	for _, m := range def.FindAllStringSubmatch(defs.String(), -1) {
		defined[m[1]] = true
	}
	n := 0
	for _, h := range []string{"include/shmem.h", "include/shmemx.h"} {
		for _, m := range decl.FindAllStringSubmatch(string(files[h]), -1) {
			n++
			if !defined[m[1]] {
				t.Errorf("%s declares %s, which nothing defines", h, m[1])
			}
		}
	}
	if n < 1000 {
		t.Errorf("found only %d prototypes: the pattern is wrong", n)
	}
}

// TestGenericsSelectEachTypeOnce: a _Generic selection may not name one
// C type twice (int64_t is long here), so each type is listed once.
func TestGenericsSelectEachTypeOnce(t *testing.T) {
	var g gen
	g.all()
	under := map[string]string{}
	for _, ty := range allTypes {
		under[ty.c] = ty.under()
	}
	for _, gn := range g.generics {
		seen := map[string]bool{}
		for _, s := range gn.plain {
			u := under[s.ctype]
			if seen[u] {
				t.Errorf("%s selects %s twice", gn.name, u)
			}
			seen[u] = true
		}
		if len(gn.plain) == 0 {
			t.Errorf("%s selects nothing", gn.name)
		}
	}
}

// TestGenericsSelectEveryRow: each generic name selects every row of its
// table, a typedef'd row through its base type's selection or its own.
// The bitwise AMO table has int32_t and int64_t but neither int nor long:
// shmem_atomic_and on an int once found no selection.
func TestGenericsSelectEveryRow(t *testing.T) {
	tables := map[string][]typ{
		"shmem_put": rmaTypes, "shmem_p": rmaTypes, "shmem_put_signal": rmaTypes, "shmem_broadcast": rmaTypes,
		"shmem_alltoalls": rmaTypes, "shmem_atomic_fetch_add": amoTypes, "shmem_atomic_swap": extAmoTypes,
		"shmem_atomic_and": bitAmoTypes, "shmem_atomic_fetch_xor_nbi": bitAmoTypes,
		"shmem_wait_until": syncTypes, "shmem_test": syncTypes, "shmem_test_any": amoTypes,
		"shmem_wait_until_some_vector": amoTypes, "shmem_and_reduce": bitRedTypes,
		"shmem_max_reduce": cmpRedTypes, "shmem_prod_reduce": arithRedTypes,
		"shmem_fadd": oldAmoTypes, "shmem_fetch": oldExtAmoTypes,
	}
	var g gen
	g.all()
	found := 0
	for _, gn := range g.generics {
		ts, ok := tables[gn.name]
		if !ok {
			continue
		}
		found++
		sel := map[string]bool{}
		for _, s := range gn.plain {
			sel[allTypesByC(t, s.ctype).under()] = true
		}
		for _, ty := range ts {
			if !sel[ty.under()] {
				t.Errorf("%s selects nothing for %s (%s)", gn.name, ty.c, ty.under())
			}
		}
		if len(gn.plain) != len(selectRows(ts)) {
			t.Errorf("%s has %d selections, want %d", gn.name, len(gn.plain), len(selectRows(ts)))
		}
	}
	if found != len(tables) {
		t.Errorf("found %d of the %d generic names", found, len(tables))
	}
}

func allTypesByC(t *testing.T, c string) typ {
	t.Helper()
	for _, ty := range allTypes {
		if ty.c == c {
			return ty
		}
	}
	t.Fatalf("no type %q", c)
	return typ{}
}

// TestSyncTables: wait_until and test take the point-to-point table
// (short and unsigned short, deprecated, beside the standard AMO types);
// the _all, _any and _some forms the standard AMO types only, as
// OpenSHMEM 1.5 has them.
func TestSyncTables(t *testing.T) {
	files, err := render()
	if err != nil {
		t.Fatal(err)
	}
	h := string(files["include/shmem.h"])
	for _, want := range []string{"void shmem_short_wait_until(", "int shmem_ushort_test(", "size_t shmem_int32_test_any(",
		"void shmem_wait_until(long *ivar, int cmp, long cmp_value);", "#define shmem_sync(...)"} {
		if !strings.Contains(h, want) {
			t.Errorf("shmem.h has no %q", want)
		}
	}
	for _, not := range []string{"shmem_short_test_any(", "shmem_ushort_wait_until_all(", "#define OSHMEM_"} {
		if strings.Contains(h, not) {
			t.Errorf("shmem.h has %q", not)
		}
	}
}

// TestCheckReportsStale: the check make build runs (gen -check) exits 1
// naming a generated file that is not what the tables and the Go types
// give, here the formats header with one offset changed by hand, and
// leaves the file alone; without -check, gen writes it again.
func TestCheckReportsStale(t *testing.T) {
	files, err := render()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if st := run(root, true, &out); st != 0 {
		t.Fatalf("gen -check on current files: status %d, %s", st, out.String())
	}
	const name = "capi/shmemi_formats.h"
	path := filepath.Join(root, name)
	good := files[name]
	from, to := "offsetof(struct shmemi_alloc_record, out) == 48", "offsetof(struct shmemi_alloc_record, out) == 56"
	if !bytes.Contains(good, []byte(from)) {
		t.Fatalf("%s has no %q: the test's edit does not apply", name, from)
	}
	stale := bytes.Replace(good, []byte(from), []byte(to), 1)
	if err := os.WriteFile(path, stale, 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if st := run(root, true, &out); st != 1 {
		t.Errorf("gen -check on a stale %s: status %d, want 1", name, st)
	}
	if want := "gen: " + name + " is not current: run go generate ./capi/gen\n"; out.String() != want {
		t.Errorf("gen -check said %q, want %q", out.String(), want)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, stale) {
		t.Errorf("gen -check changed %s", name)
	}
	out.Reset()
	if st := run(root, false, &out); st != 0 {
		t.Fatalf("gen: status %d, %s", st, out.String())
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, good) {
		t.Errorf("gen did not write %s again", name)
	}
}

// TestGeneratedLine: every generated file says so near its top, in the
// line Go's tools look for (after a build constraint and blank lines
// only), written as a comment C99 and C++ accept.
func TestGeneratedLine(t *testing.T) {
	files, err := render()
	if err != nil {
		t.Fatal(err)
	}
	mark := regexp.MustCompile(`^// Code generated .* DO NOT EDIT\.$`)
	for name, data := range files {
		found := false
		for _, line := range strings.Split(string(data), "\n") {
			if mark.MatchString(line) {
				found = true
				break
			}
			if line != "" && !strings.HasPrefix(line, "//go:build ") {
				break
			}
		}
		if !found {
			t.Errorf("%s does not begin with a line matching %s", name, mark)
		}
	}
}
