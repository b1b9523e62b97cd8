package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/symheap/symheap/bench/peers"
)

// benchCmd runs the symheap binary TestMain built with args and returns
// its standard output; stderr (the progress lines) is shown on failure.
// It also checks that the run left no segment of its jobs in /dev/shm:
// their job ids start with "j<bench's pid>-".
func benchCmd(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "symheap"), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		t.Fatalf("symheap %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "symheap bench [") {
		t.Errorf("no progress line on stderr:\n%s", stderr.String())
	}
	ents, _ := os.ReadDir("/dev/shm")
	mark := fmt.Sprintf("-j%d-", cmd.Process.Pid)
	for _, e := range ents {
		if strings.Contains(e.Name(), mark) {
			t.Errorf("bench left /dev/shm/%s behind", e.Name())
		}
	}
	return stdout.String()
}

// sectionTitles are the tables `symheap bench` prints, one per test.
var sectionTitles = []string{
	"# Put latency:", "# Get latency:", "# Put bandwidth:", "# Put message rate:",
	"# Atomic fetch-add latency:", "# Barrier latency:", "# Broadcast latency:",
	"# Reduce latency:", "# Collective malloc+free latency:", "# Alloc+free pairs:",
	"# Send/Recv latency:", "# Send/Recv bandwidth:", "# Copy bandwidth:",
}

// floorTitles are the tables with a floor column: a latency floor with
// its line transfers, or a memcpy.
var floorTitles = map[string]string{
	"# Put latency:": "x floor", "# Get latency:": "x floor", "# Put bandwidth:": "x memcpy",
	"# Put message rate:": "x memcpy", "# Atomic fetch-add latency:": "x floor",
	"# Barrier latency:": "x floor", "# Broadcast latency:": "x floor", "# Reduce latency:": "x floor",
	"# Collective malloc+free latency:": "x floor", "# Send/Recv latency:": "x floor",
	"# Send/Recv bandwidth:": "x memcpy",
}

func TestBenchQuick(t *testing.T) {
	out := benchCmd(t, "bench", "--quick")
	for _, want := range append(sectionTitles, "# Size  Latency (us)", "# Size", "MB/s", "Messages/s", "# PEs", "tlsf (default)", "SharedAlloc") {
		if !strings.Contains(out, want) {
			t.Errorf("bench --quick lacks %q", want)
		}
	}
	if strings.Contains(out, "ERROR") {
		t.Errorf("bench --quick reports errors:\n%s", out)
	}
	// Every table has rows of figures; the barrier one a row per PE count
	// (with no floor where there are more PEs than CPUs).
	for _, title := range sectionTitles {
		rows := tableRows(out, title)
		if len(rows) == 0 {
			t.Errorf("%s has no rows", title)
		}
		for _, r := range rows {
			if title == "# Barrier latency:" && atoiOr(strings.Fields(r)[0]) > runtime.NumCPU() {
				continue
			}
			if strings.Contains(r, " - ") || strings.HasSuffix(r, " -") {
				t.Errorf("%s: row without a figure: %q", title, r)
			}
		}
	}
	// Every latency and bandwidth table has its floor and says how it
	// was made; the latency ones give the line transfers per row.
	for title, ratio := range floorTitles {
		head := tableHeader(out, title)
		if !strings.Contains(head, ratio) {
			t.Errorf("%s: header %q lacks %q", title, head, ratio)
		}
		if ratio == "x floor" && !strings.Contains(head, " lines ") {
			t.Errorf("%s: header %q lacks the line transfers", title, head)
		}
		if !strings.Contains(tableNotes(out, title), "by symheap's own") && !strings.Contains(tableNotes(out, title), "symheap's own") {
			t.Errorf("%s: the note does not say who measured the floor:\n%s", title, tableNotes(out, title))
		}
	}
	// Without --peers: a line on the targets, not their table; ratios only
	// where the other side was measured.
	if !regexp.MustCompile(`\n# targets: \d+ met, \d+ missed, \d+ need a peer`).MatchString(out) || strings.Contains(out, "# Targets:") {
		t.Errorf("bench --quick: want the one-line summary of the targets, not their table")
	}
	for _, title := range sectionTitles {
		if strings.Contains(tableNotes(out, title)+tableHeader(out, title), "ratio = ours/theirs") && !strings.Contains(tableHeader(out, title), " x ") {
			t.Errorf("%s: speaks of a ratio but has no ratio column: %q", title, tableHeader(out, title))
		}
	}
	var pes []string
	for _, r := range tableRows(out, "# Barrier latency:") {
		pes = append(pes, strings.Fields(r)[0])
	}
	if !slices.Equal(pes, []string{"2", "4", "8"}) {
		t.Errorf("barrier rows for %v PEs, want 2, 4, 8", pes)
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

func atoiOr(s string) int {
	var v int
	fmt.Sscan(s, &v)
	return v
}

// tableHeader returns the column header line of the table under title.
func tableHeader(out, title string) string {
	i := strings.Index(out, "\n"+title)
	if i < 0 {
		return ""
	}
	for _, l := range strings.Split(out[i+1:], "\n")[1:] {
		if strings.HasPrefix(l, "# ") && !strings.HasPrefix(l, "# ratio") {
			return l + " "
		}
	}
	return ""
}

// tableNotes returns the comment lines after the rows of the table under
// title.
func tableNotes(out, title string) string {
	i := strings.Index(out, "\n"+title)
	if i < 0 {
		return ""
	}
	var notes []string
	rows := false
	for _, l := range strings.Split(out[i+1:], "\n")[1:] {
		if strings.TrimSpace(l) == "" {
			break
		}
		if !strings.HasPrefix(l, "#") {
			rows = true
		} else if rows {
			notes = append(notes, l)
		}
	}
	return strings.Join(notes, "\n")
}

// tableRows returns the data rows of the table under the line starting
// with title: the lines up to the next blank line that do not start with #.
func tableRows(out, title string) []string {
	i := strings.Index(out, "\n"+title)
	if i < 0 {
		return nil
	}
	var rows []string
	for _, l := range strings.Split(out[i+1:], "\n")[1:] {
		if strings.TrimSpace(l) == "" {
			break
		}
		if !strings.HasPrefix(l, "#") {
			rows = append(rows, l)
		}
	}
	return rows
}

func TestBenchJSONAndPlot(t *testing.T) {
	dir := t.TempDir()
	out := benchCmd(t, "bench", "--quick", "--json", "--plot", dir,
		"--tests", "put_lat,get_lat,put_bw,fadd,barrier,reduce,malloc,msg_lat,msg_bw")
	var rep benchReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("bench --json does not parse: %v\n%s", err, out)
	}
	ids := []string{}
	for _, s := range rep.Sections {
		ids = append(ids, s.ID)
		if len(s.Series) == 0 || len(s.Series[0].Points) == 0 {
			t.Errorf("section %s has no figures: %+v", s.ID, s)
			continue
		}
		for _, p := range s.Series[0].Points {
			if !(p.Value > 0) || math.IsInf(p.Value, 0) || len(p.Runs) != rep.Settings.Rounds {
				t.Errorf("section %s: bad point %+v", s.ID, p)
			}
		}
	}
	if want := []string{"put_lat", "get_lat", "put_bw", "fadd", "barrier", "reduce", "malloc", "msg_lat", "msg_bw"}; !slices.Equal(ids, want) {
		t.Errorf("sections %v, want %v", ids, want)
	}
	// The floor column is in the JSON: its points (with the line
	// transfers for latencies), its ingredients and how it was made.
	for _, s := range rep.Sections {
		d := s.seriesIndex(fDerived)
		if d < 0 || s.Floor == nil || s.Floor.Formula == "" {
			t.Errorf("section %s: no floor (%+v)", s.ID, s.Floor)
			continue
		}
		if len(s.Series[d].Points) == 0 {
			t.Errorf("section %s: the floor has no points", s.ID)
		}
		for _, p := range s.Series[d].Points {
			if !(p.Value > 0) || (s.Unit == "us") != (p.Lines != nil) {
				t.Errorf("section %s: bad floor point %+v", s.ID, p)
			}
		}
		if i := s.seriesIndex(fLine); i < 0 || !s.Series[i].Floor || len(s.Series[i].Points) != 1 {
			t.Errorf("section %s: no line ping-pong among the floor's ingredients", s.ID)
		}
	}
	if len(rep.Targets) == 0 || rep.Machine.CPUs == 0 || rep.Machine.Go == "" {
		t.Errorf("report lacks targets or machine: %+v %+v", rep.Targets, rep.Machine)
	}
	want := []string{"msg_bandwidth.png", "msg_latency.png", "put_bandwidth.png", "put_get_latency.png", "scalars.png"}
	var got []string
	for _, f := range rep.Charts {
		got = append(got, filepath.Base(f))
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(fh)
		fh.Close()
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if b := img.Bounds(); b.Dx() < 400 || b.Dy() < 250 {
			t.Errorf("%s: %v is too small to read", f, b)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("charts %v, want %v", got, want)
	}
}

func TestBenchPeersQuick(t *testing.T) {
	if err := peers.Available(); err != nil {
		t.Skipf("Open MPI peers unavailable: %v", err)
	}
	if testing.Short() {
		t.Skip("builds the peer harnesses (-short)")
	}
	// One test per kind of peer: OpenSHMEM, memcpy, MPI with the
	// cache-line floor, and the C mallocs (each Open MPI start takes
	// seconds on a loaded machine).
	out := benchCmd(t, "bench", "--quick", "--peers", "--tests", "put_lat,put_bw,alloc,msg_lat,copy")
	for _, want := range []string{"# Put latency:", "# Put bandwidth:", "# Alloc+free pairs:", "# Send/Recv latency:",
		"# Copy bandwidth:", "warm Go x glibc", "odd ours x glibc", "cold ours x glibc",
		"x OpenSHMEM", "x memcpy", "shm x MPI", "Go x MPI", "x glibc", "glibc malloc",
		"ratio = ours/theirs", "; the C ping-pong: ", "glibc memcpy into shared memory (C harness"} {
		if !strings.Contains(out, want) {
			t.Errorf("bench --quick --peers lacks %q", want)
		}
	}
	// The targets of these tests are read off the figures (a peer run that
	// failed would leave "n/a").
	tgt := out[strings.Index(out, "# Targets:"):]
	for _, name := range []string{"Put 8 B latency", "Put bandwidth 4 MiB vs C memcpy", "send/recv 8 B half round trip", "small alloc+free pair vs glibc",
		"Put latency, every size, vs floor", "send/recv 8 B, ordinary buffers, vs floor", "symheap copy >= 1 MiB, odd destination"} {
		i := strings.Index(tgt, name)
		if i < 0 {
			t.Errorf("targets lack %q", name)
			continue
		}
		line := tgt[i:]
		line = line[:strings.IndexByte(line, '\n')]
		if !strings.Contains(line, "pass") && !strings.Contains(line, "FAIL") {
			t.Errorf("target not measured: %s", line)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

func TestBenchFlags(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--tests", "nosuch"},
		{"bench", "--pes", "1"},
		{"bench", "--sizes", "8:x"},
		{"bench", "extra"},
	} {
		out, err := exec.Command(filepath.Join(bin, "symheap"), args...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
			t.Errorf("symheap %v: %v, want a failure\n%s", args, err, out)
		}
	}
	out, err := exec.Command(filepath.Join(bin, "symheap"), "bench", "-h").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--peers") && !strings.Contains(string(out), "-peers") {
		t.Errorf("bench -h: %v\n%s", err, out)
	}
}

func TestParseSizes(t *testing.T) {
	for in, want := range map[string][]int64{
		"8,64,4k": {8, 64, 4096},
		"0:8":     {0, 1, 2, 4, 8},
		"8:4m":    pow2(8, 4<<20),
		"1m,8,8":  {8, 1 << 20},
	} {
		got, err := parseSizes(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("parseSizes(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "8:", "4m:8", "x"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) accepted", bad)
		}
	}
}

func TestMedianAndCounts(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median = %v", m)
	}
	if m := median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median = %v", m)
	}
	p := benchParams{Iters: 1000, MinIters: 10, Warmup: 100, Reps: 2, Window: 64, Budget: 1e8} // 100 ms
	if n := p.timedCount(1e-3); n != 50 {                                                      // 50 ms per rep / 1 ms
		t.Errorf("timedCount(1ms) = %d, want 50", n)
	}
	if n := p.timedCount(1); n != 10 {
		t.Errorf("timedCount(1s) = %d, want MinIters", n)
	}
	if n := p.warmupCount(32 << 20); n != 2 {
		t.Errorf("warmupCount(32 MiB) = %d, want 2", n)
	}
	if w := p.window(4 << 20); w != 16 {
		t.Errorf("window(4 MiB) = %d, want 16", w)
	}
}

// TestTargets checks the reading of targets off synthetic figures: the
// worst of several sizes counts, and a missing peer is named.
func TestTargets(t *testing.T) {
	bw := &section{ID: "msg_bw", Key: "size", Unit: "MB/s", Series: []*series{
		{Harness: ourHarness, Metric: "msg_bw_shm", Ours: true, Points: []*point{{Size: 1 << 20, Value: 300}, {Size: 4 << 20, Value: 200}, {Size: 8, Value: 1}}},
		{Harness: ourHarness, Metric: "msg_bw_heap", Ours: true, Points: []*point{{Size: 1 << 20, Value: 100}}},
		{Harness: peers.MPI, Metric: "stream_bw", Points: []*point{{Size: 1 << 20, Value: 100}, {Size: 4 << 20, Value: 100}, {Size: 8, Value: 100}}},
	}}
	lat := &section{ID: "put_lat", Key: "size", Unit: "us", Series: []*series{
		{Harness: ourHarness, Metric: "put_lat", Ours: true, Points: []*point{{Size: 8, Value: 1}}},
		{Harness: peers.OSH, Metric: "put_lat", Unavailable: "oshrun not found"},
	}}
	res := map[string]targetResult{}
	for _, r := range evalTargets([]*section{bw, lat}) {
		res[r.Name] = r
	}
	shm := res["send/recv bandwidth >= 1 MiB, shared-heap buffers, vs Open MPI"]
	if shm.Status != "pass" || shm.Ratio != 2 || shm.At != "4 MiB" {
		t.Errorf("shm bandwidth target: %+v", shm)
	}
	if heap := res["send/recv bandwidth >= 1 MiB, ordinary buffers, vs Open MPI"]; heap.Status != "pass" || heap.Ratio != 1 {
		t.Errorf("heap bandwidth target: %+v", heap)
	}
	if put := res["Put 8 B latency vs OpenSHMEM"]; put.Status != "n/a" || !strings.Contains(put.Reason, "oshrun not found") {
		t.Errorf("put target with the peer missing: %+v", put)
	}
	if b := res["barrier, 2 PEs vs OpenSHMEM"]; b.Status != "n/a" || !strings.Contains(b.Reason, "not run") {
		t.Errorf("barrier target without the test: %+v", b)
	}
}

// TestFloorCompose checks the floor column against figures made up for
// it: lines x t_line + size / memcpy(size), per round and as the median;
// glibc's memcpy is taken over Go's when both were measured; a row
// without a floor stays without.
func TestFloorCompose(t *testing.T) {
	r := &runner{params: benchParams{Reps: 1}, pes: 2}
	s := &section{ID: "msg_lat", Key: "size", Unit: "us", PEs: 2, Series: []*series{
		{Harness: ourHarness, Metric: "msg_lat_heap", Ours: true, Points: []*point{{Size: 0, Value: 0.2}, {Size: 1000, Value: 1}, {Size: 2000, Value: 2}}},
	}}
	r.addFloor(s, floorSpec{kind: "latency", copies: 1, np: 2, sizes: []int64{0, 1000, 2000},
		lines: func(k int64) (int, bool) { return 1, k != 2000 }})
	set := func(id string, pts ...*point) {
		i := s.seriesIndex(id)
		if i < 0 {
			t.Fatalf("no ingredient %s", id)
		}
		s.Series[i].Points = pts
	}
	set(fLine, &point{Size: 64, Runs: []float64{0.1, 0.3, 0.2}, Value: 0.2})
	set(fCopy, &point{Size: 1000, Runs: []float64{1000, 1000, 1000}, Value: 1000}) // 1 us per 1000 B
	s.computeFloor()
	d := s.Series[s.seriesIndex(fDerived)]
	if len(d.Points) != 2 {
		t.Fatalf("floor points %+v, want rows 0 and 1000 (2000 has none)", d.Points)
	}
	if p := d.Points[0]; p.Size != 0 || math.Abs(p.Value-0.2) > 1e-9 || p.Lines == nil || *p.Lines != 1 || len(p.Runs) != 3 {
		t.Errorf("floor at 0 B: %+v, want 1 x 0.2 us over 3 rounds", p)
	}
	if p := d.Points[1]; p.Size != 1000 || math.Abs(p.Value-1.2) > 1e-9 || math.Abs(p.Runs[1]-1.3) > 1e-9 {
		t.Errorf("floor at 1000 B: %+v, want 0.2 + 1 us (round 2: 1.3)", p)
	}
	if !strings.Contains(s.Floor.Copy, "Go copy") || !strings.Contains(s.Floor.Line, "0.200 us") {
		t.Errorf("floor info %+v", s.Floor)
	}
	// glibc's figure, when there is one, is the memcpy of the floor.
	s.Series = append(s.Series, &series{Harness: peers.Memcpy, Metric: "memcpy_shm_bw", Floor: true,
		Points: []*point{{Size: 1000, Runs: []float64{500, 500, 500}, Value: 500}}})
	s.computeFloor()
	if p := s.Series[s.seriesIndex(fDerived)].Points[1]; math.Abs(p.Value-2.2) > 1e-9 || !strings.Contains(s.Floor.Copy, "glibc") {
		t.Errorf("floor at 1000 B with glibc's memcpy: %+v (%+v), want 0.2 + 2 us", p, s.Floor)
	}
	if v, ok := s.ratioAt(0, s.seriesIndex(fDerived), 0); !ok || math.Abs(v-1) > 1e-9 {
		t.Errorf("x floor at 0 B = %v, %v; want 1", v, ok)
	}
}

// TestFloorTargets checks the floor targets on made-up figures: 8 B
// send/recv within 1.3x its floor, every size within 1.5x.
func TestFloorTargets(t *testing.T) {
	floor := &series{Harness: "floor", Metric: "floor", Derived: true, Points: []*point{{Size: 8, Value: 0.1}, {Size: 1024, Value: 0.2}}}
	s := &section{ID: "msg_lat", Key: "size", Unit: "us", Series: []*series{
		{Harness: ourHarness, Metric: "msg_lat_heap", Ours: true, Points: []*point{{Size: 8, Value: 0.12}, {Size: 1024, Value: 0.4}}},
		{Harness: ourHarness, Metric: "msg_lat_shm", Ours: true, Points: []*point{{Size: 8, Value: 0.14}, {Size: 1024, Value: 0.2}}},
		floor,
	}}
	res := map[string]targetResult{}
	for _, r := range evalTargets([]*section{s}) {
		res[r.Name] = r
	}
	for name, want := range map[string]string{
		"send/recv 8 B, ordinary buffers, vs floor":                    "pass", // 1.2
		"send/recv 8 B, shared-heap buffers, vs floor":                 "FAIL", // 1.4
		"send/recv latency, every size, ordinary buffers, vs floor":    "FAIL", // 2 at 1 KiB
		"send/recv latency, every size, shared-heap buffers, vs floor": "pass", // 1.4 at 8 B
	} {
		if r := res[name]; r.Status != want {
			t.Errorf("%s: %+v, want %s", name, r, want)
		}
	}
	if r := res["send/recv latency, every size, ordinary buffers, vs floor"]; r.At != "1 KiB" || math.Abs(r.Ratio-2) > 1e-9 {
		t.Errorf("worst row: %+v, want 2 at 1 KiB", r)
	}
	if r := res["Put latency, every size, vs floor"]; r.Status != "n/a" {
		t.Errorf("put target without the test: %+v", r)
	}
}

// TestFmtRatio: a ratio is never printed as zero, however small.
func TestFmtRatio(t *testing.T) {
	for v, want := range map[float64]string{0: "0.00", 0.00042: "0.00042", 0.05: "0.05", 0.1: "0.10", 1.234: "1.23", 12: "12.00"} {
		if got := fmtRatio(v); got != want {
			t.Errorf("fmtRatio(%v) = %q, want %q", v, got, want)
		}
	}
}

// TestBenchTargetsFlag: --targets prints the table of targets without
// --peers, those needing a peer marked not measured.
func TestBenchTargetsFlag(t *testing.T) {
	out := benchCmd(t, "bench", "--quick", "--tests", "barrier", "--targets")
	if !strings.Contains(out, "# Targets:") || !regexp.MustCompile(`# \d+ pass, \d+ fail, \d+ not measured`).MatchString(out) {
		t.Errorf("bench --targets prints no table of targets:\n%s", out)
	}
}
