package alloc

// Release events at the allocator boundary.
//
// A registration cache must hear of every block released from a heap it
// may hold registrations of, whoever releases it. Reporting wraps a
// component and tells a ReleaseSink of each release it makes, so that the
// event comes from the one place every release passes through instead of
// from each caller:
//
//	Free          the whole block, at its usable size read before the free
//	Realloc       the whole old block when it moved, its tail when it
//	              shrank in place, nothing when it grew in place
//
// A release is reported after it succeeded and before the call returns,
// so it is in the sink before anybody can have been handed the memory
// again: a caller that wraps Reporting in Locked reports under the
// region's lock. When the sink is not listening (nobody holds a
// registration anywhere), a release costs one call to Listening more.

// Release is the kind of a reported release.
type Release uint8

// The kinds of release.
const (
	ReleaseFree  Release = iota + 1 // a whole block was freed
	ReleaseChunk                    // a realloc released a moved block, or a shrunk block's tail
)

// A ReleaseSink hears of the releases of one region, as offsets in it.
type ReleaseSink interface {
	// Listening reports whether anyone wants releases now; Reporting
	// skips the work of reporting when nobody does.
	Listening() bool
	// Released is told that [off, off+n) of the region was released.
	Released(k Release, off Off, n uint64)
}

// Reporting is an Allocator that reports its releases to Sink.
type Reporting struct {
	Allocator
	Sink ReleaseSink
}

// Report wraps a so that every release it makes is reported to sink.
func Report(a Allocator, sink ReleaseSink) *Reporting {
	return &Reporting{Allocator: a, Sink: sink}
}

// LockWord is the wrapped component's, so that Locked can wrap r.
func (r *Reporting) LockWord() *uint32 {
	if lw, ok := r.Allocator.(LockWorder); ok {
		return lw.LockWord()
	}
	return nil
}

// Free frees the block at off and reports it.
func (r *Reporting) Free(off Off) error {
	if !r.Sink.Listening() {
		return r.Allocator.Free(off)
	}
	n, err := r.Allocator.UsableSize(off)
	if err != nil {
		return err
	}
	if err := r.Allocator.Free(off); err != nil {
		return err
	}
	r.Sink.Released(ReleaseFree, off, n)
	return nil
}

// Realloc resizes the block at off and reports what it released.
func (r *Reporting) Realloc(off Off, size uint64) (Off, error) {
	if !r.Sink.Listening() {
		return r.Allocator.Realloc(off, size)
	}
	old, err := r.Allocator.UsableSize(off)
	if err != nil {
		return 0, err
	}
	to, err := r.Allocator.Realloc(off, size)
	if err != nil {
		return 0, err
	}
	switch n, _ := r.Allocator.UsableSize(to); {
	case to != off:
		r.Sink.Released(ReleaseChunk, off, old)
	case n < old:
		r.Sink.Released(ReleaseChunk, off+Off(n), old-n)
	}
	return to, nil
}
