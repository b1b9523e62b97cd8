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
	Made    time.Time // the file's modification time: when its creator sized it
	NPEs    int
	Ready   bool  // its creator finished it (a job ran in it)
	Pids    []int // the pid each PE recorded when it attached; 0: it never did
	Alive   []int // PEs whose liveness token is held
	Stale   bool  // proved abandoned: nobody holds any lock on it
	Reason  string
}

// pesGone reports whether every process that attached to the segment as a
// PE has ended (or is a zombie). A pid that names a process again is taken
// for the PE: a reused pid keeps a segment, it never removes one.
func (e Entry) pesGone() bool {
	for _, pid := range e.Pids {
		if pid == 0 {
			continue
		}
		if st, err := unix.ProcessState(pid); err == nil && st != 'Z' {
			return false
		}
	}
	return true
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
		e.Created, e.Made = fi.ModTime(), fi.ModTime()
	}
	if size >= HeaderSize {
		if m, err := unix.MapShared(fd, HeaderSize, 0, unix.ProtRead); err == nil {
			h := headerOf(m.Mem)
			if h.magic == Magic && h.version == Version && h.npes >= 1 && h.npes <= MaxPEs {
				e.NPEs = int(h.npes)
				e.Job = getString(h.job[:])
				e.Created = time.Unix(0, int64(h.created))
				e.Ready = h.state.Load() == stateReady // pairs with the creator's publishing store
				e.Pids = make([]int, e.NPEs)
				for pe := range e.Pids {
					// Relaxed: read for a verdict on a segment nobody
					// holds, whose slots no longer change.
					e.Pids[pe] = int(h.pes[pe].pid.Load())
				}
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
	return clean(uid, func(Entry) bool { return true })
}

// Sweep is the clean-up that Open's creator makes on its node when a job
// starts (step 2 of Open): it removes, of the user's segments that Clean
// would remove, those a job ran in (Ready), whose PEs' processes have all
// ended, and that were made minAge ago or more. A launcher that kills its
// job (mpirun stopping a job after a PE died or at its time limit, with
// SIGTERM and SIGKILL) leaves them behind. What it cannot prove gone that
// way (a half-made segment, another version's, one whose PE pid names a
// running process) is left to `symheap clean`.
func Sweep(uid int, minAge time.Duration) ([]Entry, error) {
	return clean(uid, func(e Entry) bool { return e.sweepable(minAge) })
}

// sweepable reports whether Sweep removes the segment of e if it is stale.
func (e Entry) sweepable(minAge time.Duration) bool {
	return e.Ready && e.NPEs > 0 && time.Since(e.Made) >= minAge && e.pesGone()
}

// SweepAge is the age below which a job's start leaves a dead job's
// segment alone (unless it needs the space): whoever looks at a job that
// has just died (symheap stat, symheap clean, a test) still finds its
// segment, and a job's own start-up never races its neighbours'.
const SweepAge = 30 * time.Second

// clean removes the stale segments of user uid that also satisfy also.
func clean(uid int, also func(Entry) bool) ([]Entry, error) {
	list, err := List(uid)
	if err != nil {
		return nil, err
	}
	var removed []Entry
	for _, e := range list {
		if !e.Stale || !also(e) {
			continue
		}
		// Prove it again under the exclusive lock, then unlink. While we
		// hold it no PE can attach (a joiner takes a shared flock first),
		// and every PE attached holds its liveness lock, the creator
		// included while it trades its exclusive flock for a shared one.
		fd, err := unix.Open(e.Path, unix.ORdonly|unix.ONofollow, 0)
		if err != nil {
			continue
		}
		if unix.Flock(fd, unix.LockExclusive, true) == nil {
			if !anyLive(fd, e.NPEs) && unix.SameFile(fd, e.Path) {
				if unix.Unlink(e.Path) == nil {
					removed = append(removed, e)
				}
			}
		}
		unix.Close(fd)
	}
	return removed, nil
}

// anyLive reports whether some PE's liveness lock on the file is held (or
// cannot be checked), for a segment of npes PEs (0: unknown, check all).
func anyLive(fd, npes int) bool {
	if npes < 1 || npes > MaxPEs {
		npes = MaxPEs
	}
	for pe := 0; pe < npes; pe++ {
		if held, err := unix.OFDLocked(fd, LiveLockBase+int64(pe)); err != nil || held {
			return true
		}
	}
	return false
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
