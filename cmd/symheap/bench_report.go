package main

// Output of `symheap bench`: OSU-style tables, the targets table, JSON.

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/symheap/symheap/alloc"
)

// benchReport is everything one run measured (--json prints it).
type benchReport struct {
	Command  string         `json:"command"`
	Machine  machineInfo    `json:"machine"`
	Settings benchSettings  `json:"settings"`
	Peers    []peerStatus   `json:"peers,omitempty"`
	Sections []*section     `json:"sections"`
	Targets  []targetResult `json:"targets"`
	Charts   []string       `json:"charts,omitempty"`
}

type benchSettings struct {
	PEs    int         `json:"pes"`
	Rounds int         `json:"rounds"`
	Quick  bool        `json:"quick"`
	Params benchParams `json:"params"`
	// Load is the load report's settings (--load); nil otherwise.
	Load *loadSettings `json:"load,omitempty"`
}

type peerStatus struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"`
}

func writeJSON(w io.Writer, rep *benchReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func printHeader(w io.Writer, rep *benchReport) {
	m := rep.Machine
	fmt.Fprintf(w, "# symheap bench: %d PEs; %d round(s), median reported; each round the best of %d repetition(s) of about %v per point\n",
		rep.Settings.PEs, rep.Settings.Rounds, rep.Settings.Params.Reps, rep.Settings.Params.Budget)
	fmt.Fprintf(w, "# machine: %d CPUs, %s; %s; %s; load average %s\n", m.CPUs, m.CPUModel, m.Kernel, m.Go, m.LoadAvg)
	if m.OpenMPI != "" {
		fmt.Fprintf(w, "# peers: %s\n", m.OpenMPI)
	}
	for _, p := range rep.Peers {
		if !p.Available {
			fmt.Fprintf(w, "# peer %s unavailable: %s\n", p.Name, p.Reason)
		}
	}
}

// table prints rows with the first column left-aligned and the others
// right-aligned; the header line starts with "# ".
func table(w io.Writer, header []string, rows [][]string) {
	widths := make([]int, len(header))
	for i, h := range header {
		widths[i] = len(h)
	}
	widths[0] += 2 // "# "
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	line := func(cells []string, first string) {
		var b strings.Builder
		fmt.Fprintf(&b, "%-*s", widths[0], first)
		for i := 1; i < len(cells); i++ {
			fmt.Fprintf(&b, "  %*s", widths[i], cells[i])
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	line(header, "# "+header[0])
	for _, r := range rows {
		line(r, r[0])
	}
}

// fmtValue formats a figure in unit with three or more significant digits.
func fmtValue(v float64, unit string) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "-"
	case unit == "msg/s" || v >= 10000:
		return fmt.Sprintf("%.0f", v)
	case v >= 100:
		return fmt.Sprintf("%.1f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

// fmtRatio prints a ratio to two decimals, or a small one to two
// significant digits: never rounded to zero.
func fmtRatio(v float64) string {
	if v > 0 && v < 0.1 {
		return strconv.FormatFloat(v, 'g', 2, 64)
	}
	return fmt.Sprintf("%.2f", v)
}

// shownRatios returns the ratio columns of s that have a figure in some
// row: a column whose other side was not measured (no --peers) is left
// out, and the table says nothing of ratios.
func shownRatios(s *section) []ratioCol {
	var shown []ratioCol
	for _, rc := range s.Ratios {
		for _, k := range s.rows() {
			if _, ok := s.ratioAt(rc.Num, rc.Den, k); ok {
				shown = append(shown, rc)
				break
			}
		}
	}
	return shown
}

func keyHeader(s *section) string {
	switch s.Key {
	case "pes":
		return "PEs"
	case "class":
		return "Allocator"
	}
	return "Size"
}

// ratioAt returns Series[num]/Series[den] in row k.
func (s *section) ratioAt(num, den int, k int64) (float64, bool) {
	a, b := s.find(num, k), s.find(den, k)
	if a == nil || b == nil || b.Value == 0 {
		return 0, false
	}
	return a.Value / b.Value, true
}

// ratioCells returns row k's cells of the ratio columns cols: each
// ratio, or "-" where a side has no figure.
func (s *section) ratioCells(cols []ratioCol, k int64) []string {
	cells := make([]string, 0, len(cols))
	for _, rc := range cols {
		if v, ok := s.ratioAt(rc.Num, rc.Den, k); ok {
			cells = append(cells, fmtRatio(v))
		} else {
			cells = append(cells, "-")
		}
	}
	return cells
}

func printSection(w io.Writer, s *section) {
	fmt.Fprintf(w, "\n# %s: %s", s.Title, s.What)
	if s.PEs > 0 {
		fmt.Fprintf(w, "; %d PEs", s.PEs)
	}
	fmt.Fprintln(w)
	ratios := shownRatios(s)
	if len(ratios) > 0 {
		fmt.Fprintf(w, "# ratio = ours/theirs: %s is better\n", s.Better)
	}
	if s.transpose {
		printTransposed(w, s)
	} else {
		header := []string{keyHeader(s)}
		var cols []int
		for i, sr := range s.Series {
			if sr.Floor {
				continue
			}
			if sr.Derived && s.Floor != nil && s.Floor.Kind == "latency" {
				header = append(header, "lines")
				cols = append(cols, -1-i) // the lines of series i's points
			}
			header = append(header, sr.Column)
			cols = append(cols, i)
		}
		for _, rc := range ratios {
			header = append(header, rc.Column)
		}
		var rows [][]string
		for _, k := range s.rows() {
			row := []string{itoa(k)}
			for _, i := range cols {
				if i < 0 {
					if p := s.find(-1-i, k); p != nil && p.Lines != nil {
						row = append(row, strconv.Itoa(*p.Lines))
					} else {
						row = append(row, "-")
					}
					continue
				}
				if p := s.find(i, k); p != nil {
					row = append(row, fmtValue(p.Value, s.Unit))
				} else {
					row = append(row, "-")
				}
			}
			row = append(row, s.ratioCells(ratios, k)...)
			rows = append(rows, row)
		}
		table(w, header, rows)
	}
	if f := s.Floor; f != nil {
		name := "floor"
		if f.Kind != "latency" {
			name = "memcpy"
		}
		fmt.Fprintf(w, "# %s = %s", name, f.Formula)
		if f.Why != "" {
			fmt.Fprintf(w, "; lines: %s", f.Why)
		}
		fmt.Fprintln(w)
		if f.Line != "" {
			fmt.Fprintf(w, "# %s\n", f.Line)
		}
		if f.Copy != "" {
			fmt.Fprintf(w, "# memcpy(size): %s\n", f.Copy)
		}
	}
	for _, sr := range s.Series {
		if sr.Unavailable != "" {
			fmt.Fprintf(w, "# %s: unavailable: %s\n", sr.Label, oneLine(sr.Unavailable))
		}
	}
	for _, n := range s.Notes {
		fmt.Fprintf(w, "# %s\n", n)
	}
	for _, e := range s.Errors {
		fmt.Fprintf(w, "# ERROR %s\n", e)
	}
}

// printTransposed prints a row per series and, per class, the figure and
// its ratio to the reference (the ratios' common denominator).
func printTransposed(w io.Writer, s *section) {
	keys := s.rows()
	header := []string{keyHeader(s)}
	ref := -1
	if len(s.Ratios) > 0 {
		ref = s.Ratios[0].Den
	}
	for _, k := range keys {
		header = append(header, fmt.Sprintf("%s (%s)", className(k), s.Unit))
		if ref >= 0 {
			header = append(header, "x "+s.Series[ref].Harness)
		}
	}
	var rows [][]string
	for i, sr := range s.Series {
		row := []string{sr.Label}
		for _, k := range keys {
			if p := s.find(i, k); p != nil {
				row = append(row, fmtValue(p.Value, s.Unit))
			} else {
				row = append(row, "-")
			}
			if ref >= 0 {
				if v, ok := s.ratioAt(i, ref, k); ok && i != ref {
					row = append(row, fmtRatio(v))
				} else {
					row = append(row, "")
				}
			}
		}
		rows = append(rows, row)
	}
	table(w, header, rows)
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// ---- targets ----

// targetSpec is a goal of another issue, read off the figures: the ratio
// of series Num to series Den (by harness:metric) in section Section,
// over the rows that rows accepts (the worst of them counts).
type targetSpec struct {
	Name    string
	Section string
	Num     string // "harness:metric"
	Den     string
	Rows    func(k int64) bool
	Op      string // "<=" or ">="
	Limit   float64
}

type targetResult struct {
	Name   string  `json:"name"`
	Want   string  `json:"want"`
	Ratio  float64 `json:"ratio,omitempty"`
	At     string  `json:"at,omitempty"`
	Ours   float64 `json:"ours,omitempty"`
	Theirs float64 `json:"theirs,omitempty"`
	Unit   string  `json:"unit,omitempty"`
	// Status is "pass", "FAIL", or "n/a" (not measured: Reason says why).
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

func is(v int64) func(int64) bool { return func(k int64) bool { return k == v } }

func targetSpecs() []targetSpec {
	def := "tlsf"
	if names := alloc.Names(); len(names) > 0 {
		def = names[0]
	}
	atLeast := func(v int64) func(int64) bool { return func(k int64) bool { return k >= v } }
	upTo256 := func(k int64) bool { return k >= 1 && k <= 256 }
	return []targetSpec{
		{"Put 8 B latency vs OpenSHMEM", "put_lat", "symheap:put_lat", "osh:put_lat", is(8), "<=", 0.25},
		{"Get 8 B latency vs OpenSHMEM", "get_lat", "symheap:get_lat", "osh:get_lat", is(8), "<=", 0.25},
		{"fetch-add latency vs OpenSHMEM", "fadd", "symheap:fadd_lat", "osh:fadd_lat", is(8), "<=", 1},
		{"barrier, 2 PEs vs OpenSHMEM", "barrier", "symheap:barrier_lat", "osh:barrier_lat", is(2), "<=", 0.5},
		// With more PEs than the machine's 2 cores the barrier is the
		// scheduler's: at or below OpenSHMEM's (0.5x holds for a pair).
		{"barrier, 4 PEs vs OpenSHMEM", "barrier", "symheap:barrier_lat", "osh:barrier_lat", is(4), "<=", 1},
		{"barrier, 8 PEs vs OpenSHMEM", "barrier", "symheap:barrier_lat", "osh:barrier_lat", is(8), "<=", 1},
		{"broadcast 1 int64 vs OpenSHMEM", "bcast", "symheap:bcast_lat", "osh:bcast_lat", is(8), "<=", 0.8},
		{"reduce 1 int64 vs OpenSHMEM", "reduce", "symheap:reduce_lat", "osh:reduce_lat", is(8), "<=", 0.8},
		{"collective malloc+free 64 B vs OpenSHMEM", "malloc", "symheap:malloc_lat", "osh:malloc_lat", is(64), "<=", 0.5},
		{"collective malloc+free 1 MiB vs OpenSHMEM", "malloc", "symheap:malloc_lat", "osh:malloc_lat", is(1 << 20), "<=", 0.5},
		{"Put bandwidth 4 MiB vs C memcpy", "put_bw", "symheap:put_bw", "memcpy:memcpy_shm_bw", is(4 << 20), ">=", 0.9},
		{"C: put 8 B latency vs OpenSHMEM", "put_lat", "oshc:put_lat", "osh:put_lat", is(8), "<=", 0.25},
		{"C: get 8 B latency vs OpenSHMEM", "get_lat", "oshc:get_lat", "osh:get_lat", is(8), "<=", 0.25},
		{"C: fetch-add latency vs OpenSHMEM", "fadd", "oshc:fadd_lat", "osh:fadd_lat", is(8), "<=", 0.5},
		{"C: barrier, 2 PEs vs OpenSHMEM", "barrier", "oshc:barrier_lat", "osh:barrier_lat", is(2), "<=", 0.5},
		{"C: malloc+free 64 B vs OpenSHMEM", "malloc", "oshc:malloc_lat", "osh:malloc_lat", is(64), "<=", 0.5},
		{"C: malloc+free 1 MiB vs OpenSHMEM", "malloc", "oshc:malloc_lat", "osh:malloc_lat", is(1 << 20), "<=", 0.5},
		{"C: put bandwidth 4 MiB vs C memcpy", "put_bw", "oshc:put_bw", "memcpy:memcpy_shm_bw", is(4 << 20), ">=", 0.9},
		{"send/recv 8 B half round trip vs Open MPI", "msg_lat", "symheap:msg_lat_heap", "mpi:pingpong_lat", is(8), "<=", 0.5},
		{"send/recv bandwidth >= 1 MiB, shared-heap buffers, vs Open MPI", "msg_bw", "symheap:msg_bw_shm", "mpi:stream_bw", atLeast(1 << 20), ">=", 1.5},
		{"send/recv bandwidth >= 1 MiB, ordinary buffers, vs Open MPI", "msg_bw", "symheap:msg_bw_heap", "mpi:stream_bw", atLeast(1 << 20), ">=", 1},
		{"send/recv message rate 1-256 B, shared-heap buffers, vs Open MPI", "msg_rate", "symheap:msg_rate_shm", "mpi:stream_rate", upTo256, ">=", 1},
		{"send/recv message rate 1-256 B, ordinary buffers, vs Open MPI", "msg_rate", "symheap:msg_rate_heap", "mpi:stream_rate", upTo256, ">=", 1},
		// Every latency at or below the peer's, at every size.
		{"Put latency, every size, vs OpenSHMEM", "put_lat", "symheap:put_lat", "osh:put_lat", all, "<=", 1},
		{"Get latency, every size, vs OpenSHMEM", "get_lat", "symheap:get_lat", "osh:get_lat", all, "<=", 1},
		{"broadcast latency, every size, vs OpenSHMEM", "bcast", "symheap:bcast_lat", "osh:bcast_lat", all, "<=", 1},
		{"reduce latency, every size, vs OpenSHMEM", "reduce", "symheap:reduce_lat", "osh:reduce_lat", all, "<=", 1},
		{"send/recv latency, every size, shared-heap buffers, vs Open MPI", "msg_lat", "symheap:msg_lat_shm", "mpi:pingpong_lat", all, "<=", 1},
		{"send/recv latency, every size, ordinary buffers, vs Open MPI", "msg_lat", "symheap:msg_lat_heap", "mpi:pingpong_lat", all, "<=", 1},
		{def + " (default allocator) small alloc+free pair vs glibc malloc", "alloc", "symheap:pair_" + def, "glibc:pair", is(16), "<=", 1.5},
		{"SharedAlloc small alloc+free pair vs mimalloc", "alloc", ourHarness + ":shared_alloc", "mimalloc:pair", is(16), "<=", 1.2},

		// Floors (bench_floorcol.go): every latency within 1.5x its floor,
		// 8 B send/recv within 1.3x, and every copy of 1 MiB or more at
		// 0.95x memcpy or better. A Put or Get latency's floor from 1 MiB
		// up is its copy alone, so 0.95x memcpy there is 1/0.95 = 1.053x
		// the floor.
		{"Put latency, every size, vs floor", "put_lat", "symheap:put_lat", fDerived, all, "<=", 1.5},
		{"Get latency, every size, vs floor", "get_lat", "symheap:get_lat", fDerived, all, "<=", 1.5},
		{"fetch-add latency vs floor", "fadd", "symheap:fadd_lat", fDerived, all, "<=", 1.5},
		{"barrier, 2 PEs, vs floor", "barrier", "symheap:barrier_lat", fDerived, is(2), "<=", 1.5},
		{"broadcast latency, every size, vs floor", "bcast", "symheap:bcast_lat", fDerived, all, "<=", 1.5},
		{"reduce latency, every size, vs floor", "reduce", "symheap:reduce_lat", fDerived, all, "<=", 1.5},
		{"collective malloc+free, every size, vs floor", "malloc", "symheap:malloc_lat", fDerived, all, "<=", 1.5},
		{"send/recv latency, every size, shared-heap buffers, vs floor", "msg_lat", "symheap:msg_lat_shm", fDerived, all, "<=", 1.5},
		{"send/recv latency, every size, ordinary buffers, vs floor", "msg_lat", "symheap:msg_lat_heap", fDerived, all, "<=", 1.5},
		{"send/recv 8 B, shared-heap buffers, vs floor", "msg_lat", "symheap:msg_lat_shm", fDerived, is(8), "<=", 1.3},
		{"send/recv 8 B, ordinary buffers, vs floor", "msg_lat", "symheap:msg_lat_heap", fDerived, is(8), "<=", 1.3},
		{"Put >= 1 MiB (copy >= 0.95x memcpy), vs floor", "put_lat", "symheap:put_lat", fDerived, atLeast(1 << 20), "<=", 1 / 0.95},
		{"Get >= 1 MiB (copy >= 0.95x memcpy), vs floor", "get_lat", "symheap:get_lat", fDerived, atLeast(1 << 20), "<=", 1 / 0.95},
		{"Put bandwidth >= 1 MiB vs memcpy", "put_bw", "symheap:put_bw", fDerived, atLeast(1 << 20), ">=", 0.95},
		{"send/recv bandwidth >= 1 MiB, shared-heap buffers, vs memcpy", "msg_bw", "symheap:msg_bw_shm", fDerived, atLeast(1 << 20), ">=", 0.95},
		{"send/recv bandwidth >= 1 MiB, ordinary buffers, vs memcpy", "msg_bw", "symheap:msg_bw_heap", fDerived, atLeast(1 << 20), ">=", 0.95},
		{"symheap copy >= 1 MiB, warm, vs glibc memcpy", "copy", "symheap:copy_bw", "memcpy:memcpy_bw", atLeast(1 << 20), ">=", 0.95},
		{"symheap copy >= 1 MiB, odd destination, vs glibc memcpy", "copy", "symheap:copy_odd_bw", "memcpy:memcpy_odd_bw", atLeast(1 << 20), ">=", 0.95},
		{"symheap copy >= 1 MiB, cold, vs glibc memcpy", "copy", "symheap:copy_cold_bw", "memcpy:memcpy_cold_bw", atLeast(1 << 20), ">=", 0.95},
	}
}

// all accepts every row.
func all(int64) bool { return true }

// seriesIndex finds the series "harness:metric" in s.
func (s *section) seriesIndex(id string) int {
	for i, sr := range s.Series {
		if sr.Harness+":"+sr.Metric == id {
			return i
		}
	}
	return -1
}

func evalTargets(sections []*section) []targetResult {
	var out []targetResult
	for _, t := range targetSpecs() {
		res := targetResult{Name: t.Name, Want: fmt.Sprintf("%s %.4g", t.Op, t.Limit), Status: "n/a"}
		var s *section
		for _, x := range sections {
			if x.ID == t.Section {
				s = x
			}
		}
		num, den := -1, -1
		if s != nil {
			num, den = s.seriesIndex(t.Num), s.seriesIndex(t.Den)
		}
		switch {
		case s == nil:
			res.Reason = "test " + t.Section + " not run"
		case num < 0:
			res.Reason = "no figure of ours"
		case den < 0 && t.Den == fDerived:
			res.Reason = "no floor measured"
		case den < 0:
			res.Reason = "peer not run (use --peers)"
		case s.Series[den].Unavailable != "":
			res.Reason = "peer unavailable: " + oneLine(s.Series[den].Unavailable)
		case s.Series[num].Unavailable != "":
			res.Reason = "unavailable: " + oneLine(s.Series[num].Unavailable)
		}
		if res.Reason != "" {
			out = append(out, res)
			continue
		}
		found := false
		for _, k := range s.rows() {
			if !t.Rows(k) {
				continue
			}
			v, ok := s.ratioAt(num, den, k)
			if !ok {
				continue
			}
			worse := !found || (t.Op == "<=" && v > res.Ratio) || (t.Op == ">=" && v < res.Ratio)
			if worse {
				found = true
				res.Ratio = v
				res.Ours, res.Theirs, res.Unit = s.find(num, k).Value, s.find(den, k).Value, s.Unit
				res.At = rowName(s, k)
			}
		}
		if !found {
			res.Reason = "size not measured"
			out = append(out, res)
			continue
		}
		pass := (t.Op == "<=" && res.Ratio <= t.Limit) || (t.Op == ">=" && res.Ratio >= t.Limit)
		res.Status = "FAIL"
		if pass {
			res.Status = "pass"
		}
		out = append(out, res)
	}
	return out
}

func rowName(s *section, k int64) string {
	switch s.Key {
	case "pes":
		return fmt.Sprintf("%d PEs", k)
	case "class":
		return className(k)
	}
	return sizeName(k)
}

// sizeName writes a byte count as 8 B, 4 KiB, 1 MiB.
func sizeName(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// printTargetSummary is the line printed instead of the targets table
// (which --targets or --peers prints).
func printTargetSummary(w io.Writer, rep *benchReport) {
	pass, fail := targetCounts(rep)
	fmt.Fprintf(w, "\n# targets: %d met, %d missed, %d need a peer to measure (symheap bench --peers runs them; --targets shows the table)\n",
		pass, fail, len(rep.Targets)-pass-fail)
}

func printTargets(w io.Writer, rep *benchReport) {
	fmt.Fprintf(w, "\n# Targets: ratio = ours/theirs (median of %d round(s)); for bandwidth over several sizes, the worst\n", rep.Settings.Rounds)
	var rows [][]string
	for _, t := range rep.Targets {
		ratio, at, figs := "-", "", ""
		if t.Status != "n/a" {
			ratio, at = fmtRatio(t.Ratio), t.At
			figs = fmt.Sprintf("%s vs %s %s", fmtValue(t.Ours, t.Unit), fmtValue(t.Theirs, t.Unit), t.Unit)
		} else {
			figs = t.Reason
		}
		rows = append(rows, []string{t.Name, t.Want, ratio, at, t.Status, figs})
	}
	widths := []int{len("# Target"), len("Want"), len("Ratio"), len("At"), len("Result")}
	for _, r := range rows {
		for i := range widths {
			widths[i] = max(widths[i], len(r[i]))
		}
	}
	fmt.Fprintf(w, "%-*s  %-*s  %*s  %-*s  %-*s  %s\n", widths[0], "# Target", widths[1], "Want", widths[2], "Ratio", widths[3], "At", widths[4], "Result", "Figures")
	for _, r := range rows {
		fmt.Fprintf(w, "%-*s  %-*s  %*s  %-*s  %-*s  %s\n", widths[0], r[0], widths[1], r[1], widths[2], r[2], widths[3], r[3], widths[4], r[4], r[5])
	}
	pass, fail := targetCounts(rep)
	fmt.Fprintf(w, "# %d pass, %d fail, %d not measured\n", pass, fail, len(rep.Targets)-pass-fail)
}

// targetCounts counts the targets met and missed (the rest were not
// measured).
func targetCounts(rep *benchReport) (pass, fail int) {
	for _, t := range rep.Targets {
		switch t.Status {
		case "pass":
			pass++
		case "FAIL":
			fail++
		}
	}
	return pass, fail
}
