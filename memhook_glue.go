package symheap

import (
	"fmt"
	"os"
	"sync"

	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/errs"

	"github.com/symheap/symheap/internal/release"
	"github.com/symheap/symheap/memhook"
	"github.com/symheap/symheap/rcache"
	"github.com/symheap/symheap/rcache/pin"
)

// The runtime's use of the memory-release monitor and the registration
// cache. symheap is the allocator of its heaps, so every block released
// from them, by any PE, produces a release event (the role malloc hooks
// played in C runtimes): the heaps' allocators are wrapped in
// alloc.Reporting, whose sink is the job's release log (package release),
// which delivers the event to this PE's monitor at once and to every other
// PE's before its next registration-cache lookup (Monitor.Sync). The
// segment's unmapping at Close is an Unmap event of this PE's monitor. A
// registration cache subscribed to the monitor can then never hand out a
// registration whose memory was released.

// releaseArea is the release log's area of every control block.
var releaseArea = core.RegisterArea("release", func(int) uint64 { return release.AreaSize() })

type hookState struct {
	mon      *memhook.Monitor
	log      *release.Log // the job's release log, a source of mon
	decision memhook.Decision

	rcOnce sync.Once
	rc     *rcache.Cache
	rcErr  error
}

// initHooks makes the monitor and takes the enable decision; with caching
// on, it runs the self-test at once and warns if it cannot see frees or
// unmaps. SYMHEAP_MEMHOOK_DISABLE switches this PE's monitor off: it has
// none (Monitor returns nil, RegistrationCache refuses), and its releases
// still go into the job's log for the PEs that listen.
func (pe *PE) initHooks() error {
	in, err := memhook.InputsFromEnv(memhook.Unset, memhook.Unset)
	if err != nil {
		return err
	}
	h := &pe.ext.hooks
	if !in.Disabled {
		h.mon = memhook.New()
	}
	areas := make([][]byte, pe.npes)
	for p := range areas {
		areas[p] = pe.sp.Bytes(releaseArea, p)
	}
	h.log = release.New(areas, pe.rank, pe.sp.Base(), uint64(len(pe.sp.Mem())), h.mon)
	h.decision = memhook.Decide(in)
	if h.decision.Warning != "" {
		fmt.Fprintln(os.Stderr, h.decision.Warning)
	}
	if h.decision.Enabled { // never with the monitor off (memhook.Decide)
		res := h.mon.SelfTest(nil)
		pe.stats.MonFlags.Store(uint64(res.Flags) | core.MonTested) // symheap stat shows it
		h.mon.WarnUnsupported(os.Stderr, h.decision)
	}
	return nil
}

// closeHooks publishes the segment's unmapping and stops the monitor.
func (pe *PE) closeHooks() {
	h := &pe.ext.hooks
	if h.log != nil {
		h.log.Close()
	}
	if h.mon == nil {
		return
	}
	h.mon.Publish(memhook.Unmap, memhook.RangeOf(pe.sp.Mem()))
	if h.rc != nil {
		pe.syncCacheStats()
		h.rc.Close()
	}
	h.mon.Close()
}

// Monitor returns this PE's memory-release monitor: subscribe to it to
// hear of every block released from the job's heaps, by any PE (see
// package memhook for the rules a callback must keep). It is nil when
// SYMHEAP_MEMHOOK_DISABLE switches the monitor off.
func (pe *PE) Monitor() *memhook.Monitor { return pe.ext.hooks.mon }

// CachingEnabled reports the registration-caching decision and its reason
// (SYMHEAP_LEAVE_PINNED, SYMHEAP_LEAVE_PINNED_PIPELINE, the network found,
// SYMHEAP_MEMHOOK_DISABLE).
func (pe *PE) CachingEnabled() (bool, string) {
	d := pe.ext.hooks.decision
	return d.Enabled, d.Reason
}

// RegistrationCache returns this PE's registration cache, made on first
// use with the pin registrar (mlock plus MADV_DONTFORK) and subscribed to
// the PE's monitor. Its figures are copied into shared memory at every
// barrier, where symheap stat reads them.
func (pe *PE) RegistrationCache() (*rcache.Cache, error) {
	if err := pe.check(); err != nil {
		return nil, err
	}
	h := &pe.ext.hooks
	if h.mon == nil {
		return nil, fmt.Errorf("symheap: RegistrationCache: %w (%s switches the memory monitor off, and a cache that hears of no release would hand out registrations of freed memory)", errs.ErrNotSupported, memhook.EnvDisable)
	}
	h.rcOnce.Do(func() {
		h.rc, h.rcErr = rcache.New(rcache.Config{Registrars: []rcache.Registrar{pin.New()}, Monitor: h.mon})
	})
	return h.rc, h.rcErr
}

// syncCacheStats copies the figures of the PE's registration caches (its
// RegistrationCache, and the one its transport to other nodes registers
// buffers through) into this PE's control block, summed.
func (pe *PE) syncCacheStats() {
	h := &pe.ext.hooks
	var s rcache.Stats
	have := false
	if h.rc != nil {
		s, have = h.rc.Stats(), true
	}
	if pe.far != nil {
		if t, ok := pe.far.CacheStats(); ok {
			s.Hits += t.Hits
			s.Misses += t.Misses
			s.Registrations += t.Registrations
			s.Deregistrations += t.Deregistrations
			s.Evictions += t.Evictions
			s.Invalidations += t.Invalidations
			s.Stale += t.Stale
			s.BytesRegistered += t.BytesRegistered
			have = true
		}
	}
	if !have {
		return
	}
	st := pe.stats
	st.RCacheHits.Store(s.Hits)
	st.RCacheMisses.Store(s.Misses)
	st.RCacheRegs.Store(s.Registrations)
	st.RCacheDeregs.Store(s.Deregistrations)
	st.RCacheEvicts.Store(s.Evictions)
	st.RCacheInv.Store(s.Invalidations)
	st.RCacheBytes.Store(s.BytesRegistered)
	st.RCacheStale.Store(s.Stale)
}
