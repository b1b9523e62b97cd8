// Package team is the teams and collectives of a PE: the world team,
// Split, Sync, Destroy, the full barrier of PE.Barrier, and Broadcast,
// Reduce, FCollect and AllToAll over the members' symmetric heaps. The
// root package exports it through thin wrappers (its Team is this
// package's, and its generic collectives call the ones here); this
// package owns all of its state (Layer, and each Team) and asks the
// runtime for the rest through Runtime: whether the PE is closed, whether
// members live, and Quiet's wake-up step for PE.Barrier.
//
// # Files
//
//	team.go        the design of teams and their synchronisation (the
//	               team area of the control blocks, full barriers,
//	               arrivals and scratch reuse, Split step by step), Layer,
//	               Team, Sync, Split, Destroy
//	collective.go  the two shapes of a collective call, and the
//	               collectives. Broadcast, FCollect and AllToAll only
//	               copy, so they work on bytes (Vec: an address, a length
//	               in elements and an element size); Reduce is generic, so
//	               that its folding loops are compiled for the element type
//	post.go        post lines: the Broadcasts and Reduces of a few words,
//	               their publication and their sleep
//	dissem.go      the full barrier: dissemination over post lines of each
//	               member's own, its area, why not a tree
//	topo.go        the members' topology keys and the barrier's order
//	linecount_*.go the line-count model (build tag linecount)
//	view.go        views of the team area, the scratch buffers and peers'
//	               heaps (internal/core does the arithmetic)
//	calllock.go    CallLock, the mutex of calls that synchronise with other
//	               PEs (Team.mu; the root package's PE.mu too)
//
// # Locking
//
// Layer is immutable after Init, but for its count of split handles (an
// atomic). Each Team guards its own state:
//
//	Team.mu (CallLock)   a team's collectives, Split and Destroy: the call
//	                     count, the arrival counts, the scratch bookkeeping
//	                     and the memo of located arrays
//	Team.busy            set by a call in progress (collectives under mu,
//	                     Sync and Layer.Barrier without it), so that a Sync
//	                     overlapping another call of the PE is refused;
//	                     plain loads and release stores, best effort
//	                     (team.go, "Full barriers")
//	Team.bar             the full barrier's partners (placed once) and the
//	                     line counts: one call at a time (mu, or busy for
//	                     Sync and Barrier); its count word lives in the
//	                     control block, owner only, plain loads and
//	                     release stores
//
// Sync and Layer.Barrier take no lock at all: any atomic read-modify-write
// besides the barrier's own add costs a sizeable share of a 2-PE barrier
// (in a team of two PE.Barrier makes none: its Quiet owes its fence to
// the next load, as PE.Quiet does).
// No lock of this package is held while a call waits for another
// process's lock; a collective waits for the other members with Team.mu
// held (and, in PE.Barrier's case, nothing held).
//
// # Lock order
//
// Outermost first; a goroutine holding one may take only those below it
// (internal/core's package comment has the runtime's whole list):
//
//	PE.mu (root)         may be held by callers of the layer (Close holds
//	                     it); the layer never takes it
//	Team.mu (CallLock)   one team's at a time: a call on one team never
//	                     enters another (Split makes the new team without
//	                     its lock). Under it the layer calls Runtime
//	                     (Check, CheckPeers: the segment's liveness
//	                     bookkeeping, a leaf; WakeSleepers: futex wakes)
package team
