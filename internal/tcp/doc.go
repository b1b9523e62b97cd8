// Package tcp is a pure-Go transport.Net over TCP, and a rendezvous
// transport.Bootstrap, both registered in every build ("tcp" and
// "rendezvous", at priority 10: UCX and PMIx, where built, come first).
// It needs no C library; speed is not its point: it proves the seam, runs
// the tests of the layers above it on one machine, and carries jobs
// where UCX is missing.
//
// # Connections
//
// Each PE listens on a TCP port (every interface, or only the IP in
// SYMHEAP_TCP_ADDR) and publishes, under the bootstrap key "symheap.tcp",
// its candidate addresses (non-loopback IPv4 first, loopback last) and
// the sizes of its regions; Open then fences and reads every PE's record.
//
// Connections are made lazily. PE i's operations on PE j (puts, gets,
// atomics, flushes, messages) all go over the one connection i dialled to
// j, its "out" connection; j's end of it is one of j's "in" connections.
// So between two PEs there are at most two connections, one per
// direction, and a PE talking to itself dials its own listener. A
// connection opens with a handshake carrying the job's name and both
// ranks: a process that is not PE j of this job (an address that means
// another host's process, 127.0.0.1 on the wrong machine) refuses it, and
// the next candidate is tried.
//
// Per out connection there are two goroutines: the writer (which also
// dials, so that no caller waits for a connection except in a wait that
// checks the peer) writes the queued frames in the order they were
// posted; the reader takes the replies (get data, fetched values, flush
// acknowledgements) and completes the calls waiting for them. Per in
// connection one goroutine, the server, reads the requests and performs
// them in order on this PE's regions and receive queue, answering on the
// same connection. Readers always drain what arrives (a message is read
// into a buffer of its own, a reply is matched or dropped), so a writer
// blocked on a full socket waits only for the peer's reader, never for
// the peer's application: no cycle of blocked writes can form.
//
// # Operations
//
// Put, Get and Atomic name (region, offset). Bounds, region, size (4 or
// 8) and alignment are checked at the origin against the published sizes
// (an immediate error) and again at the target before memory is touched
// (an error sent back: with the reply of a get or fetching atomic, or
// with the next flush's acknowledgement for a put or non-fetching
// atomic). The errors wrap errs.ErrBadArg. Atomics are sync/atomic
// operations on the target's words (amo.go), so they are atomic with the
// CPUs of the target's node; AMOSet is a swap that waits for its reply.
//
// A blocking Put copies src and returns; an nbi Put and a SendNB of more
// than copyMax bytes reference the caller's buffer until it is written.
// The bytes a peer's queue holds in copies are bounded (maxQueued); a
// Put beyond it waits for the writer.
//
// Fence has nothing to do: the server of a connection performs its
// requests in the order they were written, and one connection carries
// all of a PE's operations on one peer, so operations to a peer are
// performed in the order they were posted. Flush sends a flush request
// to every peer that has had puts or non-fetching atomics since its last
// flush and waits for the acknowledgements: the server answers a flush
// after it has performed everything before it.
//
// # Messages
//
// A message is read by the receiving server into a buffer of its own
// (eager for every size) and matched as UCX matches tags: a posted
// receive (Recv, RecvNB, Watch) takes the earliest arrived message that
// matches it, and an arriving message goes to the earliest posted receive
// that matches it, else to the unexpected queue, which TryProbe, Probe
// and RecvMatch search in arrival order. One connection per sender keeps
// each sender's messages in the order they were sent. A message longer
// than its posted receive's buffer ends that receive with errs.ErrTruncated
// and is consumed (as UCX does); RecvMatch leaves a message that does not
// qualify queued (MatchOther).
//
// # Liveness
//
// A connection that breaks without the peer's goodbye (or, before the
// handshake completed, a refusal of every candidate) marks the peer lost:
// Failed and Check report it, and every wait on it, and every call
// waiting for one of its replies, ends with a *transport.PeerError
// wrapping transport.ErrPeer and the cause. Recv and Probe from a given
// peer dial it first, so that its death breaks a connection this PE
// reads. Config.Timeout bounds the waits that only the peer completes
// (Get, a fetching atomic, Flush, a Put waiting for queue space): past it
// they end with a PeerError wrapping transport.ErrTimeout (a stopped
// peer). Between slices of a millisecond every wait checks, as UCX's
// worker does: an announcement (Watch) through Config.Announced, the
// peer's loss, Config.Lost, the timeout, then the caller's check.
//
// A peer that closed its Net said goodbye: it is not lost (Failed and
// Check do not report it), but a wait on it ends with a PeerError
// wrapping ErrPeer and saying so.
//
// # Progress
//
// Nothing here needs the PE's help: the goroutines above perform every
// operation on their own. Progress only reports whether an incoming
// operation or message was handled since it last looked; Sleep returns as
// soon as one was handled since the last Sleep (so the runtime wakes its
// sleepers), an announcement arrived, the Net was closed, or d passed;
// WaitEvent waits up to a millisecond for anything to arrive or complete.
//
// # Close
//
// Close sends a goodbye on every connection after what was queued,
// waits (at most linger) for the peers to answer with theirs or hang up,
// closes every socket, fails what still waits with errs.ErrClosed, and
// returns once every goroutine of the Net has ended. Operations after
// Close fail with errs.ErrClosed. Close is idempotent.
//
// # Locks
//
// Lock order: Net.mu before outConn.mu. queue.mu, event.mu and inConn.mu
// are leaves: nothing else is taken while they are held. Replies are
// published to waiters by closing a channel under outConn.mu (the
// waiter's receive from it is the happens-before edge); region memory
// written by a server is published by the Go memory model's ordering of
// the server's event signal before Sleep's wake-up, and to other
// processes by the sequentially consistent atomics of the signal.
package tcp
