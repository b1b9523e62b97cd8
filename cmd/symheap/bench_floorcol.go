package main

// The floor column of every latency and bandwidth table.
//
// A floor is what the machine cannot do faster, measured in the same run,
// between the same processes, alternating with the figures it is set
// against (bench_floor.go measures; this file composes):
//
//   - latency: lines x t_line + copies x size / memcpy(size) + rmws x t_rmw,
//     where lines is the number of cache-line transfers the operation
//     needs at least (each table's floorSpec says which and why), t_line
//     is half a round trip of one line between PE 0 and PE 1, memcpy(size)
//     the bandwidth of a memcpy of that size into shared memory (same
//     buffers, as the benchmark loops reuse theirs) and t_rmw an atomic on
//     a line already in the core's cache. The table prints lines, the
//     floor and each figure as "x floor" (lower is better, 1 is the floor).
//   - bandwidth: memcpy(size); each figure as "x memcpy" (higher is
//     better, 1 is the floor). A rate (put_rate) is memcpy(8 B) / 8 B.
//
// Who measures: t_line and t_rmw always symheap's own code, inside a job
// of the same PEs (the C ping-pong, when built, is printed beside it as a
// cross-check: it pins its two processes to the first two CPUs, which on
// a 2-CPU machine are the PEs' too). memcpy(size) is glibc's memcpy (the
// C harness memcpy_bench, memcpy_shm_bw) when --peers built it, else Go's
// copy into PE 1's partition (floor_copy); the note under the table and
// section.Floor in the JSON say which.

import (
	"fmt"
	"strings"

	"github.com/symheap/symheap/bench/peers"
)

// floorSpec says what one operation of a table needs at least.
type floorSpec struct {
	kind   string                    // "latency", "bandwidth" or "rate"
	lines  func(k int64) (int, bool) // latency: line transfers for row k; false: no floor for it
	copies int                       // latency: copies of the row's size in bytes
	rmws   int                       // latency: atomic read-modify-writes on a cached line
	why    string                    // the reasoning behind lines and copies, one sentence or two
	np     int                       // PEs of the floor job
	sizes  []int64                   // copy sizes to measure (the rows')
}

// floorInfo is what the JSON and the note say about a table's floor.
type floorInfo struct {
	Kind    string `json:"kind"`
	Formula string `json:"formula"`
	Why     string `json:"why,omitempty"`
	Line    string `json:"line,omitempty"` // who measured t_line, and its value
	Copy    string `json:"copy,omitempty"` // who measured memcpy(size)
}

// Ingredient series of a floor, by harness:metric.
const (
	fLine    = ourHarness + ":floor_line"
	fRMW     = ourHarness + ":floor_rmw"
	fCopy    = ourHarness + ":floor_copy"
	fCLine   = peers.Cacheline + ":proc_lat"
	fMemcpy  = peers.Memcpy + ":memcpy_shm_bw"
	fDerived = "floor:floor"
)

// constLines is a floor of n transfers at every row.
func constLines(n int) func(int64) (int, bool) { return func(int64) (int, bool) { return n, true } }

// addFloor adds to s the floor job, the C floors when built, the
// ingredient series, the floor column and its ratio columns (one per
// series of ours).
func (r *runner) addFloor(s *section, f floorSpec) {
	s.floor = &f
	nours := 0
	for _, sr := range s.Series {
		if sr.Ours {
			nours++
		}
	}
	var sizes []int64
	for _, v := range f.sizes {
		if v > 0 {
			sizes = append(sizes, v)
		}
	}
	ing := func(sr *series) int {
		sr.Floor = true
		s.Series = append(s.Series, sr)
		return len(s.Series) - 1
	}
	iLine := ing(&series{Label: "cache line PE 0 <-> PE 1, half round trip (symheap)", Column: "line (us)", Ours: true, Harness: ourHarness, Metric: "floor_line"})
	iRMW := ing(&series{Label: "atomic on a cached line (symheap)", Column: "rmw (us)", Ours: true, Harness: ourHarness, Metric: "floor_rmw"})
	iCopy := ing(&series{Label: "Go copy into PE 1's partition (symheap)", Column: "Go copy (MB/s)", Ours: true, Harness: ourHarness, Metric: "floor_copy"})
	p := r.params
	p.Sizes = sizes
	np := max(f.np, 2)
	add := func(u *runUnit, feeds ...int) {
		u.feeds = feeds
		s.units = append(s.units, u)
	}
	add(r.ourJob("floor", "floor", np, p, maxSize(sizes)+2<<20, 1<<20), iLine, iRMW, iCopy)
	if r.peers {
		iCLine := ing(&series{Label: "C cache-line ping-pong between two processes", Column: "C line (us)", Harness: peers.Cacheline, Metric: "proc_lat", scale: 1e-3})
		add(r.peerUnit("C cache-line ping-pong", peers.Cacheline, []string{"proc_lat"}, 0, nil), iCLine)
		if len(sizes) > 0 {
			// put_bw had this series as a column; it is the floor now.
			if i := s.seriesIndex(fMemcpy); i >= 0 {
				s.Series[i].Floor = true
			} else {
				iMem := ing(&series{Label: "glibc memcpy into shared memory", Column: "memcpy (MB/s)", Harness: peers.Memcpy, Metric: "memcpy_shm_bw"})
				add(r.peerUnit("C memcpy", peers.Memcpy, []string{"memcpy_shm_bw"}, 0, sizes), iMem)
			}
		}
	}
	d := &series{Label: "floor", Column: "floor (" + s.Unit + ")", Harness: "floor", Metric: "floor", Derived: true}
	ratio := "x floor"
	if f.kind != "latency" {
		d.Label, d.Column, ratio = "memcpy", "memcpy ("+s.Unit+")", "x memcpy"
	}
	s.Series = append(s.Series, d)
	di := len(s.Series) - 1
	for i := 0; i < len(s.Series) && nours > 0; i++ {
		sr := s.Series[i]
		if !sr.Ours || sr.Floor {
			continue
		}
		col := ratio
		if nours > 1 {
			col = strings.Fields(sr.Column)[0] + " " + ratio
		}
		s.Ratios = append(s.Ratios, ratioCol{Num: i, Den: di, Column: col})
	}
}

// copyBW returns memcpy(k) in MB/s for round i (-1: the median) and who
// measured it: glibc when the C harness has a figure at k, else Go.
func (s *section) copyBW(k int64, round int) (float64, string, bool) {
	for _, id := range []string{fMemcpy, fCopy} {
		i := s.seriesIndex(id)
		if i < 0 || s.Series[i].Unavailable != "" {
			continue
		}
		p := s.find(i, k)
		if p == nil {
			continue
		}
		who := "glibc memcpy into shared memory (C harness memcpy_bench, this run)"
		if id == fCopy {
			who = "Go copy into PE 1's partition (symheap's own, this run; --peers measures glibc memcpy)"
		}
		if round < 0 {
			return p.Value, who, true
		}
		if round < len(p.Runs) {
			return p.Runs[round], who, true
		}
	}
	return 0, "", false
}

// single returns the one figure of ingredient id for round i (-1: the
// median).
func (s *section) single(id string, round int) (float64, bool) {
	i := s.seriesIndex(id)
	if i < 0 || s.Series[i].Unavailable != "" || len(s.Series[i].Points) == 0 {
		return 0, false
	}
	p := s.Series[i].Points[0]
	if round < 0 {
		return p.Value, true
	}
	if round < len(p.Runs) {
		return p.Runs[round], true
	}
	return 0, false
}

// floorAt computes the floor of row k for round i (-1: from the medians).
func (s *section) floorAt(k int64, round int) (v float64, lines int, ok bool) {
	f := s.floor
	switch f.kind {
	case "bandwidth":
		v, _, ok = s.copyBW(k, round)
		return v, 0, ok
	case "rate":
		bw, _, ok := s.copyBW(k, round)
		return bw * 1e6 / float64(k), 0, ok && k > 0
	}
	lines, ok = f.lines(k)
	if !ok {
		return 0, 0, false
	}
	if lines > 0 {
		t, ok := s.single(fLine, round)
		if !ok {
			return 0, 0, false
		}
		v += float64(lines) * t
	}
	if f.rmws > 0 {
		t, ok := s.single(fRMW, round)
		if !ok {
			return 0, 0, false
		}
		v += float64(f.rmws) * t
	}
	if f.copies > 0 && s.Key == "size" && k > 0 {
		bw, _, ok := s.copyBW(k, round)
		if !ok || bw <= 0 {
			return 0, 0, false
		}
		v += float64(f.copies) * float64(k) / bw // bytes / (10^6 B/s) = us
	}
	return v, lines, true
}

// computeFloor fills the floor column from the ingredients, per round and
// as the median of the rounds, and section.Floor.
func (s *section) computeFloor() {
	f := s.floor
	di := s.seriesIndex(fDerived)
	if f == nil || di < 0 {
		return
	}
	d := s.Series[di]
	d.Points = nil
	info := &floorInfo{Kind: f.kind, Why: f.why}
	copyWho := ""
	for _, k := range s.rows() {
		if _, _, ok := s.floorAt(k, -1); !ok {
			continue
		}
		pt := &point{Size: k, PEs: s.PEs}
		if s.Key == "pes" {
			pt.Size, pt.PEs = 0, int(k)
		}
		for round := 0; ; round++ {
			v, _, ok := s.floorAt(k, round)
			if !ok {
				break
			}
			pt.Runs = append(pt.Runs, v)
		}
		v, lines, _ := s.floorAt(k, -1)
		if len(pt.Runs) > 0 {
			v = median(pt.Runs)
		}
		pt.Value = v
		if f.kind == "latency" {
			pt.Lines = &lines
		}
		d.Points = append(d.Points, pt)
		if _, who, ok := s.copyBW(k, -1); ok && copyWho == "" {
			copyWho = who
		}
	}
	switch f.kind {
	case "latency":
		info.Formula = "lines x t_line"
		if f.copies > 0 {
			info.Formula += fmt.Sprintf(" + %d x size / memcpy(size)", f.copies)
		}
		if f.rmws > 0 {
			info.Formula += fmt.Sprintf(" + %d x t_rmw", f.rmws)
		}
		if t, ok := s.single(fLine, -1); ok {
			info.Line = fmt.Sprintf("t_line = %s us: one cache line between PE 0 and PE 1, half a round trip (symheap's own ping-pong in a job of the same PEs, this run)", fmtValue(t, "us"))
			if c, ok := s.single(fCLine, -1); ok {
				info.Line += fmt.Sprintf("; the C ping-pong: %s us", fmtValue(c, "us"))
			}
		}
		if f.rmws > 0 {
			if t, ok := s.single(fRMW, -1); ok {
				info.Line += fmt.Sprintf("; t_rmw = %s us (an atomic fetch-add on a line in this core's cache)", fmtValue(t, "us"))
			}
		}
		if f.copies > 0 {
			info.Copy = copyWho
		}
	case "bandwidth":
		info.Formula = "memcpy(size), the same buffers again and again"
		info.Copy = copyWho
	case "rate":
		info.Formula = "memcpy(8 B) / 8 B"
		info.Copy = copyWho
	}
	s.Floor = info
}
