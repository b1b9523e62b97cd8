package unix

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// UnshareMounts moves the calling thread into a new mount namespace whose
// mounts are private, so that later mounts are seen by this process only.
// The caller must have locked its OS thread (or be single-threaded).
func UnshareMounts() error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return err
	}
	return unix.Mount("none", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")
}

// MountTmpfs mounts a tmpfs of the given options (e.g. "size=16m") on dir.
func MountTmpfs(dir, options string) error {
	return unix.Mount("tmpfs", dir, "tmpfs", 0, options)
}

// MapCount returns the number of mappings of this process and the
// system's limit (vm.max_map_count).
func MapCount() (n, limit int) {
	if b, err := os.ReadFile("/proc/self/maps"); err == nil {
		n = strings.Count(string(b), "\n")
	}
	if b, err := os.ReadFile("/proc/sys/vm/max_map_count"); err == nil {
		limit, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	return n, limit
}
