// Package memhook is symheap's memory-release monitor: it tells subscribers,
// such as a registration cache, that a range of addresses has been released,
// so that nothing keeps using a registration of memory that is gone.
//
// # Events
//
// Four kinds of release are reported, each with an address range:
//
//   - Free: a block of a symheap heap was freed.
//   - Chunk: a realloc or shrink released part of a block (its tail), or all
//     of it when the block moved.
//   - Unmap: pages were unmapped (munmap, or mremap moving them away).
//   - Remove: pages were dropped but stay mapped (madvise MADV_DONTNEED or
//     MADV_REMOVE); the next touch gets fresh pages.
//
// # Sources
//
// symheap is the allocator of its own heaps, so the hooks that Open MPI had
// to patch into ptmalloc2 are built in: every block released from a heap of
// the job, by any PE, is reported at the allocator boundary
// (alloc.Reporting) and reaches the monitor of every PE of the node: the
// releasing PE's at once, the others' through a Source (symheap's release
// log in shared memory) that Sync drains before it returns. PrivateHeap here
// calls PublishFree and PublishRealloc itself. Publishing costs one atomic
// load when nobody subscribes, and never allocates.
//
// Memory symheap does not own (Go memory, C memory, mappings a program makes
// itself) is watched through userfaultfd(2): Watch registers a range, and a
// dedicated reader goroutine turns the kernel's UNMAP, REMOVE and REMAP
// events into Unmap and Remove events. See Watch for what the backend needs
// from the kernel and why it registers ranges in write-protect mode.
//
// # Callbacks
//
// A Callback learns the kind and the range, nothing else. It runs on the
// thread that released the memory (for heap events, while that thread is
// inside free) or on the userfaultfd reader, so it must be short and must not
// re-enter the monitor: it must not Publish, Subscribe, cancel a
// subscription, Watch, Unwatch or Sync, nor allocate from or free into a
// symheap heap, nor unmap or madvise memory the monitor watches. Each of
// those can deadlock. A registration cache therefore only records the range
// in its callback and does the work (deregistration) later.
//
// # Lock order
//
// Monitor.subMu (held shared while callbacks run) → whatever the callback
// takes. Monitor.dispatchMu (held by the userfaultfd reader while it reads
// and dispatches a batch) → Monitor.subMu. Nothing in this package calls out
// while holding Monitor.uf.mu except the kernel.
//
// # Support and the enable decision
//
// SelfTest proves at start-up which events really arrive (Flags). Decide
// chooses whether registration caching ("leave pinned") is on, from the
// settings, the presence of an OS-bypass network and a disable switch;
// SupportWarning says when caching is on without the events it relies on.
package memhook
