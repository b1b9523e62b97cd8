package alloc_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/alloc/alloctest"
)

// Benchmarks of the allocator components, of Go's own allocator, and (in
// BenchmarkPeerMalloc) of C malloc implementations replaying the very same
// sequence of requests.
//
// # The pair workload
//
// A window of W slots holds live blocks. It is first filled with W
// allocations; then each step draws one 64-bit xorshift number r, frees the
// block in slot (r>>32)%W and allocates a new one there of size
//
//	base = lo << (r % 8)
//	size = base + (r>>8) % base
//
// and stores a byte into it. One step is one alloc+free pair. The generator
// (xorshift64 with shifts 13, 7, 17) starts from a fixed seed, so every
// contender, and bench/peers/malloc_bench.c, sees the same sizes in the
// same order.
//
//	class   lo       sizes           W
//	small   16 B     16 B .. 4 KiB   256
//	large   4 KiB    4 KiB .. 1 MiB  64
//
// To compare with the C mallocs (the ratios to glibc are reported as
// metrics; take the best of several rounds on a busy machine):
//
//	go test ./alloc/ -run '^$' -bench PeerMalloc -benchtime 5x
//	go test ./alloc/ -run '^$' -bench 'Pairs|Fragmentation' -benchtime 200ms

const benchSeed = 0x9E3779B97F4A7C15

type pairClass struct {
	name   string
	lo     uint64
	window int
}

var pairClasses = []pairClass{
	{"small", 16, 256},
	{"large", 4096, 64},
}

type xorshift uint64

func (x *xorshift) next() uint64 {
	v := uint64(*x)
	v ^= v << 13
	v ^= v >> 7
	v ^= v << 17
	*x = xorshift(v)
	return v
}

func (c pairClass) size(r uint64) uint64 {
	base := c.lo << (r % 8)
	return base + (r>>8)%base
}

const benchRegion = 256 << 20

// pairRunner replays the pair workload on one allocator.
type pairRunner struct {
	c     pairClass
	a     alloc.Allocator
	mem   []byte
	rng   xorshift
	slots []alloc.Off
}

func newPairRunner(tb testing.TB, comp alloc.Component, c pairClass) *pairRunner {
	mem := alloctest.NewRegion(tb, benchRegion)
	a, err := comp.Format(mem)
	if err != nil {
		tb.Fatal(err)
	}
	p := &pairRunner{c: c, a: a, mem: mem, rng: benchSeed, slots: make([]alloc.Off, c.window)}
	for i := range p.slots {
		off, err := a.Alloc(c.size(p.rng.next()), 0)
		if err != nil {
			tb.Fatal(err)
		}
		mem[off] = 1
		p.slots[i] = off
	}
	return p
}

// run does n pairs; it stops with an error on the first failure.
// The loop keeps its state in locals, as the C harness does.
func (p *pairRunner) run(n int) error {
	a, slots, mem, c, rng := p.a, p.slots, p.mem, p.c, p.rng
	defer func() { p.rng = rng }()
	w := uint64(len(slots))
	for i := 0; i < n; i++ {
		r := rng.next()
		s := (r >> 32) % w
		if err := a.Free(slots[s]); err != nil {
			return err
		}
		off, err := a.Alloc(c.size(r), 0)
		if err != nil {
			return err
		}
		mem[off] = byte(i)
		slots[s] = off
	}
	return nil
}

// goRunner is the same workload with make([]byte, n); the garbage
// collector does the freeing.
type goRunner struct {
	c     pairClass
	rng   xorshift
	slots [][]byte
}

func newGoRunner(c pairClass) *goRunner {
	g := &goRunner{c: c, rng: benchSeed, slots: make([][]byte, c.window)}
	for i := range g.slots {
		g.slots[i] = make([]byte, c.size(g.rng.next()))
	}
	return g
}

func (g *goRunner) run(n int) {
	w := uint64(len(g.slots))
	for i := 0; i < n; i++ {
		r := g.rng.next()
		b := make([]byte, g.c.size(r))
		b[0] = byte(i)
		g.slots[(r>>32)%w] = b
	}
}

// BenchmarkPairs measures alloc+free pairs (ns/op is ns per pair) for each
// component and for make([]byte, n).
func BenchmarkPairs(b *testing.B) {
	for _, c := range pairClasses {
		for _, comp := range alloc.Components() {
			b.Run(c.name+"/"+comp.Name, func(b *testing.B) {
				p := newPairRunner(b, comp, c)
				b.ResetTimer()
				if err := p.run(b.N); err != nil {
					b.Fatal(err)
				}
			})
		}
		b.Run(c.name+"/go-make", func(b *testing.B) {
			g := newGoRunner(c)
			b.ResetTimer()
			g.run(b.N)
		})
	}
}

// ---- fragmentation ----

// The fragmentation trace: 200,000 steps on an 8 MiB region. Each step
// allocates one block of size 16 B .. 64 KiB (log-uniform, as above with
// lo = 16 and 12 powers) that lives for 1 << (r>>20 % 12) steps, after
// which it is freed; blocks are freed in the order they fall due, and the
// ones due at the same step in allocation order. Every 1,000 steps past the
// first 20,000 the heap's figures are sampled. A failed allocation is
// counted and the step skipped.
const (
	fragRegion = 8 << 20
	fragSteps  = 200_000
	fragWarm   = 20_000
	fragEvery  = 1000
	fragLife   = 12
)

type fragResult struct {
	frag, maxFrag, util float64
	peak                float64 // peak live bytes asked for / (Size - Overhead)
	failed              int
}

func fragTrace(tb testing.TB, comp alloc.Component) fragResult {
	mem := alloctest.NewRegion(tb, fragRegion)
	a, err := comp.Format(mem)
	if err != nil {
		tb.Fatal(err)
	}
	type live struct {
		off  alloc.Off
		size uint64
	}
	due := make([][]live, 1<<fragLife)
	rng := xorshift(benchSeed)
	var res fragResult
	var reqLive uint64
	samples := 0
	for step := 0; step < fragSteps; step++ {
		bucket := step % len(due)
		for _, l := range due[bucket] {
			if err := a.Free(l.off); err != nil {
				tb.Fatal(err)
			}
			reqLive -= l.size
		}
		due[bucket] = due[bucket][:0]
		r := rng.next()
		base := uint64(16) << (r % fragLife)
		size := base + (r>>8)%base
		off, err := a.Alloc(size, 0)
		if err != nil {
			res.failed++
		} else {
			life := 1 << ((r >> 20) % fragLife)
			d := (step + life) % len(due)
			due[d] = append(due[d], live{off, size})
			reqLive += size
			res.peak = max(res.peak, float64(reqLive))
		}
		if step >= fragWarm && step%fragEvery == 0 {
			st := a.Stats()
			f := st.Fragmentation()
			res.frag += f
			res.maxFrag = max(res.maxFrag, f)
			// Useful bytes per byte taken from the heap (headers, rounding
			// and alignment gaps count against it).
			res.util += float64(reqLive) / float64(st.Size-st.Overhead-st.Free)
			samples++
		}
	}
	res.frag /= float64(samples)
	res.util /= float64(samples)
	st := a.Stats()
	res.peak /= float64(st.Size - st.Overhead)
	return res
}

// BenchmarkFragmentation replays the fragmentation trace; besides the time
// per replay it reports the mean and worst fragmentation (1 -
// LargestFree/Free), the mean utilisation of the bytes taken from the heap,
// and the failed allocations.
func BenchmarkFragmentation(b *testing.B) {
	for _, comp := range alloc.Components() {
		b.Run(comp.Name, func(b *testing.B) {
			var res fragResult
			for i := 0; i < b.N; i++ {
				res = fragTrace(b, comp)
			}
			b.ReportMetric(res.frag, "frag")
			b.ReportMetric(res.maxFrag, "maxfrag")
			b.ReportMetric(res.util, "util")
			b.ReportMetric(res.peak, "peaklive")
			b.ReportMetric(float64(res.failed), "failed")
		})
	}
}

// ---- C malloc peers ----

var peerBuild struct {
	once sync.Once
	dir  string
	bins []string // built binaries, by peer name
	err  error
}

// buildPeers runs bench/peers/build-malloc.sh once per process.
func buildPeers() (string, []string, error) {
	peerBuild.once.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..")
		script := filepath.Join(root, "bench", "peers", "build-malloc.sh")
		dir := filepath.Join(root, "bench", "peers", "bin")
		if _, err := exec.LookPath("bash"); err != nil {
			peerBuild.err = fmt.Errorf("bash not found: %v", err)
			return
		}
		out, err := exec.Command("bash", script, dir).CombinedOutput()
		peerBuild.dir = dir
		for _, name := range []string{"glibc", "jemalloc", "mimalloc"} {
			if _, serr := os.Stat(filepath.Join(dir, "malloc_bench_"+name)); serr == nil {
				peerBuild.bins = append(peerBuild.bins, name)
			}
		}
		if len(peerBuild.bins) == 0 {
			peerBuild.err = fmt.Errorf("%s built nothing (%v):\n%s", script, err, out)
		}
	})
	return peerBuild.dir, peerBuild.bins, peerBuild.err
}

// runPeer runs one C harness binary for n pairs of class c and returns its
// ns per pair (measured inside the process, start-up excluded).
func runPeer(dir, name string, c pairClass, n int) (float64, error) {
	bin := filepath.Join(dir, "malloc_bench_"+name)
	out, err := exec.Command(bin, c.name, strconv.Itoa(n), strconv.Itoa(c.window)).Output()
	if err != nil {
		return 0, fmt.Errorf("%s: %v", bin, err)
	}
	f := strings.Fields(string(bytes.TrimSpace(out)))
	if len(f) != 2 || f[0] != "ns_per_pair" {
		return 0, fmt.Errorf("%s: unexpected output %q", bin, out)
	}
	return strconv.ParseFloat(f[1], 64)
}

// BenchmarkPeerMalloc runs the pair workload in glibc malloc, jemalloc and
// mimalloc (bench/peers/malloc_bench.c, built by build-malloc.sh) and in
// each component, alternating, so that the ratios come from one run. Each
// b.N iteration is one round of every contender doing peerPairs pairs; the
// metrics are the best round of each (ns/pair) and each component's ratio
// to glibc.
func BenchmarkPeerMalloc(b *testing.B) {
	dir, peers, err := buildPeers()
	if err != nil {
		b.Skipf("C peers unavailable (need gcc and the libjemalloc-dev, libmimalloc-dev packages): %v", err)
	}
	const peerPairs = 1_000_000
	for _, c := range pairClasses {
		b.Run(c.name, func(b *testing.B) {
			best := map[string]float64{}
			note := func(name string, ns float64) {
				if v, ok := best[name]; !ok || ns < v {
					best[name] = ns
				}
			}
			comps := alloc.Components()
			for i := 0; i < b.N; i++ {
				for j, peer := range peers {
					ns, err := runPeer(dir, peer, c, peerPairs)
					if err != nil {
						b.Fatal(err)
					}
					note(peer, ns)
					// Alternate: one component after each peer.
					for k, comp := range comps {
						if k%len(peers) != j {
							continue
						}
						p := newPairRunner(b, comp, c)
						start := time.Now()
						if err := p.run(peerPairs); err != nil {
							b.Fatal(err)
						}
						note(comp.Name, float64(time.Since(start).Nanoseconds())/peerPairs)
					}
				}
			}
			names := slices.Sorted(func(yield func(string) bool) {
				for n := range best {
					if !yield(n) {
						return
					}
				}
			})
			for _, n := range names {
				b.ReportMetric(best[n], n+"-ns/pair")
			}
			if g, ok := best["glibc"]; ok {
				for _, comp := range comps {
					b.ReportMetric(best[comp.Name]/g, comp.Name+"/glibc")
				}
			}
		})
	}
}
