package rcache

// Stats are a cache's figures. Every field is a plain uint64, so that the
// runtime can copy the struct into shared memory for `symheap stat`.
type Stats struct {
	Hits          uint64 // Get calls that found a valid entry containing the range
	Misses        uint64 // Get calls that made a new entry
	Registrations uint64 // successful Register calls, over all transports
	// Deregistrations counts handles given back to their registrar
	// (failed attempts included: see DeregisterErrors).
	Deregistrations  uint64
	RegisterErrors   uint64 // Register calls that failed
	DeregisterErrors uint64 // Deregister calls that failed
	Evictions        uint64 // idle entries evicted for the limits or by Evict
	Invalidations    uint64 // entries invalidated by release events
	Stale            uint64 // entries retired by a lookup because their Go object was collected (anchor.go)
	Events           uint64 // release ranges received (Invalidate calls)
	QueueMerges      uint64 // times the pending-invalidation queue was full and was compacted
	Merges           uint64 // idle entries folded into a larger one by the merge policy
	BytesRegistered  uint64 // bytes registered over the cache's life, summed over transports

	Entries uint64 // entries not yet deregistered: valid ones, and invalid ones still held
	Held    uint64 // entries with at least one reference
	Bytes   uint64 // bytes covered by Entries
}
