package symheap_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/internal/petest"
	"github.com/symheap/symheap/internal/segment"
	"github.com/symheap/symheap/internal/unix"
)

// TestEveryPEReadsEveryPE: 8 PEs each write into every other PE's copy of
// a symmetric array through ordinary slices (Ptr), then check what they
// received, and that every PE sees the segment at the same address.
func TestEveryPEReadsEveryPE(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts []petest.Option
	}{
		{"same-address", nil},
		{"offset-mode", []petest.Option{petest.OffsetMode()}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			opts := append([]petest.Option{petest.Heap("4m"), petest.Env("SYMHEAP_SHARED_SIZE=1m")}, mode.opts...)
			petest.Run(t, 8, func(t *testing.T) {
				pe, err := symheap.Init(symheap.Config{})
				if err != nil {
					t.Fatal(err)
				}
				defer pe.Close()
				n, me := pe.Size(), pe.Rank()
				if n != 8 {
					t.Fatalf("Size %d, want 8", n)
				}
				grid, err := symheap.Calloc[int64](pe, n*n)
				if err != nil {
					t.Fatal(err)
				}
				bases, err := symheap.Calloc[uint64](pe, n)
				if err != nil {
					t.Fatal(err)
				}
				for p := 0; p < n; p++ {
					theirs := symheap.Ptr(pe, grid, p)
					for k := 0; k < n; k++ {
						theirs[me*n+k] = int64(1000*me + 10*p + k)
					}
				}
				// Every PE reports where its own inbox lives, to PE 0.
				symheap.Ptr(pe, bases, 0)[me] = uint64(uintptr(unsafe.Pointer(&grid[0])))
				if err := pe.Barrier(); err != nil {
					t.Fatal(err)
				}
				for p := 0; p < n; p++ {
					for k := 0; k < n; k++ {
						if got, want := grid[p*n+k], int64(1000*p+10*me+k); got != want {
							t.Fatalf("PE %d: cell written by PE %d = %d, want %d", me, p, got, want)
						}
					}
				}
				wantSame := mode.name == "same-address"
				if pe.SameAddress() != wantSame {
					t.Fatalf("SameAddress() = %v in %s", pe.SameAddress(), mode.name)
				}
				if me == 0 {
					// grid sits at the same offset in every partition; with
					// the same address, PE p's grid address is also what
					// Ptr(grid, p) gives here.
					for p := 0; p < n; p++ {
						mine := uint64(uintptr(unsafe.Pointer(&symheap.Ptr(pe, grid, p)[0])))
						if wantSame && bases[p] != mine {
							t.Errorf("PE %d reports its grid at %#x, PE 0 sees it at %#x", p, bases[p], mine)
						}
					}
					t.Logf("%s: grid of PE 0 at %#x, of PE 7 at %#x", mode.name, bases[0], bases[7])
				}
				if err := symheap.Free(pe, bases); err != nil {
					t.Fatal(err)
				}
				if err := symheap.Free(pe, grid); err != nil {
					t.Fatal(err)
				}
			}, opts...)
		})
	}
}

// TestKillDuringBarrier: kill -9 one PE while the others sit in a barrier.
// The job ends because of the kill (the killed PE is the first failure,
// the launcher stopped the rest, and not its timeout: a hang is caught by
// petest's job timeout, not by a clock here) with a failing status, no PE
// survives, nothing of the job is left in /dev/shm, and a new job then
// runs.
func TestKillDuringBarrier(t *testing.T) {
	t.Run("kill", testKillDuringBarrier)
	t.Run("next-job", func(t *testing.T) {
		petest.Run(t, 2, func(t *testing.T) {
			pe, err := symheap.Init(symheap.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if err := pe.Close(); err != nil {
				t.Fatal(err)
			}
		}, petest.Heap("2m"), petest.Env("SYMHEAP_SHARED_SIZE=1m"))
	})
}

func testKillDuringBarrier(t *testing.T) {
	job := petest.Start(t, 4, func(t *testing.T) {
		pe, err := symheap.Init(symheap.Config{})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println("entering barrier")
		if pe.Rank() == 2 {
			time.Sleep(time.Minute) // killed in here
		}
		err = pe.Barrier() // the others wait here for PE 2
		t.Errorf("barrier returned (%v) after a PE was killed", err)
	}, petest.Heap("2m"), petest.Env("SYMHEAP_SHARED_SIZE=1m"), petest.ExpectFailure())
	job.WaitOutput("entering barrier", 4)
	time.Sleep(100 * time.Millisecond)
	pids := job.Pids()
	killed := time.Now()
	if err := job.Kill(2, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	res := job.Wait()
	took := time.Since(killed)
	if res.Status == 0 {
		t.Errorf("job status 0 after a PE was killed")
	}
	// Ended because of the kill: PE 2, killed by our SIGKILL, is the
	// first failure, the job was not ended by its timeout, and every
	// other PE was stopped by the launcher or failed on its own (its
	// barrier's ErrPeerLost): none left the barrier well.
	if res.TimedOut || res.FirstFailed != 2 || res.PEs[2].Signal != syscall.SIGKILL || res.PEs[2].Stopped {
		t.Errorf("job ended with status %d, first failing PE %d (%v), timed out %v; want PE 2 killed by our SIGKILL first",
			res.Status, res.FirstFailed, res.PEs[2], res.TimedOut)
	}
	for _, p := range res.PEs {
		if p.Rank != 2 && !p.Stopped && !p.Failed() {
			t.Errorf("PE %d exited 0 (%v) although PE 2 was killed in the barrier", p.Rank, p)
		}
	}
	for r, pid := range pids {
		if st, err := unix.ProcessState(pid); err == nil && st != 'Z' {
			t.Errorf("PE %d (pid %d) still exists in state %c", r, pid, st)
		}
	}
	if _, err := os.Stat(segment.Path(unix.Getuid(), job.ID())); !os.IsNotExist(err) {
		t.Errorf("segment of the killed job left in /dev/shm: %v", err)
	}
	t.Logf("killed PE 2: job ended after %v with status %d (first failing PE %d)", took, res.Status, res.FirstFailed)
}

// TestBarrierReportsLostPeer: a PE that vanishes without Close turns the
// others' barrier into ErrPeerLost naming it, at the first liveness check
// after its death (counted, not timed: lossWatch), and every later
// barrier fails the same way without a sleep.
func TestBarrierReportsLostPeer(t *testing.T) {
	petest.Run(t, 3, func(t *testing.T) {
		pe, err := symheap.Init(symheap.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if err := pe.Barrier(); err != nil {
			t.Fatal(err)
		}
		if pe.Rank() == 1 {
			time.Sleep(200 * time.Millisecond)
			petest.Exit(0) // gone, without Close
		}
		w := watchLoss(t, pe, 1)
		start := time.Now()
		err = pe.Barrier()
		if !errors.Is(err, symheap.ErrPeerLost) {
			t.Fatalf("barrier with a vanished PE: %v, want ErrPeerLost", err)
		}
		sleeps, checks, after := w.firstCheck(t, "barrier with a vanished PE")
		t.Logf("PE %d: ErrPeerLost after %v: %d sleeps, %d liveness checks, %d after the death",
			pe.Rank(), time.Since(start).Round(time.Millisecond), sleeps, checks, after)
		if !strings.Contains(err.Error(), "PE 1") {
			t.Errorf("error does not name PE 1: %v", err)
		}
		if pe.Accessible(1) {
			t.Error("Accessible(1) after PE 1 died")
		}
		// The barrier stays broken: every later one fails the same way,
		// at once (without a sleep), on every survivor.
		for i := range 2 {
			err = pe.Barrier()
			if !errors.Is(err, symheap.ErrPeerLost) || !strings.Contains(err.Error(), "PE 1") {
				t.Fatalf("barrier %d after the loss: %v, want ErrPeerLost naming PE 1", i+2, err)
			}
			w.noSleep(t, fmt.Sprintf("barrier %d after the loss", i+2))
		}
		pe.Close()
	}, petest.Heap("2m"), petest.Env("SYMHEAP_SHARED_SIZE=1m"), petest.Timeout(20*time.Second))
}

func TestInitHeapLargerThanShm(t *testing.T) {
	_, free, err := unix.FreeSpace(unix.ShmDir)
	if err != nil {
		t.Fatal(err)
	}
	pe, err := symheap.Init(symheap.Config{HeapSize: int64(free) + 1<<30, SharedSize: 1 << 20})
	if err == nil {
		pe.Close()
		t.Fatal("Init succeeded with a heap larger than /dev/shm")
	}
	if !errors.Is(err, symheap.ErrOutOfMemory) || !strings.Contains(err.Error(), "free") || !strings.Contains(err.Error(), "SHMEM_SYMMETRIC_SIZE") {
		t.Errorf("error does not name the free space and the variable: %v", err)
	}
	t.Log(err)
}

func TestInitBadConfig(t *testing.T) {
	for _, tc := range []struct {
		env, val string
	}{
		{"SHMEM_SYMMETRIC_SIZE", "12q"},
		{"SHMEM_SYMMETRIC_SIZE", "-5m"},
		{"SYMHEAP_SHARED_SIZE", "lots"},
		{"SYMHEAP_OFFSET_MODE", "maybe"},
		{"SYMHEAP_ALLOCATOR", "no-such-allocator"},
		{"SYMHEAP_INIT_TIMEOUT", "soon"},
		{"SYMHEAP_PE", "7"}, // with SYMHEAP_NPES unset
	} {
		t.Run(tc.env+"="+tc.val, func(t *testing.T) {
			t.Setenv(tc.env, tc.val)
			pe, err := symheap.Init(symheap.Config{HeapSize: 1 << 20, SharedSize: 1 << 20})
			if err == nil {
				pe.Close()
				t.Fatalf("Init accepted %s=%s", tc.env, tc.val)
			}
			if !errors.Is(err, symheap.ErrBadConfig) || !strings.Contains(err.Error(), tc.env) && tc.env != "SYMHEAP_ALLOCATOR" {
				t.Errorf("%s=%s: %v", tc.env, tc.val, err)
			}
		})
	}
	if _, err := symheap.Init(symheap.Config{HeapSize: -1}); !errors.Is(err, symheap.ErrBadConfig) {
		t.Errorf("negative HeapSize: %v", err)
	}
}

func TestLonePEBasics(t *testing.T) {
	pe, err := symheap.Init(symheap.Config{HeapSize: 1 << 20, SharedSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if pe.Rank() != 0 || pe.Size() != 1 || !pe.Accessible(0) || pe.Accessible(1) || pe.Accessible(-1) {
		t.Errorf("lone PE: rank %d size %d", pe.Rank(), pe.Size())
	}
	if _, err := symheap.Init(symheap.Config{}); !errors.Is(err, symheap.ErrBadArg) {
		t.Errorf("second Init: %v", err)
	}
	if err := pe.Barrier(); err != nil {
		t.Error(err)
	}
	if err := pe.Close(); err != nil {
		t.Error(err)
	}
	if err := pe.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := pe.Barrier(); !errors.Is(err, symheap.ErrClosed) {
		t.Errorf("Barrier after Close: %v", err)
	}
	if _, err := symheap.Malloc[int](pe, 1); !errors.Is(err, symheap.ErrClosed) {
		t.Errorf("Malloc after Close: %v", err)
	}
}

// TestGlobalExit: one PE's GlobalExit ends every PE with its status.
func TestGlobalExit(t *testing.T) {
	res := petest.Run(t, 3, func(t *testing.T) {
		pe, err := symheap.Init(symheap.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if pe.Rank() == 2 {
			time.Sleep(100 * time.Millisecond)
			pe.GlobalExit(7)
		}
		// The others are busy elsewhere; only GlobalExit (or the
		// launcher's stop after PE 2's exit) ends them. A GlobalExit
		// that ends nobody is caught by petest's job timeout (which
		// fails the test) long before this sleep ends.
		time.Sleep(time.Hour)
		t.Error("still running an hour after GlobalExit")
	}, petest.Heap("2m"), petest.Env("SYMHEAP_SHARED_SIZE=1m"), petest.ExpectFailure(), petest.Timeout(60*time.Second))
	if res.Status != 7 {
		t.Errorf("job status %d, want 7", res.Status)
	}
	// Every PE exits with the code, unless the launcher, seeing the first
	// exit, stopped it a moment earlier.
	for _, p := range res.PEs {
		if p.Status() != 7 && !p.Stopped {
			t.Errorf("PE %d ended with status %d, want 7", p.Rank, p.Status())
		}
	}
	// Ended by GlobalExit (status 7 above), not by the job's timeout.
	if res.TimedOut {
		t.Errorf("job ended by its timeout, not by PE 2's GlobalExit")
	}
	t.Logf("job ended in %v", res.Elapsed)
}
