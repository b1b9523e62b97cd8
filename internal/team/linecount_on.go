//go:build linecount

package team

import (
	"encoding/binary"
	"sync"
)

// The line-count model (build tag linecount): the full barrier counts,
// per team and per PE, the cache lines it writes that another PE reads
// and the lines of other PEs it reads, and measures its critical path in
// line transfers as a logical clock: a PE's depth starts at 0 in each
// barrier; a line it publishes carries its depth (in the line's unused
// data bytes, stored before the release store of seq that the reader
// acquires, so it works across processes); a read of another PE's line
// makes its depth max(its depth, the line's + 1). A barrier's depth on
// the PE that leaves last is its critical path. The counts do not depend
// on timing: each line read is the one line the protocol waits for,
// however often the wait polls it.

// LineCounts is what the model counted on one team of one PE.
type LineCounts struct {
	Barriers int // full barriers counted
	Writes   int // lines written that another PE reads
	Reads    int // lines of other PEs read
	Depth    int // the last barrier's critical path at this PE, in line transfers
	MaxDepth int // the largest Depth seen
}

type lineCounter struct {
	c     LineCounts
	depth uint32
}

func (l *lineCounter) begin() { l.depth = 0 }

func (l *lineCounter) wrote(pl *postLine) {
	l.c.Writes++
	// Plain store before the publication's release store; the reader
	// loads it after acquiring seq. The line's reader read its previous
	// depth two barriers ago (see dissemBarrier, step 3).
	binary.LittleEndian.PutUint32(pl.data[:4], l.depth)
}

func (l *lineCounter) read(pl *postLine) {
	l.c.Reads++
	if d := binary.LittleEndian.Uint32(pl.data[:4]) + 1; d > l.depth {
		l.depth = d
	}
}

func (l *lineCounter) end() {
	l.c.Barriers++
	l.c.Depth = int(l.depth)
	l.c.MaxDepth = max(l.c.MaxDepth, l.c.Depth)
}

// LineCounts returns the model's counts of this PE's full barriers on the
// team (linecount builds only). Call it between calls on the team.
func (t *Team) LineCounts() LineCounts { return t.bar.lc.c }

// The collectives' part of the model: the post lines of small reductions
// and the bytes a PE moves in the collectives that copy data.
//
// A post line's data is the payload, so its depth travels beside it, in
// a table of this process (lineDepths): the in-process simulation
// (TestLineCountCollectives) sees the depth its publisher stored; between
// processes a line's depth reads as 0, and only the counts are checked.
// The reads of one call are taken one after another: a read makes the
// reader's depth max(its depth, the line's) + 1, so a PE that reads k
// lines has a path of at least k, however early they were published.

// CollCounts is what the model counted of one PE's collectives on a team.
type CollCounts struct {
	Calls    int    // small reductions through post lines
	Writes   int    // post lines published that another PE reads
	Reads    int    // post lines of other PEs read
	Depth    int    // the last call's critical path at this PE, in line transfers
	MaxDepth int    // the largest Depth seen
	Bytes    uint64 // bytes this PE copied or folded in collectives (data, not post lines)
}

type collCounter struct {
	c     CollCounts
	depth uint32
}

// lineDepths holds, per post line of this process's simulation, the depth
// its last publisher stored before publishing.
var lineDepths sync.Map // a line (*postLine, *agreeLine) -> uint32

func (l *collCounter) begin() { l.depth = 0 }

func (l *collCounter) wrote(pl any) {
	l.c.Writes++
	lineDepths.Store(pl, l.depth)
}

func (l *collCounter) read(pl any) {
	l.c.Reads++
	var d uint32
	if v, ok := lineDepths.Load(pl); ok {
		d = v.(uint32)
	}
	l.depth = max(l.depth, d) + 1
}

func (l *collCounter) end() {
	l.c.Calls++
	l.c.Depth = int(l.depth)
	l.c.MaxDepth = max(l.c.MaxDepth, l.c.Depth)
}

func (l *collCounter) copied(n uint64) { l.c.Bytes += n }

// CollCounts returns the model's counts of this PE's collectives on the
// team (linecount builds only). Call it between calls on the team.
func (t *Team) CollCounts() CollCounts { return t.clc.c }

// AgreeCounts returns the model's counts of this PE's agreements (the
// collective allocation's exchange, agree.go; linecount builds only):
// Calls counts the phases. Call it between allocation calls.
func (l *Layer) AgreeCounts() CollCounts { return l.agree.lc.c }
