package alloc_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/symheap/symheap/internal/unix"
)

// TestMain checks, after all tests, that none left a shared-memory file
// behind (the remote-free test creates one per component).
func TestMain(m *testing.M) {
	code := m.Run()
	left, _ := filepath.Glob(filepath.Join(unix.ShmDir, fmt.Sprintf("symheap-alloctest-%d-*", os.Getpid())))
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
