package msg

import (
	"fmt"
	"strconv"

	"github.com/symheap/symheap/internal/errs"
)

// Waits that the caller can end: RecvStop and Request.WaitStop, under the
// root's RecvCtx and Request.WaitCtx.
//
// stop is asked first in the liveness check of the wait's sleeps (Layer.sleep,
// Runtime.SleepFenced), so a context's end is seen within a sleep slice
// through the path a lost peer takes; the spin before the sleep is
// bounded by spinFor. When stop's error ends the wait:
//
//   - WaitStop leaves the request as it is, pending: a later Wait, Test
//     or WaitStop goes on with it.
//   - RecvStop withdraws its receive if no message has matched it yet (it
//     is still among the posted receives): no message was taken, and a
//     later receive gets the one that would have matched. If a large
//     message has matched it already, its copy into buf is under way and
//     cannot be undone without losing the message: the receive goes on to
//     its end, as Recv would, and returns the message.
//
// A wait whose request is done when stop is found ended returns the
// request's result (shmsync.Lost re-tests the condition).

// RecvStop is Recv that stop can end (see above); Recv is RecvStop with
// a nil stop.
func (l *Layer) RecvStop(buf []byte, source, tag int, stop func() error) (Status, error) {
	if err := l.recvArgs(source, tag, "Recv"); err != nil {
		return Status{}, err
	}
	l.lock.Lock()
	if res, ok := l.recvFast(buf, source, tag); ok {
		l.lock.Unlock() // recvFast queues no bounce work
		return res, nil
	}
	r := l.newRequest(true, false, buf, source, tag)
	l.postRecv(r)
	if l.bouncing() {
		l.flushBounce()
	}
	if r.over() {
		res, err := r.finish()
		l.unlock()
		return res, err
	}
	if stop == nil {
		// Still holding the lock: spin keeps it while it polls, starting
		// with a look at the rings and boxes (postRecv has just made
		// progress).
		return r.waitLocked(1, nil)
	}
	if err := stop(); err != nil {
		return l.withdraw(r, err)
	}
	res, err := r.waitLocked(1, stop)
	if st, ok := err.(stopped); ok {
		l.lock.Lock()
		return l.withdraw(r, st.cause)
	}
	return res, err
}

// sleepStop is Layer.sleep whose wait stop can end: it asks stop first
// in the liveness check, and returns stopped once stop's error ended the
// wait.
func (l *Layer) sleepStop(poll func() bool, live func() error, stop func() error) error {
	var cause error // stop's error, once it ended the wait
	err := l.sleep(poll, func() error {
		if err := stop(); err != nil {
			cause = err
			return err
		}
		return live()
	})
	if err != nil && cause != nil {
		return stopped{cause}
	}
	return err
}

// stopped is waitLocked's error when stop ended its wait: the request is
// as it was, the lock released. It never leaves this package.
type stopped struct{ cause error }

func (s stopped) Error() string { return s.cause.Error() }

func isStopped(err error) bool { _, ok := err.(stopped); return ok }

// withdraw ends RecvStop's wait for r, which stop ended with cause:
// the receive is withdrawn if no message matched it, else it runs to its
// end. Called with the lock held, which it releases.
func (l *Layer) withdraw(r *Request, cause error) (Status, error) {
	for i, p := range l.posted.s {
		if p == r {
			l.posted.s = removeAt(l.posted.s, i)
			l.recycle(r)
			l.unlock()
			return Status{}, fmt.Errorf("symheap: Recv from %s with tag %s: %w (no message was taken)", peerName(r.peer), tagName(r.tag), cause)
		}
	}
	if r.over() {
		res, err := r.finish()
		l.unlock()
		return res, err
	}
	// Matched: its message is being copied in (see above).
	return r.waitLocked(0, nil)
}

// WaitStop is Wait that stop can end; then the request stays pending (see
// above).
func (r *Request) WaitStop(stop func() error) (Status, error) {
	if r == nil || r.l == nil {
		return Status{}, fmt.Errorf("symheap: Wait on a nil Request: %w", errs.ErrBadArg)
	}
	if r.done.Load() != 0 {
		return r.st, r.err
	}
	if err := r.l.rt.Check(); err != nil {
		return Status{}, err
	}
	if err := stop(); err != nil {
		return Status{}, r.stopErr(err)
	}
	r.l.lock.Lock()
	res, err := r.waitLocked(0, stop)
	if st, ok := err.(stopped); ok {
		return Status{}, r.stopErr(st.cause)
	}
	return res, err
}

// stopErr words the error of a WaitStop that stop ended.
func (r *Request) stopErr(cause error) error {
	what := "receive from"
	if r.send {
		what = "send to"
	}
	return fmt.Errorf("symheap: Wait for a %s %s with tag %s: %w (the request is still pending: Wait or Test it again)", what, peerName(r.peer), tagName(r.tag), cause)
}

func peerName(p int) string {
	if p == AnySource {
		return "any PE"
	}
	return "PE " + strconv.Itoa(p)
}

func tagName(tag int) string {
	if tag == AnyTag {
		return "any tag"
	}
	return strconv.Itoa(tag)
}

// Sleepers returns how many processes' goroutines sleep on this PE's
// doorbell (Layer.sleep): tests wait for a wait to be asleep with it.
func (l *Layer) Sleepers() uint32 {
	return l.bell.sleepers.Load() // seq-cst; pairs with the sleeper's S1
}
