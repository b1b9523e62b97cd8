package rcache

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

// The model: a plain list of entries and the rules of the cache written as
// directly as possible. Random operation sequences run against both; after
// every step the cache's invariants are checked (Check: tree order, AVL
// balance, maxEnd, LRU, figures) and its answers and figures are compared
// with the model's.

type mEntry struct {
	r     Range
	id    uint64
	refs  int
	valid bool
	stamp uint64 // when it last became idle: the LRU evicts the smallest
	have  TransportSet
	e     *Entry
}

type model struct {
	t       testing.TB
	c       *Cache
	regs    []*fakeReg
	maxN    int
	maxB    uint64
	merge   bool
	list    []*mEntry // entries not yet deregistered
	byPtr   map[*Entry]*mEntry
	pending []Range
	nextID  uint64
	clock   uint64
	held    []*Entry // references the driver holds, with repeats
	st      Stats    // the figures the model expects
}

func newModel(t testing.TB, maxN int, maxB uint64, merge bool) *model {
	m := &model{t: t, maxN: maxN, maxB: maxB, merge: merge, byPtr: map[*Entry]*mEntry{}}
	m.regs = []*fakeReg{newFakeReg("a"), newFakeReg("b")}
	m.c = newTestCache(t, Config{MaxEntries: maxN, MaxBytes: maxB, Merge: merge}, m.regs...)
	return m
}

func (m *model) align(r Range) Range {
	return rg(r.Start&^(page-1), (r.End+page-1)&^(page-1))
}

func (m *model) reap(me *mEntry) {
	me.valid = false
	i := slices.Index(m.list, me)
	m.list = slices.Delete(m.list, i, i+1)
	delete(m.byPtr, me.e)
	m.st.Deregistrations += uint64(popcount(me.have))
}

func popcount(s TransportSet) int {
	n := 0
	for ; s != 0; s &= s - 1 {
		n++
	}
	return n
}

func (m *model) drain() {
	for _, r := range m.pending {
		for _, me := range slices.Clone(m.list) {
			if me.valid && me.r.Overlaps(r) {
				me.valid = false
				m.st.Invalidations++
				if me.refs == 0 {
					m.reap(me)
				}
			}
		}
	}
	m.pending = m.pending[:0]
}

func (m *model) count() (n, bytes uint64) {
	for _, me := range m.list {
		n++
		bytes += uint64(me.r.Len())
	}
	return
}

func (m *model) evictOne() bool {
	var victim *mEntry
	for _, me := range m.list {
		if me.valid && me.refs == 0 && (victim == nil || me.stamp < victim.stamp) {
			victim = me
		}
	}
	if victim == nil {
		return false
	}
	m.reap(victim)
	m.st.Evictions++
	return true
}

func (m *model) evictToLimits() {
	for {
		n, b := m.count()
		if !((m.maxN > 0 && n > uint64(m.maxN)) || (m.maxB > 0 && b > m.maxB)) {
			return
		}
		if !m.evictOne() {
			return
		}
	}
}

func (m *model) get(r Range, ts TransportSet) {
	m.drain()
	ar := m.align(r)
	var best *mEntry
	for _, me := range m.list {
		if me.valid && me.r.Contains(ar) {
			if best == nil || me.r.Len() > best.r.Len() || (me.r.Len() == best.r.Len() && me.id < best.id) {
				best = me
			}
		}
	}
	e, err := m.c.Get(r, ts)
	if err != nil {
		m.t.Fatalf("Get(%v): %v", r, err)
	}
	if best != nil {
		if e != best.e {
			m.t.Fatalf("Get(%v) returned %v (id %d), the model expects %v (id %d)", r, e.Range(), e.id, best.r, best.id)
		}
		best.refs++
		m.st.Hits++
	} else {
		if m.merge {
			var over []*mEntry
			for {
				over = over[:0]
				grown := false
				for _, me := range m.list {
					if me.valid && me.r.Overlaps(ar) {
						over = append(over, me)
						if me.r.Start < ar.Start {
							ar.Start, grown = me.r.Start, true
						}
						if me.r.End > ar.End {
							ar.End, grown = me.r.End, true
						}
					}
				}
				if !grown {
					break
				}
			}
			for _, me := range over {
				if me.refs == 0 {
					m.reap(me)
					m.st.Merges++
				} else {
					// Stays valid and held.
				}
			}
		}
		m.nextID++
		if _, dup := m.byPtr[e]; dup {
			m.t.Fatalf("Get(%v) returned an existing entry %v for a miss", r, e.Range())
		}
		if e.Range() != ar || e.id != m.nextID {
			m.t.Fatalf("miss for %v: entry %v id %d, the model expects %v id %d", r, e.Range(), e.id, ar, m.nextID)
		}
		best = &mEntry{r: ar, id: m.nextID, refs: 1, valid: true, e: e}
		m.list = append(m.list, best)
		m.byPtr[e] = best
		m.st.Misses++
		m.evictToLimits()
	}
	if n := popcount(ts &^ best.have); n > 0 {
		m.st.Registrations += uint64(n)
		m.st.BytesRegistered += uint64(n) * uint64(best.r.Len())
		best.have |= ts
	}
	m.held = append(m.held, e)
}

func (m *model) put(i int) {
	if len(m.held) == 0 {
		return
	}
	i %= len(m.held)
	e := m.held[i]
	m.held = slices.Delete(m.held, i, i+1)
	me := m.byPtr[e]
	if me.refs == 1 {
		// Only the last reference goes through the lock, which drains;
		// others are dropped without one.
		m.drain()
	}
	if err := m.c.Put(e); err != nil {
		m.t.Fatal(err)
	}
	me.refs--
	if me.refs == 0 {
		if !me.valid {
			m.reap(me)
		} else {
			m.clock++
			me.stamp = m.clock
			m.evictToLimits()
		}
	}
}

func (m *model) find(r Range) {
	m.drain()
	var want []*mEntry
	for _, me := range m.list {
		if me.valid && me.r.Overlaps(r) {
			want = append(want, me)
		}
	}
	slices.SortFunc(want, func(a, b *mEntry) int {
		if a.r.Start != b.r.Start {
			if a.r.Start < b.r.Start {
				return -1
			}
			return 1
		}
		return int(a.id) - int(b.id)
	})
	got, err := m.c.Find(r, nil)
	if err != nil {
		m.t.Fatal(err)
	}
	if len(got) != len(want) {
		m.t.Fatalf("Find(%v): %d entries, the model expects %d", r, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i].e {
			m.t.Fatalf("Find(%v)[%d] = %v, the model expects %v", r, i, got[i].Range(), want[i].r)
		}
		want[i].refs++
		m.held = append(m.held, got[i])
	}
}

func (m *model) invalidate(r Range) {
	m.c.Invalidate(r)
	m.pending = append(m.pending, r)
	m.st.Events++
}

func (m *model) evict(n int) {
	m.drain()
	k := 0
	for ; k < n && m.evictOne(); k++ {
	}
	if got := m.c.Evict(n); got != k {
		m.t.Fatalf("Evict(%d) = %d, the model expects %d", n, got, k)
	}
}

func (m *model) flush() {
	m.drain()
	m.c.Flush()
}

// compare checks the cache's invariants and figures against the model.
func (m *model) compare(step int, op string) {
	if err := m.c.Check(); err != nil {
		m.t.Fatalf("step %d (%s): %v", step, op, err)
	}
	got := m.c.Stats()
	want := m.st
	want.Entries, want.Bytes = m.count()
	for _, me := range m.list {
		if me.refs > 0 {
			want.Held++
		}
		if me.valid != me.e.Valid() {
			m.t.Fatalf("step %d (%s): entry %v valid %v, the model says %v", step, op, me.r, me.e.Valid(), me.valid)
		}
		if me.e.Transports() != me.have {
			m.t.Fatalf("step %d (%s): entry %v transports %v, the model says %v", step, op, me.r, me.e.Transports(), me.have)
		}
	}
	got.QueueMerges = 0
	if got != want {
		m.t.Fatalf("step %d (%s): figures\n got %+v\nwant %+v", step, op, got, want)
	}
	live := 0
	for _, r := range m.regs {
		live += r.nLive()
	}
	if uint64(live) != got.Registrations-got.Deregistrations {
		m.t.Fatalf("step %d (%s): %d registrations live, figures say %d", step, op, live, got.Registrations-got.Deregistrations)
	}
}

// run drives the model with the operations encoded in data.
func runModel(t testing.TB, data []byte) {
	rd := byteReader{b: data}
	cfg := rd.byte()
	maxN := []int{0, 3, 8, 0}[cfg&3]
	maxB := []uint64{0, 0, 24 * page, 6 * page}[(cfg>>2)&3]
	m := newModel(t, maxN, maxB, cfg&16 != 0)
	randRange := func() Range {
		s := uintptr(rd.u16()) % (64 * page)
		n := 1 + uintptr(rd.u16())%(12*page)
		return rg(base+s, base+s+n)
	}
	for step := 0; !rd.empty() && step < 2000; step++ {
		var op string
		switch rd.byte() % 8 {
		case 0, 1, 2:
			op = "get"
			m.get(randRange(), TransportSet(1+rd.byte()%3))
		case 3, 4:
			op = "put"
			m.put(int(rd.byte()))
		case 5:
			op = "find"
			m.find(randRange())
		case 6:
			op = "invalidate"
			m.invalidate(randRange())
		case 7:
			if rd.byte()%2 == 0 {
				op = "evict"
				m.evict(int(rd.byte() % 4))
			} else {
				op = "flush"
				m.flush()
			}
		}
		m.compare(step, op)
	}
	for len(m.held) > 0 {
		m.put(0)
	}
	m.flush()
	m.compare(-1, "final")
}

type byteReader struct {
	b []byte
}

func (r *byteReader) empty() bool { return len(r.b) == 0 }

func (r *byteReader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *byteReader) u16() uint16 {
	if len(r.b) < 2 {
		return uint16(r.byte())
	}
	v := binary.LittleEndian.Uint16(r.b)
	r.b = r.b[2:]
	return v
}

// FuzzCacheModel: go test -fuzz FuzzCacheModel ./rcache
func FuzzCacheModel(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 0, 2, 0, 3, 1, 6, 0, 0, 0, 1, 0, 0, 0, 1, 3, 0})
	f.Add([]byte{17, 0, 0, 0, 0, 16, 1, 0, 16, 0, 0, 8, 3, 2, 5, 0, 0, 0, 64})
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 8; i++ {
		b := make([]byte, 600)
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) { runModel(t, data) })
}

// TestCacheModel runs random sequences in every configuration, so that a
// plain `go test` covers what the fuzz target does.
func TestCacheModel(t *testing.T) {
	seeds := 160
	if testing.Short() {
		seeds = 20
	}
	for s := 0; s < seeds; s++ {
		r := rand.New(rand.NewPCG(uint64(s), 7))
		b := make([]byte, 1200)
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		b[0] = byte(s) // walks through the configurations
		runModel(t, b)
	}
}
