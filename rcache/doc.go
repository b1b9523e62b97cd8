// Package rcache is a registration ("pin-down") cache: it remembers the
// registrations of address ranges with transports that move data without the
// CPU (RDMA NICs, UCX, GPUs), so that sending from the same buffer again does
// not register it again, and it drops a registration as soon as its memory
// is released, so that no transfer uses pages that are gone.
//
// A transport plugs in as a Registrar (register a range, deregister a
// handle); package rcache/pin is one that pins pages with mlock. One Cache
// serves several transports: an entry covers a range and holds one handle
// per transport, registered the first time that transport asks for it.
//
// Entries may overlap. Get returns the largest valid entry containing the
// range, or registers a new one (or, with Config.Merge, the union of the
// range and the entries it overlaps). Find returns every entry overlapping a
// range. Both take a reference per entry, given back with Put; entries
// nobody holds wait on an LRU list, from whose end the limits evict.
//
// Release events from package memhook (Config.Monitor, or Invalidate called
// directly) invalidate every overlapping entry: no later Get or Find returns
// it. Deregistration never happens in the event callback: idle invalid
// entries are deregistered by the next cache call (or the worker), held ones
// by their last Put.
//
// The cache is safe for concurrent use. A hit takes no lock and allocates
// nothing (memo.go); so does giving back the most recently used entry.
// cache.go describes the structures, the paths and the lock order; tree.go
// the interval tree; queue.go the bounded queue of pending invalidations;
// package pin the page counting that lets pinned registrations overlap.
//
// Setting SYMHEAP_RCACHE_VERIFY makes every call that changes the cache
// check all of its invariants (Check) and panic on a violation.
package rcache
