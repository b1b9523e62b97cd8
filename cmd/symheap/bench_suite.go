package main

// The suite of `symheap bench`: what each test runs, for us and for the
// peers, and how rounds of ours and theirs alternate.
//
// # Model
//
// A section is one test of the suite (one --tests name) and one printed
// table. It holds series (columns: ours first, then the peers'), each a
// set of points keyed by message size, or by number of PEs for the
// barrier, and run units: the commands that produce figures, each
// returning lines in bench/peers' format (peers.Result). A series takes
// the results of its harness and metric from whichever unit produced them.
//
// # Rounds
//
// A section runs its units in order, round after round: ours, theirs,
// ours, theirs... (the unit lists interleave ours and the peers' so that
// on a noisy machine both see the same conditions), and each point's
// figure is the median of its rounds (each round's figure being the best
// of its repetitions). A unit that fails is not run again: an error of
// ours is the section's error, a peer's becomes that series' reason for
// being unavailable.

import (
	"context"
	"fmt"
	"math/bits"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/bench/peers"
	"github.com/symheap/symheap/launch"
)

// section is one test's table.
type section struct {
	ID     string    `json:"id"` // the --tests name
	Title  string    `json:"title"`
	What   string    `json:"what"`
	Key    string    `json:"key"` // "size", "pes" or "class": what a row is
	Unit   string    `json:"unit"`
	Better string    `json:"better"` // "lower" or "higher"
	PEs    int       `json:"pes,omitempty"`
	Series []*series `json:"series"`
	// Ratios are the ratio columns: Series[Num] / Series[Den].
	Ratios []ratioCol `json:"ratios,omitempty"`
	Notes  []string   `json:"notes,omitempty"`
	Errors []string   `json:"errors,omitempty"`
	// Floor says how the floor column was made: from what, measured by
	// whom (floor.go).
	Floor *floorInfo `json:"floor,omitempty"`

	transpose bool // print a row per series (alloc)
	units     []*runUnit
	floor     *floorSpec // how to compute the floor column; nil: none
}

// series is one contender's figures in a section.
type series struct {
	Label   string   `json:"label"`  // legend, e.g. "OpenSHMEM shmem_putmem"
	Column  string   `json:"column"` // table header, e.g. "OpenSHMEM (us)"
	Ours    bool     `json:"ours"`
	Harness string   `json:"harness"`
	Metric  string   `json:"metric"`
	Points  []*point `json:"points"`
	// Unavailable says why the peer has no figures (not built, failed).
	Unavailable string `json:"unavailable,omitempty"`
	// Floor marks an ingredient of the floor (a cache-line ping-pong, an
	// atomic, a memcpy): noted under the table, not a column of its own.
	Floor bool `json:"floor,omitempty"`
	// Derived marks the floor itself, computed per row from the
	// ingredients (floor.go): a column, and the denominator of "x floor"
	// or "x memcpy".
	Derived bool `json:"derived,omitempty"`

	scale float64 // harness unit to the section's unit; 0 means 1
}

// point is one figure: the median of its rounds.
type point struct {
	Size  int64     `json:"size"`
	PEs   int       `json:"pes"`
	Value float64   `json:"value"`
	Runs  []float64 `json:"runs"`
	// Lines is, on a latency floor's points, the cache-line transfers
	// the operation needs at least (floorSpec).
	Lines *int `json:"lines,omitempty"`
}

type ratioCol struct {
	Num    int    `json:"num"`
	Den    int    `json:"den"`
	Column string `json:"column"`
}

// runUnit produces figures: one job of ours, one peer harness run, or one
// in-process measurement.
type runUnit struct {
	label string // for the progress line
	ours  bool
	// series this unit feeds (indices), to mark them unavailable when it
	// fails or its peer is missing.
	feeds   []int
	unavail string // set before running: the peer is missing
	failed  bool
	run     func(ctx context.Context) ([]peers.Result, error)
}

// key is what identifies a row in s.
func (s *section) key(p *point) int64 {
	if s.Key == "pes" {
		return int64(p.PEs)
	}
	return p.Size
}

// find returns the point of series i in row k.
func (s *section) find(i int, k int64) *point {
	for _, p := range s.Series[i].Points {
		if s.key(p) == k {
			return p
		}
	}
	return nil
}

// rows returns the row keys in order: those of the first series with
// figures (ours), then any others, ascending.
func (s *section) rows() []int64 {
	seen := map[int64]bool{}
	var out []int64
	for _, sr := range s.Series {
		if sr.Floor || sr.Derived {
			continue
		}
		for _, p := range sr.Points {
			if k := s.key(p); !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}

// record adds the results of one run to the series that take them.
func (s *section) record(rs []peers.Result) {
	for _, r := range rs {
		for _, sr := range s.Series {
			if sr.Harness != r.Harness || sr.Metric != r.Metric {
				continue
			}
			v := r.Value
			if sr.scale != 0 {
				v *= sr.scale
			}
			k := &point{Size: r.Size, PEs: r.PEs}
			var p *point
			for _, q := range sr.Points {
				if q.Size == r.Size && q.PEs == r.PEs {
					p = q
				}
			}
			if p == nil {
				p = k
				sr.Points = append(sr.Points, p)
			}
			p.Runs = append(p.Runs, v)
			p.Value = median(p.Runs)
		}
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	sort.Float64s(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// runSection runs the units of s for r.rounds rounds, alternating.
func (r *runner) runSection(ctx context.Context, s *section) error {
	for _, u := range s.units {
		if u.unavail != "" {
			for _, i := range u.feeds {
				s.Series[i].Unavailable = u.unavail
			}
		}
	}
	for round := 1; round <= r.rounds; round++ {
		for _, u := range s.units {
			if u.unavail != "" || u.failed {
				continue
			}
			r.prog.step(fmt.Sprintf("%s: %s, round %d/%d", s.ID, u.label, round, r.rounds))
			rs, err := u.run(ctx)
			s.record(rs)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err == nil {
				continue
			}
			u.failed = true
			if u.ours {
				s.Errors = append(s.Errors, fmt.Sprintf("%s: %v", u.label, err))
				continue
			}
			for _, i := range u.feeds {
				s.Series[i].Unavailable = fmt.Sprintf("failed: %v", err)
			}
		}
	}
	for _, sr := range s.Series {
		sort.Slice(sr.Points, func(i, j int) bool { return s.key(sr.Points[i]) < s.key(sr.Points[j]) })
	}
	s.computeFloor()
	return nil
}

// ---- run units ----

// ourJob is a unit that launches this executable as npes PEs running
// worker test with params p; heap and shared are the per-PE heap sizes.
func (r *runner) ourJob(label, test string, npes int, p benchParams, heap, shared int64) *runUnit {
	args := append([]string{hiddenBenchPE, "-test", test}, p.args()...)
	return &runUnit{label: label, ours: true, run: func(ctx context.Context) ([]peers.Result, error) {
		var out strings.Builder
		errs := &tailWriter{max: 8 << 10}
		_, err := launch.Run(ctx, launch.Options{
			N:       npes,
			Heap:    strconv.FormatInt(roundMiB(heap), 10),
			Env:     []string{"SYMHEAP_SHARED_SIZE=" + strconv.FormatInt(roundMiB(shared), 10)},
			Stdout:  &out,
			Stderr:  errs,
			Timeout: r.timeout,
		}, r.exe, args...)
		rs, perr := peers.Parse(strings.NewReader(out.String()))
		switch {
		case err != nil:
			return rs, fmt.Errorf("%d PEs: %w%s", npes, err, indentTail(errs.String()))
		case perr != nil:
			return rs, perr
		case len(rs) == 0:
			return nil, fmt.Errorf("%d PEs printed no figures%s", npes, indentTail(errs.String()))
		}
		return rs, nil
	}}
}

func roundMiB(n int64) int64 { return (n + 1<<20 - 1) &^ (1<<20 - 1) }

// peerUnit runs tests of harness h with the same iteration settings as
// ours.
func (r *runner) peerUnit(label, h string, tests []string, np int, sizes []int64) *runUnit {
	spec := peers.Spec{
		Harness: h, Tests: tests, NP: np, Sizes: sizes,
		Iters: r.params.Iters, MinIters: r.params.MinIters, Warmup: r.params.Warmup,
		Reps: r.params.Reps, Window: r.params.Window, Budget: r.params.Budget,
		Batch: r.params.Batch, Timeout: r.timeout, Dir: r.peerDir,
	}
	u := &runUnit{label: label, run: func(ctx context.Context) ([]peers.Result, error) {
		return peers.Run(ctx, spec)
	}}
	if err := r.peerErr[h]; err != nil {
		u.unavail = err.Error()
	}
	return u
}

// ---- the suite ----

// Test names, in the order they run and print.
var benchTests = []string{
	"put_lat", "get_lat", "put_bw", "put_rate", "fadd", "barrier",
	"bcast", "reduce", "malloc", "alloc", "msg_lat", "msg_bw", "msg_rate", "copy",
}

// vecSizes are the bytes of the vector collectives: 1 and 1024 int64.
var vecSizes = []int64{8, 8192}

// mallocSizes are the collective Malloc+Free sizes (as osh_bench's).
var mallocSizes = []int64{64, 1 << 20}

// newSection builds the section of test id; nil for an unknown id.
func (r *runner) newSection(id string) *section {
	n := r.pes
	p := r.params
	oursLat := func(metric, label string) *series {
		return &series{Label: label, Column: "Latency (us)", Ours: true, Harness: ourHarness, Metric: metric}
	}
	osh := func(metric, label, column string) *series {
		return &series{Label: label, Column: column, Harness: peers.OSH, Metric: metric}
	}
	s := &section{ID: id, Key: "size", Unit: "us", Better: "lower", PEs: n}
	add := func(u *runUnit, feeds ...int) {
		u.feeds = feeds
		s.units = append(s.units, u)
	}
	ratio := func(num, den int, column string) {
		s.Ratios = append(s.Ratios, ratioCol{Num: num, Den: den, Column: column})
	}
	// withC adds the "symheap (C)" column: OpenSHMEM's own harness
	// (osh_bench.c) built with symcc and run by shrun, fed by a unit run
	// right after OpenSHMEM's in every round; its ratio is to OpenSHMEM
	// (series osh), and to memcpy when mc >= 0.
	withC := func(metric, column string, osh, np int, sizes []int64, mc int) {
		i := len(s.Series)
		s.Series = append(s.Series, &series{Label: "symheap (C) osh_bench.c", Column: "symheap (C) " + column,
			Harness: peers.SymheapC, Metric: metric})
		add(r.peerUnit("symheap (C)", peers.SymheapC, []string{metric}, np, sizes), i)
		ratio(i, osh, "C x OpenSHMEM")
		if mc >= 0 {
			ratio(i, mc, "C x memcpy")
		}
	}
	withPeers := r.peers
	switch id {
	case "put_lat", "get_lat":
		op, peerOp := "Put + Quiet into", "shmem_putmem + shmem_quiet"
		if id == "get_lat" {
			op, peerOp = "Get from", "shmem_getmem"
		}
		s.Title = strings.SplitN(op, " ", 2)[0] + " latency"
		s.What = fmt.Sprintf("PE 0: %s PE 1, per operation", op)
		p.Sizes = r.p2pSizes
		s.Series = []*series{oursLat(id, "symheap "+strings.SplitN(op, " ", 2)[0])}
		add(r.ourJob("symheap", id, n, p, maxSize(p.Sizes)+2<<20, 1<<20), 0)
		if withPeers {
			s.Series = append(s.Series, osh(id, "OpenSHMEM "+peerOp, "OpenSHMEM (us)"))
			add(r.peerUnit("OpenSHMEM", peers.OSH, []string{id}, n, p.Sizes), 1)
			ratio(0, 1, "x OpenSHMEM")
			withC(id, "(us)", 1, n, p.Sizes, -1)
		}
		// Floor: 0 line transfers + one copy. PE 1 never touches its copy
		// while PE 0 puts into it (or gets from it) again and again, so
		// after the first operation the lines stay in PE 0's cache
		// (modified for a put, shared for a get) and no line moves; what
		// is left is the copy of size bytes (Quiet fences nothing on
		// amd64: rma.go). A put into a line the target is reading would
		// add 1 transfer: that case is the send/recv table's.
		r.addFloor(s, floorSpec{kind: "latency", lines: constLines(0), copies: 1, np: n, sizes: p.Sizes,
			why: "0 line transfers: PE 1 does not touch its copy between operations, so the lines stay in PE 0's cache; one copy of size bytes"})
	case "put_bw":
		s.Title, s.Unit, s.Better = "Put bandwidth", "MB/s", "higher"
		s.What = fmt.Sprintf("window of %d PutNBI into PE 1 (at most 64 MiB), then Quiet; MB/s = 10^6 B/s", p.Window)
		p.Sizes = r.p2pSizes
		s.Series = []*series{{Label: "symheap PutNBI", Column: "MB/s", Ours: true, Harness: ourHarness, Metric: "put_bw"}}
		add(r.ourJob("symheap", "put_bw", n, p, maxSize(p.Sizes)+2<<20, 1<<20), 0)
		if withPeers {
			s.Series = append(s.Series,
				osh("put_bw", "OpenSHMEM shmem_putmem_nbi", "OpenSHMEM (MB/s)"),
				&series{Label: "C memcpy into shared memory", Column: "memcpy (MB/s)", Harness: peers.Memcpy, Metric: "memcpy_shm_bw"})
			add(r.peerUnit("OpenSHMEM", peers.OSH, []string{"put_bw"}, n, p.Sizes), 1)
			add(r.peerUnit("C memcpy", peers.Memcpy, []string{"memcpy_shm_bw"}, 0, p.Sizes), 2)
			ratio(0, 1, "x OpenSHMEM")
			withC("put_bw", "(MB/s)", 1, n, p.Sizes, 2)
		}
		// Floor: memcpy of size bytes into shared memory, the same
		// buffers again and again (as the window puts one buffer).
		r.addFloor(s, floorSpec{kind: "bandwidth", np: n, sizes: p.Sizes})
	case "put_rate":
		s.Title, s.Unit, s.Better = "Put message rate", "msg/s", "higher"
		s.What = fmt.Sprintf("window of %d PutNBI of 8 B into PE 1, then Quiet", p.Window)
		p.Sizes = []int64{8}
		s.Series = []*series{{Label: "symheap PutNBI", Column: "Messages/s", Ours: true, Harness: ourHarness, Metric: "put_rate"}}
		add(r.ourJob("symheap", "put_rate", n, p, 2<<20, 1<<20), 0)
		if withPeers {
			s.Series = append(s.Series, osh("put_rate", "OpenSHMEM shmem_putmem_nbi", "OpenSHMEM (msg/s)"))
			add(r.peerUnit("OpenSHMEM", peers.OSH, []string{"put_rate"}, n, p.Sizes), 1)
			ratio(0, 1, "x OpenSHMEM")
			withC("put_rate", "(msg/s)", 1, n, p.Sizes, -1)
		}
		// Floor: as many 8-byte memcpys per second as memcpy(8 B) allows.
		r.addFloor(s, floorSpec{kind: "rate", np: n, sizes: p.Sizes})
	case "fadd":
		s.Title = "Atomic fetch-add latency"
		s.What = "AtomicFetchAdd on PE 1's int64 from PE 0, per operation"
		s.Series = []*series{oursLat("fadd_lat", "symheap AtomicFetchAdd")}
		add(r.ourJob("symheap", "fadd_lat", n, p, 2<<20, 1<<20), 0)
		if withPeers {
			s.Series = append(s.Series, osh("fadd_lat", "OpenSHMEM shmem_long_atomic_fetch_add", "OpenSHMEM (us)"))
			add(r.peerUnit("OpenSHMEM", peers.OSH, []string{"fadd_lat"}, n, nil), 1)
			ratio(0, 1, "x OpenSHMEM")
			withC("fadd_lat", "(us)", 1, n, nil, -1)
		}
		// Floor: 0 line transfers + one atomic. PE 1 does not touch its
		// word, so after the first fetch-add its line stays in PE 0's
		// cache and each one is a locked add on a cached line.
		r.addFloor(s, floorSpec{kind: "latency", lines: constLines(0), rmws: 1, np: n,
			why: "0 line transfers: PE 1 does not touch its word, so its line stays in PE 0's cache; one atomic read-modify-write"})
	case "barrier":
		s.Title, s.Key, s.PEs = "Barrier latency", "pes", 0
		s.What = "Barrier, the slowest PE's mean per call"
		s.Series = []*series{oursLat("barrier_lat", "symheap Barrier")}
		if withPeers {
			s.Series = append(s.Series, osh("barrier_lat", "OpenSHMEM shmem_barrier_all", "OpenSHMEM (us)"),
				&series{Label: "symheap (C) osh_bench.c", Column: "symheap (C) (us)", Harness: peers.SymheapC, Metric: "barrier_lat"})
			ratio(0, 1, "x OpenSHMEM")
			ratio(2, 1, "C x OpenSHMEM")
		}
		for _, np := range r.barrierPEs {
			add(r.ourJob(fmt.Sprintf("symheap, %d PEs", np), "barrier_lat", np, p, 2<<20, 1<<20), 0)
			if withPeers {
				add(r.peerUnit(fmt.Sprintf("OpenSHMEM, %d PEs", np), peers.OSH, []string{"barrier_lat"}, np, nil), 1)
				add(r.peerUnit(fmt.Sprintf("symheap (C), %d PEs", np), peers.SymheapC, []string{"barrier_lat"}, np, nil), 2)
			}
		}
		// Floor: 2·⌈log₂ N⌉ line transfers for N PEs, while every PE
		// has a CPU of its own. The barrier is a dissemination barrier
		// (internal/team, dissem.go): ⌈log₂ N⌉ rounds in sequence, and in
		// each the writer's store must take its line from the reader
		// polling it (one transfer) before the reader fetches it back
		// (one more). With 2 PEs: 2, the line there and back.
		// More PEs than CPUs: no floor, the scheduler decides.
		r.addFloor(s, floorSpec{kind: "latency", np: 2, lines: func(k int64) (int, bool) {
			return 2 * bits.Len64(uint64(k-1)), k >= 2 && k <= int64(runtime.NumCPU())
		}, why: "2·⌈log₂ N⌉ line transfers for N PEs on N CPUs: each of the dissemination barrier's rounds takes a line from its reader and back; none with more PEs than CPUs"})
	case "bcast", "reduce":
		metric, title, peerOp := "bcast_lat", "Broadcast latency", "shmem_broadcast64"
		what := "Broadcast from PE 0 of size/8 int64 over the world team"
		if id == "reduce" {
			metric, title, peerOp = "reduce_lat", "Reduce latency", "shmem_long_sum_to_all"
			what = "Reduce (OpSum, every PE gets the result) of size/8 int64 over the world team"
		}
		s.Title, s.What = title, what+", the slowest PE's mean per call (8 B = 1 int64, 8192 B = 1024 int64)"
		p.Sizes = vecSizes
		s.Series = []*series{oursLat(metric, "symheap "+strings.SplitN(title, " ", 2)[0])}
		add(r.ourJob("symheap", metric, n, p, 4<<20, 1<<20), 0)
		if withPeers {
			s.Series = append(s.Series, osh(metric, "OpenSHMEM "+peerOp, "OpenSHMEM (us)"))
			add(r.peerUnit("OpenSHMEM", peers.OSH, []string{metric}, n, p.Sizes), 1)
			ratio(0, 1, "x OpenSHMEM")
			withC(metric, "(us)", 1, n, p.Sizes, -1)
		}
		// Floor, 2 PEs: 2 line transfers + one copy of size bytes. The
		// data (and the flag beside them) must reach the other PE (1),
		// and, before the next call may overwrite the buffer it was read
		// from, word that it was read must come back (1). Broadcast: the
		// receiver copies the root's data once; Reduce: each PE reads the
		// other's vector once (the adds ride along). More PEs: none here.
		r.addFloor(s, floorSpec{kind: "latency", copies: 1, np: n, sizes: p.Sizes, lines: func(int64) (int, bool) { return 2, n == 2 },
			why: "2 PEs: 2 line transfers (the data to the other PE, word of their use back before the buffer is reused) + one copy of size bytes"})
	case "malloc":
		s.Title = "Collective malloc+free latency"
		s.What = "Malloc + Free pair (collective), the slowest PE's mean per pair"
		p.Sizes = mallocSizes
		s.Series = []*series{oursLat("malloc_lat", "symheap Malloc+Free")}
		add(r.ourJob("symheap", "malloc_lat", n, p, 2*maxSize(p.Sizes)+4<<20, 1<<20), 0)
		if withPeers {
			s.Series = append(s.Series, osh("malloc_lat", "OpenSHMEM shmem_malloc+shmem_free", "OpenSHMEM (us)"))
			add(r.peerUnit("OpenSHMEM", peers.OSH, []string{"malloc_lat"}, n, p.Sizes), 1)
			ratio(0, 1, "x OpenSHMEM")
			withC("malloc_lat", "(us)", 1, n, p.Sizes, -1)
		}
		// Floor, 2 PEs: 4 line transfers. A collective Malloc must learn
		// that every PE made the same call (an exchange: 2, as a
		// barrier), and a Free may free only once every PE has reached it
		// (a barrier: 2). No bytes are copied; the size does not matter.
		r.addFloor(s, floorSpec{kind: "latency", np: n, lines: func(int64) (int, bool) { return 4, n == 2 },
			why: "2 PEs: 4 line transfers, an exchange for Malloc (2) and an entry barrier for Free (2)"})
	case "alloc":
		r.allocSection(s)
	case "copy":
		r.copySection(s)
	case "msg_lat":
		s.Title = "Send/Recv latency"
		s.What = "Send/Recv ping-pong between PEs 0 and 1, half a round trip"
		p.Sizes = r.msgLatSizes
		s.Series = []*series{
			{Label: "symheap, shared-heap buffers", Column: "shm buf (us)", Ours: true, Harness: ourHarness, Metric: "msg_lat_shm"},
			{Label: "symheap, ordinary buffers", Column: "Go buf (us)", Ours: true, Harness: ourHarness, Metric: "msg_lat_heap"},
		}
		add(r.ourJob("symheap", "msg_lat", n, p, 2<<20, 2*maxSize(p.Sizes)+8<<20), 0, 1)
		if withPeers {
			s.Series = append(s.Series,
				&series{Label: "Open MPI MPI_Send/MPI_Recv", Column: "Open MPI (us)", Harness: peers.MPI, Metric: "pingpong_lat"})
			add(r.peerUnit("Open MPI", peers.MPI, []string{"pingpong_lat"}, n, p.Sizes), 2)
			ratio(0, 2, "shm x MPI")
			ratio(1, 2, "Go x MPI")
		}
		// Floor: 1 line transfer + one copy of size bytes. Half a round
		// trip moves the message from PE 0 to PE 1 once: the line
		// holding it (and its flag) must travel to the receiver, which
		// is exactly half a round trip of the line ping-pong; a larger
		// message needs at least one copy of its bytes (single copy),
		// whose other lines can travel in parallel.
		r.addFloor(s, floorSpec{kind: "latency", lines: constLines(1), copies: 1, np: n, sizes: p.Sizes,
			why: "1 line transfer (the message's line to the receiver: half a round trip) + one copy of size bytes"})
	case "msg_bw":
		s.Title, s.Unit, s.Better = "Send/Recv bandwidth", "MB/s", "higher"
		s.What = fmt.Sprintf("PE 0: window of %d Isend (at most 64 MiB), PE 1: as many Irecv, then a 4-byte ack; MB/s = 10^6 B/s", p.Window)
		p.Sizes = r.msgBwSizes
		s.Series = []*series{
			{Label: "symheap, shared-heap buffers", Column: "shm buf (MB/s)", Ours: true, Harness: ourHarness, Metric: "msg_bw_shm"},
			{Label: "symheap, ordinary buffers", Column: "Go buf (MB/s)", Ours: true, Harness: ourHarness, Metric: "msg_bw_heap"},
		}
		add(r.ourJob("symheap", "msg_bw", n, p, 2<<20, 2*maxSize(p.Sizes)+8<<20), 0, 1)
		if withPeers {
			s.Series = append(s.Series,
				&series{Label: "Open MPI MPI_Isend/MPI_Irecv", Column: "Open MPI (MB/s)", Harness: peers.MPI, Metric: "stream_bw"})
			add(r.peerUnit("Open MPI", peers.MPI, []string{"stream_bw"}, n, p.Sizes), 2)
			ratio(0, 2, "shm x MPI")
			ratio(1, 2, "Go x MPI")
		}
		// Floor: memcpy of size bytes, the same buffers again and again
		// (a message is copied once; the window reuses one buffer).
		r.addFloor(s, floorSpec{kind: "bandwidth", np: n, sizes: p.Sizes})
	case "msg_rate":
		s.Title, s.Unit, s.Better = "Send/Recv message rate", "msg/s", "higher"
		s.What = fmt.Sprintf("PE 0: window of %d Isend, PE 1: as many Irecv, then WaitAll (which releases them), then a 4-byte ack (Open MPI: MPI_Waitall)", p.Window)
		p.Sizes = r.msgRateSizes
		if len(p.Sizes) == 0 {
			return nil
		}
		s.Series = []*series{
			{Label: "symheap, shared-heap buffers", Column: "shm buf (msg/s)", Ours: true, Harness: ourHarness, Metric: "msg_rate_shm"},
			{Label: "symheap, ordinary buffers", Column: "Go buf (msg/s)", Ours: true, Harness: ourHarness, Metric: "msg_rate_heap"},
		}
		add(r.ourJob("symheap", "msg_rate", n, p, 2<<20, 2*maxSize(p.Sizes)+8<<20), 0, 1)
		if withPeers {
			s.Series = append(s.Series,
				&series{Label: "Open MPI MPI_Isend/MPI_Irecv", Column: "Open MPI (msg/s)", Harness: peers.MPI, Metric: "stream_rate"})
			add(r.peerUnit("Open MPI", peers.MPI, []string{"stream_rate"}, n, p.Sizes), 2)
			ratio(0, 2, "shm x MPI")
			ratio(1, 2, "Go x MPI")
		}
	default:
		return nil
	}
	return s
}

// allocSection: alloc+free pairs of every allocator component (in this
// process), of SharedAlloc (a job of PEs), and of the C mallocs.
func (r *runner) allocSection(s *section) {
	s.Title, s.Key, s.Unit, s.transpose, s.PEs = "Alloc+free pairs", "class", "ns", true, 0
	s.What = "ns per alloc+free pair replaying one xorshift size sequence (bench_alloc.go); " +
		"small: 16 B..4 KiB, window 256; large: 4 KiB..1 MiB, window 64"
	pairs := r.params.Pairs
	comps := alloc.Names()
	var oursUnits, theirUnits []*runUnit
	for i, name := range comps {
		label := name
		if i == 0 {
			label += " (default)"
		}
		s.Series = append(s.Series, &series{Label: label, Column: label, Ours: true, Harness: ourHarness, Metric: "pair_" + name})
		idx := len(s.Series) - 1
		oursUnits = append(oursUnits, &runUnit{label: name, ours: true, feeds: []int{idx},
			run: func(ctx context.Context) ([]peers.Result, error) {
				var rs []peers.Result
				for _, c := range pairClasses {
					ns, err := componentPairs(name, c, pairs)
					if err != nil {
						return rs, err
					}
					rs = append(rs, peers.Result{Harness: ourHarness, Metric: "pair_" + name, Size: int64(c.lo), Value: ns, Unit: "ns", PEs: 1})
				}
				return rs, nil
			}})
	}
	s.Series = append(s.Series, &series{Label: "SharedAlloc (" + comps[0] + ")", Column: "SharedAlloc", Ours: true, Harness: ourHarness, Metric: "shared_alloc"})
	p := r.params
	p.Sizes = []int64{16, 4096}
	shared := r.ourJob("SharedAlloc", "shared_alloc", r.pes, p, 2<<20, 192<<20)
	shared.feeds = []int{len(s.Series) - 1}
	oursUnits = append(oursUnits, shared)
	if r.peers {
		for _, name := range mallocPeers {
			label := name + " malloc"
			if name != "glibc" {
				label = name
			}
			s.Series = append(s.Series, &series{Label: label, Column: label, Harness: name, Metric: "pair"})
			u := &runUnit{label: label, feeds: []int{len(s.Series) - 1},
				run: func(ctx context.Context) ([]peers.Result, error) {
					var rs []peers.Result
					for _, c := range pairClasses {
						ns, err := cMallocPairs(ctx, r.peerDir, name, c, pairs)
						if err != nil {
							return rs, err
						}
						rs = append(rs, peers.Result{Harness: name, Metric: "pair", Size: int64(c.lo), Value: ns, Unit: "ns", PEs: 1})
					}
					return rs, nil
				}}
			if err := r.peerErr["malloc:"+name]; err != nil {
				u.unavail = err.Error()
			}
			theirUnits = append(theirUnits, u)
		}
		glibc := slices.IndexFunc(s.Series, func(x *series) bool { return x.Harness == "glibc" })
		for i := range s.Series {
			if i != glibc {
				s.Ratios = append(s.Ratios, ratioCol{Num: i, Den: glibc, Column: "x glibc"})
			}
		}
	}
	// Interleave: ours, theirs, ours, theirs...
	for i := 0; i < max(len(oursUnits), len(theirUnits)); i++ {
		if i < len(oursUnits) {
			s.units = append(s.units, oursUnits[i])
		}
		if i < len(theirUnits) {
			s.units = append(s.units, theirUnits[i])
		}
	}
}

// className names the pair class starting at lo.
func className(lo int64) string {
	if c, ok := pairClassOf(lo); ok {
		return c.name
	}
	return strconv.FormatInt(lo, 10)
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	max int
	b   []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	if len(w.b) > w.max {
		w.b = w.b[len(w.b)-w.max:]
	}
	return len(p), nil
}

func (w *tailWriter) String() string { return string(w.b) }

// indentTail formats a job's stderr for an error message.
func indentTail(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	return "\n    " + strings.ReplaceAll(lastLines(s, 6), " | ", "\n    ")
}

// elapsedString formats d to the tenth of a second.
func elapsedString(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }
