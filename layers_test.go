package symheap

import (
	"os"
	"os/exec"
	"path"
	"regexp"
	"strings"
	"testing"
)

// TestLayerMap: the layer map at the top of the package doc ("Layers")
// matches the imports: every package it lists imports, of the packages
// it lists, only those listed after it, in the default build and in the
// ucx build.
func TestLayerMap(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to list the imports")
	}
	src, err := os.ReadFile("symheap.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(src)
	i := strings.Index(doc, "//\tsymheap ")
	j := strings.Index(doc, "// The tools sit beside it.")
	if i < 0 || j < i {
		t.Fatal("the package doc has no layer map (a line \"//\\tsymheap ...\" and, after it, \"// The tools sit beside it.\")")
	}
	const mod = "github.com/symheap/symheap"
	var order []string // patterns, as listed: a path below the module, or path/...
	first := regexp.MustCompile(`^//\t(\S.*?)(\s{2,}|$)`)
	for _, l := range strings.Split(doc[i:j], "\n") {
		m := first.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		for _, name := range strings.Split(m[1], ",") {
			if name = strings.TrimSpace(name); name != "" {
				order = append(order, name)
			}
		}
	}
	if len(order) < 5 || order[0] != "symheap" {
		t.Fatalf("layer map parsed as %q", order)
	}
	rank := func(pkg string) int {
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg, mod), "/")
		if pkg == mod {
			rel = "symheap"
		}
		best := -1
		for k, p := range order {
			switch {
			case p == rel:
				return k
			case strings.HasSuffix(p, "/...") && (rel == strings.TrimSuffix(p, "/...") || strings.HasPrefix(rel, strings.TrimSuffix(p, "...")) && best < 0):
				best = k
			}
		}
		return best
	}
	for _, tags := range []string{"", "ucx"} {
		out, err := exec.Command("go", "list", "-tags", tags, "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", mod+"/...").Output()
		if err != nil {
			t.Fatalf("go list -tags %q: %v", tags, err)
		}
		checked := 0
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(l)
			k := rank(f[0])
			if k < 0 || strings.HasSuffix(f[0], "_test") || strings.Contains(f[0], "/internal/mutate") {
				continue
			}
			checked++
			for _, imp := range f[1:] {
				if q := rank(imp); q >= 0 && q <= k && imp != f[0] && !sameEntry(order, k, q) {
					t.Errorf("build %q: %s (layer %q) imports %s (layer %q), which the layer map lists before it, not after",
						tags, f[0], order[k], imp, order[q])
				}
			}
		}
		if checked < 10 {
			t.Errorf("build %q: only %d packages found on the layer map", tags, checked)
		}
	}
}

// sameEntry reports whether layers k and q are one entry of the map
// written as several names (alloc and alloc/..., rcache and rcache/pin):
// packages of one entry may import each other downwards.
func sameEntry(order []string, k, q int) bool {
	a, b := strings.TrimSuffix(order[k], "/..."), strings.TrimSuffix(order[q], "/...")
	return path.Dir(a) == b || path.Dir(b) == a || a == b
}
