package alloctest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/symheap/symheap/internal/unix"
)

// MainNoLeftovers runs the tests of m (call it from TestMain) and then
// checks that none left behind a shared-memory file named
// prefix-<this process's pid>-*: it removes any it finds and fails the
// test binary. It does not return.
func MainNoLeftovers(m *testing.M, prefix string) {
	code := m.Run()
	left, _ := filepath.Glob(filepath.Join(unix.ShmDir, fmt.Sprintf("%s-%d-*", prefix, os.Getpid())))
	if len(left) > 0 {
		fmt.Fprintf(os.Stderr, "tests left shared-memory files behind: %v\n", left)
		for _, f := range left {
			os.Remove(f)
		}
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
