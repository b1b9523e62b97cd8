package alloctest

import (
	"testing"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/internal/unix"
)

// NewRegion returns size bytes of zeroed private memory whose first byte is
// aligned to alloc.MaxAlign, as the segment layer provides. It is mapped
// with MAP_NORESERVE, so a large region costs only the pages written. It is
// unmapped in t.Cleanup: allocators over it must not outlive the test.
func NewRegion(t testing.TB, size uint64) []byte {
	t.Helper()
	mem, err := mapRegion(t, size)
	if err != nil {
		t.Fatalf("alloctest: map %d bytes: %v", size, err)
	}
	return mem
}

func mapRegion(t testing.TB, size uint64) ([]byte, error) {
	m, err := unix.MapAnonAligned(uintptr(pageRound(size)), alloc.MaxAlign, true)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		if err := unix.Unmap(m); err != nil {
			t.Errorf("alloctest: unmap: %v", err)
		}
	})
	return m.Mem[:size:size], nil
}

// NewSharedRegion returns two mappings of the same size bytes of shared
// memory (a memfd file), at different addresses, both aligned to
// alloc.MaxAlign: what two processes attached to one segment see. Both are
// unmapped, and the file closed, in t.Cleanup.
func NewSharedRegion(t testing.TB, size uint64) (a, b []byte) {
	t.Helper()
	fd, err := unix.MemfdCreate("alloctest")
	if err != nil {
		t.Skipf("alloctest: memfd_create not available: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Ftruncate(fd, int64(pageRound(size))); err != nil {
		t.Fatalf("alloctest: size memfd to %d bytes: %v", size, err)
	}
	var views [2][]byte
	for i := range views {
		m, err := unix.MapSharedAligned(fd, uintptr(pageRound(size)), alloc.MaxAlign)
		if err != nil {
			t.Fatalf("alloctest: map memfd: %v", err)
		}
		t.Cleanup(func() {
			if err := unix.Unmap(m); err != nil {
				t.Errorf("alloctest: unmap: %v", err)
			}
		})
		views[i] = m.Mem[:size:size]
	}
	return views[0], views[1]
}

func pageRound(n uint64) uint64 { return (n + unix.PageSize - 1) &^ (unix.PageSize - 1) }

// MapFile maps the file at path (creating it, at size bytes, when create
// is set) shared, at an address aligned to alloc.MaxAlign, for tests that
// share a region between processes. The mapping is released in t.Cleanup;
// removing a created file is the caller's business (register its removal
// first, so that it happens even if the test fails).
func MapFile(t testing.TB, path string, size uint64, create bool) []byte {
	t.Helper()
	flags := unix.ORdwr
	if create {
		flags |= unix.OCreat | unix.OExcl
	}
	fd, err := unix.Open(path, flags, 0o600)
	if err != nil {
		t.Fatalf("alloctest: open %s: %v", path, err)
	}
	defer unix.Close(fd)
	if create {
		if err := unix.Ftruncate(fd, int64(pageRound(size))); err != nil {
			t.Fatalf("alloctest: size %s: %v", path, err)
		}
	}
	m, err := unix.MapSharedAligned(fd, uintptr(pageRound(size)), alloc.MaxAlign)
	if err != nil {
		t.Fatalf("alloctest: map %s: %v", path, err)
	}
	t.Cleanup(func() { unix.Unmap(m) })
	return m.Mem[:size:size]
}
