package rcache

import "fmt"

func errorf(format string, args ...any) error {
	return fmt.Errorf("rcache: invariant violated: "+format, args...)
}

// Check verifies every invariant of the cache: the tree's (tree.go); that
// the LRU list holds every valid idle entry and only valid entries; that
// no invalid entry is in the tree; that every memo slot of the current
// generation answers as the tree does; and that the figures match the
// structures. Call it while no other goroutine uses the cache.
func (c *Cache) Check() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checkLocked()
}

func (c *Cache) checkLocked() error {
	if err := c.tree.check(); err != nil {
		return err
	}
	var bytes uint64
	for _, e := range c.tree.inorder(nil) {
		refs := e.refs.Load()
		switch {
		case e.invalid.Load():
			return errorf("invalid entry %v in the tree", e.Range())
		case refs < 0:
			return errorf("claimed entry %v (refs %d) in the tree", e.Range(), refs)
		case refs == 0 && !e.inLRU:
			return errorf("idle entry %v is not in the LRU list", e.Range())
		}
		bytes += uint64(e.end - e.start)
	}
	n := 0
	var prev *Entry
	for e := c.lruHead; e != nil; e = e.next {
		if e.prev != prev || !e.inLRU || e.invalid.Load() || e.refs.Load() < 0 {
			return errorf("LRU list broken at %v", e.Range())
		}
		prev = e
		n++
	}
	if prev != c.lruTail || n != c.lruLen {
		return errorf("LRU list holds %d entries, its length says %d", n, c.lruLen)
	}
	if c.st.Entries != uint64(c.tree.n+c.limbo) {
		return errorf("%d entries counted, %d in the tree and %d in limbo", c.st.Entries, c.tree.n, c.limbo)
	}
	if c.st.Bytes != bytes+c.limboB {
		return errorf("%d bytes counted, the tree covers %d and limbo %d", c.st.Bytes, bytes, c.limboB)
	}
	g := c.gen.Load()
	for i := range c.memo {
		s := &c.memo[i]
		r := Range{Start: s.start.Load(), End: s.end.Load()}
		if s.seq.Load()&1 != 0 {
			return errorf("memo slot %d left half written", i)
		}
		if e := s.lookup(r, g); e != nil && (!e.Valid() || c.tree.bestCover(r) != e) {
			return errorf("memo slot %d answers %v with %v, the tree with another", i, r, e.Range())
		}
	}
	if len(c.reap) != 0 {
		return errorf("%d entries left to reap", len(c.reap))
	}
	return nil
}

// verifyLocked runs checkLocked when SYMHEAP_RCACHE_VERIFY is set, and
// panics on a violation: a debugging aid, off by default, meant for tests
// that use the cache from one goroutine.
func (c *Cache) verifyLocked() {
	if !c.verify {
		return
	}
	if err := c.checkLocked(); err != nil {
		panic(err)
	}
}
