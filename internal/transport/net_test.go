package transport

import (
	"errors"
	"testing"
)

// The registries: order by priority then name, lookup, the errors of an
// unknown name, and a duplicate refused. Tests register under names no
// build uses and leave them (the registries are the process's).
func TestRegistries(t *testing.T) {
	open := func(Config) (Net, error) { return nil, errors.New("test transport: not a transport") }
	Register(Transport{Name: "test-b", Priority: -100, Open: open})
	Register(Transport{Name: "test-a", Priority: -100, Open: open})
	ts := Transports()
	last := 1 << 30
	var lastName string
	for _, tr := range ts {
		if tr.Priority > last || (tr.Priority == last && tr.Name < lastName) {
			t.Fatalf("Transports out of order at %s (priority %d) after %s (%d)", tr.Name, tr.Priority, lastName, last)
		}
		last, lastName = tr.Priority, tr.Name
	}
	if _, ok := Lookup("test-a"); !ok {
		t.Fatal("Lookup of a registered transport")
	}
	if _, err := Open("no-such", Config{}); !errors.Is(err, ErrUnknown) {
		t.Fatalf("Open of an unknown transport: %v, want ErrUnknown", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a second Register of test-a did not panic")
			}
		}()
		Register(Transport{Name: "test-a", Open: open})
	}()

	detected := 0
	RegisterBoot(Boot{Name: "test-boot", Priority: -100, Detect: func(getenv func(string) string, _ Who) (Bootstrap, error) {
		detected++
		return nil, nil
	}})
	if b, err := Detect("test-boot", func(string) string { return "" }, Who{Rank: -1, Size: -1}); b != nil || err != nil || detected != 1 {
		t.Fatalf("Detect of a bootstrap that does not apply: %v %v, asked %d times", b, err, detected)
	}
	if _, err := Detect("no-such", func(string) string { return "" }, Who{}); !errors.Is(err, ErrUnknown) {
		t.Fatalf("Detect of an unknown bootstrap: %v, want ErrUnknown", err)
	}
}

// PeerError wraps ErrPeer and its cause, and names the peer.
func TestPeerError(t *testing.T) {
	err := error(&PeerError{Peer: 3, Op: "get", Err: ErrTimeout})
	if !errors.Is(err, ErrPeer) || !errors.Is(err, ErrTimeout) || err.Error() != "get (peer 3): transport: timed out" {
		t.Fatalf("%v", err)
	}
}
