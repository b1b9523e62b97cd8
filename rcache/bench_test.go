package rcache

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/unix"
	"github.com/symheap/symheap/memhook"
	"github.com/symheap/symheap/rcache/pin"
)

// go test -run XXX -bench . -benchtime 1s ./rcache

// nopReg registers nothing: the benchmarks of the cache itself use it.
type nopReg struct{}

func (nopReg) Name() string                       { return "nop" }
func (nopReg) Register(r Range) (Handle, error)   { return nil, nil }
func (nopReg) Deregister(r Range, h Handle) error { return nil }

// filledCache returns a cache (with a monitor attached, as the runtime has)
// holding n idle 64 KiB entries, and their ranges.
func filledCache(b *testing.B, n int) (*Cache, []Range) {
	mon := memhook.New()
	c, err := New(Config{Registrars: []Registrar{nopReg{}}, Monitor: mon})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close(); mon.Close() })
	rs := make([]Range, n)
	for i := range rs {
		s := base + uintptr(i)*(80<<10)
		rs[i] = rg(s, s+64<<10)
		e, err := c.Get(rs[i], 1)
		if err != nil {
			b.Fatal(err)
		}
		c.Put(e)
	}
	return c, rs
}

// threadCPU returns the CPU time the calling OS thread has used. On a
// machine shared with other work, ns/op counts the time the benchmark waited
// for a CPU; cpu-ns/op, from this, does not.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuTimed runs loop(b.N) on a locked thread and reports its CPU time per
// operation as cpu-ns/op.
func cpuTimed(b *testing.B, loop func(n int)) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	t0 := threadCPU()
	loop(b.N)
	cpu := threadCPU() - t0
	b.StopTimer()
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkHit: a Get that finds its entry, with the Put that gives it back,
// in a cache of 1000 entries. "same" repeats one buffer (the memo answers),
// "rotating" cycles through all 1000 (the tree answers), "get-only" is Get
// alone, "parallel" runs one buffer per goroutine on every P.
func BenchmarkHit(b *testing.B) {
	b.Run("same", func(b *testing.B) {
		c, rs := filledCache(b, 1000)
		r := rg(rs[500].Start+100, rs[500].Start+4000)
		b.ReportAllocs()
		cpuTimed(b, func(n int) {
			for i := 0; i < n; i++ {
				e, _ := c.Get(r, 1)
				c.Put(e)
			}
		})
	})
	b.Run("rotating", func(b *testing.B) {
		c, rs := filledCache(b, 1000)
		b.ReportAllocs()
		cpuTimed(b, func(n int) {
			for i := 0; i < n; i++ {
				r := rs[(i*7)%len(rs)]
				e, _ := c.Get(rg(r.Start+100, r.Start+4000), 1)
				c.Put(e)
			}
		})
	})
	b.Run("get-only", func(b *testing.B) {
		c, rs := filledCache(b, 1000)
		r := rg(rs[500].Start+100, rs[500].Start+4000)
		e, _ := c.Get(r, 1)
		b.ReportAllocs()
		cpuTimed(b, func(n int) {
			for i := 0; i < n; i++ {
				c.Get(r, 1)
			}
		})
		for i := 0; i <= b.N; i++ {
			c.Put(e)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		c, rs := filledCache(b, 1000)
		var next int64
		var mu = make(chan struct{}, 1)
		mu <- struct{}{}
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			<-mu
			r := rs[next%int64(len(rs))]
			next++
			mu <- struct{}{}
			for pb.Next() {
				e, _ := c.Get(r, 1)
				c.Put(e)
			}
		})
	})
}

// mapTouched maps n bytes and touches every page, so that registrations
// measure pinning, not first faults.
func mapTouched(b *testing.B, n int) unix.Mapping {
	m, err := unix.MapAnon(n)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i += page {
		m.Mem[i] = 1
	}
	b.Cleanup(func() { unix.Unmap(m) })
	return m
}

// BenchmarkMissPin: every Get misses and registers with the pin registrar
// (mlock + MADV_DONTFORK); with MaxEntries 1 it also evicts, so each
// operation includes the deregistration (munlock + MADV_DOFORK) of the
// previous buffer: the steady-state cost of a miss.
func BenchmarkMissPin(b *testing.B) {
	for _, size := range []int{4 << 10, 64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			const bufs = 16
			m := mapTouched(b, bufs*size)
			all := memhook.RangeOf(m.Mem)
			c, err := New(Config{Registrars: []Registrar{pin.New()}, MaxEntries: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s := all.Start + uintptr((i%bufs)*size)
				e, err := c.Get(rg(s, s+uintptr(size)), 1)
				if err != nil {
					b.Fatal(err)
				}
				c.Put(e)
			}
			b.StopTimer()
			if s := c.Stats(); s.Hits != 0 {
				b.Fatalf("%d hits", s.Hits)
			}
		})
	}
}

// BenchmarkHitVsFresh1MiB measures, in one run, registering a 1 MiB buffer
// afresh for each transfer (pin Register + Deregister, what a runtime
// without a cache pays) and a cache hit on the same buffer (Get + Put), and
// reports the ratio.
func BenchmarkHitVsFresh1MiB(b *testing.B) {
	const size = 1 << 20
	m := mapTouched(b, size)
	r := memhook.RangeOf(m.Mem)
	p := pin.New()
	c, err := New(Config{Registrars: []Registrar{p}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	e, err := c.Get(r, 1)
	if err != nil {
		b.Fatal(err)
	}
	c.Put(e)
	fresh := pin.New()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()

	t0, c0 := time.Now(), threadCPU()
	for i := 0; i < b.N; i++ {
		h, err := fresh.Register(r)
		if err != nil {
			b.Fatal(err)
		}
		fresh.Deregister(r, h)
	}
	// A hit is some thousand times cheaper: run a thousand times as
	// many, so that both phases last long enough to be timed.
	t1, c1 := time.Now(), threadCPU()
	hits := 1000 * b.N
	for i := 0; i < hits; i++ {
		e, _ := c.Get(r, 1)
		c.Put(e)
	}
	t2, c2 := time.Now(), threadCPU()
	per := func(d time.Duration, n int) float64 { return float64(d.Nanoseconds()) / float64(n) }
	freshNs, hitNs := per(t1.Sub(t0), b.N), per(t2.Sub(t1), hits)
	freshCPU, hitCPU := per(c1-c0, b.N), per(c2-c1, hits)
	b.ReportMetric(freshNs, "fresh-ns/op")
	b.ReportMetric(hitNs, "hit-ns/op")
	b.ReportMetric(freshNs/hitNs, "speedup")
	b.ReportMetric(freshCPU, "fresh-cpu-ns/op")
	b.ReportMetric(hitCPU, "hit-cpu-ns/op")
	b.ReportMetric(freshCPU/hitCPU, "cpu-speedup")
}

// BenchmarkInvalidate10k: 10 000 idle entries are invalidated and
// deregistered (no-op registrar, to measure the cache): by one event covering
// them all, or by one event each (more than the queue holds, so the queue
// compacts).
func BenchmarkInvalidate10k(b *testing.B) {
	const n = 10000
	for _, perEntry := range []bool{false, true} {
		name := "one-event"
		if perEntry {
			name = "10k-events"
		}
		b.Run(name, func(b *testing.B) {
			c, err := New(Config{Registrars: []Registrar{nopReg{}}})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var cpu time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				for k := 0; k < n; k++ {
					s := base + uintptr(k)*2*page
					e, _ := c.Get(rg(s, s+page), 1)
					c.Put(e)
				}
				b.StartTimer()
				c0 := threadCPU()
				if perEntry {
					for k := 0; k < n; k++ {
						s := base + uintptr(k)*2*page
						c.Invalidate(rg(s, s+1))
					}
				} else {
					c.Invalidate(rg(base, base+2*n*page))
				}
				c.Flush()
				cpu += threadCPU() - c0
			}
			b.StopTimer()
			if s := c.Stats(); s.Entries != 0 || s.Invalidations != uint64(n*b.N) {
				b.Fatalf("stats %+v", s)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/entry")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
