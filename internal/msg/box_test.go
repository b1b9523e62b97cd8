package msg

import "testing"

// TestBoxQuietFlag: a put marks the box as written to (so that the next
// receive from the peer waits before its first look: fast.go, "Quiet"),
// and the next look at the peer's slot clears the mark; the message and
// its acknowledgement go through as before.
func TestBoxQuietFlag(t *testing.T) {
	line := make([]byte, 2*lineSize)
	l := line[:lineSize:lineSize]
	a := boxPair{line: l, mine: 0, theirs: boxSlot}
	b := boxPair{line: l, mine: boxSlot, theirs: 0}
	if !a.free() || a.wrote {
		t.Fatalf("a fresh box: free %v, wrote %v", a.free(), a.wrote)
	}
	a.put(7, []byte("12345678"), 0, true)
	if !a.wrote {
		t.Fatal("a put left the box unmarked")
	}
	w0, ready, ok := b.pending(0)
	if !ok || !ready {
		t.Fatalf("the peer sees no message (word 0 %#x)", w0)
	}
	tag, payload, bad := b.msg()
	if bad || tag != 7 || string(payload) != "12345678" {
		t.Fatalf("message: tag %d, payload %q, bad %v", tag, payload, bad)
	}
	b.got = uint16(w0)
	b.put(8, nil, 0, true) // the reply carries the acknowledgement
	if _, ready, ok := a.pending(0); !ok || !ready || a.wrote {
		t.Fatalf("the reply: ready %v, ok %v; a's mark after a look: %v", ready, ok, a.wrote)
	}
	if !a.free() {
		t.Fatal("the reply's acknowledgement did not free a's slot")
	}
}
