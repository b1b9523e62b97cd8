package alloc_test

import (
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
	"github.com/symheap/symheap/internal/unix"
)

// The remote-free test: an owner process allocates blocks continuously
// through alloc.Locked, and child processes (this test binary, re-executed)
// free them through their own mappings of the same /dev/shm file. Offsets
// travel through one single-producer single-consumer ring per child, laid
// out in the same file:
//
//	0                    owner pid and per-child pids (8 bytes each)
//	ringOff(c)           ring of child c: head (owner), tail (child),
//	                     stop flag, then ringSlots offsets
//	heapOff (MaxAlign)   the heap region, heapSize bytes
const (
	remoteEnv     = "SYMHEAP_ALLOC_REMOTE_CHILD" // "path,component,id" in a child
	remoteKids    = 3
	remotePerKid  = 2000
	ringSlots     = 256
	ringBytes     = 64 * 1024
	heapOff       = alloc.MaxAlign
	heapSize      = 4 << 20
	remoteTagSalt = 0x5eed_f00d_cafe_0000
)

func ringOff(c int) uint64 { return 4096 + uint64(c)*ringBytes }

type ring struct {
	head, tail, stop *uint64
	mem              []byte
	base             uint64
}

func ringAt(mem []byte, c int) ring {
	b := ringOff(c)
	return ring{
		head: alloctest.Word64(mem, b), tail: alloctest.Word64(mem, b+64),
		stop: alloctest.Word64(mem, b+128), mem: mem, base: b + 192,
	}
}

func (r ring) slot(i uint64) *uint64 { return alloctest.Word64(r.mem, r.base+i%ringSlots*8) }

// alive reports whether the PE with this holder id still runs: its pid is
// in the control area, and it is neither gone nor a zombie.
func aliveIn(mem []byte) func(holder uint32) bool {
	return func(holder uint32) bool {
		pid := int(atomic.LoadUint64(alloctest.Word64(mem, uint64(holder)*8))) // acquire: pid published before the PE locks
		if pid == 0 || !unix.ProcessExists(pid) {
			return false
		}
		st, err := unix.ProcessState(pid)
		return err != nil || st != 'Z'
	}
}

func TestRemoteFree(t *testing.T) {
	if spec := os.Getenv(remoteEnv); spec != "" {
		remoteChild(t, spec)
		return
	}
	for _, c := range alloc.Components() {
		t.Run(c.Name, func(t *testing.T) { remoteOwner(t, c) })
	}
}

func remoteOwner(t *testing.T, c alloc.Component) {
	path := filepath.Join(unix.ShmDir, fmt.Sprintf("symheap-alloctest-%d-%s-%d", os.Getpid(), c.Name, time.Now().UnixNano()))
	t.Cleanup(func() {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			t.Errorf("remove %s: %v", path, err)
		}
	})
	mem := alloctest.MapFile(t, path, heapOff+heapSize, true)
	heap := mem[heapOff:]
	a, err := c.Format(heap)
	if err != nil {
		t.Fatal(err)
	}
	fresh := a.Stats()
	atomic.StoreUint64(alloctest.Word64(mem, 0), uint64(os.Getpid())) // release: before any child can see the lock held by us
	alive := aliveIn(mem)
	owner, err := alloc.NewLocked(a, 0, alive)
	if err != nil {
		t.Fatal(err)
	}

	// Start the children; kill any still running if the test fails.
	var kids []*exec.Cmd
	var outs []*strings.Builder
	t.Cleanup(func() {
		for _, k := range kids {
			if k.ProcessState == nil {
				k.Process.Kill()
				k.Wait()
			}
		}
	})
	for id := 1; id <= remoteKids; id++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRemoteFree$", "-test.count=1")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%s,%d", remoteEnv, path, c.Name, id))
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		atomic.StoreUint64(alloctest.Word64(mem, uint64(id)*8), uint64(cmd.Process.Pid)) // release: pairs with aliveIn
		kids = append(kids, cmd)
		outs = append(outs, out)
	}
	kidDone := make([]chan error, remoteKids)
	for i, k := range kids {
		kidDone[i] = make(chan error, 1)
		go func() { kidDone[i] <- k.Wait() }()
	}
	failKid := func(i int, err error) {
		t.Fatalf("child %d exited early: %v\n%s", i+1, err, outs[i].String())
	}

	// Allocate continuously; hand most blocks to the children, keep some.
	r := rand.New(rand.NewPCG(1, 2))
	var mine []alloc.Off
	sent := 0
	for sent < remoteKids*remotePerKid {
		off, err := owner.Alloc(16+r.Uint64N(4080), 0)
		if err != nil {
			t.Fatalf("owner alloc after %d blocks: %v", sent, err)
		}
		// Tag the block: the child verifies it before freeing.
		*alloctest.Word64(heap, uint64(off)) = uint64(off) ^ remoteTagSalt
		if r.IntN(8) == 0 {
			mine = append(mine, off)
			if len(mine) > 32 {
				if err := owner.Free(mine[0]); err != nil {
					t.Fatal(err)
				}
				mine = mine[1:]
			}
			continue
		}
		k := sent % remoteKids
		rg := ringAt(mem, k)
		head := atomic.LoadUint64(rg.head)                 // only we write head
		for head-atomic.LoadUint64(rg.tail) >= ringSlots { // acquire: the child is done with the slot
			select {
			case err := <-kidDone[k]:
				failKid(k, err)
			default:
			}
			unix.SchedYield()
		}
		*rg.slot(head) = uint64(off)
		atomic.StoreUint64(rg.head, head+1) // release: publishes the slot to the child
		sent++
	}
	for _, off := range mine {
		if err := owner.Free(off); err != nil {
			t.Fatal(err)
		}
	}
	for k := 0; k < remoteKids; k++ {
		atomic.StoreUint64(ringAt(mem, k).stop, 1) // release: after the last head store
	}
	deadline := time.After(60 * time.Second)
	for k := range kids {
		select {
		case err := <-kidDone[k]:
			if err != nil {
				failKid(k, err)
			}
		case <-deadline:
			t.Fatalf("child %d did not finish in time\n%s", k+1, outs[k].String())
		}
	}

	if err := owner.Check(); err != nil {
		t.Fatal(err)
	}
	st := owner.Stats()
	if st.Live != 0 || st.InUse != 0 || st.Allocs != st.Frees || st.Free != fresh.Free || st.LargestFree != fresh.LargestFree {
		t.Fatalf("after all remote frees: %+v\nfresh heap: %+v", st, fresh)
	}
	if want := uint64(remoteKids*remotePerKid + len(mine)); st.Frees < want {
		t.Fatalf("%d frees counted, want at least %d", st.Frees, want)
	}
	if id, held := owner.L.Holder(); held {
		t.Fatalf("heap lock still held by %d", id)
	}
}

// remoteChild is the child's side: attach, then free every offset the
// owner sends until told to stop.
func remoteChild(t *testing.T, spec string) {
	parts := strings.Split(spec, ",")
	if len(parts) != 3 {
		t.Fatalf("bad %s=%q", remoteEnv, spec)
	}
	path, name := parts[0], parts[1]
	id, err := strconv.Atoi(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	c, ok := alloc.Lookup(name)
	if !ok {
		t.Fatalf("no component %q", name)
	}
	mem := alloctest.MapFile(t, path, heapOff+heapSize, false)
	heap := mem[heapOff:]
	a, err := c.Attach(heap)
	if err != nil {
		t.Fatal(err)
	}
	me, err := alloc.NewLocked(a, uint32(id), aliveIn(mem))
	if err != nil {
		t.Fatal(err)
	}
	rg := ringAt(mem, id-1)
	freed := 0
	for {
		tail := atomic.LoadUint64(rg.tail)      // only we write tail
		if tail == atomic.LoadUint64(rg.head) { // acquire: pairs with the owner's head store
			if atomic.LoadUint64(rg.stop) != 0 && tail == atomic.LoadUint64(rg.head) {
				break
			}
			unix.SchedYield()
			continue
		}
		off := alloc.Off(*rg.slot(tail))
		atomic.StoreUint64(rg.tail, tail+1) // release: the slot may be reused
		if tag := *alloctest.Word64(heap, uint64(off)); tag != uint64(off)^remoteTagSalt {
			t.Fatalf("block %#x carries tag %#x: not the owner's block", off, tag)
		}
		if err := me.Free(off); err != nil {
			t.Fatalf("free of %#x: %v", off, err)
		}
		if freed++; freed%250 == 0 {
			// The whole heap, checked from this process while the owner
			// keeps allocating.
			if err := me.Check(); err != nil {
				t.Fatalf("after %d frees: %v", freed, err)
			}
		}
	}
	if freed != remotePerKid {
		t.Fatalf("freed %d blocks, want %d", freed, remotePerKid)
	}
}
