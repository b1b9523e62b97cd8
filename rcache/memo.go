package rcache

// The memo: a hit without a lock.
//
// 128 slots, each remembering one lookup: an aligned range, the entry the
// tree returned for it, and the tree generation (Cache.gen) at that moment.
// A slot is the answer for its range exactly as long as gen has not moved,
// because the tree, the only thing the answer depends on, moves gen
// whenever it changes. Matching the exact range (not any entry containing
// the request) keeps the rule "the largest entry containing the range".
//
// Each slot is a seqlock: the writer, which holds Cache.mu (so there is one
// at a time), makes seq odd, stores the fields, makes seq even again; a
// reader loads seq, the fields, then seq again, and trusts the fields only
// if both loads saw the same even value. All fields are atomics, so a reader
// racing a writer reads a mix at worst, which the seq check rejects.
//
// Slots are indexed by a hash of the range and padded to a cache line, so
// that goroutines hitting different buffers do not share one.

import "sync/atomic"

const (
	memoBits  = 7
	memoSlots = 1 << memoBits
)

type memoSlot struct {
	seq   atomic.Uint64 // odd while being written
	start atomic.Uintptr
	end   atomic.Uintptr
	gen   atomic.Uint64
	e     atomic.Pointer[Entry]
	_     [24]byte
}

func memoIndex(r Range) int {
	h := (uint64(r.Start>>12) ^ uint64(r.End>>12)*0x9E3779B97F4A7C15) * 0x9E3779B97F4A7C15
	return int(h >> (64 - memoBits))
}

// lookup returns the entry remembered for r at generation gen, or nil.
func (s *memoSlot) lookup(r Range, gen uint64) *Entry {
	q := s.seq.Load()
	if q&1 != 0 || s.start.Load() != r.Start || s.end.Load() != r.End || s.gen.Load() != gen {
		return nil
	}
	e := s.e.Load()
	if s.seq.Load() != q {
		return nil
	}
	return e
}

// store remembers that the tree of generation gen answers r with e.
// Requires Cache.mu.
func (s *memoSlot) store(r Range, e *Entry, gen uint64) {
	q := s.seq.Load()
	s.seq.Store(q + 1)
	s.start.Store(r.Start)
	s.end.Store(r.End)
	s.gen.Store(gen)
	s.e.Store(e)
	s.seq.Store(q + 2)
}
