package rcache

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/errs"
)

const base = 0x7000_0000_0000

func TestGetHitMissAndLazyTransports(t *testing.T) {
	a, b := newFakeReg("a"), newFakeReg("b")
	c := newTestCache(t, Config{}, a, b)

	e1 := mustGet(t, c, rg(base+100, base+200), Transports(0))
	if e1.Range() != rg(base, base+page) {
		t.Errorf("range not rounded to the page: %v", e1.Range())
	}
	if e1.Transports() != Transports(0) || e1.Handle(1) != nil {
		t.Errorf("transport 1 registered eagerly: %v", e1.Transports())
	}
	// Same page, other transport: a hit that registers b lazily.
	e2 := mustGet(t, c, rg(base+300, base+400), Transports(0, 1))
	if e2 != e1 || e2.Transports() != Transports(0, 1) {
		t.Errorf("lazy registration: %p %p %v", e1, e2, e2.Transports())
	}
	mustPut(t, c, e1)
	mustPut(t, c, e2)
	if err := c.Put(e2); !errors.Is(err, errs.ErrBadArg) {
		t.Errorf("extra Put: %v", err)
	}
	s := c.Stats()
	if s.Hits != 1 || s.Misses != 1 || s.Registrations != 2 || s.Entries != 1 || s.Held != 0 || s.Bytes != page || s.BytesRegistered != 2*page {
		t.Errorf("stats %+v", s)
	}
	if _, err := c.Get(rg(base, base), Transports(0)); !errors.Is(err, errs.ErrBadArg) {
		t.Errorf("empty range: %v", err)
	}
	if _, err := c.Get(rg(base, base+1), Transports(2)); !errors.Is(err, errs.ErrBadArg) {
		t.Errorf("unknown transport: %v", err)
	}
	if _, err := c.Get(rg(base, base+1), 0); !errors.Is(err, errs.ErrBadArg) {
		t.Errorf("no transport: %v", err)
	}
}

func TestOverlappingEntriesCoexist(t *testing.T) {
	a := newFakeReg("a")
	c := newTestCache(t, Config{}, a)
	small := mustGet(t, c, rg(base+page, base+2*page), 1)
	big := mustGet(t, c, rg(base, base+4*page), 1) // not contained in small: a miss
	if small == big {
		t.Fatal("one entry for two ranges")
	}
	other := mustGet(t, c, rg(base+3*page, base+6*page), 1)
	// A range both small and big contain: the largest wins.
	if e := mustGet(t, c, rg(base+page, base+page+10), 1); e != big {
		t.Errorf("lookup returned %v, want the largest %v", e.Range(), big.Range())
	} else {
		mustPut(t, c, e)
	}
	found, err := c.Find(rg(base+3*page+1, base+3*page+2), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 2 || found[0] != big || found[1] != other {
		t.Errorf("Find: %v", found)
	}
	for _, e := range append(found, small, big, other) {
		mustPut(t, c, e)
	}
	if s := c.Stats(); s.Entries != 3 || s.Misses != 3 || s.Hits != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestInvalidateIdleAndHeld(t *testing.T) {
	a := newFakeReg("a")
	c := newTestCache(t, Config{}, a)
	idle := mustGet(t, c, rg(base, base+page), 1)
	mustPut(t, c, idle)
	held := mustGet(t, c, rg(base+2*page, base+3*page), 1)
	far := mustGet(t, c, rg(base+8*page, base+9*page), 1)
	mustPut(t, c, far)

	c.Invalidate(rg(base+100, base+2*page+1)) // touches idle and held, not far
	if a.nLive() != 3 {
		t.Errorf("deregistered inside Invalidate")
	}
	e := mustGet(t, c, rg(base, base+page), 1)
	if e == idle || !idle.Range().Contains(e.Range()) || idle.Valid() || held.Valid() || !far.Valid() {
		t.Errorf("after invalidation: new %p old %p valid idle %v held %v far %v", e, idle, idle.Valid(), held.Valid(), far.Valid())
	}
	if a.nLive() != 3 { // idle deregistered, e registered, held still live
		t.Errorf("%d live registrations", a.nLive())
	}
	if held.Handle(0) == nil {
		t.Errorf("a held invalid entry lost its handle")
	}
	e2 := mustGet(t, c, rg(base+2*page, base+3*page), 1)
	if e2 == held {
		t.Errorf("invalid held entry returned by Get")
	}
	mustPut(t, c, held)
	if a.nLive() != 3 {
		t.Errorf("held entry not deregistered at its last Put: %d live", a.nLive())
	}
	mustPut(t, c, e)
	mustPut(t, c, e2)
	if s := c.Stats(); s.Invalidations != 2 || s.Events != 1 || s.Deregistrations != 2 {
		t.Errorf("stats %+v", s)
	}
}

func TestLimitsEvictFromLRU(t *testing.T) {
	a := newFakeReg("a")
	c := newTestCache(t, Config{MaxEntries: 3, MaxBytes: 5 * page}, a)
	var es []*Entry
	for i := uintptr(0); i < 3; i++ {
		es = append(es, mustGet(t, c, rg(base+i*page*4, base+i*page*4+page), 1))
	}
	// All held: a fourth exceeds the limit, nothing can be evicted.
	held := mustGet(t, c, rg(base+100*page, base+101*page), 1)
	if s := c.Stats(); s.Entries != 4 || s.Evictions != 0 {
		t.Errorf("held entries evicted: %+v", s)
	}
	mustPut(t, c, es[1]) // LRU: es1
	mustPut(t, c, es[0]) // LRU: es0 es1 — es1 goes first
	if es[1].Valid() || !es[0].Valid() {
		t.Errorf("LRU order: es0 valid %v, es1 valid %v", es[0].Valid(), es[1].Valid())
	}
	mustPut(t, c, es[2])
	mustPut(t, c, held)
	// A 4-page entry: the byte limit evicts the least recently used.
	big := mustGet(t, c, rg(base+200*page, base+204*page), 1)
	if s := c.Stats(); s.Bytes > 5*page || s.Entries > 3 {
		t.Errorf("over the limits with idle entries left: %+v", s)
	}
	mustPut(t, c, big)
	if n := c.Evict(100); n == 0 {
		t.Errorf("Evict found nothing")
	}
	if s := c.Stats(); s.Entries != 0 || a.nLive() != 0 {
		t.Errorf("after Evict: %+v, %d live", s, a.nLive())
	}
}

func TestMergePolicy(t *testing.T) {
	a := newFakeReg("a")
	c := newTestCache(t, Config{Merge: true}, a)
	e1 := mustGet(t, c, rg(base, base+2*page), 1)
	mustPut(t, c, e1)
	e2 := mustGet(t, c, rg(base+4*page, base+6*page), 1)
	// Overlaps both: the new entry is the union; the idle e1 is retired, the
	// held e2 stays.
	e3 := mustGet(t, c, rg(base+page, base+5*page), 1)
	if e3.Range() != rg(base, base+6*page) {
		t.Errorf("merged range %v", e3.Range())
	}
	if e1.Valid() || !e2.Valid() {
		t.Errorf("e1 valid %v, e2 valid %v", e1.Valid(), e2.Valid())
	}
	if s := c.Stats(); s.Merges != 1 || s.Entries != 2 {
		t.Errorf("stats %+v", s)
	}
	mustPut(t, c, e2)
	mustPut(t, c, e3)
}

func TestRegisterFailure(t *testing.T) {
	a, b := newFakeReg("a"), newFakeReg("b")
	boom := errors.New("device says no")
	b.fail = func(r Range) error {
		if r.Start >= base+10*page {
			return boom
		}
		return nil
	}
	var reported []error
	c := newTestCache(t, Config{OnError: func(err error) { reported = append(reported, err) }}, a, b)

	// Nothing registered: the entry must not stay in the way.
	if _, err := c.Get(rg(base+10*page, base+11*page), Transports(1)); !errors.Is(err, boom) {
		t.Fatalf("error not passed on: %v", err)
	}
	if s := c.Stats(); s.Entries != 0 || s.RegisterErrors != 1 {
		t.Errorf("failed entry kept: %+v", s)
	}
	// Transport a registered, b fails: the entry stays, with a.
	if _, err := c.Get(rg(base+10*page, base+11*page), Transports(0, 1)); !errors.Is(err, boom) {
		t.Fatalf("error not passed on: %v", err)
	}
	e := mustGet(t, c, rg(base+10*page, base+11*page), Transports(0))
	if s := c.Stats(); s.Hits != 1 || s.Entries != 1 {
		t.Errorf("stats %+v", s)
	}
	mustPut(t, c, e)
	if len(reported) != 0 {
		t.Errorf("errors reported: %v", reported)
	}
}

func TestInvalidationQueueIsBounded(t *testing.T) {
	a := newFakeReg("a")
	c := newTestCache(t, Config{QueueLen: 8}, a)
	var es []*Entry
	for i := uintptr(0); i < 64; i++ {
		e := mustGet(t, c, rg(base+2*i*page, base+2*i*page+page), 1)
		es = append(es, e)
		mustPut(t, c, e)
	}
	// 32 events on the even entries, more than the queue holds.
	for i := uintptr(0); i < 64; i += 2 {
		c.Invalidate(rg(base+2*i*page+10, base+2*i*page+20))
	}
	c.Flush()
	for i, e := range es {
		if i%2 == 0 && e.Valid() {
			t.Errorf("entry %d missed its invalidation", i)
		}
	}
	s := c.Stats()
	if s.QueueMerges == 0 || s.Events != 32 {
		t.Errorf("stats %+v", s)
	}
	t.Logf("32 events through a queue of 8: %d compactions, %d of 64 entries invalidated", s.QueueMerges, s.Invalidations)
}

func TestWorkerDeregisters(t *testing.T) {
	a := newFakeReg("a")
	c := newTestCache(t, Config{Worker: true}, a)
	e := mustGet(t, c, rg(base, base+page), 1)
	mustPut(t, c, e)
	c.Invalidate(rg(base, base+1))
	deadline := time.Now().Add(5 * time.Second)
	for a.nLive() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the worker did not deregister the invalid entry")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestClose(t *testing.T) {
	a := newFakeReg("a")
	c := newTestCache(t, Config{}, a)
	held := mustGet(t, c, rg(base, base+page), 1)
	idle := mustGet(t, c, rg(base+page, base+2*page), 1)
	mustPut(t, c, idle)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if a.nLive() != 1 || held.Valid() {
		t.Errorf("after Close: %d live, held valid %v", a.nLive(), held.Valid())
	}
	if _, err := c.Get(rg(base, base+1), 1); !errors.Is(err, errs.ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	mustPut(t, c, held)
	if a.nLive() != 0 {
		t.Errorf("held entry not deregistered at Put after Close")
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{Registrars: []Registrar{nil}},
		{Registrars: []Registrar{newFakeReg("a")}, Align: 3000},
		{Registrars: []Registrar{newFakeReg("a")}, MaxEntries: -1},
	} {
		if _, err := New(cfg); !errors.Is(err, errs.ErrBadConfig) {
			t.Errorf("New(%+v): %v", cfg, err)
		}
	}
}

func TestHitAllocatesNothing(t *testing.T) {
	a := newFakeReg("a")
	c := newTestCache(t, Config{}, a)
	if c.verify {
		t.Skip("SYMHEAP_RCACHE_VERIFY checks every call, which allocates")
	}
	for i := uintptr(0); i < 100; i++ {
		mustPut(t, c, mustGet(t, c, rg(base+i*page, base+i*page+page), 1))
	}
	i := uintptr(0)
	n := testing.AllocsPerRun(1000, func() {
		i = (i + 7) % 100
		e, _ := c.Get(rg(base+i*page+8, base+i*page+64), 1)
		c.Put(e)
	})
	if n != 0 {
		t.Errorf("a hit allocates %v times", n)
	}
}

func TestTransports(t *testing.T) {
	s := Transports(0, 3, 63)
	if !s.Has(0) || !s.Has(3) || !s.Has(63) || s.Has(1) {
		t.Errorf("%#x", uint64(s))
	}
	if fmt.Sprint(Transports()) != "0" {
		t.Errorf("empty set")
	}
}
