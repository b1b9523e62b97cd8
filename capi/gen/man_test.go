package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestManPages: every routine the headers declare has a page (its
// family's, or a .so line pointing at one that exists), the families
// are the ones man.go's comment promises, and man renders a page.
func TestManPages(t *testing.T) {
	files, err := render()
	if err != nil {
		t.Fatal(err)
	}
	// Every declaration ends a line with ");" (after joining the lines a
	// long one is split over): the parser must have found each of them.
	for _, h := range []string{"include/shmem.h", "include/shmemx.h"} {
		text := string(files[h])
		protos, _ := parseHeader(filepath.Base(h), text)
		want := 0
		for _, l := range strings.Split(text, "\n") {
			// Not a statement of an inline function, nor a static
			// assertion's message.
			stmt := strings.HasPrefix(strings.TrimSpace(l), "return ") || strings.HasSuffix(l, "\");")
			if !strings.HasPrefix(l, "#") && !stmt && (strings.HasSuffix(l, ");") || strings.HasSuffix(l, "));")) {
				want++
			}
		}
		if len(protos) != want {
			t.Errorf("%s: parsed %d prototypes, the header has %d declarations", h, len(protos), want)
		}
	}
	pages, err := manPages()
	if err != nil {
		t.Fatal(err)
	}
	protos, _ := parseHeader("shmem.h", string(files["include/shmem.h"]))
	if len(protos) < 1000 {
		t.Fatalf("only %d prototypes in shmem.h", len(protos))
	}
	for _, p := range protos {
		data, ok := pages[p.name+".3"]
		if !ok {
			t.Errorf("%s has no page", p.name)
			continue
		}
		if target, ok := strings.CutPrefix(string(data), ".so man3/"); ok {
			if _, ok := pages[strings.TrimSpace(target)]; !ok {
				t.Errorf("%s.3 points at %s, which is not written", p.name, target)
			}
		}
	}
	family := map[string]string{}
	for _, f := range families(protos) {
		for _, m := range f.members {
			family[m.name] = f.name
		}
	}
	for name, want := range map[string]string{
		"shmem_ctx_long_put": "shmem_put", "shmem_longlong_sum_reduce": "shmem_sum_reduce", "shmem_long_sum_reduce": "shmem_sum_reduce",
		"shmem_put64_nbi": "shmem_put_nbi", "shmem_ctx_getmem_nbi": "shmem_get_nbi", "shmem_iput128": "shmem_iput",
		"shmem_broadcast32": "shmem_broadcast", "shmem_broadcastmem": "shmem_broadcast", "shmem_ctx_create": "shmem_ctx_create",
		"shmem_ctx_quiet": "shmem_quiet", "shmem_int_wait_until_any_vector": "shmem_wait_until_any_vector",
		"shmem_ptrdiff_test": "shmem_test", "shmem_test_lock": "shmem_test_lock", "shmem_ptr": "shmem_ptr",
		"shmem_long_wait": "shmem_wait", "shmem_wait": "shmem_wait", "shmem_uint64_atomic_fetch_xor_nbi": "shmem_atomic_fetch_xor_nbi",
	} {
		if got := family[name]; got != want {
			t.Errorf("%s: family %q, want %q", name, got, want)
		}
	}
	put := string(pages["shmem_put.3"])
	for _, want := range []string{
		`void shmem_TYPENAME_put(TYPE *dest, const TYPE *source, size_t nelems, int pe);`,
		`void shmem_ctx_putSIZE(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe);`,
		`void shmem_put(shmem_ctx_t ctx, TYPE *dest, const TYPE *source, size_t nelems, int pe);`,
	} {
		if !strings.Contains(put, strings.ReplaceAll(want, "-", `\-`)) {
			t.Errorf("shmem_put.3 lacks %s:\n%s", want, put)
		}
	}
	if _, err := exec.LookPath("man"); err != nil {
		t.Skip("man is not installed: the pages were not rendered")
	}
	dir := t.TempDir()
	if code := writeMan(dir, &strings.Builder{}); code != 0 {
		t.Fatalf("writeMan: %d", code)
	}
	for _, page := range []string{"shmem_put.3", "shmem_init.3", "shmem_atomic_compare_swap.3"} {
		cmd := exec.Command("man", "--warnings", "-l", filepath.Join(dir, page))
		cmd.Env = append(cmd.Environ(), "MANWIDTH=100", "MANPAGER=cat", "PAGER=cat")
		out, err := cmd.CombinedOutput()
		name := strings.ToUpper(strings.TrimSuffix(page, ".3"))
		if err != nil || !strings.Contains(string(out), "SYNOPSIS") || !strings.Contains(string(out), name+"(3)") || strings.Contains(string(out), "warning") {
			t.Errorf("man -l %s: %v\n%s", page, err, out)
		}
	}
}
