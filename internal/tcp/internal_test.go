package tcp

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/transport"
)

// memJob is an in-memory bootstrap for the tests of this file: its
// fence is a barrier of the job's goroutines, and rewrite may change
// what Get returns.
type memJob struct {
	name    string
	size    int
	mu      sync.Mutex
	cond    sync.Cond
	pub     []map[string][]byte // published, by rank
	store   []map[string][]byte // as of the last fence
	arrived int
	round   int
	rewrite func(rank, from int, val []byte) []byte
}

type memBoot struct {
	j    *memJob
	rank int
}

func newMemJob(name string, size int) []transport.Bootstrap {
	j := &memJob{name: name, size: size, pub: make([]map[string][]byte, size), store: make([]map[string][]byte, size)}
	j.cond.L = &j.mu
	bs := make([]transport.Bootstrap, size)
	for r := range size {
		j.pub[r] = map[string][]byte{}
		bs[r] = &memBoot{j, r}
	}
	return bs
}

func (b *memBoot) Name() string             { return "mem" }
func (b *memBoot) Rank() int                { return b.rank }
func (b *memBoot) Size() int                { return b.j.size }
func (b *memBoot) Job() string              { return b.j.name }
func (b *memBoot) Nodes() ([]string, error) { return make([]string, b.j.size), nil }
func (b *memBoot) Lost() (int, string, bool) {
	return -1, "", false
}
func (b *memBoot) Close() {}

func (b *memBoot) Publish(key string, val []byte) error {
	b.j.mu.Lock()
	defer b.j.mu.Unlock()
	b.j.pub[b.rank][key] = val
	return nil
}

func (b *memBoot) Fence() error {
	j := b.j
	j.mu.Lock()
	defer j.mu.Unlock()
	round := j.round
	j.arrived++
	if j.arrived == j.size {
		for r := range j.size {
			j.store[r] = j.pub[r]
		}
		j.arrived = 0
		j.round++
		j.cond.Broadcast()
	}
	for j.round == round {
		j.cond.Wait()
	}
	return nil
}

func (b *memBoot) Get(rank int, key string) ([]byte, error) {
	b.j.mu.Lock()
	defer b.j.mu.Unlock()
	v, ok := b.j.store[rank][key]
	if !ok {
		return nil, fmt.Errorf("no %q from %d", key, rank)
	}
	if b.j.rewrite != nil {
		v = b.j.rewrite(b.rank, rank, v)
	}
	return v, nil
}

// openMem opens a job of n Nets over a memJob.
func openMem(t *testing.T, j []transport.Bootstrap) []*Net {
	t.Helper()
	nets := make([]*Net, len(j))
	errs := make([]error, len(j))
	var wg sync.WaitGroup
	for r := range j {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := Open(transport.Config{Boot: j[r], Regions: [][]byte{make([]byte, 4096), make([]byte, 64)}})
			if err == nil {
				nets[r] = n.(*Net)
			}
			errs[r] = err
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, n := range nets {
			if n != nil {
				n.Close()
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return nets
}

// TestWrongProcess: a candidate address at which another job's PE (or
// another rank) listens is refused by its handshake, and the next
// candidate is used; a peer with no right candidate is lost.
func TestWrongProcess(t *testing.T) {
	other := openMem(t, newMemJob("other", 2))
	j := newMemJob("this", 3)
	// Rank 0 sees rank 1 first at the other job's PE 1, then at rank 2
	// of its own job, then where it is; and rank 2 only at wrong places.
	j[0].(*memBoot).j.rewrite = func(rank, from int, val []byte) []byte {
		if rank != 0 || from == 0 {
			return val
		}
		rec, _ := decodeRecord(val)
		switch from {
		case 1:
			rec.Addrs = append([]string{other[1].recs[1].Addrs[0], "127.0.0.1:1"}, rec.Addrs...)
		case 2:
			rec.Addrs = []string{other[0].recs[0].Addrs[0], other[1].recs[1].Addrs[0]}
		}
		return rec.encode()
	}
	nets := openMem(t, j)
	if err := nets[0].Put(1, 0, 8, []byte("right"), false); err != nil {
		t.Fatal(err)
	}
	if err := nets[0].Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(nets[1].cfg.Regions[0][8:13], []byte("right")) {
		t.Fatalf("the put went elsewhere: %q", nets[1].cfg.Regions[0][8:13])
	}
	for _, n := range other {
		if !bytes.Equal(n.cfg.Regions[0][8:13], make([]byte, 5)) {
			t.Fatal("the other job's memory changed")
		}
	}
	err := nets[0].Get(make([]byte, 8), 2, 0, 0)
	var pe *transport.PeerError
	if !errors.As(err, &pe) || pe.Peer != 2 || !errors.Is(err, transport.ErrPeer) {
		t.Fatalf("Get from a peer only other processes answer for: %v", err)
	}
	for _, want := range []string{"not of job", "PE 2 of job"} {
		if !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if p, err := nets[0].Failed(); p != 2 || err == nil {
		t.Fatalf("Failed: %d, %v", p, err)
	}
	// Nobody was taken for lost by the refused handshakes.
	for _, n := range append(other, nets[1], nets[2]) {
		if p, err := n.Failed(); p >= 0 {
			t.Fatalf("PE %d of job %s takes %d for lost: %v", n.rank, n.job, p, err)
		}
	}
}

// TestTargetChecks: with the origin's checks off, the target refuses
// what is out of range or misaligned, and nothing changes.
func TestTargetChecks(t *testing.T) {
	nets := openMem(t, newMemJob("checks", 2))
	n := nets[0]
	n.targetOnly = true
	heap := nets[1].cfg.Regions[0]
	for i := range heap {
		heap[i] = 0xee
	}
	before := bytes.Clone(heap)
	if err := n.Put(1, 0, 4090, make([]byte, 8), false); err != nil {
		t.Fatalf("Put without the origin's check: %v", err)
	}
	if err := n.Flush(); !errors.Is(err, errs.ErrBadArg) || errors.Is(err, transport.ErrPeer) {
		t.Fatalf("Flush after a put past the end: %v, want ErrBadArg and no peer failure", err)
	}
	if err := n.Flush(); err != nil {
		t.Fatalf("the next Flush: %v", err)
	}
	if err := n.Get(make([]byte, 8), 1, 5, 0); !errors.Is(err, errs.ErrBadArg) {
		t.Fatalf("Get from region 5: %v", err)
	}
	if _, err := n.Atomic(transport.AMOFetchAdd, 1, 0, 4, 8, 1, 0); !errors.Is(err, errs.ErrBadArg) {
		t.Fatalf("misaligned fetch-add: %v", err)
	}
	if _, err := n.Atomic(transport.AMOAdd, 1, 1, 64, 8, 1, 0); err != nil {
		t.Fatal(err)
	}
	if err := n.Flush(); !errors.Is(err, errs.ErrBadArg) {
		t.Fatalf("Flush after an add past the end: %v", err)
	}
	if _, err := n.Atomic(transport.AMOFetchOr, 1, 1, 0, 3, 1, 0); !errors.Is(err, errs.ErrBadArg) {
		t.Fatalf("atomic on 3 bytes: %v", err)
	}
	if !bytes.Equal(heap, before) {
		t.Fatal("refused operations changed the target's memory")
	}
	if p, _ := n.Failed(); p >= 0 {
		t.Fatalf("a refusal made peer %d lost", p)
	}
	// Still working.
	if _, err := n.Atomic(transport.AMOFetchAdd, 1, 0, 8, 8, 1, 0); err != nil {
		t.Fatal(err)
	}
}
