package config

// Environment variables of the job contract. The launcher sets the first
// four in every PE; the others carry settings from the launcher's flags
// into Init.
const (
	// EnvJob is the job id: the same string in every PE of one job and
	// different between jobs. The segment of a job is named after it
	// (internal/segment.Name).
	EnvJob = "SYMHEAP_JOB"
	// EnvPE is the rank of the PE, 0 ≤ rank < npes, in decimal.
	EnvPE = "SYMHEAP_PE"
	// EnvNPES is the number of PEs of the job, in decimal.
	EnvNPES = "SYMHEAP_NPES"
	// EnvLauncher is the pid of the launcher (package launch) that
	// started the PE, in decimal. The launcher starts every PE with a
	// parent-death signal (SIGKILL), which would end the PE without
	// leaving the job; a symheap PE that finds its parent is this pid
	// clears that signal at start-up and watches its parent instead, so
	// that, when the launcher dies, it leaves the job's segment before it
	// exits (launcher.go in package symheap).
	EnvLauncher = "SYMHEAP_LAUNCHER"
	// EnvHeap is the symmetric heap size per PE, in ParseSize syntax.
	EnvHeap = "SHMEM_SYMMETRIC_SIZE"
	// EnvSharedHeap is the local shared heap size per PE, in ParseSize syntax.
	EnvSharedHeap = "SYMHEAP_SHARED_SIZE"
	// EnvAllocator names the memheap component of the symmetric heap.
	EnvAllocator = "SYMHEAP_ALLOCATOR"
	// EnvOffsetMode, when "1", asks the runtime not to try the same-address
	// mapping and to translate offsets instead.
	EnvOffsetMode = "SYMHEAP_OFFSET_MODE"
	// EnvSharedSmall, when "0", turns off the local shared heap's
	// small-block front end (alloc/small): every block then comes from the
	// allocator component under its lock.
	EnvSharedSmall = "SYMHEAP_SHARED_SMALL"
	// EnvUCXPeerErrors, when "0", makes the endpoints to PEs on other
	// nodes without UCX's peer error handling (multi-node jobs, build tag
	// ucx): UCX 1.13 then moves large messages over TCP without a copy
	// at the receiver, but a PE lost on another node is no longer
	// reported (ErrPeerLost): UCX may end the others with it.
	EnvUCXPeerErrors = "SYMHEAP_UCX_PEER_ERRORS"
)
