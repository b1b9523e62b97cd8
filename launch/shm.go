package launch

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/symheap/symheap/internal/segment"
	"github.com/symheap/symheap/internal/unix"
)

// SegmentFiles lists the /dev/shm files of job for the calling user: the
// segment itself (internal/segment.Name) and the files whose names extend
// the segment's with "-" or "." (helper files of the segment layer). A job
// id must therefore not be another job's id followed by '-' or '.'; the
// generated ones (NewJobID) never are.
func SegmentFiles(job string) ([]string, error) {
	name := segment.Name(unix.Getuid(), job)
	entries, err := os.ReadDir(unix.ShmDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if n == name || strings.HasPrefix(n, name+"-") || strings.HasPrefix(n, name+".") {
			out = append(out, filepath.Join(unix.ShmDir, n))
		}
	}
	return out, nil
}

// RemoveSegmentFiles removes the files SegmentFiles lists and returns those
// it removed. Only call it when no process of the job is left: the segment
// layer removes its segment when the last PE leaves, and this is for the
// jobs where that did not happen (a PE was killed, the job failed).
func RemoveSegmentFiles(job string) ([]string, error) {
	files, err := SegmentFiles(job)
	var removed []string
	for _, f := range files {
		switch e := os.Remove(f); {
		case e == nil:
			removed = append(removed, f)
		case errors.Is(e, fs.ErrNotExist):
		default:
			err = errors.Join(err, e)
		}
	}
	return removed, err
}
