package symheap

import (
	"fmt"
	"sync/atomic"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/msg"
)

// Message passing: Send, Recv, Isend, Irecv. The layer lives in
// internal/msg, whose package comment is its design (paths, matching,
// progress and waiting, its lock and the lock order); this file is the
// public API over it, and what the layer asks of the PE (msgRuntime).

// AnySource and AnyTag match any sender and any tag in Recv and Irecv.
const AnySource, AnyTag = msg.AnySource, msg.AnyTag

// MaxTag is the largest tag a message may carry (tags start at 0).
const MaxTag = msg.MaxTag

// DefaultEagerLimit is the largest message sent through the rings when
// the send buffer is ordinary memory, and DefaultSharedEagerLimit when it
// lies in the segment (a local shared heap or a symmetric heap), unless
// SYMHEAP_MSG_EAGER and SYMHEAP_MSG_EAGER_SHARED say otherwise; larger
// messages are copied once from the sender's buffer. BenchmarkEagerCrossover
// and the stream of symheap bench's msg_bw chose them
// (docs/bench/design-measurements.md). Both limits are capped at a quarter
// of a ring.
const (
	DefaultEagerLimit       = msg.DefaultEagerLimit
	DefaultSharedEagerLimit = msg.DefaultSharedEagerLimit
)

// Status describes a received message (or, for a send, the message sent).
type Status struct {
	Source int // the sending PE
	Tag    int
	Count  int // the message's length in bytes (also when truncated)
}

// Request is an outstanding Isend or Irecv. Wait or Test it until done; a
// send's buffer must not change, and a receive's must not be read, before.
type Request msg.Request

// Send sends buf to PE dest with tag (0 to MaxTag) and returns when buf
// may be reused: at once for a small message, after the receiver has
// copied a large one. A destination that has died gives ErrPeerLost.
func (pe *PE) Send(buf []byte, dest, tag int) error {
	if err := pe.checkOpen(); err != nil {
		return err
	}
	if pe.far != nil {
		return pe.far.Send(buf, dest, tag) // a job on several nodes: internal/far
	}
	return pe.ext.msg.Send(buf, dest, tag)
}

// Isend starts sending buf to PE dest with tag. buf must not change until
// the request is done (Wait, Test).
func (pe *PE) Isend(buf []byte, dest, tag int) (*Request, error) {
	if err := pe.checkOpen(); err != nil {
		return nil, err
	}
	if pe.far != nil {
		r, err := pe.far.Isend(buf, dest, tag)
		return (*Request)(r), err
	}
	r, err := pe.ext.msg.Isend(buf, dest, tag)
	return (*Request)(r), err
}

// Recv receives a message from PE source (or AnySource) with tag (or
// AnyTag) into buf. If buf is shorter than the message it returns
// ErrTruncated with the message's size in Count, and the message stays
// queued for a later receive. If the PE it waits for dies it returns
// ErrPeerLost within a second.
func (pe *PE) Recv(buf []byte, source, tag int) (Status, error) {
	if err := pe.checkOpen(); err != nil {
		return Status{}, err
	}
	if pe.far != nil {
		st, err := pe.far.Recv(buf, source, tag)
		return Status(st), err
	}
	st, err := pe.ext.msg.Recv(buf, source, tag)
	return Status(st), err
}

// Irecv starts receiving a message from PE source (or AnySource) with tag
// (or AnyTag) into buf.
func (pe *PE) Irecv(buf []byte, source, tag int) (*Request, error) {
	if err := pe.checkOpen(); err != nil {
		return nil, err
	}
	if pe.far != nil {
		r, err := pe.far.Irecv(buf, source, tag)
		return (*Request)(r), err
	}
	r, err := pe.ext.msg.Irecv(buf, source, tag)
	return (*Request)(r), err
}

// Wait blocks until the request is done and returns its result. It may be
// called again and returns the same result, until the request is released
// (Release).
func (r *Request) Wait() (Status, error) {
	if st, err, ok := farOf().ReqWait((*msg.Request)(r)); ok {
		return Status(st), err
	}
	st, err := (*msg.Request)(r).Wait()
	return Status(st), err
}

// Test makes progress and reports whether the request is done, with its
// result if so.
func (r *Request) Test() (done bool, st Status, err error) {
	if done, st, err, ok := farOf().ReqTest((*msg.Request)(r)); ok {
		return done, Status(st), err
	}
	done, s, err := (*msg.Request)(r).Test()
	return done, Status(s), err
}

// Release gives a done request back to its PE, for a later Isend or Irecv
// to reuse: a program that releases its requests (a window of Isends, then
// Wait and Release for each) sends and receives without allocating. r
// must not be used after Release: a later Isend or Irecv may return it
// again. Release of a request that is not done, or of one released
// before, returns ErrBadArg and changes nothing.
func (r *Request) Release() error {
	if err, ok := farOf().ReqRelease((*msg.Request)(r)); ok {
		return err
	}
	return (*msg.Request)(r).Release()
}

// WaitAll waits for every request of reqs (nil entries are skipped, as
// MPI_Waitall skips null requests), stores each one's result in sts[i]
// when sts is not nil (it needs len(reqs) entries), then releases them
// all (Release) and sets their entries of reqs to nil, as MPI_Waitall
// frees its requests: the program must not use them again. Releasing a
// window's requests together takes the messaging layer's lock once
// instead of once a request. It returns the first request's error,
// naming its index; the others are released all the same.
func WaitAll(reqs []*Request, sts []Status) error {
	if sts != nil && len(sts) < len(reqs) {
		return fmt.Errorf("symheap: WaitAll of %d requests with room for %d results: %w (pass nil or len(reqs) Statuses)", len(reqs), len(sts), ErrBadArg)
	}
	var first error
	for i, r := range reqs {
		if r == nil {
			continue
		}
		st, err := r.Wait()
		if sts != nil {
			sts[i] = st
		}
		if err != nil && first == nil {
			first = fmt.Errorf("symheap: WaitAll, request %d of %d: %w", i, len(reqs), err)
		}
	}
	for i, r := range reqs { // the multi-node path's requests (ucx build)
		if r == nil {
			continue
		}
		if err, ok := farOf().ReqRelease((*msg.Request)(r)); ok {
			if err != nil && first == nil {
				first = fmt.Errorf("symheap: WaitAll, request %d of %d: %w", i, len(reqs), err)
			}
			reqs[i] = nil
		}
	}
	err := msg.ReleaseAll(len(reqs), func(i int) *msg.Request { return (*msg.Request)(reqs[i]) })
	clear(reqs)
	if first == nil && err != nil {
		first = fmt.Errorf("symheap: WaitAll: %w", err)
	}
	return first
}

// EagerLimit returns the largest message this PE sends through the rings
// from ordinary memory (larger ones are copied once from the sender's
// buffer).
func (pe *PE) EagerLimit() int { return pe.ext.msg.EagerLimit() }

// SharedEagerLimit returns the largest message this PE sends through the
// rings from a buffer in a local shared heap or a symmetric heap.
func (pe *PE) SharedEagerLimit() int { return pe.ext.msg.SharedEagerLimit() }

// checkOpen is check, small enough to inline into the calls above: on
// their path from a message's arrival to the reply, a call costs.
func (pe *PE) checkOpen() error {
	if pe != nil && !pe.closed.Load() {
		return nil
	}
	return pe.check()
}

// initMsg reads the messaging settings and maps the rings.
func (pe *PE) initMsg() error {
	set, err := msg.ReadSettings(getenv, func(name, value, source string) {
		pe.set.params = append(pe.set.params, Param{name, value, source})
	})
	if err != nil {
		return err
	}
	return pe.ext.msg.Init((*msgRuntime)(pe), msg.Config{Space: &pe.sp, Stats: pe.stats, Relaxed: pe.rma.membarrierReady(), Settings: set})
}

// msgRuntime is the PE as the messaging layer sees it: msg.Runtime.
type msgRuntime PE

var _ msg.Runtime = (*msgRuntime)(nil)

func (r *msgRuntime) Check() error               { return (*PE)(r).check() }
func (r *msgRuntime) CheckPeers(pes []int) error { return r.seg.CheckPeers(pes) }
func (r *msgRuntime) Alive(p int) bool           { return r.seg.Alive(p) }
func (r *msgRuntime) Pid(p int) int              { return r.seg.Pid(p) }

func (r *msgRuntime) SleepFenced(word *atomic.Uint32, cond func() bool, check func() error) error {
	return r.rma.sleepFenced(word, cond, check)
}

// AllocBounce and FreeBounce use this PE's pool of its local shared heap
// directly: the blocks are the layer's, not the program's, so they do
// not count as SharedAlloc and SharedFree calls. The layer calls them
// without its lock (lock order: sharedHeap.mu, then alloc.Lock).
func (r *msgRuntime) AllocBounce(size, align uint64) (core.SharedOff, error) {
	pool, err := (*PE)(r).ext.shared.pool(r.rank)
	if err != nil {
		return 0, err
	}
	off, err := pool.Alloc(size, align)
	return core.SharedOff(off), err
}

func (r *msgRuntime) FreeBounce(off core.SharedOff) error {
	pool, err := (*PE)(r).ext.shared.pool(r.rank)
	if err != nil {
		return err
	}
	return pool.Free(alloc.Off(off))
}
