// Package release is the job's release log: how a block released by one
// PE reaches the memory monitor of every PE of the node, before that PE's
// next registration-cache lookup.
//
// The memory monitor (memhook) is one per process and hears of what its
// own process does. But a PE's registrations may cover memory that
// another PE releases: a block of the local shared heap that any PE may
// free, another PE's copy of a symmetric block, a bounce buffer. So every
// release goes into a log in shared memory that every PE reads.
//
// # Layout
//
// Each PE's control block holds an Area: a ring of Slots records that only
// that PE writes, and the index of its next record (head). PE 0's area
// also holds two job-wide words, on lines of their own:
//
//	gen        bumped after every record any PE appends: a reader that
//	           sees it unchanged has nothing to read (one load)
//	listeners  the PEs whose monitor has subscribers; while it is zero
//	           nobody appends anything (alloc.ReleaseSink.Listening)
//
// A record is a seqlock of four words: stamp (its sequence number + 1
// once written, 0 while being written), the segment offset, the length,
// and the kind.
//
// # Paths
//
//	release    1. (alloc.Reporting, under the region's lock if any) the
//	              sink is told of [off, off+n) of its region
//	           2. the range is delivered to this PE's own monitor at once
//	           3. if anyone listens: under this process's append lock,
//	              stamp 0, the fields, stamp seq+1, head seq+1; then gen+1
//	Sync       1. (memhook.Monitor.Sync, before every cache lookup)
//	              gen unchanged since the last drain: return
//	           2. under the drain lock, for every other PE, the records
//	              from this PE's cursor to that PE's head: each is read
//	              between two loads of its stamp, which must both be its
//	              sequence number + 1, and published to the monitor at
//	              this PE's address of the range
//	           3. a record overwritten before it was read (the reader fell
//	              more than Slots records behind) is replaced by one event
//	              covering the whole segment: the cache drops everything
//	              in it, which is always safe
//
// The writer never waits for a reader: a PE that never calls symheap
// again holds up nobody, and only loses precision when it comes back.
//
// # Ordering
//
// All accesses are sync/atomic (sequentially consistent). A reader that
// loads gen = g sees every head store made before the gen increments
// that g counts, and every record below those heads complete. Listening
// is a load of listeners; a PE increments it before its first
// registration, so a release that starts after that is logged.
package release

import (
	"sync"
	"sync/atomic"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/memhook"
)

// Slots is the number of records in each PE's ring.
const Slots = 512

// Area is one PE's part of the log, in its control block.
type Area struct {
	gen       atomic.Uint64 // PE 0's only: bumped after every append by any PE
	_         [56]byte
	listeners atomic.Uint32 // PE 0's only: PEs whose monitor has subscribers
	_         [60]byte
	head      atomic.Uint64 // records this PE has appended, ever
	_         [56]byte
	recs      [Slots]record
}

type record struct {
	stamp atomic.Uint64 // sequence number + 1 once written; 0 while being written
	off   atomic.Uint64 // segment offset
	n     atomic.Uint64 // bytes
	kind  atomic.Uint64 // memhook.Kind
}

// AreaSize is the bytes of every PE's control block the log takes.
func AreaSize() uint64 { return areaSize }

// Log is this PE's handle on the job's release log. It is safe for
// concurrent use.
type Log struct {
	areas []*Area // every PE's, by rank
	job   *Area   // PE 0's
	rank  int
	base  uintptr // the segment's address in this process
	size  uint64  // the segment's length
	mon   *memhook.Monitor

	wmu sync.Mutex // serialises this process's appends to its ring

	rmu       sync.Mutex    // serialises drains; guards cursors
	seen      atomic.Uint64 // gen at the end of the last drain
	cursors   []uint64      // per PE: the next record to read
	listening atomic.Bool   // this PE counts itself in listeners
}

// New returns the handle of PE rank on the log whose areas are given
// (every PE's, by rank), delivering to mon (nil: this PE's monitor is
// off; its releases are still logged for the others). base and size locate the
// segment in this process: records hold segment offsets, and each PE
// delivers them at its own address.
func New(areas [][]byte, rank int, base uintptr, size uint64, mon *memhook.Monitor) *Log {
	l := &Log{rank: rank, base: base, size: size, mon: mon, cursors: make([]uint64, len(areas))}
	for _, a := range areas {
		l.areas = append(l.areas, areaOf(a))
	}
	l.job = l.areas[0]
	if mon != nil {
		mon.AddSource(l)
	}
	return l
}

// Close stops counting this PE among the listeners.
func (l *Log) Close() {
	if l.listening.CompareAndSwap(true, false) {
		l.job.listeners.Add(^uint32(0)) // seq-cst; pairs with the writers' Listening loads
	}
}

// Sink returns the sink for the region that starts at segment offset
// regionOff (a PE's symmetric or shared heap).
func (l *Log) Sink(regionOff uint64) alloc.ReleaseSink { return &sink{l, regionOff} }

type sink struct {
	l   *Log
	off uint64
}

// Listening reports whether some PE's monitor has subscribers. Seq-cst
// load; pairs with the listeners' increments in Listen.
func (s *sink) Listening() bool { return s.l.job.listeners.Load() != 0 }

// Released is steps 2 and 3 of a release.
func (s *sink) Released(k alloc.Release, off alloc.Off, n uint64) {
	kind := memhook.Free
	if k == alloc.ReleaseChunk {
		kind = memhook.Chunk
	}
	so := s.off + uint64(off)
	l := s.l
	if l.mon != nil {
		l.mon.Publish(kind, memhook.Range{Start: l.base + uintptr(so), End: l.base + uintptr(so+n)})
	}
	l.append(kind, so, n)
}

// append writes a record into this PE's ring (step 3).
func (l *Log) append(kind memhook.Kind, off, n uint64) {
	a := l.areas[l.rank]
	l.wmu.Lock()
	seq := a.head.Load() // only this process writes it, under wmu
	r := &a.recs[seq%Slots]
	// Seq-cst stores: a reader that loads a stamp of seq+1 before and
	// after the fields read them complete (Drain).
	r.stamp.Store(0)
	r.off.Store(off)
	r.n.Store(n)
	r.kind.Store(uint64(kind))
	r.stamp.Store(seq + 1)
	a.head.Store(seq + 1)
	l.wmu.Unlock()
	l.job.gen.Add(1) // after the head: a reader that sees the new gen sees the head
}

// Listen counts this PE among the listeners while its monitor has
// subscribers (memhook.Source).
func (l *Log) Listen(on bool) {
	if on && l.listening.CompareAndSwap(false, true) {
		l.job.listeners.Add(1)
	} else if !on && l.listening.CompareAndSwap(true, false) {
		l.job.listeners.Add(^uint32(0))
	}
}

// Drain delivers the other PEs' records appended since the last drain
// (memhook.Source; Sync's steps 1 to 3).
func (l *Log) Drain(m *memhook.Monitor) {
	if l.job.gen.Load() == l.seen.Load() {
		return
	}
	l.rmu.Lock()
	defer l.rmu.Unlock()
	g := l.job.gen.Load()
	if g == l.seen.Load() {
		return // drained by a concurrent call while we waited
	}
	whole := false
	for p, a := range l.areas {
		if p == l.rank {
			continue // this PE's own releases were delivered as they happened
		}
		head := a.head.Load()
		seq := l.cursors[p]
		if head-seq > Slots {
			whole = true
			seq = head - Slots
		}
		for ; seq < head; seq++ {
			r := &a.recs[seq%Slots]
			if r.stamp.Load() != seq+1 {
				whole = true // overwritten by a later lap
				continue
			}
			off, n, kind := r.off.Load(), r.n.Load(), memhook.Kind(r.kind.Load())
			if r.stamp.Load() != seq+1 || off > l.size || n > l.size-off {
				whole = true
				continue
			}
			m.Publish(kind, memhook.Range{Start: l.base + uintptr(off), End: l.base + uintptr(off+n)})
		}
		l.cursors[p] = head
	}
	if whole {
		m.Publish(memhook.Free, memhook.Range{Start: l.base, End: l.base + uintptr(l.size)})
	}
	l.seen.Store(g)
}
