// Package far is the multi-node layer: what a PE does with the PEs of
// other nodes, over a transport.Net (UCX in the ucx build, TCP in every
// build) joined by a transport.Bootstrap (PMIx in the ucx build, a
// rendezvous at SYMHEAP_BOOT in every build). One Layer per PE of a job
// on several nodes: the hierarchical barrier, the allocation records'
// exchange, teams made by Split and their collectives, messages, the
// one-sided operations (transport.Remote) and the liveness of the other
// nodes' PEs. It reaches the PE that owns it through Runtime only, and
// the other nodes through the transport only.
//
// # Bootstrap
//
// Init asks the bootstrap for this PE's rank, the job's size and the
// node of every PE. The PEs of a node share the node's segment, which
// keeps the job's numbering: every node's segment has a control block and
// a partition slot for every PE of the job, and only the node's own PEs
// attach and back theirs (segment.Params.Local). So a rank, a heap offset
// and a control-block offset mean the same on every node, and the layers
// above index every PE alike.
//
// A job whose PEs are all on one node stops there: no transport.
// Otherwise every PE opens the transport (Start), which registers two
// regions, once: its symmetric heap (the target of puts, gets and
// atomics) and the node's control blocks (which a wait pings to tell a
// stopped PE from a busy one); allocation never registers anything. The
// transport publishes what its peers need through the bootstrap and
// fences (the cross-node part of Init's barrier: every heap is formatted
// before it). Connections are made lazily, on the first operation to a
// PE, so start-up costs the fence and nothing per PE.
//
// # Progress
//
// Over a network without remote memory access (UCX over TCP), puts and
// atomics are performed at the target in software, when the target's
// transport progresses. Every blocking operation progresses while it
// waits; every wait of the runtime progresses in its condition
// (WaitUntil, the allocation records, the barrier); and a progress
// goroutine sleeps in Net.Sleep until something arrives, so a PE busy in
// its own code, or asleep in a futex wait, still serves the others. After
// each wake-up the goroutine wakes this PE's sleepers, whose condition
// may have been changed by what arrived, and matches the receives that
// wait to be matched (msg.go, progressMatch): a sender of a
// rendezvous message waits for its receiver's receive, which must not
// wait in turn for the receiving PE to call a message function.
//
// # Barrier
//
// PE.Barrier and the world team's Sync are hierarchical: every PE
// completes its operations (Quiet, a flush), the node's PEs meet in the
// segment's barrier, the node's lowest rank (its leader) runs a
// dissemination barrier with the other nodes' leaders over tagged
// messages (ceil(log2 nodes) rounds), and the node's PEs meet again. A
// leader that finds a PE lost leaves the rank in its control block
// (control.farLost) before the second meeting, so that every PE of the
// node returns the error; one that finds a PE of another node in another
// collective call (pingCalls) leaves LostDiverged.
//
// # Atomics
//
// An atomic on a PE of this node is a CPU atomic on the shared segment;
// one on a PE of another node is the transport's, which both UCX over
// TCP (its software atomics) and the TCP transport perform at the target
// with the same locked CPU instructions on the same coherent memory. The
// two kinds are atomic with respect to each other. A NIC's hardware
// atomics would not be (they are not atomic with the CPU's): no transport
// here uses them.
//
// # Faults
//
// When a PE dies its connections fail and the transport reports it
// (transport.PeerError); the bootstrap's launcher events (a process
// terminated or aborted) are recorded too. Both become ErrPeerLost naming
// the PE. The PE that finds the loss (on a connection, or in the
// launcher's report) announces it to its partners on the other nodes, each of which leaves it for its node, and leaves it for
// its own node itself (control.farLost of the node's leader) before it
// returns: a PE whose node's peer leaves after such a loss reports the
// loss, not the leaving. A stopped PE on another node is reported when an operation on
// it has not completed for SYMHEAP_PEER_TIMEOUT.
package far
