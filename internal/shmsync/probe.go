package shmsync

import (
	"math"
	"sync/atomic"
	"time"
)

// # The transfer time, measured between PEs
//
// The pacing's transfer time (Machine.Line) is best measured between two
// PEs of the node, through their shared memory, right after they meet:
// the same kind of transfer the waits are for, between processes the
// kernel has placed on cores of their own by then. Measured inside one
// process (pingPong), by two threads at the moment every PE of the job
// starts, it often found no second core free (4 threads on 2 cores), and
// half of 2-PE jobs on 2 cores then ran on the default (defaultLine):
// budgets of about twice the polls, and messages and barriers that
// looked at their peer's line later than they need (TransferPolls,
// SettlePolls). So Init defers the measurement (DeferLine), the node's
// first two PEs measure it with ProbeLine and every PE of the node
// adopts the result (SetLine).

// probeDone marks the probe word's final value: probeDone | the transfer
// time in ns (0: not measured).
const probeDone = 1 << 63

// probeReady is the follower's mark that it has come; the leader's first
// bounce stores the next odd value.
const probeReady = 2

// Probe rounds: blocks of round trips, the best block counts (a block
// that met a preemption or an interrupt is slower, never faster).
const (
	probeRounds = 32
	probeBlocks = 8
)

// DeferLine tells the pacing that the transfer time will come from
// SetLine: until then the budgets use the default, and nothing measures
// it inside this process. Init calls it before anything waits.
func DeferLine() {
	machineMu.Lock()
	defer machineMu.Unlock()
	if !lineTried {
		machine.Line, machine.Static, lineTried = 0, true, true
	}
	plans.Store(nil)
}

// SetLine sets the transfer time the pacing uses (a measurement by
// ProbeLine) and recomputes the budgets. Layers that copied a figure
// derived from it (TransferPolls, SettlePolls) read it again themselves.
func SetLine(d time.Duration) {
	if d <= 0 {
		return
	}
	calibrate(false) // Poll and Yield, if nothing measured them yet
	machineMu.Lock()
	machine.Line, machine.Static, lineTried = d, false, true
	machineMu.Unlock()
	plans.Store(nil)
}

// ProbeLine measures the transfer time of one cache line between this
// process and another that calls it with the same word of shared memory
// (zero before either starts) at about the same moment, lead in one of
// them and not in the other. The follower marks the word when it comes
// (probeReady); the leader waits for that for up to arrive, then bounces
// the word probeRounds times per block, probeBlocks blocks, and takes
// half the round trip of the best block. It then stores the result in the
// word, which ends the follower's loop and gives the result to the
// follower and to any other process waiting in ProbeResult. The leader
// gives up after arrive plus limit (the peer has no core now, or is
// gone): ok is false in both then, and the word says so. It takes some
// 40 µs on a machine whose transfers take 70 ns.
func ProbeLine(w *atomic.Uint64, lead bool, arrive, limit time.Duration) (d time.Duration, ok bool) {
	start := time.Now()
	if !lead {
		w.CompareAndSwap(0, probeReady)
		for i := 1; ; i++ {
			switch v := w.Load(); {
			case v&probeDone != 0:
				return probeValue(v)
			case v&1 == 1:
				StoreRelease64(w, v+1)
			default:
				Pause()
			}
			// The leader gives up in time; this side waits for its
			// verdict, unless the leader is gone.
			if i&255 == 0 && time.Since(start) > 2*(arrive+limit) {
				return 0, false
			}
		}
	}
	best := time.Duration(math.MaxInt64)
	v := uint64(probeReady)
	for i := 1; w.Load() != v; i++ {
		Pause()
		if i&255 == 0 && time.Since(start) > arrive {
			StoreRelease64(w, probeDone)
			return 0, false
		}
	}
	start = time.Now()
blocks:
	for range probeBlocks {
		t := time.Now()
		for range probeRounds {
			StoreRelease64(w, v+1)
			for i := 1; w.Load() != v+2; i++ {
				Pause()
				if i&255 == 0 && time.Since(start) > limit {
					break blocks
				}
			}
			v += 2
		}
		best = min(best, time.Since(t))
	}
	if best != time.Duration(math.MaxInt64) {
		d = max(best/(2*probeRounds), time.Nanosecond)
	}
	StoreRelease64(w, probeDone|uint64(d))
	return d, d > 0
}

// ProbeResult waits, for at most limit, for the result of a ProbeLine on
// w by two other processes, without taking a core from them for long.
func ProbeResult(w *atomic.Uint64, limit time.Duration) (time.Duration, bool) {
	start := time.Now()
	for {
		if v := w.Load(); v&probeDone != 0 {
			return probeValue(v)
		}
		if time.Since(start) > limit {
			return 0, false
		}
		time.Sleep(Nap)
	}
}

func probeValue(v uint64) (time.Duration, bool) {
	d := time.Duration(v &^ probeDone)
	return d, d > 0
}
