package small_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/alloc/alloctest"
	"github.com/symheap/symheap/alloc/small"
	"github.com/symheap/symheap/alloc/tlsf"
	"github.com/symheap/symheap/internal/unix"
)

// Remote frees under contention, across processes: the owner allocates
// small blocks without pause (from two goroutines), and child processes
// (this test binary, re-executed) free them through their own handles on
// their own mappings of the same /dev/shm file, all at once, so that
// pushes on one span's remote-free stack race each other and the owner's
// collection. Then every child frees the same batch of blocks at once:
// of the three frees of each block exactly one must succeed. Offsets
// travel through one single-producer single-consumer ring per child, in
// the same file:
//
//	0                   pids: owner, then each child (8 bytes each)
//	ringOff(c)          child c's ring: head (owner), tail (child), then
//	                    ringSlots offsets
//	resOff(c)           child c's words: frees, frees of the batch that
//	                    succeeded, that were refused, release events heard,
//	                    the owner's "ring done" flag
//	batchOff            the batch: its length (set last), then offsets
//	heapOff (MaxAlign)  the heap region
const (
	rEnv      = "SYMHEAP_SMALL_REMOTE_CHILD" // "path,hdr,id" in a child
	rKids     = 3
	rPerKid   = 100000
	ringSlots = 256
	heapOff   = alloc.MaxAlign
	heapSize  = 32 << 20
	tagSalt   = 0x5eed_5a11_0000_0000
	batchOff  = 2 << 20
	batchLen  = 3000
)

func ringOff(c int) uint64 { return 4096 + uint64(c)*(16+8*ringSlots+64) }
func resOff(c int) uint64  { return 1<<20 + uint64(c)*64 }

type ring struct {
	mem  []byte
	base uint64
}

func (r ring) head() *uint64         { return alloctest.Word64(r.mem, r.base) }
func (r ring) tail() *uint64         { return alloctest.Word64(r.mem, r.base+8) }
func (r ring) slot(i uint64) *uint64 { return alloctest.Word64(r.mem, r.base+16+i%ringSlots*8) }

func aliveIn(mem []byte) func(holder uint32) bool {
	return func(holder uint32) bool {
		pid := int(atomic.LoadUint64(alloctest.Word64(mem, uint64(holder)*8))) // acquire: published before the process locks
		return pid != 0 && unix.ProcessExists(pid)
	}
}

// counter is a sink that counts the releases it hears of.
type counter struct{ n atomic.Uint64 }

func (c *counter) Listening() bool                           { return true }
func (c *counter) Released(alloc.Release, alloc.Off, uint64) { c.n.Add(1) }

func TestRemoteFreeContention(t *testing.T) {
	if spec := os.Getenv(rEnv); spec != "" {
		remoteChild(t, spec)
		return
	}
	path := filepath.Join(unix.ShmDir, fmt.Sprintf("symheap-smalltest-%d-%d", os.Getpid(), time.Now().UnixNano()))
	t.Cleanup(func() {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			t.Errorf("remove %s: %v", path, err)
		}
	})
	mem := alloctest.MapFile(t, path, heapOff+heapSize, true)
	region := mem[heapOff:]
	atomic.StoreUint64(alloctest.Word64(mem, 0), uint64(os.Getpid())) // release: before a child can see us hold the lock
	in, err := tlsf.Format(region)
	if err != nil {
		t.Fatal(err)
	}
	l, err := alloc.NewLocked(in, 0, aliveIn(mem))
	if err != nil {
		t.Fatal(err)
	}
	owner, err := small.Format(l, region, nil)
	if err != nil {
		t.Fatal(err)
	}
	fresh := owner.Stats()

	var kids []*exec.Cmd
	var outs []*strings.Builder
	done := make([]chan error, 0, rKids)
	t.Cleanup(func() {
		for i, k := range kids {
			k.Process.Kill() // an error if it has exited already
			<-done[i]
		}
	})
	for id := 1; id <= rKids; id++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRemoteFreeContention$", "-test.count=1")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%d", rEnv, path, owner.Header(), id))
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		atomic.StoreUint64(alloctest.Word64(mem, uint64(id)*8), uint64(cmd.Process.Pid)) // release: pairs with aliveIn
		kids = append(kids, cmd)
		outs = append(outs, out)
		d := make(chan error, 1)
		done = append(done, d)
		go func() { d <- cmd.Wait(); close(d) }()
	}

	// Two goroutines allocate (so the owner's frees and allocations run
	// on two Ps at once), each feeding the rings of its children: child
	// 1 from goroutine 0, children 2 and 3 from goroutine 1. Every block
	// carries a tag the child checks before freeing.
	errc := make(chan error, 2)
	var kept [2][]alloc.Off
	for g := 0; g < 2; g++ {
		go func() {
			r := rand.New(rand.NewPCG(uint64(g), 7))
			mine := []int{0}
			if g == 1 {
				mine = []int{1, 2}
			}
			for sent := 0; sent < rPerKid*len(mine); {
				off, err := owner.Alloc(16+r.Uint64N(small.MaxSmall-16), 0)
				if err != nil {
					errc <- fmt.Errorf("owner alloc after %d blocks: %w (spans %d, stats %+v)", sent, err, owner.Spans(), owner.Stats())
					return
				}
				*alloctest.Word64(region, uint64(off)&^7) = uint64(off) ^ tagSalt
				if r.IntN(10) == 0 {
					kept[g] = append(kept[g], off)
					if len(kept[g]) > 50 {
						if err := owner.Free(kept[g][0]); err != nil {
							errc <- err
							return
						}
						kept[g] = kept[g][1:]
					}
					continue
				}
				k := mine[sent%len(mine)]
				rg := ring{mem, ringOff(k)}
				head := atomic.LoadUint64(rg.head())
				for head-atomic.LoadUint64(rg.tail()) >= ringSlots { // acquire: the child is done with the slot
					select {
					case err := <-done[k]:
						errc <- fmt.Errorf("child %d exited early: %v\n%s", k+1, err, outs[k].String())
						return
					default:
					}
					unix.SchedYield()
				}
				*rg.slot(head) = uint64(off)
				atomic.StoreUint64(rg.head(), head+1) // release: publishes the slot
				sent++
			}
			errc <- nil
		}()
	}
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	for k := range rKids {
		atomic.StoreUint64(alloctest.Word64(mem, resOff(k)+32), 1) // release: the ring is done, after its last head store
	}
	// The batch: blocks every child frees at once.
	for i := range batchLen {
		off, err := owner.Alloc(uint64(16+i%200), 0)
		if err != nil {
			t.Fatal(err)
		}
		*alloctest.Word64(region, uint64(off)&^7) = uint64(off) ^ tagSalt
		*alloctest.Word64(mem, batchOff+8+8*uint64(i)) = uint64(off)
	}
	atomic.StoreUint64(alloctest.Word64(mem, batchOff), batchLen) // release: publishes the batch
	deadline := time.After(120 * time.Second)
	for k := range kids {
		select {
		case err := <-done[k]:
			if err != nil {
				t.Fatalf("child %d: %v\n%s", k+1, err, outs[k].String())
			}
		case <-deadline:
			t.Fatalf("child %d did not finish in time\n%s", k+1, outs[k].String())
		}
	}
	var won, refused uint64
	for k := range rKids {
		w := func(i uint64) uint64 { return atomic.LoadUint64(alloctest.Word64(mem, resOff(k)+8*i)) } // acquire: the child has exited
		frees, bw, br, events := w(0), w(1), w(2), w(3)
		if frees != rPerKid || events != frees+bw {
			t.Errorf("child %d: %d frees (want %d) and %d of the batch, %d release events (want one per free)", k+1, frees, rPerKid, bw, events)
		}
		won += bw
		refused += br
	}
	t.Logf("%d children freed %d blocks each while the owner allocated, then %d blocks at once: %d frees succeeded, %d refused", rKids, rPerKid, batchLen, won, refused)
	if won != batchLen || refused != (rKids-1)*batchLen {
		t.Errorf("%d blocks freed by %d children at once: %d frees succeeded (want %d), %d refused (want %d)", batchLen, rKids, won, batchLen, refused, (rKids-1)*batchLen)
	}
	for g := range kept {
		for _, off := range kept[g] {
			if err := owner.Free(off); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := owner.Check(); err != nil {
		t.Fatalf("after the remote frees: %v", err)
	}
	if st := owner.Stats(); st.Live != 0 || st.InUse != 0 {
		t.Fatalf("every block was freed, but Stats says %+v", st)
	}
	// The spans still hold what the children freed, pending; a large
	// allocation collects and gives them back.
	big, err := owner.Alloc(fresh.LargestFree/2, 0)
	if err != nil {
		t.Fatalf("large alloc after collecting: %v (spans left %d)", err, owner.Spans())
	}
	if err := owner.Free(big); err != nil {
		t.Fatal(err)
	}
}

// remoteChild frees every offset its ring brings, through its own handle,
// then every block of the batch (which the other children free at the
// same moment). It writes its counts into its results words.
func remoteChild(t *testing.T, spec string) {
	parts := strings.Split(spec, ",")
	if len(parts) != 3 {
		t.Fatalf("bad %s=%q", rEnv, spec)
	}
	hdr, err1 := strconv.ParseUint(parts[1], 10, 64)
	id, err2 := strconv.Atoi(parts[2])
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	mem := alloctest.MapFile(t, parts[0], heapOff+heapSize, false)
	region := mem[heapOff:]
	in, err := tlsf.Attach(region)
	if err != nil {
		t.Fatal(err)
	}
	l, err := alloc.NewLocked(in, uint32(id), aliveIn(mem))
	if err != nil {
		t.Fatal(err)
	}
	var events counter
	me, err := small.Attach(l, region, alloc.Off(hdr), &events)
	if err != nil {
		t.Fatal(err)
	}
	rg := ring{mem, ringOff(id - 1)}
	res := resOff(id - 1)
	var freed uint64
	for {
		tail := atomic.LoadUint64(rg.tail())
		if tail == atomic.LoadUint64(rg.head()) { // acquire: pairs with the owner's head store
			if atomic.LoadUint64(alloctest.Word64(mem, res+32)) != 0 && tail == atomic.LoadUint64(rg.head()) {
				break
			}
			unix.SchedYield()
			continue
		}
		off := alloc.Off(*rg.slot(tail))
		atomic.StoreUint64(rg.tail(), tail+1) // release: the slot may be reused
		if tag := *alloctest.Word64(region, uint64(off)&^7); tag != uint64(off)^tagSalt {
			t.Fatalf("block %#x carries tag %#x: not the owner's block", off, tag)
		}
		if err := me.Free(off); err != nil {
			t.Fatalf("free of %#x: %v", off, err)
		}
		freed++
	}
	// The batch: the owner allocates nothing while the children free it,
	// so a refused free is a true double free.
	for atomic.LoadUint64(alloctest.Word64(mem, batchOff)) == 0 { // acquire: pairs with the owner's publishing store
		unix.SchedYield()
	}
	var won, refused uint64
	for i := range uint64(batchLen) {
		off := alloc.Off(*alloctest.Word64(mem, batchOff+8+8*i)) // all in the same order: they collide on each block
		switch err := me.Free(off); {
		case err == nil:
			won++
		case errors.Is(err, alloc.ErrBadFree):
			refused++
		default:
			t.Fatalf("free of batch block %#x: %v", off, err)
		}
	}
	atomic.StoreUint64(alloctest.Word64(mem, res), freed)
	atomic.StoreUint64(alloctest.Word64(mem, res+8), won)
	atomic.StoreUint64(alloctest.Word64(mem, res+16), refused)
	atomic.StoreUint64(alloctest.Word64(mem, res+24), events.n.Load())
}

// TestMain checks that no test left a shared-memory file behind.
func TestMain(m *testing.M) { alloctest.MainNoLeftovers(m, "symheap-smalltest") }
