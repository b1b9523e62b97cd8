// Package ucx is symheap's binding of UCX's UCP layer: one context and
// one worker per process, endpoints to peers made lazily on first use,
// memory registration with packed remote keys, one-sided put and get,
// atomics, fence and flush, tag-matched messages, progress, the worker's
// event descriptor, and peer failure reporting.
//
// It is compiled only with the build tag ucx (it needs libucx and cgo);
// in the default build the package is empty. Nothing outside it sees a C
// type: buffers are []byte, remote memory is (peer, region, address).
//
// # Threads
//
// The worker is created for serialized use and every call into it is
// made under Worker.mu, so that the PE's own goroutines and its progress
// goroutine (which sleeps on the event descriptor without the lock) can
// share it. Blocking operations progress the worker themselves while
// they wait, in C, releasing the lock only between slices of at most a
// millisecond, so that their waits end when a peer is declared lost.
//
// # Endpoints
//
// An endpoint is made on the first operation to its peer, and settled
// before that operation is posted: one 8-byte get, waited for, which
// completes only once the peer has handled this side's wireup request.
// UCX 1.13's TCP transport crashes a worker that handles a wireup request
// with more bytes behind it on the same connection (Worker.settle says
// how); the get keeps anything from being sent behind the request.
//
// # Buffers
//
// Go memory handed to UCX stays in place: Go's heap does not move, and a
// buffer that UCX still holds when the call returns (a pending
// non-blocking put, a pending receive) is pinned (runtime.Pinner) until
// the operation completes or the next Flush.
package ucx
