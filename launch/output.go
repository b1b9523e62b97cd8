package launch

import (
	"bytes"
	"io"
	"sync"
)

// maxLine is the longest line a lineWriter holds back; a longer one is
// written in pieces of this size (each tagged, each ended with a newline).
const maxLine = 64 << 10

// lineWriter relays one stream of one PE to a writer shared by the group,
// a whole line at a time.
//
// Write is called by the single goroutine os/exec runs to copy the PE's
// pipe, and flush only after that goroutine is done (Cmd.Wait has
// returned), so pending needs no lock; mu, shared by every lineWriter of
// the group, serialises the writes to w.
type lineWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix []byte // "[pe N] " or nil
	// pending holds the start of a line whose newline has not come yet.
	pending []byte
	// failed is set after w returned an error: from then on output is
	// dropped, but Write still succeeds so that the PE is never blocked
	// on a full pipe or killed by SIGPIPE because its output went away.
	failed bool
}

func (lw *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	last := bytes.LastIndexByte(p, '\n')
	if last < 0 {
		lw.pending = append(lw.pending, p...)
		for len(lw.pending) >= maxLine {
			lw.emit(nil, lw.pending[:maxLine], true)
			lw.pending = append(lw.pending[:0], lw.pending[maxLine:]...)
		}
		return n, nil
	}
	// p[:last+1] completes the pending line and holds zero or more whole
	// lines after it: write them all in one locked write.
	lw.emit(lw.pending, p[:last+1], false)
	lw.pending = append(lw.pending[:0], p[last+1:]...)
	return n, nil
}

// flush writes a last line that has no newline. With tagging a newline is
// added so that the next tagged line starts a line of its own.
func (lw *lineWriter) flush() {
	if len(lw.pending) > 0 {
		lw.emit(nil, lw.pending, lw.prefix != nil)
		lw.pending = lw.pending[:0]
	}
}

// emit writes head+body, which is a run of whole lines (or, with newline,
// a piece that gets one), tagging each line.
func (lw *lineWriter) emit(head, body []byte, newline bool) {
	var buf []byte
	if lw.prefix == nil {
		buf = append(append(buf, head...), body...)
	} else {
		text := append(append([]byte(nil), head...), body...)
		for len(text) > 0 {
			i := bytes.IndexByte(text, '\n') + 1
			if i == 0 {
				i = len(text)
			}
			buf = append(append(buf, lw.prefix...), text[:i]...)
			text = text[i:]
		}
	}
	if newline {
		buf = append(buf, '\n')
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.failed {
		return
	}
	if _, err := lw.w.Write(buf); err != nil {
		lw.failed = true
	}
}
