package rcache

// The registration cache.
//
// # Structures
//
//	tree      interval tree (tree.go) of the valid entries          Cache.mu
//	gen       tree generation: +1 on every change of the tree        atomic, written under mu
//	memo      128 seqlocked slots (memo.go): aligned range → the      written under mu,
//	          entry a tree lookup returned for it, and gen then      read without a lock
//	LRU list  every valid idle entry, most recently put first; it    Cache.mu
//	          may also hold held entries (lazy: a Get does not
//	          unlink, eviction unlinks the held ones it meets)
//	limbo     invalid entries still held: in no structure, counted   Cache.mu
//	reap      entries out of every structure, claimed (refs = -1),   Cache.mu
//	          to deregister once mu is released
//	queue     pending invalidations (queue.go)                       its own mutex
//
// # An entry's life
//
//	created (miss) ── in tree, refs 1, no handle yet
//	   │  register lazily, per transport, outside mu, under Entry.regMu
//	   ▼
//	valid, held ⇄ valid, idle (in LRU)   Get/Find take a reference, Put drops it
//	   │ release event (drained)          │ release event, eviction, merge
//	   ▼                                  ▼
//	invalid, held (limbo) ── last Put ──► claimed (refs -1) → deregistered
//
// Entry.refs is atomic: ≥ 0 is the number of references; -1 means claimed
// for reaping, after which nobody may take a reference. Only a holder of mu
// claims, and only with CompareAndSwap(0, -1), so an entry is claimed once,
// and never while held. An invalid entry is never in the tree, and the gen
// changes whenever the tree does, so no lookup, with or without mu, returns
// an entry that was out of the tree when the lookup began.
//
// Handles are written once, before the transport's bit is set in Entry.have
// (an atomic store), and read after loading it; they are deregistered only
// by the reaper, after the claim, when no one can read or register them.
//
// # Paths
//
// Get(r, ts):
//  1. Round r out to Align. Sync with the monitor's userfaultfd reader (an
//     atomic load unless a batch of events is being delivered).
//  2. Fast path, no lock: if no invalidation is pending and the memo slot
//     of r answers for the current gen, take a reference (CAS on refs ≥ 0)
//     and check that gen has not moved and the entry is valid; count the
//     hit in a striped counter. Otherwise, or if that check fails (the
//     reference is given back), the slow path:
//  3. Lock mu. If invalidations are pending, drain them: every entry
//     overlapping a queued range becomes invalid and leaves the tree; idle
//     ones are claimed and go to reap, held ones to limbo.
//  4. Look up the largest entry containing r in the tree, record it in the
//     memo. Hit: take a reference. Miss: insert a new entry (with the merge
//     policy: the union of r and every valid entry overlapping it, the idle
//     ones of which are claimed and reaped), held; evict while over
//     MaxEntries or MaxBytes: from the LRU tail, claim idle entries and
//     unlink held ones (their Put links them again).
//  5. Unlock; deregister what was reaped.
//  6. If the entry lacks a transport of ts, lock its regMu and register the
//     missing ones (a concurrent Get of the same entry waits there, then
//     finds them registered). If the entry was invalidated before
//     registering began, give it back and start again; if nothing could be
//     registered, retire the entry and return the error.
//
// Put(e):
//  1. Not the last reference: decrement (CAS), nothing else changes.
//  2. The last one, the entry valid and already at the LRU head (head, an
//     atomic mirror of it), nothing pending, not over a limit: decrement
//     to 0 without the lock. Then re-load invalid and head: if an
//     invalidation or an eviction found the entry held meanwhile (and so
//     left it in limbo, or unlinked it), settle it under mu.
//  3. Otherwise, under mu, after draining: decrement; at 0 an invalid entry
//     is claimed and reaped, a valid one moves to the LRU head and
//     eviction runs while over the limits. Deregister after unlocking.
//
// Every decision about an idle entry is made by whoever sees it at 0 after
// the other side's store: a claim (CAS 0 → -1) under mu, or a Put that
// re-loads after its decrement. So an idle valid entry is always on the
// LRU list, and an invalid one is always reaped, once.
//
// A hit (steps 1-2 of Get) takes no lock and allocates nothing; so does
// its Put when the entry is the most recently used one (repeated transfers
// from one buffer).
//
// # Lock order
//
//	Entry.regMu → Cache.mu → invQueue.mu
//
// Registrar calls run under Entry.regMu only (Register) or under no lock
// (Deregister). The event callback takes invQueue.mu only.

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"sync"
	"sync/atomic"

	"github.com/symheap/symheap/internal/config"
	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/memhook"
)

// Range is an address range, [Start, End).
type Range = memhook.Range

// Handle is what a registrar returns for a registration: a memory region
// key, a UCX memory handle, whatever the transport needs to use it.
type Handle = any

// Registrar is a transport's registration of memory.
type Registrar interface {
	// Name names the transport in errors and figures.
	Name() string
	// Register registers r and returns its handle. It may be called for
	// overlapping ranges, each registration independent of the others.
	Register(r Range) (Handle, error)
	// Deregister releases a registration made by Register. The memory
	// may be unmapped by then: the cache deregisters after the release.
	Deregister(r Range, h Handle) error
}

// TransportSet is a set of registrars, bit i standing for Config.Registrars[i].
type TransportSet uint64

// Transports returns the set of the registrars with these indexes.
func Transports(ids ...int) TransportSet {
	var s TransportSet
	for _, i := range ids {
		s |= 1 << uint(i)
	}
	return s
}

// Has reports whether registrar i is in s.
func (s TransportSet) Has(i int) bool { return s&(1<<uint(i)) != 0 }

// Config configures a cache. The zero value of every field but Registrars
// means the default.
type Config struct {
	// Registrars are the transports, 1 to 64 of them; indexes into this
	// slice name them in TransportSet.
	Registrars []Registrar
	// MaxEntries and MaxBytes bound the entries not yet deregistered and
	// the bytes they cover; idle entries are evicted from the LRU end to
	// stay within them. Held entries are never evicted, so the bounds may
	// be exceeded while everything is held. 0: no bound.
	MaxEntries int
	MaxBytes   uint64
	// Align is the granularity of entries: ranges are rounded out to it.
	// A power of two; 0: the page size.
	Align uintptr
	// Merge makes a miss register the union of the range and every valid
	// entry overlapping it, retiring the idle ones (off by default: then
	// overlapping entries coexist).
	Merge bool
	// QueueLen bounds the pending invalidations (see queue.go); 0: 1024.
	QueueLen int
	// Worker starts a goroutine that drains invalidations and
	// deregisters invalid entries as soon as they are idle, instead of at
	// the next cache call. Close stops it.
	Worker bool
	// Monitor, if set, is subscribed to (every release kind invalidates)
	// and synchronised with before each lookup (Monitor.Sync).
	Monitor *memhook.Monitor
	// OnError, if set, is told of deregistration failures, which no call
	// can return (they happen wherever an entry is reaped). They are
	// counted in Stats.DeregisterErrors either way.
	OnError func(error)
}

// Entry is a cached registration of a range with one or more transports.
// Get and Find return entries holding a reference, which the caller gives
// back with Put; until then the handles stay registered.
type Entry struct {
	start, end uintptr // immutable
	id         uint64  // creation order; immutable

	// refs: ≥ 0 references held by callers, -1 claimed for reaping (see
	// the file comment). Changed by CAS without a lock when taking a
	// reference or dropping one that is not the last; otherwise under
	// Cache.mu.
	refs atomic.Int32

	// invalid: out of the tree for good (released memory, evicted,
	// merged away, failed, cache closed). Set under Cache.mu; loaded
	// without it by Valid, the fast path and registration.
	invalid atomic.Bool

	// Tree links and augmentation (guarded by Cache.mu; see tree.go).
	left, right *Entry
	maxEnd      uintptr
	height      int8

	// LRU links (guarded by Cache.mu). inLRU: the entry is on the list.
	prev, next *Entry
	inLRU      bool

	// anchor, if anchored, points into the Go object the entry
	// registers (anchor.go): the entry dies with it. Immutable.
	anchor   Anchor
	anchored bool

	// Registrations. regMu serialises registering; have's bit i is set
	// (release) after handles[i] is written and is read (acquire)
	// before handles[i] is.
	regMu   sync.Mutex
	have    atomic.Uint64
	handles []Handle
}

// Range returns the range the entry registers (the requested range rounded
// out to Config.Align, or wider).
func (e *Entry) Range() Range { return Range{Start: e.start, End: e.end} }

// Handle returns the handle of registrar i, or nil if the entry has none.
func (e *Entry) Handle(i int) Handle {
	if i < 0 || i >= 64 || e.have.Load()&(1<<uint(i)) == 0 {
		return nil
	}
	return e.handles[i]
}

// Transports returns the registrars the entry is registered with.
func (e *Entry) Transports() TransportSet { return TransportSet(e.have.Load()) }

// Valid reports whether the entry can still be returned by a lookup: false
// once a release of its memory has been processed, or it was evicted,
// merged away or its cache closed. A held entry's handles stay usable (the
// registration exists) until Put, but the memory it registered may be gone.
func (e *Entry) Valid() bool { return !e.invalid.Load() }

// stripe is a counter on a cache line of its own.
type stripe struct {
	n atomic.Uint64
	_ [56]byte
}

// Cache caches registrations. It is safe for concurrent use.
type Cache struct {
	regs   []Registrar
	all    TransportSet
	align  uintptr
	maxN   uint64
	maxB   uint64
	merge  bool
	mon    *memhook.Monitor
	unsub  func()
	onErr  func(error)
	q      *invQueue
	kick   chan struct{} // nil without a worker
	stop   chan struct{}
	worker sync.WaitGroup
	verify bool

	gen    atomic.Uint64         // tree generation (written under mu)
	head   atomic.Pointer[Entry] // lruHead, readable without mu (written under mu)
	over   atomic.Bool           // over a limit after the last eviction (written under mu)
	memo   [memoSlots]memoSlot
	hits   [16]stripe // hits, striped by entry id so that parallel hits do not share a line
	deregE atomic.Uint64

	mu      sync.Mutex
	tree    tree
	lruHead *Entry // most recently put; mirrored in head
	lruTail *Entry // next to evict
	lruLen  int
	reap    []*Entry
	scratch []*Entry
	found   []*Entry
	spareQ  []Range
	nextID  uint64
	closed  bool
	st      Stats  // counters (Hits, Held, DeregisterErrors, Events, QueueMerges are gathered by Stats)
	limbo   int    // invalid entries still held
	limboB  uint64 // bytes they cover
}

// errStale reports that an entry was invalidated before it was registered.
var errStale = errors.New("rcache: entry invalidated while registering")

const maxAttempts = 8

// New makes a cache.
func New(cfg Config) (*Cache, error) {
	if len(cfg.Registrars) == 0 || len(cfg.Registrars) > 64 {
		return nil, fmt.Errorf("rcache: %d registrars (want 1 to 64): %w", len(cfg.Registrars), errs.ErrBadConfig)
	}
	for i, r := range cfg.Registrars {
		if r == nil {
			return nil, fmt.Errorf("rcache: registrar %d is nil: %w", i, errs.ErrBadConfig)
		}
	}
	align := cfg.Align
	if align == 0 {
		align = uintptr(os.Getpagesize())
	}
	if bits.OnesCount64(uint64(align)) != 1 {
		return nil, fmt.Errorf("rcache: Align %d is not a power of two: %w", align, errs.ErrBadConfig)
	}
	if cfg.MaxEntries < 0 {
		return nil, fmt.Errorf("rcache: MaxEntries %d: %w", cfg.MaxEntries, errs.ErrBadConfig)
	}
	ql := cfg.QueueLen
	if ql <= 0 {
		ql = 1024
	}
	c := &Cache{
		regs:   append([]Registrar(nil), cfg.Registrars...),
		all:    TransportSet(1<<uint(len(cfg.Registrars)) - 1),
		align:  align,
		maxN:   uint64(cfg.MaxEntries),
		maxB:   cfg.MaxBytes,
		merge:  cfg.Merge,
		mon:    cfg.Monitor,
		onErr:  cfg.OnError,
		q:      newInvQueue(ql),
		verify: os.Getenv(config.EnvRCacheVerify) != "",
	}
	if len(cfg.Registrars) == 64 {
		c.all = ^TransportSet(0)
	}
	c.gen.Store(1) // memo slots start with gen 0: none answers
	c.spareQ = make([]Range, 0, ql)
	if cfg.Worker {
		c.kick = make(chan struct{}, 1)
		c.stop = make(chan struct{})
		c.worker.Add(1)
		go c.work()
	}
	if c.mon != nil {
		c.unsub = c.mon.Subscribe(func(_ memhook.Kind, r Range) { c.Invalidate(r) })
	}
	return c, nil
}

// Invalidate records that r was released: every entry overlapping it is
// invalid from the next cache call on (no later Get or Find returns it).
// It is the monitor callback: it never blocks for long, never allocates,
// never deregisters, and may be called from any goroutine, inside a
// registrar or an allocator included.
func (c *Cache) Invalidate(r Range) {
	c.q.push(r)
	if c.kick != nil {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
}

func (c *Cache) work() {
	defer c.worker.Done()
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
			c.Flush()
		}
	}
}

// alignRange rounds r out to the cache's granularity.
func (c *Cache) alignRange(r Range) (Range, error) {
	a := c.align - 1
	if r.End <= r.Start || r.End+a < r.End {
		return Range{}, fmt.Errorf("rcache: range %v: %w", r, errs.ErrBadArg)
	}
	return Range{Start: r.Start &^ a, End: (r.End + a) &^ a}, nil
}

// Get returns a referenced entry containing r (rounded out to Align) and
// registered with every transport of ts: the largest valid entry containing
// it, registering the transports it lacks, or a new entry. Give it back with
// Put. Registrar errors are returned wrapped, naming the transport.
func (c *Cache) Get(r Range, ts TransportSet) (*Entry, error) {
	return c.get(r, ts, Anchor{}, false)
}

func (c *Cache) get(r Range, ts TransportSet, a Anchor, anchored bool) (*Entry, error) {
	if ts == 0 || ts&^c.all != 0 {
		return nil, fmt.Errorf("rcache: transport set %#x (have %d registrars): %w", uint64(ts), len(c.regs), errs.ErrBadArg)
	}
	ar, err := c.alignRange(r)
	if err != nil {
		return nil, err
	}
	if c.mon != nil {
		c.mon.Sync()
	}
	for attempt := 1; ; attempt++ {
		e := c.fastGet(ar)
		if e == nil {
			if e, err = c.lookup(ar, a, anchored); err != nil {
				return nil, err
			}
		}
		if TransportSet(e.have.Load())&ts == ts {
			return e, nil
		}
		err = c.register(e, ts)
		if err == nil {
			return e, nil
		}
		c.Put(e)
		if err != errStale {
			return nil, err
		}
		if attempt == maxAttempts {
			return nil, fmt.Errorf("rcache: %v was released %d times while being registered: %w", ar, attempt, errs.ErrBadArg)
		}
	}
}

// fastGet is step 2 of Get: a hit found in the memo, without a lock, or nil.
func (c *Cache) fastGet(ar Range) *Entry {
	// A release published before this Get began has set pending: the
	// slow path drains it first.
	if c.q.pending.Load() {
		return nil
	}
	g := c.gen.Load()
	e := c.memo[memoIndex(ar)].lookup(ar, g)
	if e == nil || !e.tryRef() {
		return nil
	}
	// gen unchanged since before the reference: the tree, and so e's
	// place in it, did not change in between.
	if c.gen.Load() != g || e.invalid.Load() || e.dead() {
		c.release(e, false)
		return nil
	}
	c.hits[e.id%uint64(len(c.hits))].n.Add(1)
	return e
}

// tryRef takes a reference unless the entry has been claimed.
func (e *Entry) tryRef() bool {
	for {
		n := e.refs.Load()
		if n < 0 {
			return false
		}
		if e.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// lookup is steps 3 to 5 of Get.
func (c *Cache) lookup(ar Range, a Anchor, anchored bool) (*Entry, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, fmt.Errorf("rcache: cache closed: %w", errs.ErrClosed)
	}
	if c.q.pending.Load() {
		c.drainLocked()
	}
	q := ar
	e := c.tree.bestCover(ar)
	for e != nil && e.dead() {
		c.st.Stale++
		c.retireLocked(e)
		e = c.tree.bestCover(ar)
	}
	if e != nil {
		// Under mu nobody claims: the reference cannot fail.
		e.tryRef()
		c.hits[e.id%uint64(len(c.hits))].n.Add(1)
	} else {
		if c.merge {
			ar = c.mergeLocked(ar)
		}
		e = c.newEntryLocked(ar)
		e.anchor, e.anchored = a, anchored
		c.st.Misses++
		c.evictLocked()
	}
	// The memo remembers the answer for the range asked (not a merged one).
	c.memo[memoIndex(q)].store(q, e, c.gen.Load())
	reap := c.takeReapLocked()
	c.verifyLocked()
	c.mu.Unlock()
	c.deregister(reap)
	return e, nil
}

// The tree changes only through these three, which move gen. Require mu.

func (c *Cache) treeInsert(e *Entry) {
	c.tree.insert(e)
	c.gen.Add(1)
}

func (c *Cache) treeRemove(e *Entry) {
	c.tree.remove(e)
	c.gen.Add(1)
}

func (c *Cache) treeRebuild(sorted []*Entry) {
	c.tree.rebuild(sorted)
	c.gen.Add(1)
}

// newEntryLocked inserts a new, held entry for ar. Requires mu.
func (c *Cache) newEntryLocked(ar Range) *Entry {
	c.nextID++
	e := &Entry{start: ar.Start, end: ar.End, id: c.nextID, handles: make([]Handle, len(c.regs))}
	e.refs.Store(1)
	c.treeInsert(e)
	c.st.Entries++
	c.st.Bytes += uint64(ar.Len())
	return e
}

// mergeLocked widens ar to the union of it and every valid entry
// overlapping it, and retires the idle ones among those. Requires mu.
func (c *Cache) mergeLocked(ar Range) Range {
	for {
		c.scratch = c.tree.overlapping(ar, c.scratch[:0])
		grown := false
		for _, e := range c.scratch {
			if e.start < ar.Start {
				ar.Start, grown = e.start, true
			}
			if e.end > ar.End {
				ar.End, grown = e.end, true
			}
		}
		if !grown {
			break
		}
	}
	for _, e := range c.scratch {
		if e.refs.CompareAndSwap(0, -1) {
			c.retireClaimedLocked(e)
			c.st.Merges++
		}
	}
	clear(c.scratch)
	return ar
}

// retireClaimedLocked takes a valid entry that the caller has claimed out
// of the tree and the LRU list and reaps it. Requires mu.
func (c *Cache) retireClaimedLocked(e *Entry) {
	e.invalid.Store(true)
	c.treeRemove(e)
	c.lruRemove(e)
	c.reapLocked(e)
}

// retireLocked takes a valid entry out of the tree for good: claimed and
// reaped if idle, to limbo if held. Requires mu.
func (c *Cache) retireLocked(e *Entry) {
	e.invalid.Store(true)
	c.treeRemove(e)
	c.lruRemove(e)
	c.afterInvalidLocked(e)
}

// afterInvalidLocked settles an entry that has just been made invalid and
// left the tree: claim and reap it if idle; otherwise it is held, and its
// last Put reaps it. Invalid is stored before the claim is tried, and Put
// decrements before it loads invalid, so one of the two reaps. Requires mu.
func (c *Cache) afterInvalidLocked(e *Entry) {
	if e.refs.CompareAndSwap(0, -1) {
		c.reapLocked(e)
		return
	}
	c.limbo++
	c.limboB += uint64(e.end - e.start)
}

// reapLocked accounts for the end of e, claimed and in no structure, and
// queues its deregistration. Requires mu.
func (c *Cache) reapLocked(e *Entry) {
	c.st.Entries--
	c.st.Bytes -= uint64(e.end - e.start)
	c.st.Deregistrations += uint64(bits.OnesCount64(e.have.Load()))
	c.reap = append(c.reap, e)
}

func (c *Cache) takeReapLocked() []*Entry {
	if len(c.reap) == 0 {
		return nil
	}
	r := c.reap
	c.reap = nil
	return r
}

func (c *Cache) overLimits() bool {
	return (c.maxN > 0 && c.st.Entries > c.maxN) || (c.maxB > 0 && c.st.Bytes > c.maxB)
}

// evictOneLocked evicts the least recently used idle entry, unlinking the
// held entries it meets on the way (their last Put links them again). It
// reports whether it evicted one. Requires mu.
func (c *Cache) evictOneLocked() bool {
	for e := c.lruTail; e != nil; e = c.lruTail {
		c.lruRemove(e)
		if e.refs.CompareAndSwap(0, -1) {
			c.retireClaimedLocked(e)
			c.st.Evictions++
			return true
		}
		// Held: unlinked, its last Put links it again. That Put, if it
		// runs without the lock, decrements after our failed claim and
		// so loads the head after our unlink: it sees the entry off the
		// head and links it under mu. Should it be idle already, link it
		// here all the same: an idle valid entry is always on the list.
		if e.refs.Load() == 0 {
			c.lruToHead(e)
		}
	}
	return false
}

// evictLocked evicts idle entries while over a limit. Requires mu.
func (c *Cache) evictLocked() {
	for c.overLimits() && c.evictOneLocked() {
	}
	// Still over (everything is held): Puts take the lock, so that each
	// newly idle entry can be evicted.
	c.over.Store(c.overLimits())
}

// drainLocked processes the pending invalidations. Requires mu.
func (c *Cache) drainLocked() {
	ranges := c.q.take(c.spareQ)
	s := c.scratch[:0]
	for _, r := range ranges {
		c.found = c.tree.overlapping(r, c.found[:0])
		for _, e := range c.found {
			// An entry overlapping two queued ranges is collected once.
			if !e.invalid.Load() {
				e.invalid.Store(true)
				s = append(s, e)
			}
		}
		clear(c.found)
	}
	c.spareQ = ranges[:0]
	if len(s) == 0 {
		c.scratch = s
		return
	}
	c.st.Invalidations += uint64(len(s))
	if len(s) > c.tree.n/8 {
		// Many at once: rebuild from the survivors, O(n).
		keep := c.tree.inorder(make([]*Entry, 0, c.tree.n))
		n := 0
		for _, e := range keep {
			if !e.invalid.Load() {
				keep[n] = e
				n++
			}
		}
		c.treeRebuild(keep[:n])
		for _, e := range s {
			e.left, e.right = nil, nil
		}
	} else {
		for _, e := range s {
			c.treeRemove(e)
		}
	}
	for _, e := range s {
		c.lruRemove(e)
		c.afterInvalidLocked(e)
	}
	clear(s)
	c.scratch = s[:0]
}

// register registers e with the transports of ts it lacks (step 6 of Get).
func (c *Cache) register(e *Entry, ts TransportSet) error {
	e.regMu.Lock()
	defer e.regMu.Unlock()
	if e.invalid.Load() {
		return errStale
	}
	have := e.have.Load()
	need := uint64(ts) &^ have
	r := e.Range()
	var done uint64
	var err error
	for need != 0 {
		i := bits.TrailingZeros64(need)
		need &^= 1 << uint(i)
		h, rerr := c.regs[i].Register(r)
		if rerr != nil {
			err = fmt.Errorf("rcache: register %v with %s: %w", r, c.regs[i].Name(), rerr)
			break
		}
		e.handles[i] = h
		have |= 1 << uint(i)
		// Publishes handles[i] to Handle and to the reaper.
		e.have.Store(have)
		done++
	}
	if done == 0 && err == nil {
		return nil // a concurrent Get registered them meanwhile
	}
	c.mu.Lock()
	c.st.Registrations += done
	c.st.BytesRegistered += done * uint64(r.Len())
	if err != nil {
		c.st.RegisterErrors++
		if have == 0 && !e.invalid.Load() {
			// An entry with no registration at all would only stand in
			// the way of the next Get of its range.
			c.retireLocked(e)
		}
	}
	c.mu.Unlock()
	return err
}

// Put gives back a reference taken by Get or Find. Putting an entry not
// held is an error (ErrBadArg) and changes nothing.
func (c *Cache) Put(e *Entry) error { return c.release(e, true) }

// release drops a reference. use: the entry was used, so the last Put makes
// it the most recently used; a fast path giving back a reference it should
// not have taken leaves the LRU order as it was.
func (c *Cache) release(e *Entry, use bool) error {
	if e == nil {
		return fmt.Errorf("rcache: Put of nil: %w", errs.ErrBadArg)
	}
	for {
		n := e.refs.Load()
		if n <= 0 {
			return fmt.Errorf("rcache: Put of an entry not held: %w", errs.ErrBadArg)
		}
		if n == 1 {
			// The last reference. Without the lock only if the entry
			// is valid and already the most recently used (at the LRU
			// head, where it stays), with nothing to drain.
			if !use || c.head.Load() != e || e.invalid.Load() || c.q.pending.Load() || c.over.Load() {
				break
			}
			if !e.refs.CompareAndSwap(1, 0) {
				continue
			}
			// Re-check what may have changed before the decrement: an
			// invalidation that found it held left it to us (limbo), an
			// eviction that found it held unlinked it.
			if e.invalid.Load() || c.head.Load() != e {
				c.mu.Lock()
				c.settleIdleLocked(e)
				reap := c.takeReapLocked()
				c.mu.Unlock()
				c.deregister(reap)
			}
			return nil
		}
		// Not the last reference: nothing else changes.
		if e.refs.CompareAndSwap(n, n-1) {
			return nil
		}
	}
	c.mu.Lock()
	if c.q.pending.Load() {
		c.drainLocked()
	}
	// The last reference, unless another was taken meanwhile; and under
	// mu nobody else drops the last one, so the count is at least 1.
	if n := e.refs.Add(-1); n < 0 {
		e.refs.Add(1)
		c.mu.Unlock()
		return fmt.Errorf("rcache: Put of an entry not held: %w", errs.ErrBadArg)
	} else if n == 0 {
		if use && !e.invalid.Load() {
			c.lruToHead(e)
			c.evictLocked()
		} else {
			c.settleIdleLocked(e)
		}
	}
	reap := c.takeReapLocked()
	c.verifyLocked()
	c.mu.Unlock()
	c.deregister(reap)
	return nil
}

// Find appends to dst every valid entry overlapping r, each with a
// reference the caller gives back with Put, in address order.
func (c *Cache) Find(r Range, dst []*Entry) ([]*Entry, error) {
	if c.mon != nil {
		c.mon.Sync()
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return dst, fmt.Errorf("rcache: cache closed: %w", errs.ErrClosed)
	}
	if c.q.pending.Load() {
		c.drainLocked()
	}
	n := len(dst)
	dst = c.tree.overlapping(r, dst)
	k := n
	for _, e := range dst[n:] {
		if e.dead() {
			c.st.Stale++
			c.retireLocked(e)
			continue
		}
		e.tryRef()
		dst[k] = e
		k++
	}
	clear(dst[k:])
	dst = dst[:k]
	reap := c.takeReapLocked()
	c.mu.Unlock()
	c.deregister(reap)
	return dst, nil
}

// Flush processes pending invalidations now and deregisters every idle
// invalid entry.
func (c *Cache) Flush() {
	if c.mon != nil {
		c.mon.Sync()
	}
	c.mu.Lock()
	if c.q.pending.Load() {
		c.drainLocked()
	}
	reap := c.takeReapLocked()
	c.verifyLocked()
	c.mu.Unlock()
	c.deregister(reap)
}

// Evict deregisters up to n idle entries, least recently used first, and
// returns how many.
func (c *Cache) Evict(n int) int {
	c.mu.Lock()
	if c.q.pending.Load() {
		c.drainLocked()
	}
	k := 0
	for k < n && c.evictOneLocked() {
		k++
	}
	reap := c.takeReapLocked()
	c.verifyLocked()
	c.mu.Unlock()
	c.deregister(reap)
	return k
}

// deregister releases every handle of the reaped entries. No lock is held.
func (c *Cache) deregister(reap []*Entry) {
	for _, e := range reap {
		have := e.have.Load()
		for have != 0 {
			i := bits.TrailingZeros64(have)
			have &^= 1 << uint(i)
			if err := c.regs[i].Deregister(e.Range(), e.handles[i]); err != nil {
				c.deregE.Add(1)
				if c.onErr != nil {
					c.onErr(fmt.Errorf("rcache: deregister %v from %s: %w", e.Range(), c.regs[i].Name(), err))
				}
			}
			e.handles[i] = nil
		}
	}
}

// Stats returns the cache's figures. It walks the entries to count the held
// ones: O(n).
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	s := c.st
	s.Held = uint64(c.limbo)
	c.found = c.tree.inorder(c.found[:0])
	for _, e := range c.found {
		if e.refs.Load() > 0 {
			s.Held++
		}
	}
	clear(c.found)
	c.mu.Unlock()
	for i := range c.hits {
		s.Hits += c.hits[i].n.Load()
	}
	s.DeregisterErrors = c.deregE.Load()
	s.Events, s.QueueMerges = c.q.counts()
	return s
}

// Close stops the worker, unsubscribes from the monitor, deregisters every
// idle entry and invalidates the held ones (each is deregistered at its last
// Put). Later Get and Find calls fail with ErrClosed. Close is idempotent.
func (c *Cache) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.gen.Add(1) // no memo slot answers any more
	c.mu.Unlock()
	if c.unsub != nil {
		c.unsub()
	}
	if c.stop != nil {
		close(c.stop)
		c.worker.Wait()
	}
	c.mu.Lock()
	if c.q.pending.Load() {
		c.drainLocked()
	}
	for _, e := range c.tree.inorder(nil) {
		c.retireLocked(e)
	}
	reap := c.takeReapLocked()
	c.verifyLocked()
	c.mu.Unlock()
	c.deregister(reap)
	return nil
}

// settleIdleLocked puts right an entry whose last reference was dropped,
// if it is still idle: an invalid one (in limbo) is claimed and reaped, a
// valid one off the LRU list is linked at its head. Requires mu.
func (c *Cache) settleIdleLocked(e *Entry) {
	if e.refs.Load() != 0 {
		return // taken again meanwhile, or claimed already
	}
	if e.invalid.Load() {
		if e.refs.CompareAndSwap(0, -1) {
			c.limbo--
			c.limboB -= uint64(e.end - e.start)
			c.reapLocked(e)
		}
		return
	}
	if !e.inLRU {
		c.lruToHead(e)
		c.evictLocked()
	}
}

// LRU list: doubly linked through Entry.prev/next, head most recent.
// Require mu.

func (c *Cache) lruToHead(e *Entry) {
	if c.lruHead == e {
		return
	}
	c.lruRemove(e)
	e.prev, e.next = nil, c.lruHead
	if c.lruHead != nil {
		c.lruHead.prev = e
	} else {
		c.lruTail = e
	}
	c.lruHead = e
	c.head.Store(e)
	e.inLRU = true
	c.lruLen++
}

func (c *Cache) lruRemove(e *Entry) {
	if !e.inLRU {
		return
	}
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		c.lruHead = e.next
		c.head.Store(e.next)
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		c.lruTail = e.prev
	}
	e.prev, e.next, e.inLRU = nil, nil, false
	c.lruLen--
}
