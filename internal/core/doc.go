// Package core is the mapped segment as the runtime sees it: the layout,
// a type for each kind of offset, the one address translator, the views
// of the control blocks, and the pointer arithmetic of the whole runtime.
// Every other layer works on its results without importing unsafe.
//
// # Offsets
//
//	SegOff     from the segment's first byte
//	HeapOff    in a PE's symmetric heap (the alloc.Off of that region)
//	SharedOff  in a PE's local shared heap (the alloc.Off of that region)
//	CBOff      in a PE's control block
//
// # Translation
//
// Every address of another PE's memory is computed as that PE's
// partition base plus an offset (Space.Part): correctness never depends
// on the segment lying at the same address in every PE, which is an
// optimisation (a pointer can then be handed to another PE as it is).
// In protected mode other PEs' symmetric heaps are read-only in the main
// mapping, and the runtime writes them through a writable alias
// (HeapAddr); what users see is the main mapping (ViewAddr).
//
// # Control blocks
//
// Each PE's control block starts with the runtime's fixed words
// (ControlSize bytes); the layers' areas follow, each registered by its
// layer with RegisterArea from an init function, so that this package
// knows none of them. Areas are laid out in name order, each on a
// 128-byte boundary. Two areas are this package's own, because symheap
// stat reads them without the runtime: the per-PE counters (Stats) and
// the job's team ids in use (TeamIDs).
//
// # Lock order
//
// The runtime's locks, outermost first; a goroutine holding one may take
// only those below it:
//
//	PE.mu (callLock)           a PE's collective allocation calls and its heap
//	team.Team.mu (CallLock)    a team's collectives, Split and Destroy
//	                           (internal/team; Sync and PE.Barrier take
//	                           no lock)
//	far.msgs.mu                a job on several nodes: the lazily matched
//	                           receives and the table of cross-node
//	                           requests (internal/far); taken around the
//	                           matching step, which takes the lock below
//	msg.Layer.lock (msgLock)   the messaging tables; none of the locks
//	                           below is taken under it (only the
//	                           segment's liveness bookkeeping, a leaf).
//	                           Bounce buffers are allocated and freed
//	                           with it released (msg.Layer.bounceWork):
//	                           alloc.Lock may wait for another PE's free
//	sharedHeap.mu              the handles on other PEs' shared heaps
//	alloc.Lock                 a region's cross-process lock (robust,
//	                           owner-tagged); a release is logged under it
//	release.Log append lock    this process's appends to its release ring
//	memhook.Monitor.subMu      subscribers, while callbacks run
//	rcache.Cache.mu            the cache's tree (callbacks only record ranges)
//	rmaLayer.mbMu              the one registration for membarrier (a leaf;
//	                           puts, gets, atomics and waits take no lock)
package core
