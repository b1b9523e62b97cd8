package mutate

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// excluded are build outputs kept out of a copy even should git list them
// (a missing .gitignore line, say): prefixes of slash-separated paths.
var excluded = []string{".git/", ".bin/", "bench/peers/bin/"}

// GitFiles returns the files of the working tree at root that a copy
// holds: tracked files and untracked ones that are not ignored (git
// ls-files -co --exclude-standard), slash-separated and sorted. Tracked
// files deleted in the working tree are listed too; CopyTree skips them.
func GitFiles(root string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "-co", "--exclude-standard")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files in %s: %v: %s", root, err, strings.TrimSpace(stderr.String()))
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" || slices.ContainsFunc(excluded, func(p string) bool { return strings.HasPrefix(f, p) }) {
			continue
		}
		files = append(files, f)
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}

// Tree is a scratch copy of a working tree, in which one mutant at a time
// is applied and then taken back.
type Tree struct {
	Dir  string // the copy's root
	undo *saved // the file the applied mutant changed; nil if none
}

type saved struct {
	path string
	data []byte
	mode fs.FileMode
}

// CopyTree copies files (GitFiles of src) from src into the directory dst,
// which must exist, and returns the copy and the number of files copied.
// Regular files keep their permission bits and symbolic links stay links;
// files that no longer exist in src are skipped, as are directories (a
// submodule).
func CopyTree(src, dst string, files []string) (*Tree, int, error) {
	n := 0
	for _, f := range files {
		from := filepath.Join(src, filepath.FromSlash(f))
		to := filepath.Join(dst, filepath.FromSlash(f))
		fi, err := os.Lstat(from)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, n, err
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return nil, n, err
		}
		switch {
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(from)
			if err != nil {
				return nil, n, err
			}
			if err := os.WriteFile(to, data, fi.Mode().Perm()); err != nil {
				return nil, n, err
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(from)
			if err != nil {
				return nil, n, err
			}
			if err := os.Symlink(target, to); err != nil {
				return nil, n, err
			}
		default:
			continue
		}
		n++
	}
	return &Tree{Dir: dst}, n, nil
}

// Apply edits the copy's file as m says and returns the line where the
// edit starts. The previous mutant must have been taken back (Restore).
func (t *Tree) Apply(m Mutant) (line int, err error) {
	if t.undo != nil {
		return 0, fmt.Errorf("mutant %s: %s is still mutated (Restore first)", m.Name, t.undo.path)
	}
	path := filepath.Join(t.Dir, filepath.FromSlash(m.File))
	fi, err := os.Stat(path)
	if err != nil {
		return 0, fmt.Errorf("mutant %s: %w", m.Name, err)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("mutant %s: %w", m.Name, err)
	}
	out, line, err := Apply(src, m)
	if err != nil {
		return 0, err
	}
	t.undo = &saved{path: path, data: src, mode: fi.Mode().Perm()}
	if err := os.WriteFile(path, out, fi.Mode().Perm()); err != nil {
		return 0, fmt.Errorf("mutant %s: %w", m.Name, err)
	}
	return line, nil
}

// Restore takes back the applied mutant, if any.
func (t *Tree) Restore() error {
	if t.undo == nil {
		return nil
	}
	if err := os.WriteFile(t.undo.path, t.undo.data, t.undo.mode); err != nil {
		return fmt.Errorf("restoring %s: %w", t.undo.path, err)
	}
	t.undo = nil
	return nil
}

// Locate checks m against the file as it is under root without changing
// it: the file exists and the original occurs in it exactly once. It
// returns the line where the original starts.
func Locate(root string, m Mutant) (int, error) {
	src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(m.File)))
	if err != nil {
		return 0, fmt.Errorf("mutant %s: %w", m.Name, err)
	}
	_, line, err := Apply(src, m)
	return line, err
}
