package tcp

import "sync"

// event counts occurrences of something (an incoming operation handled,
// a reply arrived) and lets goroutines wait for the next one without
// losing a wake-up: a waiter reads the count, checks its condition, and
// then waits for the count to move past what it read.
type event struct {
	mu sync.Mutex
	n  uint64        // occurrences so far; guarded by mu
	ch chan struct{} // closed at the next occurrence; nil while nobody waits; guarded by mu
}

// closedCh is since's channel for an occurrence that came already.
var closedCh = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// signal records one occurrence and wakes every waiter.
func (e *event) signal() {
	e.mu.Lock()
	e.n++
	if e.ch != nil {
		close(e.ch)
		e.ch = nil
	}
	e.mu.Unlock()
}

// count returns the occurrences so far.
func (e *event) count() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n
}

// since returns a channel closed at the first occurrence after seen:
// one closed already if there has been one, so that a receive from it,
// alone or in a select, never waits for an occurrence that came.
func (e *event) since(seen uint64) <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n != seen {
		return closedCh
	}
	if e.ch == nil {
		e.ch = make(chan struct{})
	}
	return e.ch
}
