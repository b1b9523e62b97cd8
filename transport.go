package symheap

import (
	"errors"
	"fmt"
	"time"

	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/transport"
)

// The transport seam (package transport). Every one-sided operation
// resolves its target to a path: PEs of this node are reached by load and
// store in the segment, inline in Put, Get and the atomics; PEs of other
// nodes through the rma layer's Remote. While the job has no far PE
// (rmaLayer.far false), the fast paths pay one byte load for the seam and
// take the segment. Otherwise the fast paths step aside to the slow ones,
// which ask route and call the Remote for far targets.
//
// The remote paths locate the symmetric side by its offset in this PE's
// own heap, which names the same object in every PE: a slice onto a far
// PE's copy cannot exist (Ptr returns nil for far PEs).

// errFar tells an operation's caller that the target is far: it then
// takes the Remote path. Never returned to users.
var errFar = errors.New("symheap: far target")

// useRemote makes the PEs in far reachable only through r (the multi-node
// bootstrap calls it, and tests with a loopback Remote), and turns off the
// atomics' fast path in sp (core.Near), which assumes every PE on this
// node. Call it before the PE is used.
func (r *rmaLayer) useRemote(sp *core.Space, remote transport.Remote, far []int) {
	if len(far) > 0 {
		sp.NoNear()
	}
	r.paths = make([]transport.Path, r.npes)
	for _, p := range far {
		r.paths[p] = transport.Far
	}
	r.remote = remote
	r.far = len(far) > 0
}

// route returns the path to target (a valid rank).
func (r *rmaLayer) route(target int) transport.Path {
	if !r.far {
		return transport.Local
	}
	return r.paths[target]
}

// farPut puts src into the symmetric object dst of PE target through the
// Remote.
func farPut[T any](pe *PE, op string, dst, src []T, target int) error {
	off, err := farOff(pe, op, "dst", dst, len(src))
	if err != nil {
		return err
	}
	sp, n := core.SliceData(src)
	if err := pe.rma.remote.Put(target, off, core.Bytes(sp, n), op == opPutNBI); err != nil {
		return fmt.Errorf("symheap: %s of %d bytes to PE %d: %w", op, n, target, err)
	}
	core.Bump(&pe.stats.Puts)
	return nil
}

// farGet gets the symmetric object src of PE source into dst through the
// Remote.
func farGet[T any](pe *PE, op string, dst, src []T, source int) error {
	off, err := farOff(pe, op, "src", src, len(src))
	if err != nil {
		return err
	}
	dp, n := core.SliceData(dst[:len(src)])
	if err := pe.rma.remote.Get(core.Bytes(dp, n), source, off); err != nil {
		return fmt.Errorf("symheap: %s of %d bytes from PE %d: %w", op, n, source, err)
	}
	core.Bump(&pe.stats.Gets)
	return nil
}

// farOff locates the first n elements of the symmetric object s in this
// PE's own heap.
func farOff[T any](pe *PE, op, what string, s []T, n int) (core.HeapOff, error) {
	p, _ := core.SliceData(s)
	size := uint64(n) * core.SizeOf[T]()
	off, owner, ok := pe.sp.HeapOffset(p, size)
	if !ok || owner != pe.rank {
		return 0, pe.notSymmetric(op, what, p, size)
	}
	return off, nil
}

var amoNames = map[transport.AMO]string{
	transport.AMOFetch: opFetch, transport.AMOSet: opSet, transport.AMOSwap: opSwap,
	transport.AMOCompareSwap: opCSwap, transport.AMOFetchAdd: opFetchAdd, transport.AMOFetchAnd: opFetchAnd,
	transport.AMOFetchOr: opFetchOr, transport.AMOFetchXor: opFetchXor,
	transport.AMOAdd: opAdd, transport.AMOAnd: opAnd, transport.AMOOr: opOr, transport.AMOXor: opXor,
}

// farProgress drives the Remote while a wait polls.
func (r *rmaLayer) farProgress() {
	if r.far {
		r.remote.Progress()
	}
}

// farPoll is how long a wait for what PEs of other nodes send polls the
// Remote (a few network round trips) before it sleeps.
const farPoll = 200 * time.Microsecond

// pollThenWait waits until cond holds. With PEs on other nodes it first
// polls the Remote for farPoll, testing cond, and keeps driving it while
// it sleeps: what they send arrives only while this PE (or its progress
// goroutine, whose wake-up ends the sleep) drives the transport. Then it
// sleeps on PE owner's signal word (waitSignal), with check.
func (r *rmaLayer) pollThenWait(owner int, cond func() bool, check func() error) error {
	if r.far {
		local := cond
		cond = func() bool { r.farProgress(); return local() }
		for t0 := time.Now(); time.Since(t0) < farPoll; {
			if cond() {
				return nil
			}
		}
	}
	return r.waitSignal(owner, cond, check)
}

// farComplete is Quiet's part for the Remote. Quiet reports no error; a
// Remote that cannot complete keeps its error for the next Barrier.
func (r *rmaLayer) farComplete() {
	if err := r.remote.Quiet(); err != nil {
		r.farErr.CompareAndSwap(nil, &err)
	}
}
