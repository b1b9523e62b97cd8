package segment

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/unix"
)

// Entry describes one segment file of a user, as List finds it.
type Entry struct {
	Path    string
	Job     string // from the header when readable, else from the name
	Size    int64
	Created time.Time
	NPEs    int
	Alive   []int // PEs whose liveness token is held
	Stale   bool  // proved abandoned: nobody holds any lock on it
	Reason  string
}

// List returns the segments of user uid in /dev/shm, newest first, with
// which PEs are alive and whether the segment is stale.
func List(uid int) ([]Entry, error) {
	ents, err := os.ReadDir(unix.ShmDir)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, de := range ents {
		u, job, ok := ParseName(de.Name())
		if !ok || u != uid {
			continue
		}
		e := Entry{Path: unix.ShmDir + "/" + de.Name(), Job: job}
		probe(&e, uid)
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	return out, nil
}

// probe fills in what the file and its locks say. It takes no lock that
// could make a live job think it is alone: only a non-blocking exclusive
// flock, released at once.
func probe(e *Entry, uid int) {
	fd, err := unix.Open(e.Path, unix.ORdonly|unix.ONofollow, 0)
	if err != nil {
		e.Reason = err.Error()
		return
	}
	defer unix.Close(fd)
	fuid, _, size, err := unix.Fstat(fd)
	if err != nil || int(fuid) != uid {
		e.Reason = "not owned by this user"
		return
	}
	e.Size = size
	if fi, err := os.Stat(e.Path); err == nil {
		e.Created = fi.ModTime()
	}
	if size >= HeaderSize {
		if m, err := unix.MapShared(fd, HeaderSize, 0, unix.ProtRead); err == nil {
			h := headerOf(m.Mem)
			if h.magic == Magic && h.version == Version && h.npes >= 1 && h.npes <= MaxPEs {
				e.NPEs = int(h.npes)
				e.Job = getString(h.job[:])
				e.Created = time.Unix(0, int64(h.created))
			}
			unix.Unmap(m)
		}
	}
	n := e.NPEs
	if n == 0 {
		n = MaxPEs
	}
	for pe := 0; pe < n; pe++ {
		if held, err := unix.OFDLocked(fd, LiveLockBase+int64(pe)); err == nil && held {
			e.Alive = append(e.Alive, pe)
		}
	}
	if len(e.Alive) > 0 {
		e.Reason = fmt.Sprintf("%d PE(s) alive", len(e.Alive))
		return
	}
	if unix.Flock(fd, unix.LockExclusive, true) != nil {
		e.Reason = "locked by a starting or attached process"
		return
	}
	unix.Flock(fd, unix.LockUnlock, false)
	if size == 0 && time.Since(e.Created) < 2*time.Second {
		e.Reason = "being created"
		return
	}
	e.Stale = true
	e.Reason = "no PE attached"
}

// Clean removes the stale segments of user uid and returns them. A live
// job, a starting one and other users' files are never touched.
func Clean(uid int) ([]Entry, error) {
	list, err := List(uid)
	if err != nil {
		return nil, err
	}
	var removed []Entry
	for _, e := range list {
		if !e.Stale {
			continue
		}
		// Prove it again under the exclusive lock, then unlink.
		fd, err := unix.Open(e.Path, unix.ORdonly|unix.ONofollow, 0)
		if err != nil {
			continue
		}
		if unix.Flock(fd, unix.LockExclusive, true) == nil {
			if live, _ := unix.OFDLocked(fd, LiveLockBase); !live && unix.SameFile(fd, e.Path) {
				if unix.Unlink(e.Path) == nil {
					removed = append(removed, e)
				}
			}
		}
		unix.Close(fd)
	}
	return removed, nil
}

// Inspect attaches read-only to the segment at path (or of job id), for
// symheap stat. It takes no lock and no liveness token, so it can never
// keep a job's segment alive or be mistaken for a PE.
func Inspect(pathOrJob string) (*Segment, error) {
	path := pathOrJob
	if !strings.Contains(path, "/") {
		if _, _, ok := ParseName(path); !ok {
			path = Path(unix.Getuid(), path)
		} else {
			path = unix.ShmDir + "/" + path
		}
	}
	fd, err := unix.Open(path, unix.ORdonly|unix.ONofollow, 0)
	if err != nil {
		return nil, fmt.Errorf("segment: open %s: %v: %w (is the job running? `symheap stat` lists live jobs)", path, err, errs.ErrSegment)
	}
	s := &Segment{path: path, fd: fd, p: Params{ReadOnly: true}}
	uid, _, size, err := unix.Fstat(fd)
	if err != nil || int(uid) != unix.Getuid() {
		unix.Close(fd)
		return nil, fmt.Errorf("segment: %s is not ours (uid %d): %w", path, uid, errs.ErrSegment)
	}
	if size < HeaderSize {
		unix.Close(fd)
		return nil, fmt.Errorf("segment: %s is still being created: %w", path, errs.ErrSegment)
	}
	if err := s.mapHeader(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := ValidateHeader(s.hdrMap.Mem, uint64(size), uint64(unix.Getuid())); err != nil {
		s.unmapAll()
		unix.Close(fd)
		return nil, fmt.Errorf("segment: %s: %w", path, err)
	}
	s.lay = s.h.layout()
	s.p.NPEs = s.lay.NPEs
	s.p.Rank = -1
	s.p.Job = getString(s.h.job[:])
	m, err := mapAligned(fd, int(s.lay.Total), unix.ProtRead)
	if err != nil {
		s.unmapAll()
		unix.Close(fd)
		return nil, err
	}
	s.m = m
	return s, nil
}
