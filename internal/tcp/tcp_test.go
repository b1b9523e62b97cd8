package tcp_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/tcp"
	"github.com/symheap/symheap/internal/transport"
	"github.com/symheap/symheap/internal/transport/nettest"
)

// guard bounds a wait for something that must happen: a hang's bound,
// not a measure of speed.
const guard = 2 * time.Minute

// noLeaks fails t if a goroutine started by package tcp outlives the
// test's Nets and bootstraps. Register it first: cleanups run last in
// first out.
func noLeaks(t *testing.T) {
	t.Cleanup(func() {
		deadline := time.Now().Add(guard)
		for {
			left := leaked()
			if left == "" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("goroutines of package tcp left behind:\n%s", left)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// leaked returns the stacks of the goroutines that package tcp started.
func leaked() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "created by github.com/symheap/symheap/internal/tcp.") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// boots makes the rendezvous bootstraps of a job of n PEs in this
// process, rank 0 listening on a port of 127.0.0.1 chosen by the system.
func boots(t *testing.T, n int) []transport.Bootstrap {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	job := fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
	bs := make([]transport.Bootstrap, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bs[r], errs[r] = join(l, r, n, job)
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, b := range bs {
			if b != nil {
				b.Close()
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return bs
}

// join makes rank r's rendezvous bootstrap of a job of size PEs, rank 0
// listening on l.
func join(l net.Listener, r, size int, job string) (transport.Bootstrap, error) {
	if r == 0 {
		return tcp.RendezvousOn(l, size, job)
	}
	return tcp.Rendezvous(l.Addr().String(), r, size, job)
}

// regions are the regions nettest asks for.
func regions() [][]byte {
	return [][]byte{make([]byte, nettest.HeapSize), make([]byte, nettest.ControlSize), nil}
}

// openNets opens a job of n Nets in this process, each with its own
// rendezvous bootstrap; mod, if not nil, changes each Config.
// The caller calls noLeaks first.
func openNets(t *testing.T, n int, mod func(*transport.Config)) ([]transport.Net, []transport.Bootstrap) {
	t.Helper()
	bs := boots(t, n)
	nets := make([]transport.Net, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := transport.Config{Boot: bs[r], Regions: regions(), PeerErrors: true}
			if mod != nil {
				mod(&c)
			}
			nets[r], errs[r] = tcp.Open(c)
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, n := range nets {
			if n != nil {
				wg.Add(1)
				go func() {
					defer wg.Done()
					n.Close()
				}()
			}
		}
		wg.Wait()
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return nets, bs
}

// TestNet runs the conformance suite over Nets in one process.
func TestNet(t *testing.T) {
	nettest.Run(t, func(t *testing.T, n int) []transport.Net {
		noLeaks(t)
		nets, _ := openNets(t, n, nil)
		return nets
	})
}

// TestNetOneAddress: with SYMHEAP_TCP_ADDR the Net listens on that IP
// only, and publishes it alone.
func TestNetOneAddress(t *testing.T) {
	noLeaks(t)
	t.Setenv("SYMHEAP_TCP_ADDR", "127.0.0.1")
	nets, _ := openNets(t, 2, nil)
	if err := nets[0].Put(1, 0, 0, []byte("x"), false); err != nil {
		t.Fatal(err)
	}
	s, err := nets[0].Describe(1)
	if err != nil || !strings.HasPrefix(s, "tcp 127.0.0.1:") || strings.Contains(s, "also") {
		t.Fatalf("Describe(1) = %q, %v; want tcp 127.0.0.1:port", s, err)
	}
}

// TestOpenBadAddress: a SYMHEAP_TCP_ADDR that is no IP is a clear error.
func TestOpenBadAddress(t *testing.T) {
	noLeaks(t)
	t.Setenv("SYMHEAP_TCP_ADDR", "not-an-ip")
	bs := boots(t, 1)
	if _, err := tcp.Open(transport.Config{Boot: bs[0]}); err == nil || !strings.Contains(err.Error(), "SYMHEAP_TCP_ADDR") {
		t.Fatalf("Open with SYMHEAP_TCP_ADDR=not-an-ip: %v", err)
	}
}

// TestRegistered: the transport and the bootstrap are in the registries.
func TestRegistered(t *testing.T) {
	if tr, ok := transport.Lookup("tcp"); !ok || tr.Priority != 10 {
		t.Fatalf("transport tcp: %+v, %v", tr, ok)
	}
	found := false
	for _, b := range transport.Boots() {
		found = found || b.Name == "rendezvous"
	}
	if !found {
		t.Fatal("bootstrap rendezvous not registered")
	}
}

// TestRendezvous: nodes, the collecting fence, goodbyes that are no
// losses.
func TestRendezvous(t *testing.T) {
	noLeaks(t)
	t.Setenv("SYMHEAP_NODE", "node-x")
	bs := boots(t, 3)
	for r, b := range bs {
		if b.Rank() != r || b.Size() != 3 || b.Name() != "rendezvous" || b.Job() == "" {
			t.Fatalf("bootstrap %d: rank %d size %d name %q job %q", r, b.Rank(), b.Size(), b.Name(), b.Job())
		}
		nodes, err := b.Nodes()
		if err != nil || len(nodes) != 3 || nodes[0] != "node-x" || nodes[2] != "node-x" {
			t.Fatalf("Nodes: %q, %v", nodes, err)
		}
	}
	for round := range 3 {
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for r, b := range bs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := b.Publish("k", []byte(fmt.Sprintf("%d-%d", r, round))); err != nil {
					errs[r] = err
					return
				}
				errs[r] = b.Fence()
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			for r := range 3 {
				v, err := b.Get(r, "k")
				if err != nil || string(v) != fmt.Sprintf("%d-%d", r, round) {
					t.Fatalf("round %d: Get(%d) on rank %d: %q, %v", round, r, b.Rank(), v, err)
				}
			}
		}
	}
	if _, err := bs[1].Get(0, "nothing"); err == nil {
		t.Fatal("Get of a key nobody published: no error")
	}
	// An orderly goodbye is no loss.
	bs[2].Close()
	bs[2].Close()
	time.Sleep(20 * time.Millisecond)
	for _, b := range bs[:2] {
		if r, st, ok := b.Lost(); ok {
			t.Fatalf("rank %d reports rank %d lost (%s) after its orderly close", b.Rank(), r, st)
		}
	}
	if err := bs[0].Fence(); err == nil {
		t.Fatal("Fence after a rank left: no error")
	}
}

// TestDetect: the rendezvous applies only with SYMHEAP_BOOT, and says
// what is missing.
func TestDetect(t *testing.T) {
	noLeaks(t)
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if b, err := transport.Detect("rendezvous", getenv, transport.Who{Rank: 0, Size: 1}); b != nil || err != nil {
		t.Fatalf("without SYMHEAP_BOOT: %v, %v", b, err)
	}
	env["SYMHEAP_BOOT"] = "127.0.0.1:0"
	if _, err := transport.Detect("rendezvous", getenv, transport.Who{Rank: -1, Size: -1}); err == nil || !strings.Contains(err.Error(), "rank") || !strings.Contains(err.Error(), "size") {
		t.Fatalf("without rank and size: %v", err)
	}
	env["SYMHEAP_BOOT_TIMEOUT"] = "soon"
	if _, err := transport.Detect("rendezvous", getenv, transport.Who{Rank: 0, Size: 1}); err == nil || !strings.Contains(err.Error(), "SYMHEAP_BOOT_TIMEOUT") {
		t.Fatalf("with a bad timeout: %v", err)
	}
	env["SYMHEAP_BOOT_TIMEOUT"] = "5"
	b, err := transport.Detect("rendezvous", getenv, transport.Who{Rank: 0, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Job() != "rendezvous-127.0.0.1:0" {
		t.Fatalf("job %q", b.Job())
	}
	// A job of one has its fence alone.
	if err := b.Publish("a", []byte("b")); err != nil {
		t.Fatal(err)
	}
	if err := b.Fence(); err != nil {
		t.Fatal(err)
	}
	if v, err := b.Get(0, "a"); err != nil || string(v) != "b" {
		t.Fatalf("Get: %q, %v", v, err)
	}
}

// TestRendezvousUnreachable: a rank that cannot reach rank 0 fails after
// the timeout, naming the address and what to check.
func TestRendezvousUnreachable(t *testing.T) {
	noLeaks(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	t.Setenv("SYMHEAP_BOOT_TIMEOUT", "0.2")
	_, err = tcp.Rendezvous(addr, 1, 2, "job")
	if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "check") {
		t.Fatalf("Rendezvous to nobody: %v", err)
	}
	// And rank 0 whose peers never come.
	l, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tcp.RendezvousOn(l, 3, "job")
	if err == nil || !strings.Contains(err.Error(), "missing ranks [1 2]") {
		t.Fatalf("RendezvousOn without peers: %v", err)
	}
}

// TestMain runs the tests, then checks that none of package tcp's
// goroutines is left (the tests of package tcp itself included).
func TestMain(m *testing.M) {
	if helper() {
		return
	}
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(guard)
		for left := leaked(); left != ""; left = leaked() {
			if time.Now().After(deadline) {
				fmt.Fprintf(os.Stderr, "goroutines of package tcp left behind after the tests:\n%s\n", left)
				code = 1
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	os.Exit(code)
}
