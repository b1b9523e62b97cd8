// Command loops times plain loops of small synchronising calls on PE 0:
// 2-PE barriers, 1-int64 broadcasts and 1-int64 reductions, optionally
// right after a
// message-rate loop in the same job. Run it as several jobs in a row to
// see how much a figure moves from job to job (bench/loops/run.sh):
//
//	shrun -n 2 ./loops -calls 20000 -after-rate
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/internal/shmsync"
)

func main() {
	calls := flag.Int("calls", 20000, "calls per loop")
	afterRate := flag.Bool("after-rate", false, "run a message-rate loop (windows of 64 Isend/Irecv of 8 B) first")
	flag.IntVar(&reps, "reps", 0, "also time reps short runs of 100 calls and print the fastest (the cost without interference)")
	flag.IntVar(&pin, "pin", -1, "after Init, move every thread of the PE to this CPU (all PEs on one core, as the kernel sometimes places them, while the runtime believes it has a core per PE)")
	flag.IntVar(&elems, "elems", 1, "int64 elements per broadcast and reduction")
	flag.DurationVar(&settle, "settle", 0, "before the loops, run barriers for this long: the Go runtime's monitor thread (sysmon) wakes every 20-70 us for the first tens of milliseconds of a process, and each time takes a core from a PE")
	flag.BoolVar(&xcopy, "xcopy", false, "instead of the loops, time PE 0's copy of 64 B .. 64 KiB that PE 1 has just written (lines in the other core's cache), beside the same copy in cache: what moving data between the PEs' cores costs (docs/bench/floors.md)")
	flag.BoolVar(&spread, "spread", false, "after Init, move every thread of PE r to CPU r modulo the CPUs (a core per PE even on a busy machine, where the kernel may put both on one)")
	flag.Parse()
	if err := run(*calls, *afterRate); err != nil {
		fmt.Fprintln(os.Stderr, "loops:", err)
		os.Exit(1)
	}
}

var (
	reps, pin, elems int
	spread, xcopy    bool
	settle           time.Duration
)

func run(calls int, afterRate bool) error {
	pe, err := symheap.Init(symheap.Config{})
	if err != nil {
		return err
	}
	defer pe.Close()
	if spread {
		pin = pe.Rank() % runtime.NumCPU()
	}
	if pin >= 0 {
		if err := pinTo(pin); err != nil {
			return err
		}
	}
	if xcopy {
		return crossCopy(pe, calls)
	}
	if settle > 0 {
		// PE 0 decides when to stop, and tells PE 1 through the
		// broadcast of a flag, so that both run the same barriers.
		flagv, err := symheap.Malloc[int64](pe, 1)
		if err != nil {
			return err
		}
		stop, err := symheap.Malloc[int64](pe, 1)
		if err != nil {
			return err
		}
		for t := time.Now(); ; {
			for range 1000 {
				if err := pe.Barrier(); err != nil {
					return err
				}
			}
			if pe.Rank() == 0 && time.Since(t) >= settle {
				flagv[0] = 1
			}
			if err := symheap.Broadcast(pe.World(), stop, flagv, 0); err != nil {
				return err
			}
			if stop[0] != 0 {
				break
			}
		}
	}
	if afterRate {
		if err := rate(pe, 2000); err != nil {
			return err
		}
	}
	w := pe.World()
	src, err := symheap.Malloc[int64](pe, elems)
	if err != nil {
		return err
	}
	dst, err := symheap.Malloc[int64](pe, elems)
	if err != nil {
		return err
	}
	barrier := func() error { return pe.Barrier() }
	bcast := func() error { return symheap.Broadcast(w, dst, src, 0) }
	reduce := func() error { return symheap.Reduce(w, dst, src, symheap.OpSum) }
	var figures []string
	line, err := lineTime(pe, calls)
	if err != nil {
		return err
	}
	for _, l := range []struct {
		name string
		f    func() error
	}{{"barrier", barrier}, {"bcast", bcast}, {"reduce", reduce}} {
		for range calls / 10 { // warm up
			if err := l.f(); err != nil {
				return err
			}
		}
		if err := pe.Barrier(); err != nil {
			return err
		}
		t := time.Now()
		for range calls {
			if err := l.f(); err != nil {
				return err
			}
		}
		figures = append(figures, fmt.Sprintf("%s %.3f", l.name, float64(time.Since(t).Nanoseconds())/float64(calls)/1e3))
		if reps > 0 {
			best := time.Duration(1 << 62)
			for range reps {
				t := time.Now()
				for range 100 {
					if err := l.f(); err != nil {
						return err
					}
				}
				best = min(best, time.Since(t))
			}
			figures = append(figures, fmt.Sprintf("%s-best100 %.3f", l.name, float64(best.Nanoseconds())/100/1e3))
		}
		if err := pe.Barrier(); err != nil {
			return err
		}
	}
	after, err := lineTime(pe, calls)
	if err != nil {
		return err
	}
	figures = append(figures, fmt.Sprintf("line %.3f", min(line, after)))
	if pe.Rank() == 0 {
		for _, f := range figures {
			fmt.Println(f, "us")
		}
	}
	return nil
}

// rate runs windows of 64 Isend of 8 B from PE 0 to PE 1, as the
// message-rate benchmark does.
func rate(pe *symheap.PE, windows int) error {
	const window = 64
	buf := make([]byte, 8)
	reqs := make([]*symheap.Request, window)
	for range windows {
		for i := range reqs {
			var err error
			if pe.Rank() == 0 {
				reqs[i], err = pe.Isend(buf, 1, 1)
			} else {
				reqs[i], err = pe.Irecv(buf, 0, 1)
			}
			if err != nil {
				return err
			}
		}
		for _, r := range reqs {
			if _, err := r.Wait(); err != nil {
				return err
			}
		}
	}
	return pe.Barrier()
}

// pingLine is the line lineTime bounces: one word and the rest of its 64
// bytes.
type pingLine struct {
	v atomic.Uint64
	_ [56]byte
}

// lineTime returns the time one cache line takes between PE 0 and PE 1
// in this job, half a round trip in us, over calls round trips (the
// floor of symheap bench, bench_floor.go): where the machine placed the
// two PEs' CPUs this time, which the loops' figures move with.
func lineTime(pe *symheap.PE, calls int) (float64, error) {
	lines, err := symheap.Align[pingLine](pe, 64, 1)
	if err != nil {
		return 0, err
	}
	defer symheap.Free(pe, lines)
	view := symheap.Ptr(pe, lines, 1) // both PEs use PE 1's copy
	if view == nil {
		return 0, fmt.Errorf("no direct view of PE 1's heap: run both PEs on one node")
	}
	l := &view[0]
	var seq uint64
	if err := pe.Barrier(); err != nil {
		return 0, err
	}
	t := time.Now()
	for range calls {
		switch pe.Rank() {
		case 0: // store odd, wait for the next even
			shmsync.StoreRelease64(&l.v, seq+1)
			for l.v.Load() != seq+2 {
				shmsync.Pause()
			}
		case 1: // wait for odd, answer with the next even
			for l.v.Load() != seq+1 {
				shmsync.Pause()
			}
			shmsync.StoreRelease64(&l.v, seq+2)
		}
		seq += 2
	}
	d := time.Since(t)
	return float64(d.Nanoseconds()) / float64(calls) / 2 / 1e3, pe.Barrier()
}

// crossCopy times, on PE 0, copies of size bytes out of PE 1's copy of a
// symmetric buffer right after PE 1 wrote one byte into each of its lines
// (so every line sits modified in PE 1's core's cache), and the same copy
// again at once (the lines now in PE 0's cache). calls copies per size;
// the figures are means in us, less one reading of the clock.
func crossCopy(pe *symheap.PE, calls int) error {
	const most = 64 << 10
	buf, err := symheap.Align[byte](pe, 64, most)
	if err != nil {
		return err
	}
	defer symheap.Free(pe, buf)
	turn, err := symheap.Align[pingLine](pe, 64, 1)
	if err != nil {
		return err
	}
	defer symheap.Free(pe, turn)
	src := symheap.Ptr(pe, buf, 1) // PE 1's copy, for both PEs
	tv := symheap.Ptr(pe, turn, 1)
	if src == nil || tv == nil {
		return fmt.Errorf("no direct view of PE 1's heap: run both PEs on one node")
	}
	t := &tv[0]
	dst := make([]byte, most)
	var seq uint64
	for _, size := range []int{64, 512, 2048, 8192, most} {
		if err := pe.Barrier(); err != nil {
			return err
		}
		var cross, warm time.Duration
		for range calls {
			switch pe.Rank() {
			case 0: // wait for PE 1's lines, copy them twice, hand back
				for t.v.Load() != seq+1 {
					shmsync.Pause()
				}
				t0 := time.Now()
				copy(dst[:size], src[:size])
				t1 := time.Now()
				copy(dst[:size], src[:size])
				t2 := time.Now()
				t3 := time.Now() // the clock's own cost, taken off both
				cross, warm = cross+t1.Sub(t0)-t3.Sub(t2), warm+t2.Sub(t1)-t3.Sub(t2)
				shmsync.StoreRelease64(&t.v, seq+2)
			case 1: // dirty every line, then hand over
				for t.v.Load() != seq {
					shmsync.Pause()
				}
				for i := 0; i < size; i += 64 {
					src[i]++
				}
				shmsync.StoreRelease64(&t.v, seq+1)
			}
			seq += 2
		}
		if pe.Rank() == 0 {
			fmt.Printf("xcopy %d B: %.3f us from the other core, %.3f us in cache\n", size,
				float64(cross.Nanoseconds())/1e3/float64(calls), float64(warm.Nanoseconds())/1e3/float64(calls))
		}
	}
	return pe.Barrier()
}
