package rcache

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/symheap/symheap/memhook"
)

// genReg is a registrar for the stress test: each registration snapshots the
// generation of every page it covers. A page's generation goes up when its
// owner frees it; a registration whose snapshot differs from the current
// generations is stale, and Get must never return one to the owner.
type genReg struct {
	gens   []atomic.Uint64 // per page of the test's address space
	live   atomic.Int64
	regs   atomic.Uint64
	errors atomic.Uint64
}

type genHandle struct {
	r    Range
	snap []uint64
	dead atomic.Bool
}

func (g *genReg) Name() string { return "gen" }

func (g *genReg) pageOf(a uintptr) int { return int((a - base) / page) }

func (g *genReg) Register(r Range) (Handle, error) {
	h := &genHandle{r: r}
	for p := g.pageOf(r.Start); p < g.pageOf(r.End); p++ {
		h.snap = append(h.snap, g.gens[p].Load())
	}
	g.live.Add(1)
	g.regs.Add(1)
	return h, nil
}

func (g *genReg) Deregister(r Range, h Handle) error {
	gh := h.(*genHandle)
	if gh.r != r || gh.dead.Swap(true) {
		g.errors.Add(1)
		return fmt.Errorf("double or mismatched deregistration of %v", r)
	}
	g.live.Add(-1)
	return nil
}

// stale reports whether h registered an older generation of a page of r.
func (g *genReg) stale(h *genHandle, r Range) bool {
	first := g.pageOf(h.r.Start)
	for p := g.pageOf(r.Start); p < g.pageOf(r.End); p++ {
		if h.snap[p-first] != g.gens[p].Load() {
			return true
		}
	}
	return false
}

// TestStress runs owners (each frees and reuses its own pages, publishing
// the frees through a monitor, and checks it never gets a stale entry),
// finders, a foreign invalidator, an evicter and a stats reader at once.
// Run it under -race.
func TestStress(t *testing.T) {
	for _, cfg := range []struct {
		name   string
		worker bool
		merge  bool
		maxN   int
	}{{"plain", false, false, 0}, {"worker+limits", true, false, 40}, {"merge", false, true, 0}} {
		t.Run(cfg.name, func(t *testing.T) { stress(t, cfg.worker, cfg.merge, cfg.maxN) })
	}
}

func stress(t *testing.T, worker, merge bool, maxN int) {
	const owners, pagesPer, iters = 6, 32, 1500
	iterations := iters
	if testing.Short() {
		iterations = 300
	}
	// Each owner's region is followed by a guard gap, so no entry spans two.
	span := uintptr(pagesPer+8) * page
	g := &genReg{gens: make([]atomic.Uint64, owners*(pagesPer+8))}
	g2 := newFakeReg("b")
	mon := memhook.New()
	c, err := New(Config{Registrars: []Registrar{g, g2}, Monitor: mon, Worker: worker, Merge: merge, MaxEntries: maxN, QueueLen: 64})
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg, others sync.WaitGroup
	for o := 0; o < owners; o++ {
		wg.Add(1)
		go func(o int) {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(o), 99))
			lo := base + uintptr(o)*span
			var held []*Entry
			for i := 0; i < iterations; i++ {
				s := lo + uintptr(rnd.IntN(pagesPer*page))
				n := 1 + uintptr(rnd.IntN(6*page))
				if s+n > lo+pagesPer*page {
					n = lo + pagesPer*page - s
				}
				r := rg(s, s+n)
				switch op := rnd.IntN(10); {
				case op < 6:
					ts := TransportSet(1 + rnd.IntN(3))
					e, err := c.Get(r, ts)
					if err != nil {
						t.Error(err)
						return
					}
					if h, ok := e.Handle(0).(*genHandle); ts.Has(0) && (!ok || h.dead.Load() || g.stale(h, c.mustAlign(r))) {
						t.Errorf("owner %d: Get(%v) returned a stale or dead registration %v", o, r, e.Range())
						return
					}
					held = append(held, e)
				case op < 8 && len(held) > 0:
					k := rnd.IntN(len(held))
					c.Put(held[k])
					held = append(held[:k], held[k+1:]...)
				default:
					// Free: the pages get a new generation, then the
					// release is published, as an allocator does.
					ar := c.mustAlign(r)
					for p := g.pageOf(ar.Start); p < g.pageOf(ar.End); p++ {
						g.gens[p].Add(1)
					}
					mon.PublishFree(r.Start, r.Len())
				}
			}
			for _, e := range held {
				c.Put(e)
			}
		}(o)
	}
	// Finders: every entry they get must be registered (not deregistered).
	for f := 0; f < 2; f++ {
		others.Add(1)
		go func() {
			defer others.Done()
			var buf []*Entry
			for !stop.Load() {
				buf, _ = c.Find(rg(base, base+owners*span), buf[:0])
				for _, e := range buf {
					if h, ok := e.Handle(0).(*genHandle); ok && h.dead.Load() {
						t.Errorf("Find returned a deregistered handle for %v", e.Range())
					}
					c.Put(e)
				}
			}
		}()
	}
	others.Add(3)
	go func() { // foreign invalidations: spurious, but legal
		defer others.Done()
		rnd := rand.New(rand.NewPCG(5, 5))
		for !stop.Load() {
			s := base + uintptr(rnd.IntN(owners*int(span)))
			c.Invalidate(rg(s, s+uintptr(1+rnd.IntN(3*page))))
			time.Sleep(20 * time.Microsecond)
		}
	}()
	go func() {
		defer others.Done()
		for !stop.Load() {
			c.Evict(2)
		}
	}()
	go func() {
		defer others.Done()
		for !stop.Load() {
			s := c.Stats()
			if s.Held > s.Entries {
				t.Errorf("stats: %d held of %d entries", s.Held, s.Entries)
			}
		}
	}()
	wg.Wait()
	stop.Store(true)
	others.Wait()
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	s := c.Stats()
	if g.live.Load() != 0 || g2.nLive() != 0 || g.errors.Load() != 0 || s.Entries != 0 {
		t.Errorf("after Close: %d + %d live registrations, %d bad deregistrations, stats %+v", g.live.Load(), g2.nLive(), g.errors.Load(), s)
	}
	g2.done(t)
	t.Logf("%+v", s)
}

func (c *Cache) mustAlign(r Range) Range {
	ar, err := c.alignRange(r)
	if err != nil {
		panic(err)
	}
	return ar
}

// TestStressHotLRU hammers a few entries with Get and Put (the lock-free
// paths) while evictions and invalidations run, under tight limits, then
// checks that every idle entry is still on the LRU list and nothing leaked.
func TestStressHotLRU(t *testing.T) {
	a := newFakeReg("a")
	c, err := New(Config{Registrars: []Registrar{a}, MaxEntries: 2})
	if err != nil {
		t.Fatal(err)
	}
	iters := 20000
	if testing.Short() {
		iters = 3000
	}
	var wg sync.WaitGroup
	var stop atomic.Bool
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < iters; i++ {
				s := base + uintptr((g+i)%4)*page
				e, err := c.Get(rg(s, s+page), 1)
				if err != nil {
					t.Error(err)
					return
				}
				if i%3 == 0 {
					e2, _ := c.Get(rg(s, s+page), 1)
					c.Put(e2)
				}
				c.Put(e)
			}
		}(g)
	}
	var bg sync.WaitGroup
	bg.Add(2)
	go func() {
		defer bg.Done()
		for !stop.Load() {
			c.Evict(1)
		}
	}()
	go func() {
		defer bg.Done()
		for i := 0; !stop.Load(); i++ {
			s := base + uintptr(i%4)*page
			c.Invalidate(rg(s, s+1))
			time.Sleep(50 * time.Microsecond)
		}
	}()
	wg.Wait()
	stop.Store(true)
	bg.Wait()
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Held != 0 || s.Entries > 2 {
		t.Errorf("after the storm: %+v", s)
	}
	c.Close()
	a.done(t)
	t.Logf("%+v", c.Stats())
}
