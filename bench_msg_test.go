package symheap_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/bench/peers"
	"github.com/symheap/symheap/internal/unix"
	"github.com/symheap/symheap/launch"
)

// BenchmarkMsg measures message passing between two PEs: the half round
// trip of a Send/Recv ping-pong from 0 B to 64 MiB, and the bandwidth of a
// stream (a window of Isends against a window of Irecvs, then a 4-byte
// acknowledgement, as the OSU and bench/peers harnesses do), with the
// buffers in the local shared heap (single copy from the sender's block)
// and in ordinary Go memory (process_vm_readv). Open MPI's MPI_Send and
// MPI_Recv (bench/peers' mpi harness, ob1 over vader with CMA) are measured
// in the same run on the same sizes, as is the cache-line ping-pong between
// two processes, the floor for any latency here.
//
// Metrics, per size: ns/op (half round trip, or time per streamed
// message), MB/s (10^6 B/s) for streams, openmpi-ns/op or openmpi-MB/s,
// and x-openmpi: ours / Open MPI's (below 1 is better for latency, above 1
// for bandwidth); floor-ns is the cache-line half round trip.
//
// Each group (PingPong_shared, ...) is one job of two PEs that measures
// every size; PE 0 prints the figures and the parent reports each size as
// a sub-benchmark. With -benchtime=Nx every size gets a few milliseconds
// and a few sizes are skipped, so `go test -bench Msg -benchtime=1x` takes
// seconds.
func BenchmarkMsg(b *testing.B) {
	for _, g := range msgBenchGroups {
		runMsgGroup(b, g)
	}
}

// BenchmarkEagerCrossover measures the ping-pong of messages around the
// eager limit once with none of them eager (single copy: by
// process_vm_readv for ordinary buffers, from the shared heap for shared
// ones) and once with every one of them eager (through the rings), and
// reports x-rendezvous, eager time over rendezvous time, for each size:
// the eager limit for ordinary buffers (DefaultEagerLimit) is the largest
// size at which it stays below 1; the one for buffers in the segment
// (DefaultSharedEagerLimit) is one size above, where a stream of eager
// messages still beats single copies (docs/bench/design-measurements.md).
func BenchmarkEagerCrossover(b *testing.B) {
	for _, g := range eagerBenchGroups {
		runMsgGroup(b, g)
	}
}

// msgBenchGroup is one job: one kind of measurement over a list of sizes.
type msgBenchGroup struct {
	name   string
	stream bool
	shared bool     // buffers in the local shared heap
	sizes  []int64  // all sizes; quickSizes under -benchtime=Nx
	quick  []int64  // sizes measured in a quick run
	env    []string // extra settings of the PEs
	peer   string   // the bench/peers mpi test to compare with, "" for none
	versus string   // a group run before, reported as the ratio x-rendezvous
}

var (
	pingSizes  = []int64{0, 1, 8, 64, 512, 4 << 10, 8 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20}
	pingQuick  = []int64{0, 8, 4 << 10, 64 << 10, 1 << 20, 64 << 20}
	streamSize = []int64{8, 512, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20}
	streamQ    = []int64{8, 64 << 10, 1 << 20, 16 << 20}
	eagerSizes = []int64{256, 512, 1 << 10, 2 << 10, 3 << 10, 4 << 10, 6 << 10, 8 << 10, 12 << 10, 16<<10 - 64}
)

var msgBenchGroups = []msgBenchGroup{
	{name: "PingPong_shared", shared: true, sizes: pingSizes, quick: pingQuick, peer: "pingpong_lat"},
	{name: "PingPong_ordinary", sizes: pingSizes, quick: pingQuick, peer: "pingpong_lat"},
	{name: "Stream_shared", stream: true, shared: true, sizes: streamSize, quick: streamQ, peer: "stream_bw"},
	{name: "Stream_ordinary", stream: true, sizes: streamSize, quick: streamQ, peer: "stream_bw"},
}

var eagerBenchGroups = []msgBenchGroup{
	{name: "Rendezvous_ordinary", sizes: eagerSizes, quick: eagerSizes, env: []string{"SYMHEAP_MSG_EAGER=0"}},
	{name: "Eager_ordinary", sizes: eagerSizes, quick: eagerSizes, env: []string{"SYMHEAP_MSG_EAGER=16k"}, versus: "Rendezvous_ordinary"},
	{name: "Rendezvous_shared", shared: true, sizes: eagerSizes, quick: eagerSizes, env: []string{"SYMHEAP_MSG_EAGER_SHARED=0"}},
	{name: "Eager_shared", shared: true, sizes: eagerSizes, quick: eagerSizes, env: []string{"SYMHEAP_MSG_EAGER_SHARED=16k", "SYMHEAP_MSG_EAGER=16k"}, versus: "Rendezvous_shared"},
}

// sizesFor returns the sizes the group measures: all, or the quick ones,
// and of those only the ones SYMHEAP_MSGBENCH_SIZES lists if it is set
// (comma-separated byte counts: to profile one size).
func (g msgBenchGroup) sizesFor(quick bool) []int64 {
	sizes := g.sizes
	if quick {
		sizes = g.quick
	}
	only := os.Getenv(envMsgSizes)
	if only == "" {
		return sizes
	}
	var keep []int64
	for _, s := range sizes {
		if slices.Contains(strings.Split(only, ","), strconv.FormatInt(s, 10)) {
			keep = append(keep, s)
		}
	}
	return keep
}

// streamWindow is the messages in flight of a stream of size-byte
// messages: 64, as OSU and bench/peers use, except for the largest
// messages, whose window is bounded to 256 MiB in flight.
func streamWindow(size int64) int64 {
	if size > 4<<20 {
		return 4
	}
	return 64
}

const (
	envMsgBench    = "SYMHEAP_MSGBENCH"
	envMsgBudget   = "SYMHEAP_MSGBENCH_BUDGET"
	envMsgQuick    = "SYMHEAP_MSGBENCH_QUICK"
	envMsgSizes    = "SYMHEAP_MSGBENCH_SIZES"
	msgBenchMark   = "msgbench-result"
	msgBenchCtlTag = symheap.MaxTag
)

var (
	figMu      sync.Mutex
	msgFigures = map[string]map[int64]float64{} // group -> size -> figure
)

// runMsgGroup runs one group: in a PE of its job, the measurement; in the
// parent, the job, then a sub-benchmark per size.
func runMsgGroup(b *testing.B, g msgBenchGroup) {
	b.Run(g.name, func(b *testing.B) {
		if name := os.Getenv(envMsgBench); name != "" {
			if name == b.Name() {
				msgBenchPE(b, g)
			}
			return
		}
		figs, err := msgBenchJob(b, g)
		if err != nil {
			b.Fatal(err)
		}
		figMu.Lock()
		msgFigures[g.name] = figs
		figMu.Unlock()
		_, quick := msgBenchBudget()
		for _, size := range g.sizesFor(quick) {
			b.Run(sizeName(size), func(b *testing.B) { reportMsg(b, g, size, figs[size], quick) })
		}
	})
}

// reportMsg reports one size's figures beside Open MPI's.
func reportMsg(b *testing.B, g msgBenchGroup, size int64, ours float64, quick bool) {
	if ours <= 0 {
		b.Fatalf("the PEs printed no figure for %d bytes", size)
	}
	if g.stream {
		b.ReportMetric(float64(size)/ours*1e3, "ns/op")
		b.ReportMetric(ours, "MB/s")
	} else {
		b.ReportMetric(ours, "ns/op")
	}
	if g.versus != "" {
		figMu.Lock()
		other := msgFigures[g.versus][size]
		figMu.Unlock()
		if other > 0 {
			b.ReportMetric(ours/other, "x-rendezvous")
		}
	}
	if g.peer == "" {
		return
	}
	mpi, floor, err := msgPeerFigures(quick)
	if !g.stream && floor > 0 {
		b.ReportMetric(floor, "floor-ns")
	}
	if err != nil {
		b.Logf("no Open MPI comparison: %v", err)
		return
	}
	r, ok := peers.Find(mpi, g.peer, size)
	if !ok || r.Value <= 0 {
		b.Logf("no Open MPI figure for %s %d", g.peer, size)
		return
	}
	if g.stream {
		b.ReportMetric(r.Value, "openmpi-MB/s")
		b.ReportMetric(ours/r.Value, "x-openmpi")
	} else {
		theirs := r.Value * 1000 // us
		b.ReportMetric(theirs, "openmpi-ns/op")
		b.ReportMetric(ours/theirs, "x-openmpi")
	}
}

func sizeName(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// msgReps is how many timed repetitions each figure is the best of, here
// and for Open MPI: many short ones, so that on a shared machine some fall
// in a quiet moment.
const msgReps = 8

// msgBenchBudget is the time budget per size, all repetitions together,
// in the PEs (and for Open MPI), and whether the run is a quick one
// (-benchtime=Nx).
func msgBenchBudget() (time.Duration, bool) {
	f := flag.Lookup("test.benchtime")
	if f == nil {
		return 200 * time.Millisecond, false
	}
	v := f.Value.String()
	if strings.HasSuffix(v, "x") {
		return 3 * time.Millisecond, true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		d = time.Second
	}
	return d / 5, false
}

// msgBenchJob launches a group's PEs and collects PE 0's figures.
func msgBenchJob(b *testing.B, g msgBenchGroup) (map[int64]float64, error) {
	budget, quick := msgBenchBudget()
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	shared := "8m"
	if g.shared {
		shared = "160m"
	}
	env := append([]string{envMsgBench + "=" + b.Name(), envMsgBudget + "=" + budget.String(),
		envMsgQuick + "=" + strconv.FormatBool(quick), "SYMHEAP_SHARED_SIZE=" + shared}, g.env...)
	var out bytes.Buffer
	res, err := launch.Run(context.Background(), launch.Options{
		N: 2, Heap: "8m", Timeout: 5 * time.Minute, Stdout: &out, Stderr: &out, Env: env,
	}, exe, "-test.run=^$", "-test.bench="+msgBenchPattern(b.Name()), "-test.benchtime=1x", "-test.count=1")
	if err != nil || res.Status != 0 {
		return nil, fmt.Errorf("benchmark job: %v (status %d); output:\n%s", err, res.Status, out.String())
	}
	figs := map[int64]float64{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 4 && f[0] == msgBenchMark && f[1] == b.Name() {
			size, _ := strconv.ParseInt(f[2], 10, 64)
			figs[size], _ = strconv.ParseFloat(f[3], 64)
		}
	}
	return figs, nil
}

// msgBenchPattern is the -test.bench value that selects exactly benchmark
// name (each level anchored).
func msgBenchPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

var (
	peerOnce  sync.Once
	peerMPI   []peers.Result
	peerFloor float64
	peerErr   error
)

// msgPeerFigures runs Open MPI's MPI harness (ping-pong and stream, both
// windows) and the cache-line ping-pong once per process.
func msgPeerFigures(quick bool) ([]peers.Result, float64, error) {
	peerOnce.Do(func() {
		dir := peersDir()
		budget, _ := msgBenchBudget()
		spec := peers.Spec{Dir: dir, Timeout: 5 * time.Minute, Budget: budget, Reps: msgReps}
		if quick {
			spec.Reps, spec.Warmup, spec.MinIters = 3, 20, 1
		}
		if peers.HarnessAvailable(peers.Cacheline) == nil {
			cl := spec
			cl.Harness, cl.Tests = peers.Cacheline, []string{"proc_lat"}
			if rs, err := peers.Run(context.Background(), cl); err == nil {
				if r, ok := peers.Find(rs, "proc_lat", 64); ok {
					peerFloor = r.Value
				}
			}
		}
		if err := peers.HarnessAvailable(peers.MPI); err != nil {
			peerErr = fmt.Errorf("skipping the Open MPI comparison: %w", err)
			return
		}
		if _, err := os.Stat(filepath.Join(dir, "mpi_bench")); err != nil {
			peerErr = fmt.Errorf("skipping the Open MPI comparison: mpi_bench is not built (make peers, or bench/peers/build.sh): %v", err)
			return
		}
		var small, large []int64
		for _, s := range streamSize {
			if streamWindow(s) == 64 {
				small = append(small, s)
			} else {
				large = append(large, s)
			}
		}
		runs := []peers.Spec{
			{Tests: []string{"pingpong_lat"}, Sizes: pingSizes},
			{Tests: []string{"stream_bw"}, Sizes: small, Window: 64},
			{Tests: []string{"stream_bw"}, Sizes: large, Window: int(streamWindow(large[0]))},
		}
		for _, r := range runs {
			s := spec
			s.Harness, s.NP, s.Tests, s.Sizes, s.Window = peers.MPI, 2, r.Tests, r.Sizes, r.Window
			rs, err := peers.Run(context.Background(), s)
			if err != nil {
				peerErr = fmt.Errorf("Open MPI: %w", err)
				return
			}
			peerMPI = append(peerMPI, rs...)
		}
	})
	return peerMPI, peerFloor, peerErr
}

// peersDir is where the peer harnesses are built.
func peersDir() string {
	for _, d := range []string{os.Getenv("SYMHEAP_PEERS_DIR"), filepath.Join("bench", "peers", "bin"), peers.DefaultDir()} {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "mpi_bench")); err == nil {
			return d
		}
	}
	return peers.DefaultDir()
}

// msgBenchPE is one PE of a benchmark job: it measures every size of the
// group and PE 0 prints the figures.
func msgBenchPE(b *testing.B, g msgBenchGroup) {
	budget, err := time.ParseDuration(os.Getenv(envMsgBudget))
	if err != nil {
		b.Fatalf("%s: %v", envMsgBudget, err)
	}
	sizes := g.sizesFor(os.Getenv(envMsgQuick) == "true")
	pe, err := symheap.Init(symheap.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer pe.Close()
	if pe.Size() != 2 {
		b.Fatalf("a job of %d PEs, want 2", pe.Size())
	}
	// Each PE on a CPU of its own, as mpirun binds its ranks to cores
	// and the cache-line harness pins its two sides.
	if _, err := unix.PinProcess(pe.Rank()); err != nil {
		b.Logf("PE %d not pinned to a CPU: %v", pe.Rank(), err)
	}
	var maxSize int64
	for _, s := range sizes {
		maxSize = max(maxSize, s)
	}
	var sbuf, rbuf []byte
	if g.shared {
		if sbuf, err = symheap.SharedAlloc[byte](pe, int(maxSize)+1); err == nil {
			rbuf, err = symheap.SharedAlloc[byte](pe, int(maxSize)+1)
		}
		if err != nil {
			b.Fatal(err)
		}
	} else {
		sbuf, rbuf = make([]byte, maxSize+1), make([]byte, maxSize+1)
	}
	for i := range sbuf {
		sbuf[i] = byte(i)
	}
	m := &msgBencher{b: b, pe: pe, peer: 1 - pe.Rank(), budget: budget, quick: os.Getenv(envMsgQuick) == "true"}
	for _, size := range sizes {
		if err := pe.Barrier(); err != nil {
			b.Fatal(err)
		}
		var v float64
		if w := streamWindow(size); g.stream {
			perMsg := m.measure(func(n int) { m.stream(n, sbuf[:size], rbuf[:size], w) }, size*w) / float64(w)
			v = float64(size) / perMsg * 1e3 // MB/s: bytes per ns is GB/s
		} else {
			v = m.measure(func(n int) { m.pingPong(n, sbuf[:size], rbuf[:size]) }, 2*size) / 2
		}
		if pe.Rank() == 0 {
			fmt.Printf("%s %s %d %g\n", msgBenchMark, b.Name(), size, v)
		}
	}
}

// msgBencher runs timed loops on the two PEs of a benchmark job.
type msgBencher struct {
	b      *testing.B
	pe     *symheap.PE
	peer   int
	budget time.Duration // per size, all repetitions
	quick  bool
}

func (m *msgBencher) check(err error) {
	if err != nil {
		m.b.Fatal(err)
	}
}

// agree gives PE 1 PE 0's value of n.
func (m *msgBencher) agree(n int) int {
	var w [8]byte
	if m.pe.Rank() == 0 {
		binary.LittleEndian.PutUint64(w[:], uint64(n))
		m.check(m.pe.Send(w[:], m.peer, msgBenchCtlTag))
		return n
	}
	_, err := m.pe.Recv(w[:], m.peer, msgBenchCtlTag)
	m.check(err)
	return int(binary.LittleEndian.Uint64(w[:]))
}

// measure returns the best of the timed repetitions of loop, in ns per
// iteration (a round trip, or a window), as PE 0 timed it. bytesPerIter
// sizes the warm-up.
func (m *msgBencher) measure(loop func(n int), bytesPerIter int64) float64 {
	warm := m.agree(int(min(max(64<<20/max(bytesPerIter, 1), 2), 1000)))
	start := time.Now()
	loop(warm)
	per := float64(time.Since(start).Nanoseconds()) / float64(warm)
	reps := msgReps
	if m.quick {
		reps = 3
	}
	n := m.agree(int(min(max(float64(m.budget.Nanoseconds())/float64(reps)/per, 1), 2e6)))
	best := 0.0
	for range reps {
		start := time.Now()
		loop(n)
		v := float64(time.Since(start).Nanoseconds()) / float64(n)
		if best == 0 || v < best {
			best = v
		}
	}
	return best
}

// pingPong runs n round trips.
func (m *msgBencher) pingPong(n int, sbuf, rbuf []byte) {
	pe := m.pe
	for range n {
		if pe.Rank() == 0 {
			m.check(pe.Send(sbuf, m.peer, 1))
			_, err := pe.Recv(rbuf, m.peer, 1)
			m.check(err)
		} else {
			_, err := pe.Recv(rbuf, m.peer, 1)
			m.check(err)
			m.check(pe.Send(sbuf, m.peer, 1))
		}
	}
}

// stream runs n windows of w messages and their acknowledgements.
func (m *msgBencher) stream(n int, sbuf, rbuf []byte, w int64) {
	pe := m.pe
	reqs := make([]*symheap.Request, w)
	var ack [4]byte
	for range n {
		for i := range reqs {
			var err error
			if pe.Rank() == 0 {
				reqs[i], err = pe.Isend(sbuf, m.peer, 2)
			} else {
				reqs[i], err = pe.Irecv(rbuf, m.peer, 2)
			}
			m.check(err)
		}
		for _, r := range reqs {
			_, err := r.Wait()
			m.check(err)
		}
		if pe.Rank() == 0 {
			_, err := pe.Recv(ack[:], m.peer, 3)
			m.check(err)
		} else {
			m.check(pe.Send(ack[:], m.peer, 3))
		}
	}
}

// BenchmarkMsgLocal measures the software cost of messaging in this
// process alone: a lone PE (no launcher) sending 8-byte messages to
// itself, so that the figures hold no cache-line transfer between cores,
// only what the code adds. They are the figures to profile (-cpuprofile)
// when the two-PE ones move.
func BenchmarkMsgLocal(b *testing.B) {
	if os.Getenv(envMsgBench) != "" || os.Getenv("SYMHEAP_PE") != "" {
		b.Skip("runs outside a job only")
	}
	pe, err := symheap.Init(symheap.Config{HeapSize: 8 << 20, SharedSize: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer pe.Close()
	sbuf, rbuf := make([]byte, 8), make([]byte, 8)
	check := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	b.Run("Send+Recv", func(b *testing.B) {
		for range b.N {
			check(pe.Send(sbuf, 0, 1))
			_, err := pe.Recv(rbuf, 0, 1)
			check(err)
		}
	})
	b.Run("Irecv+Send+Wait", func(b *testing.B) { // the receive is posted first
		for range b.N {
			r, err := pe.Irecv(rbuf, 0, 1)
			check(err)
			check(pe.Send(sbuf, 0, 1))
			_, err = r.Wait()
			check(err)
		}
	})
	for _, release := range []bool{false, true} {
		name := "Window64"
		if release {
			name += "+Release"
		}
		b.Run(name, func(b *testing.B) { // per message: 64 Isends, 64 Irecvs, every Wait (and Release)
			b.ReportAllocs()
			reqs := make([]*symheap.Request, 128)
			for i := 0; i < b.N; i += 64 {
				for j := range 64 {
					reqs[j], err = pe.Irecv(rbuf, 0, 2)
					check(err)
					reqs[64+j], err = pe.Isend(sbuf, 0, 2)
					check(err)
				}
				for _, r := range reqs {
					_, err := r.Wait()
					check(err)
					if release {
						check(r.Release())
					}
				}
			}
		})
	}
}
