// Package msg is the message passing of a PE: Send, Recv, Isend, Irecv
// between the PEs of one node, over the job's segment. The root package
// exports it through thin wrappers; this package owns all of its state
// (Layer) and asks the runtime for the rest through Runtime.
//
// # Paths
//
// A message of at most BoxMax (16) bytes travels through the fast box the
// two PEs share, one cache line for both directions, when the box is free
// (queue.go, "Fast boxes"). A message of at most the eager limit
// (DefaultEagerLimit, env SYMHEAP_MSG_EAGER; DefaultSharedEagerLimit, env
// SYMHEAP_MSG_EAGER_SHARED, when the send buffer lies in the segment)
// travels whole through the ring from sender to receiver (queue.go).
// Either way the sender copies it in, the receiver copies it out, and the
// send is complete once it is in. A larger message is announced by a
// descriptor record (RTS: tag, length, id, where) and copied once, by the
// receiver, from the sender's buffer:
//
//	segment  the send buffer lies in the job's segment (a local shared
//	         heap, or a symmetric heap): the receiver copies straight from
//	         it, in user space (HMPI's single copy)
//	kernel   the buffer is ordinary Go memory: the receiver copies it with
//	         process_vm_readv from the address the sender gave, one copy
//	         through the kernel. The sender's Request holds the buffer, so
//	         it stays reachable (and Go's collector does not move heap
//	         objects) until the receiver's ack arrives
//	bounce   process_vm_readv was refused (EPERM from ptrace rules or
//	         seccomp; the receiver answers NACK and the sender never tries
//	         it to that PE again), or SYMHEAP_MSG_NOKERNEL=1, or for every
//	         large message SYMHEAP_MSG_BOUNCE=1: the sender copies the
//	         message piecewise into a few chunks of a buffer in its own
//	         shared heap and posts a CHUNK record for each; the receiver
//	         copies each out and answers CHUNKACK, which frees the chunk for
//	         the next piece, so both copies run at once
//
// The receiver answers ACK when it has copied a segment or kernel message;
// the last CHUNKACK ends a bounce, once the sender has given the buffer
// back to its shared heap. Only then does the send complete. Each path is
// counted on the sender (core.Stats: MsgEager, box messages included,
// MsgSingleCopy, MsgKernel, MsgBounce). A segment or kernel message of at
// least SYMHEAP_MSG_SPLIT bytes is copied by both PEs at once when the
// sender is waiting for it: the receiver reads chunks, the sender writes
// chunks (split.go), still one copy of every byte.
//
// The eager limits trade the eager path's second copy against the large
// paths' handshake (RTS, then ACK): see DefaultEagerLimit.
//
// # Matching
//
// Every PE keeps, in its own memory, the receives it has posted and the
// messages that arrived before a matching receive (unexpected: eager
// payloads copied out of the ring, and descriptors). A new receive first
// takes the oldest matching unexpected message; otherwise it is posted. A
// record drained from a ring goes to the oldest matching posted receive;
// otherwise it is queued as unexpected. The box and the ring of a pair
// form one FIFO sequence (queue.go) and both queues keep arrival order, so
// messages from one sender with one tag never overtake each other. A
// receive whose buffer is too short for the message it matches ends with
// ErrTruncated and the message's real size in Status.Count, and the
// message stays where it was (a later receive with a large enough buffer
// gets it).
//
// # Progress and waiting
//
// There is no progress thread. Every Recv, every Test and Wait, and
// every send that cannot complete at once drains this PE's incoming rings
// and boxes, pushes records that found a ring full (each destination's
// backlog, in order), and advances bounce transfers. (A send that
// completes at once returns without: its progress would only delay the
// return, and pull back the line just written. An Irecv that finds no
// unexpected message posts itself without, too: a window of Irecvs is
// then posted before its messages are drained, which go straight into
// their buffers, not through the unexpected queue; it gives back the
// boxes it may receive from, which progress would have.) A blocking wait does this
// in a loop (Request.spin): it polls, holding Layer.lock, for up to
// spinFor while the job has no more PEs than the machine has cores, then
// spins briefly and yields without it, then sleeps on this PE's doorbell
// (Layer.sleep), which every record addressed to it and every release of
// ring room rings when it sleeps (queue.go, "Waking"), as does a
// goroutine of this PE that completes another's request. Every polling
// loop pauses (shmsync.Pause) between polls. On each 50 ms sleep slice it
// checks the liveness of the PEs it waits for, so a dead peer turns into
// ErrPeerLost well within a second. Sends check the destination's
// liveness too: every large one, and on the eager path the first and
// then one in livenessEvery, and every one to a PE already seen dead.
//
// # Requests and the small-message rate
//
// A stream of small messages costs per message what the sender's and
// the receiver's calls cost, and the cache lines that cross between
// them. So the path of an eager Isend, Irecv and Wait holds no locked
// instruction (the statistics count with core.Bump, a request is marked
// done by a release store: a locked instruction would wait for the
// message's line to reach the sender's core, once per message), a send
// does not look at a fast box it last saw taken (boxPair.busy), and two
// small messages share a line of the ring (queue.go). Requests are not
// reused behind the program's back (Wait may be called again on a done
// one); a program that releases them (Request.Release) gets them back
// from its later Isends and Irecvs instead of an allocation: a window
// of released requests allocates nothing (the collector's cycles, on a
// machine with as many cores as PEs, take a core from a PE).
//
// A blocking Recv from one source first tries the fast path (fast.go):
// when nothing else is under way it takes the next message from that
// source's box or ring straight into its buffer, without a Request or a
// full progress.
//
// # Locking
//
// Layer.lock (a msgLock, lock.go) serialises this PE's goroutines on the
// queues, the rings' producer and consumer sides, the boxes, the requests
// and every other field of Layer not marked immutable. Nothing sleeps or
// blocks while holding it; a wait that polls holds it between polls and
// lets it go when another goroutine asks. The path from the arrival of a
// message to the publishing of the reply (fast receive, then send) takes
// no locked instruction while the PE's messaging runs on one P.
//
// Bounce buffers are the exception that the rule has to be kept against:
// allocating or freeing one takes the cross-process lock of this PE's
// shared heap (alloc.Lock), which another PE holds while it frees a block
// into that heap, and whose waiters sleep. So neither happens under
// Layer.lock. A transfer that needs a buffer is queued (Layer.wantBounce),
// as is a buffer a transfer is done with (Layer.toFree); every release of
// the lock goes through Layer.unlock, which hands the queues to bounceWork:
// it lets the lock go, allocates and frees through Runtime, takes the
// lock again to install the results (and post the first chunks), and
// releases it. A poller that keeps the lock between polls runs bounceWork
// whenever its progress queued something (flushBounce). A send that
// fails while its buffer is being allocated gets it freed at once, and
// its Request is not reused for another call until bounceWork is done
// with it (Request.inWork). xfer.go, "Bounce buffers", has the steps.
//
// # Lock order
//
// Outermost first; a goroutine holding one may take only those below it
// (internal/core's package comment has the runtime's whole list):
//
//	PE.mu, team.Team.mu        may be held by callers of the layer
//	                           (Close holds PE.mu)
//	Layer.lock (msgLock)       under it the layer takes no other lock of
//	                           the runtime's (Runtime.CheckPeers takes
//	                           only the segment's liveness bookkeeping,
//	                           a leaf) and waits for no other process
//	sharedHeap.mu, alloc.Lock  taken by Runtime.AllocBounce and
//	                           FreeBounce, which bounceWork calls with
//	                           Layer.lock released
package msg
