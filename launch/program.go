package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// resolve finds what to execute for prog, building it first when it is a
// Go package. It returns the absolute path of the executable and a function
// that removes whatever the build left (nil when there was no build).
//
//  1. prog names an existing file (relative to dir): an executable is run
//     as is; a .go file is built; anything else is an error.
//  2. prog names an existing directory: it must hold a Go main package,
//     which is built.
//  3. prog is a bare name (no '/'): it is looked up in PATH.
//  4. Otherwise `go list` must know prog as a main package, which is built.
func resolve(ctx context.Context, dir, prog string, buildFlags []string) (string, func(), error) {
	if prog == "" {
		return "", nil, fmt.Errorf("%w: empty program name", ErrProgram)
	}
	local := prog
	if !filepath.IsAbs(local) && dir != "" {
		local = filepath.Join(dir, local)
	}
	fi, statErr := os.Stat(local)
	switch {
	case statErr == nil && fi.Mode().IsRegular():
		if strings.HasSuffix(local, ".go") {
			return build(ctx, dir, mustAbs(local), buildFlags)
		}
		if fi.Mode().Perm()&0o111 == 0 {
			return "", nil, fmt.Errorf("%w: %s is not executable", ErrProgram, prog)
		}
		return mustAbs(local), nil, nil
	case statErr == nil && fi.IsDir():
		if !hasGoFiles(local) {
			return "", nil, fmt.Errorf("%w: %s is a directory without .go files", ErrProgram, prog)
		}
		return build(ctx, dir, mustAbs(local), buildFlags)
	case statErr == nil:
		return "", nil, fmt.Errorf("%w: %s is not a regular file", ErrProgram, prog)
	case !errors.Is(statErr, fs.ErrNotExist):
		return "", nil, fmt.Errorf("%w: %v", ErrProgram, statErr)
	}
	if !strings.Contains(prog, "/") {
		if p, err := exec.LookPath(prog); err == nil {
			return mustAbs(p), nil, nil
		}
	}
	return build(ctx, dir, prog, buildFlags)
}

// build checks with `go list` that target is a main package and builds it
// into a fresh temporary directory.
func build(ctx context.Context, dir, target string, flags []string) (string, func(), error) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		return "", nil, fmt.Errorf("%w: %s is not a file, and no go command is in PATH to build it as a package", ErrProgram, target)
	}
	var stderr bytes.Buffer
	list := exec.CommandContext(ctx, gotool, "list", "-f", "{{.Name}} {{.ImportPath}}", "--", target)
	list.Dir, list.Stderr = dir, &stderr
	out, err := list.Output()
	if err != nil {
		return "", nil, fmt.Errorf("%w: %s is no executable file and not a Go package: go list: %s",
			ErrProgram, target, firstLines(stderr.String(), err))
	}
	name, importPath, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if strings.Contains(importPath, "\n") {
		return "", nil, fmt.Errorf("%w: %s names more than one package", ErrProgram, target)
	}
	if name != "main" {
		return "", nil, fmt.Errorf("%w: %s is package %s, not a main package", ErrProgram, importPath, name)
	}
	tmp, err := os.MkdirTemp("", "symheap-build-")
	if err != nil {
		return "", nil, fmt.Errorf("%w: %v", ErrProgram, err)
	}
	cleanup := func() { os.RemoveAll(tmp) }
	base := path.Base(importPath)
	if strings.HasSuffix(target, ".go") {
		base = strings.TrimSuffix(filepath.Base(target), ".go")
	}
	exe := filepath.Join(tmp, base)
	args := append(append([]string{"build", "-o", exe}, flags...), "--", target)
	stderr.Reset()
	b := exec.CommandContext(ctx, gotool, args...)
	b.Dir, b.Stdout, b.Stderr = dir, &stderr, &stderr
	if err := b.Run(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("%w: go build %s: %s", ErrProgram, target, firstLines(stderr.String(), err))
	}
	return exe, cleanup, nil
}

func hasGoFiles(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	return len(m) > 0
}

func mustAbs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// firstLines returns the first lines of a tool's error output, or err when
// the tool printed nothing.
func firstLines(s string, err error) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return err.Error()
	}
	lines := strings.SplitN(s, "\n", 11)
	if len(lines) > 10 {
		lines[10] = "..."
	}
	return strings.Join(lines, "\n")
}
