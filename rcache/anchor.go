package rcache

// Anchors: entries of Go memory die with their object.
//
// The memory monitor cannot see the Go collector: it frees objects
// without a call anyone can hook, and it returns pages to the kernel with
// madvise from its own threads (watching the Go heap with userfaultfd
// could hang the process, see memhook). A registration of a Go buffer is
// therefore tied to the buffer's object instead: GetAnchored stores a weak
// pointer into the object (weak.Make) in the new entry, and every lookup
// that meets the entry loads it. Once the object is unreachable the weak
// pointer reads nil, and the entry is retired there and then (counted in
// Stats.Stale), never returned.
//
// Why that is enough:
//
//  1. The collector hands an object's address out again only after the
//     object's span has been swept, and sweeping clears the weak pointers
//     of the dead objects in it first: a lookup for a new object at a
//     reused address always finds the old entry's anchor nil.
//  2. The runtime returns to the kernel only pages of free spans. While
//     the anchor is alive its span is in use, so its pages stay; an entry
//     covers the anchor's range rounded out to Config.Align, which stays
//     inside the span as long as Align is at most the runtime's page
//     (8 KiB): the cache's default, the OS page, is.
//  3. A lookup for another object that lies in a live entry's range uses
//     the same pages, which 2 keeps in place.

import (
	"runtime"
	"weak"

	"github.com/symheap/symheap/memhook"
)

// Anchor is a weak pointer into the Go object whose memory an entry
// registers (AnchorOf).
type Anchor = weak.Pointer[byte]

// AnchorOf returns an anchor for b's first byte when b is memory of the Go
// heap, and false when it is not (memory of C, of a mapping, of a
// goroutine stack, or empty): such memory relies on the monitor's events.
// A global variable's anchor never dies, as the variable.
// It costs an allocation and a few locks of the runtime: call it on a miss.
func AnchorOf(b []byte) (Anchor, bool) {
	if len(b) == 0 || !goHeap(&b[0]) {
		return Anchor{}, false
	}
	return weak.Make(&b[0]), true
}

// goHeap reports whether p points into an object of the Go heap (or a Go
// global). weak.Make aborts the process on any other pointer;
// runtime.AddCleanup panics instead, which can be recovered, so it serves
// as the probe.
func goHeap(p *byte) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	c := runtime.AddCleanup(p, func(struct{}) {}, struct{}{})
	c.Stop()
	return true
}

// dead reports whether the entry's object has been collected.
func (e *Entry) dead() bool { return e.anchored && e.anchor.Value() == nil }

// GetAnchored is Get for a range of the Go object a points into
// (AnchorOf): a new entry keeps the anchor, and an entry whose anchor has
// died is retired by the lookup that meets it, whatever range it covers.
func (c *Cache) GetAnchored(r Range, ts TransportSet, a Anchor) (*Entry, error) {
	return c.get(r, ts, a, true)
}

// GetBytes is Get for the memory of b, as a transport asks for the buffer
// of an operation. A hit costs what Get's does. On a miss, Go memory is
// anchored (AnchorOf); other memory is cached only when the cache has a
// monitor, whose events must then cover it (the C library's hooks do);
// without one GetBytes returns no entry and no error: the caller
// registers nothing and the transport does as it would without a cache.
func (c *Cache) GetBytes(b []byte, ts TransportSet) (*Entry, error) {
	if len(b) == 0 {
		return nil, nil
	}
	r := memhook.RangeOf(b)
	ar, err := c.alignRange(r)
	if err != nil {
		return nil, err
	}
	if c.mon != nil {
		c.mon.Sync()
	}
	if e := c.fastGet(ar); e != nil {
		if TransportSet(e.have.Load())&ts == ts {
			return e, nil
		}
		c.release(e, false)
	}
	a, ok := AnchorOf(b)
	if !ok && c.mon == nil {
		return nil, nil
	}
	return c.get(r, ts, a, ok)
}
