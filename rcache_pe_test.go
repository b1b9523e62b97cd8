package symheap

// Registration caching at PE level: the enable decision that
// SYMHEAP_LEAVE_PINNED and SYMHEAP_MEMHOOK_DISABLE steer (memhook.Decide,
// docs/environment.md), the PE's cache (PE.RegistrationCache) hitting,
// missing and being invalidated by the PE's frees, its figures reaching
// shared memory where symheap stat reads them, and release events reaching
// every PE's cache (DESIGN.md, memory monitor: "a free by PE q reaches the
// cache of PE p").

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/symheap/symheap/alloc/small"
	"github.com/symheap/symheap/internal/config"
	"github.com/symheap/symheap/internal/inspect"
	"github.com/symheap/symheap/internal/petest"
	"github.com/symheap/symheap/memhook"
	"github.com/symheap/symheap/rcache"
)

// rcpeOpts are the options of every job here: small heaps, the cache's
// full invariant check after every change, the caching switches unset
// (whatever the caller's environment says) unless env sets them.
func rcpeOpts(env ...string) []petest.Option {
	return []petest.Option{petest.Heap("4m"), petest.Env("SYMHEAP_SHARED_SIZE=1m", "SYMHEAP_RCACHE_VERIFY=1",
		memhook.EnvLeavePinned+"=", memhook.EnvLeavePinnedPipeline+"=", memhook.EnvDisable+"="),
		petest.Env(env...), petest.Timeout(30 * time.Second)}
}

// rcpeWarning is the part of the conflict warning of memhook.Decide that
// says what happens.
const rcpeWarning = "caching stays off"

// TestRCachePEDecision: each setting gives the decision docs/environment.md and
// memhook.Decide promise, on every PE of a job, with its reason; a "yes"
// overridden by SYMHEAP_MEMHOOK_DISABLE is told on stderr by every PE.
func TestRCachePEDecision(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     []string
		on      bool
		reason  []string // substrings of CachingEnabled's reason
		warning bool     // every PE prints the conflict warning
	}{
		{"leave-pinned-yes", []string{"SYMHEAP_LEAVE_PINNED=yes"}, true,
			[]string{"requested", "leave pinned yes"}, false},
		{"leave-pinned-no", []string{"SYMHEAP_LEAVE_PINNED=no"}, false,
			[]string{"refused", "leave pinned no"}, false},
		{"memhook-disable", []string{"SYMHEAP_MEMHOOK_DISABLE=yes"}, false,
			[]string{"SYMHEAP_MEMHOOK_DISABLE"}, false},
		{"memhook-disable-overrides-yes", []string{"SYMHEAP_MEMHOOK_DISABLE=yes", "SYMHEAP_LEAVE_PINNED=yes"}, false,
			[]string{"SYMHEAP_MEMHOOK_DISABLE"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 2
			j := petest.Start(t, n, func(t *testing.T) {
				pe, err := Init(Config{})
				if err != nil {
					t.Fatal(err)
				}
				defer pe.Close()
				on, why := pe.CachingEnabled()
				fmt.Printf("caching %v: %s\n", on, why)
				if on != tc.on {
					t.Errorf("PE %d: CachingEnabled() = %v (%s), want %v with %v", pe.Rank(), on, why, tc.on, tc.env)
				}
				for _, want := range tc.reason {
					if !strings.Contains(why, want) {
						t.Errorf("PE %d: reason %q lacks %q", pe.Rank(), why, want)
					}
				}
			}, rcpeOpts(tc.env...)...)
			if res := j.Wait(); res.Status != 0 {
				t.Fatalf("job failed (status %d, first failed PE %d); output:\n%s", res.Status, res.FirstFailed, j.Output())
			}
			if petest.IsChild() {
				return
			}
			got := strings.Count(j.Output(), rcpeWarning)
			switch {
			case tc.warning && got != n:
				t.Errorf("%d of %d PEs warned that %s overrides the request (%q); output:\n%s", got, n, memhook.EnvDisable, rcpeWarning, j.Output())
			case !tc.warning && got != 0:
				t.Errorf("a warning with nothing to warn of; output:\n%s", j.Output())
			}
		})
	}
}

// TestRCachePELeavePinned: with SYMHEAP_LEAVE_PINNED=yes every PE's
// registration cache (one per PE: the same *Cache at every call) registers
// a symmetric block once, hits on it afterwards, drops the registration
// when the block is freed (the next Get misses), and its figures reach the
// PE's control block at the barrier, where inspect.Open (symheap stat) reads
// them.
func TestRCachePELeavePinned(t *testing.T) {
	petest.Run(t, 2, func(t *testing.T) {
		pe, err := Init(Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer pe.Close()
		me := pe.Rank()
		if on, why := pe.CachingEnabled(); !on {
			t.Fatalf("PE %d: caching off with SYMHEAP_LEAVE_PINNED=yes: %s", me, why)
		}
		rc, err := pe.RegistrationCache()
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := pe.RegistrationCache(); again != rc {
			t.Errorf("PE %d: RegistrationCache returned two caches", me)
		}
		x, err := Malloc[byte](pe, 64<<10)
		if err != nil {
			t.Fatal(err)
		}
		r := memhook.RangeOf(x)
		get := func(what string) {
			t.Helper()
			e, err := rc.Get(r, rcache.Transports(0))
			if err != nil {
				t.Fatalf("PE %d: Get %s: %v", me, what, err)
			}
			if err := rc.Put(e); err != nil {
				t.Fatalf("PE %d: Put %s: %v", me, what, err)
			}
		}
		want := func(when string, hits, misses, regs, inval uint64) {
			t.Helper()
			s := rc.Stats()
			if s.Hits != hits || s.Misses != misses || s.Registrations != regs || s.Invalidations != inval {
				t.Errorf("PE %d %s: hits %d misses %d registrations %d invalidations %d; want %d %d %d %d",
					me, when, s.Hits, s.Misses, s.Registrations, s.Invalidations, hits, misses, regs, inval)
			}
		}
		get("first")
		want("after the first Get", 0, 1, 1, 0)
		get("second")
		get("third")
		want("after three Gets of one block", 2, 1, 1, 0)

		// The barrier copies the figures where symheap stat reads them.
		if err := pe.Barrier(); err != nil {
			t.Fatal(err)
		}
		rcpeCheckInspect(t, pe, 2, 1, 0)

		// Free releases the block: the registration must not survive it.
		if err := Free(pe, x); err != nil {
			t.Fatal(err)
		}
		get("after Free")
		want("after Free and a Get", 2, 2, 2, 1)
		if err := pe.Barrier(); err != nil {
			t.Fatal(err)
		}
		rcpeCheckInspect(t, pe, 2, 2, 1)
	}, rcpeOpts("SYMHEAP_LEAVE_PINNED=yes")...)
}

// rcpeCheckInspect reads this PE's registration-cache figures as symheap
// stat does (read-only attachment to the job's segment) and compares them.
func rcpeCheckInspect(t *testing.T, pe *PE, hits, misses, inval uint64) {
	t.Helper()
	v, err := inspect.Open(os.Getenv(config.EnvJob))
	if err != nil {
		t.Fatalf("inspect.Open: %v", err)
	}
	defer v.Close()
	ji := v.Info()
	if len(ji.PEs) != pe.Size() {
		t.Fatalf("inspect.Open: %d PEs, want %d", len(ji.PEs), pe.Size())
	}
	f := ji.PEs[pe.Rank()].RCache
	if f.Hits != hits || f.Misses != misses || f.Invalidations != inval || f.Registrations != misses || f.BytesRegistered < misses*64<<10 {
		t.Errorf("PE %d as symheap stat reads it: %+v; want %d hits, %d misses and registrations (at least 64 KiB each), %d invalidations",
			pe.Rank(), f, hits, misses, inval)
	}
}

// TestRCachePEReleaseReachesEveryPE: a block released by one PE must
// invalidate the registrations of it in every PE's cache (DESIGN.md: release
// events are "delivered to every PE of the job (a free by PE q reaches the
// cache of PE p)"): a block of PE 0's local shared heap freed by PE 1, and
// each PE's copy of a symmetric block, registered by the other PE.
// (This failed before commit f9d9989, when SharedFree published no release
// at all and a symmetric Free only its own copy's, to its own PE.)
func TestRCachePEReleaseReachesEveryPE(t *testing.T) {
	// hit Gets r from rc, gives the entry back, and reports whether the Get
	// was a hit.
	hit := func(t *testing.T, rc *rcache.Cache, r rcache.Range) bool {
		t.Helper()
		before := rc.Stats().Hits
		e, err := rc.Get(r, rcache.Transports(0))
		if err != nil {
			t.Fatal(err)
		}
		rc.Put(e)
		return rc.Stats().Hits > before
	}
	// A large block (the locked allocator's) and a small one (the
	// small-block front end's, freed onto its span's remote-free stack).
	// The small one is freed once by PE 1 and once by its owner, PE 0:
	// either way the other PE's cache must drop it.
	for _, c := range []struct{ size, freer int }{{64 << 10, 1}, {256, 1}, {256, 0}} {
		size, freer := c.size, c.freer
		name := "shared-free-by-other-PE"
		switch {
		case size <= small.MaxSmall && freer == 1:
			name = "small-shared-free-by-other-PE"
		case size <= small.MaxSmall:
			name = "small-shared-free-by-owner"
		}
		t.Run(name, func(t *testing.T) {
			petest.Run(t, 2, func(t *testing.T) {
				pe, err := Init(Config{})
				if err != nil {
					t.Fatal(err)
				}
				defer pe.Close()
				me := pe.Rank()
				rc, err := pe.RegistrationCache()
				if err != nil {
					t.Fatal(err)
				}
				blk := rcpeShareBlock(t, pe, size)
				r := memhook.RangeOf(blk)
				// Both PEs register the block.
				if hit(t, rc, r) {
					t.Fatalf("PE %d: first Get of the block was a hit", me)
				}
				if !hit(t, rc, r) {
					t.Fatalf("PE %d: second Get of the block missed", me)
				}
				if err := pe.Barrier(); err != nil {
					t.Fatal(err)
				}
				// PE freer frees PE 0's block (any PE may).
				if me == freer {
					if err := SharedFree(pe, blk); err != nil {
						t.Fatal(err)
					}
				}
				if err := pe.Barrier(); err != nil {
					t.Fatal(err)
				}
				if hit(t, rc, r) {
					t.Errorf("PE %d: the registration of PE 0's shared block survived its SharedFree by PE %d (cache %+v)", me, freer, rc.Stats())
				}
				if err := pe.Barrier(); err != nil {
					t.Fatal(err)
				}
			}, rcpeOpts("SYMHEAP_LEAVE_PINNED=yes")...)
		})
	}
	t.Run("symmetric-free-of-other-PEs-copy", func(t *testing.T) {
		petest.Run(t, 2, func(t *testing.T) {
			pe, err := Init(Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer pe.Close()
			me, other := pe.Rank(), 1-pe.Rank()
			rc, err := pe.RegistrationCache()
			if err != nil {
				t.Fatal(err)
			}
			x, err := Malloc[byte](pe, 64<<10)
			if err != nil {
				t.Fatal(err)
			}
			theirs := Ptr(pe, x, other)
			if theirs == nil {
				t.Skip("no direct view of the other PE's copy")
			}
			r := memhook.RangeOf(theirs)
			if hit(t, rc, r) || !hit(t, rc, r) {
				t.Fatalf("PE %d: registering the other PE's copy: want a miss, then a hit", me)
			}
			if err := Free(pe, x); err != nil {
				t.Fatal(err)
			}
			// The other PE's free of its copy happens before it enters
			// the barrier, so before this PE's next lookup.
			if err := pe.Barrier(); err != nil {
				t.Fatal(err)
			}
			if hit(t, rc, r) {
				t.Errorf("PE %d: the registration of PE %d's copy survived PE %d's Free of it (cache %+v)", me, other, other, rc.Stats())
			}
			if err := pe.Barrier(); err != nil {
				t.Fatal(err)
			}
		}, rcpeOpts("SYMHEAP_LEAVE_PINNED=yes")...)
	})
}

// TestRCachePEMemhookDisableSwitchesMonitorOff: docs/environment.md:
// SYMHEAP_MEMHOOK_DISABLE=yes "switch[es] the memory-release monitor off",
// and memhook.Decide's warning says the same ("SYMHEAP_MEMHOOK_DISABLE
// switches the memory monitor off"): a subscriber of the PE's monitor
// then hears of no release.
func TestRCachePEMemhookDisableSwitchesMonitorOff(t *testing.T) {
	petest.Run(t, 2, func(t *testing.T) {
		pe, err := Init(Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer pe.Close()
		var (
			mu     sync.Mutex // the callback may run on another goroutine
			events []string
		)
		if m := pe.Monitor(); m != nil {
			cancel := m.Subscribe(func(k memhook.Kind, r memhook.Range) {
				mu.Lock()
				events = append(events, fmt.Sprintf("%v %v", k, r))
				mu.Unlock()
			})
			defer cancel()
		}
		x, err := Malloc[byte](pe, 64<<10)
		if err != nil {
			t.Fatal(err)
		}
		if err := Free(pe, x); err != nil {
			t.Fatal(err)
		}
		if err := pe.Barrier(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		heard := append([]string(nil), events...)
		mu.Unlock()
		if len(heard) > 0 {
			t.Errorf("PE %d: with SYMHEAP_MEMHOOK_DISABLE=yes the memory monitor still delivered %v", pe.Rank(), heard)
		}
	}, rcpeOpts("SYMHEAP_MEMHOOK_DISABLE=yes")...)
}

// rcpeShareBlock has PE 0 allocate size bytes in its local shared heap,
// after a neighbour of the same size that it keeps (so that a small
// block's span outlives the block: a release event must be the block's
// own, not the span's), and returns the block on every PE as that PE sees
// it, handed over through a symmetric word.
func rcpeShareBlock(t *testing.T, pe *PE, size int) []byte {
	t.Helper()
	box, err := Calloc[uint64](pe, 1)
	if err != nil {
		t.Fatal(err)
	}
	if pe.Rank() == 0 {
		if _, err := SharedAlloc[byte](pe, size); err != nil { // the neighbour, kept until Close
			t.Fatal(err)
		}
		b, err := SharedAlloc[byte](pe, size)
		if err != nil {
			t.Fatal(err)
		}
		p, err := SharedPtrOf(pe, b)
		if err != nil {
			t.Fatal(err)
		}
		for q := range pe.Size() {
			if err := Put(pe, box, []uint64{uint64(p)}, q); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	blk, err := SharedAt[byte](pe, SharedPtr(box[0]), size)
	if err != nil {
		t.Fatal(err)
	}
	return blk
}

// TestRCachePEEveryReleasePath: a registration held by one PE, exactly as
// a user holds it (the default switches, pe.RegistrationCache, Get, Put),
// of memory another PE releases, must be gone from that PE's cache when
// the next collective call returns: for every release path (symmetric
// Free and a moving Realloc of the other PE's copy, SharedFree of small
// and large blocks by their owner and by another PE). Only the PE that
// registers has a cache; the releasing PE has none.
func TestRCachePEEveryReleasePath(t *testing.T) {
	type path struct {
		name string
		// setup returns, on every PE, the bytes PE 1 registers.
		setup func(t *testing.T, pe *PE) []byte
		// release is called on the releasing PE.
		release func(t *testing.T, pe *PE)
		freer   int
	}
	var sym []byte // the symmetric block of the job in this process
	var blk []byte // the shared block, as this PE sees it
	symmetric := func(t *testing.T, pe *PE) []byte {
		var err error
		if sym, err = Malloc[byte](pe, 1<<20); err != nil {
			t.Fatal(err)
		}
		return Ptr(pe, sym, 0) // PE 0's copy
	}
	shared := func(size int) func(t *testing.T, pe *PE) []byte {
		return func(t *testing.T, pe *PE) []byte {
			blk = rcpeShareBlock(t, pe, size)
			return blk
		}
	}
	sharedFree := func(t *testing.T, pe *PE) {
		if err := SharedFree(pe, blk); err != nil {
			t.Fatal(err)
		}
	}
	var paths []path
	for _, size := range []int{256, 64 << 10, 1 << 20} {
		paths = append(paths,
			path{fmt.Sprintf("SharedFree-by-owner/%d", size), shared(size), sharedFree, 0},
			path{fmt.Sprintf("SharedFree-by-other-PE/%d", size), shared(size), sharedFree, 1})
	}
	paths = append(paths,
		path{"Free", symmetric, func(t *testing.T, pe *PE) {
			if err := Free(pe, sym); err != nil {
				t.Fatal(err)
			}
		}, -1},
		path{"Realloc-moving", symmetric, func(t *testing.T, pe *PE) {
			// A neighbour allocated after the block keeps it from growing
			// in place.
			if _, err := Malloc[byte](pe, 64); err != nil {
				t.Fatal(err)
			}
			moved, err := Realloc(pe, sym, 4<<20)
			if err != nil {
				t.Fatal(err)
			}
			if &moved[0] == &sym[0] {
				t.Fatal("Realloc grew the block in place; the test needs it moved")
			}
		}, -1})
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			petest.Run(t, 2, func(t *testing.T) {
				pe, err := Init(Config{})
				if err != nil {
					t.Fatal(err)
				}
				defer pe.Close()
				mem := p.setup(t, pe)
				if mem == nil {
					t.Skip("no direct view of PE 0's memory")
				}
				r := memhook.RangeOf(mem)
				var rc *rcache.Cache
				if pe.Rank() == 1 {
					if rc, err = pe.RegistrationCache(); err != nil {
						t.Fatal(err)
					}
					e, err := rc.Get(r, rcache.Transports(0))
					if err != nil {
						t.Fatal(err)
					}
					rc.Put(e)
				}
				if err := pe.Barrier(); err != nil {
					t.Fatal(err)
				}
				if p.freer < 0 || p.freer == pe.Rank() {
					p.release(t, pe)
				}
				if err := pe.Barrier(); err != nil {
					t.Fatal(err)
				}
				if rc != nil {
					before := rc.Stats()
					e, err := rc.Get(r, rcache.Transports(0))
					if err != nil {
						t.Fatal(err)
					}
					rc.Put(e)
					if rc.Stats().Hits > before.Hits {
						t.Errorf("PE 1: its registration of PE 0's %d bytes survived their release (%s; cache %+v)", len(mem), p.name, rc.Stats())
					}
				}
				if err := pe.Barrier(); err != nil {
					t.Fatal(err)
				}
			}, petest.Heap("16m"), petest.Env("SYMHEAP_SHARED_SIZE=4m", "SYMHEAP_RCACHE_VERIFY=1"), petest.Timeout(30*time.Second))
		})
	}
}
