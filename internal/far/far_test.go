package far_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/internal/petest"
)

// The multi-node layer, tested in every build without cgo, mpirun or
// namespaces: a job of four plain processes, two "nodes" of two PEs (each
// PE names its node with SYMHEAP_NODE; the nodes' segments share this
// machine's /dev/shm under different names), joined by the rendezvous
// and the TCP transport. Every family that crosses nodes runs across
// them; the cluster tests of the root package run the same over fake
// hosts, and over UCX too in the ucx build.

// nodeJob is the environment of a job over TCP through a rendezvous at a
// free port of this machine. In a child it is not used: the child has the
// parent's.
func nodeJob(t *testing.T) petest.Option {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return petest.Env("SYMHEAP_BOOT="+addr, "SYMHEAP_TRANSPORT=tcp", "SYMHEAP_BOOTSTRAP=rendezvous",
		"SHMEM_SYMMETRIC_SIZE=16m", "SYMHEAP_SHARED_SIZE=1m", "SYMHEAP_PEER_TIMEOUT=5s")
}

// initUneven joins the job as a PE of nodes of three PEs (0-2) and two
// (3, 4), allocates one zeroed int64 and leaves a barrier.
func initUneven(t *testing.T) (*symheap.PE, []int64) {
	t.Helper()
	node := 0
	if petest.Rank() >= 3 {
		node = 1
	}
	os.Setenv("SYMHEAP_NODE", fmt.Sprintf("node%d", node))
	pe, err := symheap.Init(symheap.Config{})
	if err != nil {
		t.Fatal(err)
	}
	x, err := symheap.Calloc[int64](pe, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := pe.Barrier(); err != nil {
		t.Fatal(err)
	}
	return pe, x
}

// initNode joins the job as a PE of node rank/2.
func initNode(t *testing.T) *symheap.PE {
	t.Helper()
	os.Setenv("SYMHEAP_NODE", fmt.Sprintf("node%d", petest.Rank()/2))
	pe, err := symheap.Init(symheap.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return pe
}

func TestTwoNodes(t *testing.T) {
	petest.Run(t, 4, func(t *testing.T) {
		pe := initNode(t)
		defer func() {
			if err := pe.Close(); err != nil {
				t.Error(err)
			}
		}()
		me, far := pe.Rank(), pe.Rank()^2 // the partner on the other node
		if pe.Nodes() != 2 || pe.Node(me) != me/2 || pe.Node(far) == pe.Node(me) {
			t.Fatalf("PE %d: %d nodes, node %d, partner's %d", me, pe.Nodes(), pe.Node(me), pe.Node(far))
		}
		if fmt.Sprint(pe.NodePEs()) != fmt.Sprint([]int{me &^ 1, me | 1}) {
			t.Fatalf("PE %d: NodePEs %v", me, pe.NodePEs())
		}

		// One-sided: a put and a get across, every PE's fetch-adds on one
		// word of PE 0, counted exactly.
		x, err := symheap.Calloc[int64](pe, 1024)
		if err != nil {
			t.Fatal(err)
		}
		src := make([]int64, 1024)
		for i := range src {
			src[i] = int64(me*10000 + i)
		}
		if err := symheap.Put(pe, x, src, far); err != nil {
			t.Fatal(err)
		}
		if err := pe.Barrier(); err != nil {
			t.Fatal(err)
		}
		for i, v := range x {
			if v != int64(far*10000+i) {
				t.Fatalf("PE %d: x[%d] = %d after PE %d's put", me, i, v, far)
			}
		}
		got := make([]int64, 8)
		if err := symheap.Get(pe, got, x[:8], far); err != nil || got[3] != int64(me*10000+3) {
			t.Fatalf("PE %d: get from PE %d: %v %v", me, far, got, err)
		}
		c, err := symheap.Calloc[int64](pe, 1)
		if err != nil {
			t.Fatal(err)
		}
		const adds = 500
		for range adds {
			if _, err := symheap.AtomicFetchAdd(pe, &c[0], 1, 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := pe.Barrier(); err != nil {
			t.Fatal(err)
		}
		if v, err := symheap.AtomicFetch(pe, &c[0], 0); err != nil || v != 4*adds {
			t.Fatalf("PE %d: the counter on PE 0 is %d (%v), want %d", me, v, err, 4*adds)
		}

		// Collectives on the world team and on a team across nodes.
		w := pe.World()
		sum, err := symheap.Malloc[int64](pe, 1024)
		if err != nil {
			t.Fatal(err)
		}
		if err := symheap.Reduce(w, sum, x, symheap.OpSum); err != nil {
			t.Fatal(err)
		}
		// x[i] on PE p is PE p^2's 10000*(p^2) + i: the sum over the PEs
		// is 10000*(0+1+2+3) + 4i.
		if want := int64(10000*6 + 4*512); sum[512] != want {
			t.Fatalf("PE %d: Reduce gave %d at 512, want %d", me, sum[512], want)
		}
		all := make([]int64, 4)
		one, err := symheap.Malloc[int64](pe, 1)
		if err != nil {
			t.Fatal(err)
		}
		one[0] = int64(me)
		all2, err := symheap.Malloc[int64](pe, 4)
		if err != nil {
			t.Fatal(err)
		}
		if err := symheap.FCollect(w, all2, one); err != nil {
			t.Fatal(err)
		}
		copy(all, all2)
		if fmt.Sprint(all) != "[0 1 2 3]" {
			t.Fatalf("PE %d: FCollect %v", me, all)
		}
		cross, err := w.Split(me&1, 2, 2) // {0, 2} and {1, 3}: each spans both nodes
		if err != nil {
			t.Fatal(err)
		}
		if cross.Size() != 2 || cross.Rank() != me/2 {
			t.Fatalf("PE %d: team of %d, rank %d", me, cross.Size(), cross.Rank())
		}
		if err := cross.Sync(); err != nil {
			t.Fatal(err)
		}
		b, err := symheap.Malloc[int64](pe, 4)
		if err != nil {
			t.Fatal(err)
		}
		for i := range b {
			b[i] = int64(100*me + i)
		}
		if err := symheap.Broadcast(cross, b, b, 1); err != nil { // from the member on node 1
			t.Fatal(err)
		}
		if root := (me & 1) | 2; b[2] != int64(100*root+2) {
			t.Fatalf("PE %d: Broadcast from PE %d gave %v", me, root, b)
		}
		if err := cross.Destroy(); err != nil {
			t.Fatal(err)
		}

		// Messages across: sizes from 0 to 1 MiB in order with one tag,
		// then one from any source.
		for _, n := range []int{0, 1, 1000, 64 << 10, 1 << 20} {
			out := make([]byte, n)
			for i := range out {
				out[i] = byte(me + i)
			}
			in := make([]byte, n)
			if me < 2 {
				if err := pe.Send(out, far, 7); err != nil {
					t.Fatal(err)
				}
				if _, err := pe.Recv(in, far, 7); err != nil {
					t.Fatal(err)
				}
			} else {
				if _, err := pe.Recv(in, far, 7); err != nil {
					t.Fatal(err)
				}
				if err := pe.Send(out, far, 7); err != nil {
					t.Fatal(err)
				}
			}
			for i := range in {
				if in[i] != byte(far+i) {
					t.Fatalf("PE %d: %d B from PE %d: byte %d is %d", me, n, far, i, in[i])
				}
			}
		}
		if me == 3 {
			for range 3 {
				buf := make([]byte, 8)
				st, err := pe.Recv(buf, symheap.AnySource, 9)
				if err != nil || st.Count != 8 || int(buf[0]) != st.Source {
					t.Fatalf("PE 3: from AnySource: %+v %v %v", st, buf, err)
				}
			}
		} else if err := pe.Send([]byte{byte(me), 0, 0, 0, 0, 0, 0, 0}, 3, 9); err != nil {
			t.Fatal(err)
		}

		// A lock taken by every PE in turn guards a counter on PE 0.
		lk, err := symheap.Calloc[int64](pe, 2)
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			if err := pe.SetLock(&lk[0]); err != nil {
				t.Fatal(err)
			}
			v, err := symheap.AtomicFetch(pe, &lk[1], 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := symheap.AtomicSet(pe, &lk[1], v+1, 0); err != nil {
				t.Fatal(err)
			}
			if err := pe.ClearLock(&lk[0]); err != nil {
				t.Fatal(err)
			}
		}
		if err := pe.Barrier(); err != nil {
			t.Fatal(err)
		}
		if v, _ := symheap.AtomicFetch(pe, &lk[1], 0); v != 80 {
			t.Fatalf("PE %d: 80 increments under the lock made %d", me, v)
		}
	}, nodeJob(t), petest.Timeout(3*time.Minute))
}

// TestTwoNodesLostPE: PE 3 vanishes (exits without Close) while the
// others wait in barriers; each of them, on both nodes, ends with
// ErrPeerLost naming it (a loss never reported is a job that does not end
// before its timeout), and no segment is left.
func TestTwoNodesLostPE(t *testing.T) {
	petest.Run(t, 4, func(t *testing.T) {
		pe := initNode(t)
		left, err := symheap.Calloc[int64](pe, 1) // on PE 3: the PEs out of the first barrier
		if err != nil {
			t.Fatal(err)
		}
		if err := pe.Barrier(); err != nil {
			t.Fatal(err)
		}
		if pe.Rank() == 3 {
			// Gone, without Close (its connections break), once the
			// others have left the barrier: a loss while they still
			// complete it would be reported there.
			if err := symheap.WaitUntil(pe, &left[0], symheap.CmpEQ, 3); err != nil {
				t.Fatal(err)
			}
			petest.Exit(0)
		}
		if err := symheap.AtomicAdd(pe, &left[0], 1, 3); err != nil {
			t.Fatal(err)
		}
		for err == nil {
			err = pe.Barrier()
		}
		if !errors.Is(err, symheap.ErrPeerLost) || !strings.Contains(err.Error(), "PE 3") {
			t.Fatalf("PE %d: %v, want ErrPeerLost naming PE 3", pe.Rank(), err)
		}
		if err := pe.Close(); !errors.Is(err, symheap.ErrPeerLost) {
			t.Errorf("PE %d: Close after the loss: %v, want ErrPeerLost", pe.Rank(), err)
		}
	}, nodeJob(t), petest.Timeout(2*time.Minute))
}

// TestUnevenNodesLostPE: nodes of three PEs (0-2) and two (3, 4). PE 4
// stops (SIGSTOP: its connections and its bootstrap stay up, so no
// launcher or socket reports it) while the others wait on their own
// memory for a value no PE writes. PE 3 finds it stalled through its
// node's segment and announces it to its partner on the other node, PE
// 0, only. PEs 1 and 2 talk to nobody: they hear of the loss only because
// PE 0 leaves it for its node. Every PE must end its wait with
// ErrPeerLost naming PE 4 (a loss never heard is a job that does not end
// before its timeout). The PEs that heard meet in files before they
// leave, so that none finds an earlier one's exit instead; the first to
// leave ends the job.
func TestUnevenNodesLostPE(t *testing.T) {
	dir := t.TempDir()
	res := petest.Run(t, 5, func(t *testing.T) {
		pe, never := initUneven(t)
		if pe.Rank() == 4 {
			for { // stopped again if anything continues it; the launcher kills it
				syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			}
		}
		err := symheap.WaitUntil(pe, &never[0], symheap.CmpEQ, 1)
		fmt.Printf("PE %d: %v\n", pe.Rank(), err)
		if !errors.Is(err, symheap.ErrPeerLost) || !strings.Contains(err.Error(), "PE 4") {
			fmt.Println("WRONG ERROR: want ErrPeerLost naming PE 4")
			os.Exit(4)
		}
		heard := os.Getenv("HEARD_DIR")
		if err := os.WriteFile(filepath.Join(heard, fmt.Sprint(pe.Rank())), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		for {
			if ents, _ := os.ReadDir(heard); len(ents) == 4 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		pe.Close()
		os.Exit(3)
	}, nodeJob(t), petest.Env("HEARD_DIR="+dir, "SYMHEAP_PEER_TIMEOUT=1s"), petest.ExpectFailure(), petest.Timeout(2*time.Minute))
	// A PE writes its file once it has heard, and the first exit (3,
	// which ends the job) comes after all four.
	for r := range 4 {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprint(r))); err != nil {
			t.Errorf("PE %d never heard of PE 4's loss", r)
		}
	}
	if res.Status != 3 || res.TimedOut {
		t.Errorf("job status %d (timed out: %v), want 3 from a PE that heard", res.Status, res.TimedOut)
	}
}

// TestFoundLossLeftForNode: nodes of three PEs (0-2) and two (3, 4). PE 3
// exits without Close; PE 0 finds it gone on its own connection (a Get),
// closes and stays; only then does PE 1, which talks to no PE of the
// other node, wait on its own memory. It must report PE 3's loss, which
// PE 0 left for its node before it closed, and not PE 0's leaving (which
// its node's segment shows first). PEs 2 and 4 make no call until PE 1
// has heard, so that no announcement tells PE 1 instead.
func TestFoundLossLeftForNode(t *testing.T) {
	dir := t.TempDir() // the parent's, to its children through STEPS_DIR
	step := func(name string) {
		if err := os.WriteFile(filepath.Join(os.Getenv("STEPS_DIR"), name), nil, 0o644); err != nil {
			panic(err)
		}
	}
	await := func(name string) {
		for {
			if _, err := os.Stat(filepath.Join(os.Getenv("STEPS_DIR"), name)); err == nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	petest.Run(t, 5, func(t *testing.T) {
		pe, x := initUneven(t)
		switch pe.Rank() {
		case 3:
			// Gone once the others have left the barrier.
			if err := symheap.WaitUntil(pe, &x[0], symheap.CmpEQ, 4); err != nil {
				t.Fatal(err)
			}
			petest.Exit(0)
		default:
			if err := symheap.AtomicAdd(pe, &x[0], 1, 3); err != nil {
				t.Fatal(err)
			}
		}
		switch pe.Rank() {
		case 0:
			var v [1]int64
			var err error
			for err == nil {
				time.Sleep(time.Millisecond)
				err = symheap.Get(pe, v[:], x, 3)
			}
			if !errors.Is(err, symheap.ErrPeerLost) || !strings.Contains(err.Error(), "PE 3") {
				t.Errorf("PE 0: Get from PE 3 after it left: %v, want ErrPeerLost naming PE 3", err)
			}
			pe.Close() // ErrPeerLost
			step("closed")
			await("heard")
		case 1:
			await("closed")
			err := symheap.WaitUntil(pe, &x[0], symheap.CmpEQ, 5)
			if !errors.Is(err, symheap.ErrPeerLost) || !strings.Contains(err.Error(), "PE 3") {
				t.Errorf("PE 1: %v, want ErrPeerLost naming PE 3 (left for the node by PE 0)", err)
			}
			step("heard")
			pe.Close()
		default:
			await("heard")
			pe.Close()
		}
	}, nodeJob(t), petest.Env("STEPS_DIR="+dir), petest.Timeout(2*time.Minute))
}

// TestNodesDivergedArgs: PEs on several nodes that pass different sizes
// to one collective fail with ErrDiverged instead of copying what does
// not match. One PE passes 1000 elements where the others pass 1: on a
// node of its own (2 nodes of one PE: the leaders' barrier messages
// carry each call's record) and beside another PE of its node (2 nodes
// of 2: the node's PEs compare their records after their first meeting).
// The same on a team made by Split (split: all the PEs, in reverse
// order), whose barrier compares the records its own way (teamSync).
// Every PE's call, or the barrier after it, must fail with ErrDiverged
// (or ErrPeerLost, once a PE that found it has left), and one PE's
// message must name both sizes.
func TestNodesDivergedArgs(t *testing.T) {
	for _, c := range []struct {
		name      string
		npes, odd int
		perNode   int
		split     bool
	}{{"leaders", 2, 1, 1, false}, {"node", 4, 1, 2, false}, {"other-node", 4, 3, 2, false},
		{"split-leaders", 2, 1, 1, true}, {"split-node", 4, 1, 2, true}, {"split-other-node", 4, 2, 2, true}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			petest.Run(t, c.npes, func(t *testing.T) {
				os.Setenv("SYMHEAP_NODE", fmt.Sprintf("node%d", petest.Rank()/c.perNode))
				pe, err := symheap.Init(symheap.Config{})
				if err != nil {
					t.Fatal(err)
				}
				defer pe.Close()
				const big = 1000
				buf, err := symheap.Malloc[int64](pe, 2*big)
				if err != nil {
					t.Fatal(err)
				}
				tm := pe.World()
				if c.split {
					if tm, err = tm.Split(c.npes-1, -1, c.npes); err != nil {
						t.Fatal(err)
					}
				}
				k := 1
				if pe.Rank() == c.odd {
					k = big
				}
				err = symheap.Broadcast(tm, buf[:k], buf[big:big+k], 0)
				if err == nil {
					err = tm.Sync()
				}
				if !errors.Is(err, symheap.ErrDiverged) && !errors.Is(err, symheap.ErrPeerLost) {
					t.Fatalf("PE %d: Broadcast of %d elements (PE %d passed %d): %v, want ErrDiverged or ErrPeerLost", pe.Rank(), k, c.odd, big, err)
				}
				if err := os.WriteFile(filepath.Join(os.Getenv("ERRS_DIR"), fmt.Sprint(pe.Rank())), []byte(err.Error()), 0o644); err != nil {
					t.Fatal(err)
				}
			}, nodeJob(t), petest.Env("ERRS_DIR="+dir), petest.Timeout(2*time.Minute))
			named := false
			for r := range c.npes {
				b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprint(r)))
				named = named || strings.Contains(string(b), "Broadcast of 8000 B") && strings.Contains(string(b), "Broadcast of 8 B")
			}
			if !named {
				t.Errorf("no PE named both sizes")
			}
		})
	}
}
