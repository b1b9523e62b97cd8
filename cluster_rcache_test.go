package symheap

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/inspect"
	"github.com/symheap/symheap/internal/unix"
	"github.com/symheap/symheap/rcache"
)

// The registration cache feeding the transport to other nodes: puts and
// gets across nodes from Go buffers register through it (with caching on:
// SYMHEAP_LEAVE_PINNED=yes, as the enable decision has it without an
// OS-bypass network), and a buffer the collector frees, whose address a
// new buffer then gets, is registered again: its stale entry is never
// used.

func init() {
	clusterChecks = append(clusterChecks, struct {
		name string
		fn   func(*testing.T, *PE)
	}{"gcreg", checkClusterGCReg})
}

func TestClusterRegCache(t *testing.T) {
	overTransports(t, func(t *testing.T, tr string) {
		r := clusterJob(t, tr, 2, 1, "gcreg,stat", 300*time.Second, "SYMHEAP_LEAVE_PINNED=yes")
		if r.Err != nil {
			t.Fatal(clusterFailure(r))
		}
		if n := strings.Count(string(r.Output), "--- PASS: TestClusterPE"); n != 2 {
			t.Fatalf("%d of 2 PEs passed", n)
		}
	})
}

// reuseAddr drops nothing itself: the caller holds no reference to the
// n-byte object that was at addr. It collects and allocates objects of
// that size until one lands at addr, and returns it (nil after many
// tries).
func reuseAddr(addr uintptr, n int) []byte {
	for range 200 {
		runtime.GC()
		for range 4 {
			if b := make([]byte, n); unix.AddrOf(b) == addr {
				return b
			}
		}
	}
	return nil
}

func checkClusterGCReg(t *testing.T, pe *PE) {
	const n = 1 << 20
	dst, err := Malloc[byte](pe, n)
	if err != nil {
		t.Fatal(err)
	}
	defer Free(pe, dst)
	peer := (pe.Rank() + 1) % pe.Size() // on the other node
	if pe.Node(peer) == pe.Node(pe.Rank()) {
		t.Fatalf("PE %d is on this PE's node", peer)
	}
	before, caching := pe.far.CacheStats()
	fill := func(b []byte, v byte) {
		for i := range b {
			b[i] = v + byte(i%251)
		}
	}
	expect := func(v byte, what string) {
		t.Helper()
		want := make([]byte, n)
		fill(want, v)
		if !bytes.Equal(dst, want) {
			t.Fatalf("PE %d: %s: the data PE %d put differ", pe.Rank(), what, peer)
		}
	}
	// 1. A buffer put twice: registered once, then a hit. A get into
	// another: a second registration.
	buf := make([]byte, n)
	fill(buf, 1)
	for range 2 {
		if err := Put(pe, dst, buf, peer); err != nil {
			t.Fatal(err)
		}
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	expect(1, "first buffer")
	back := make([]byte, n)
	if err := Get(pe, back, dst, peer); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, dst) {
		t.Fatalf("PE %d: a get from PE %d returned other data", pe.Rank(), peer)
	}
	if err := pe.Barrier(); err != nil { // every get done before the next put
		t.Fatal(err)
	}
	// 2. The collector frees the buffer, a new one takes its address.
	addr := unix.AddrOf(buf)
	runtime.KeepAlive(buf)
	buf = nil
	nb := reuseAddr(addr, n)
	reused := nb != nil
	if !reused {
		nb = make([]byte, n)
		t.Logf("PE %d: the collector did not hand %#x out again: the stale case is not exercised", pe.Rank(), addr)
	}
	fill(nb, 2)
	if err := Put(pe, dst, nb, peer); err != nil {
		t.Fatal(err)
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	expect(2, "buffer at the reused address")
	runtime.KeepAlive(nb)
	runtime.KeepAlive(back)
	after, _ := pe.far.CacheStats()
	d := rcache.Stats{Hits: after.Hits - before.Hits, Misses: after.Misses - before.Misses, Stale: after.Stale - before.Stale}
	t.Logf("PE %d: transport cache: %v; this check: %d hits, %d misses, %d stale (address reused: %v)", pe.Rank(), caching, d.Hits, d.Misses, d.Stale, reused)
	switch {
	case caching != (os.Getenv("SYMHEAP_TRANSPORT") == "ucx"):
		t.Errorf("PE %d: transport %s: cache %v; want one exactly over ucx (tcp registers nothing)", pe.Rank(), os.Getenv("SYMHEAP_TRANSPORT"), caching)
	case !caching:
	case reused && (d.Hits != 1 || d.Misses != 3 || d.Stale != 1):
		t.Errorf("PE %d: %d hits, %d misses, %d stale; want 1, 3 (first buffer, get buffer, new buffer), 1", pe.Rank(), d.Hits, d.Misses, d.Stale)
	case !reused && (d.Hits != 1 || d.Misses != 3):
		t.Errorf("PE %d: %d hits, %d misses; want 1, 3", pe.Rank(), d.Hits, d.Misses)
	}
	// 3. symheap stat's figures: the barrier above made them public.
	v, err := inspect.Open(pe.seg.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	for _, p := range v.Info().PEs {
		if p.Rank != pe.Rank() {
			continue
		}
		t.Logf("PE %d: symheap stat: registration cache %+v, monitor %q", p.Rank, p.RCache, p.Monitor)
		if caching && (p.RCache.Misses < after.Misses || p.RCache.Stale < after.Stale) {
			t.Errorf("PE %d: symheap stat shows %d misses, %d stale; the cache has %d, %d", p.Rank, p.RCache.Misses, p.RCache.Stale, after.Misses, after.Stale)
		}
	}
}
