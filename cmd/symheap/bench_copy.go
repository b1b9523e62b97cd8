package main

// The copy test of `symheap bench` (--tests copy): Go's copy (the
// runtime's memmove, which every large Put, Get and message copy of
// symheap uses) against glibc's memcpy (bench/peers' memcpy_bench), per
// size, warm and cold, alternating round by round:
//
//   - warm: the same two private buffers copied again and again, so that
//     sizes that fit a cache measure that cache (as a loop of puts of one
//     buffer does);
//   - cold: each copy takes the next size-byte slice of two pools of
//     coldPool bytes (or 4 x size), so that its source and destination
//     were last touched a whole pool ago: memory, not cache.
//
// Both sides count iterations as the other tests do (benchParams): a
// timed warm-up gives the count, the best of Reps repetitions is the
// figure, in MB/s = 10^6 bytes copied per second.

import (
	"context"
	"fmt"
	"time"

	"github.com/symheap/symheap/bench/peers"
)

// coldPool is the size of each pool of the cold copy (COLD_POOL in
// bench/peers/csrc/memcpy_bench.c): well above the caches of the machines
// this runs on (on the 2-core VM of docs/bench, copies from pools of 64
// MiB and more run at memory speed).
const coldPool = 256 << 20

// goCopyBW measures Go's copy at each size, warm or cold (with pools of
// pool bytes, or 4 x the largest size), in this process.
func goCopyBW(p benchParams, sizes []int64, cold bool, pool int64) []peers.Result {
	big := maxSize(sizes)
	var dst, src []byte
	if cold {
		pool := max(pool, 4*big)
		dst, src = touched(pool), touched(pool)
	} else {
		dst, src = touched(big), touched(big)
	}
	metric := "copy_bw"
	if cold {
		metric = "copy_cold_bw"
	}
	var out []peers.Result
	for _, s := range sizes {
		if s <= 0 {
			continue
		}
		d, sr := dst[:s], src[:s]
		loop := func(n int) {
			for i := 0; i < n; i++ {
				copy(d, sr)
			}
		}
		if cold {
			slots, slot := int64(len(dst))/s, int64(0)
			loop = func(n int) {
				for i := 0; i < n; i++ {
					off := slot * s
					copy(dst[off:off+s], src[off:off+s])
					if slot++; slot == slots {
						slot = 0
					}
				}
			}
		}
		per := timeLoop(p.warmupCount(s), loop)
		n := p.timedCount(per)
		best := per
		for r := 0; r < p.Reps; r++ {
			best = min(best, timeLoop(n, loop))
		}
		out = append(out, peers.Result{Harness: ourHarness, Metric: metric, Size: s, Value: float64(s) / best / 1e6, Unit: "MB/s", PEs: 1})
	}
	return out
}

// copySection: Go copy and glibc memcpy, warm and cold.
func (r *runner) copySection(s *section) {
	s.Title, s.Unit, s.Better, s.PEs = "Copy bandwidth", "MB/s", "higher", 0
	p := r.params
	sizes := r.copySizes
	pool := int64(coldPool)
	if r.quick {
		pool = 16 << 20 // a quick run checks the plumbing, not the memory
	}
	s.What = fmt.Sprintf("Go copy (runtime memmove) and glibc memcpy between private buffers, one process; warm: the same buffers again and again; "+
		"cold: the next slice of two pools of %d MiB (glibc: %d MiB) each time; MB/s = 10^6 B/s", pool>>20, coldPool>>20)
	s.Series = []*series{
		{Label: "Go copy, warm", Column: "Go warm", Ours: true, Harness: ourHarness, Metric: "copy_bw"},
		{Label: "Go copy, cold", Column: "Go cold", Ours: true, Harness: ourHarness, Metric: "copy_cold_bw"},
	}
	s.units = append(s.units, &runUnit{label: "Go copy", ours: true, feeds: []int{0, 1},
		run: func(ctx context.Context) ([]peers.Result, error) {
			rs := goCopyBW(p, sizes, false, pool)
			return append(rs, goCopyBW(p, sizes, true, pool)...), ctx.Err()
		}})
	if r.peers {
		s.Series = append(s.Series,
			&series{Label: "glibc memcpy, warm", Column: "memcpy warm", Harness: peers.Memcpy, Metric: "memcpy_bw"},
			&series{Label: "glibc memcpy, cold", Column: "memcpy cold", Harness: peers.Memcpy, Metric: "memcpy_cold_bw"})
		u := r.peerUnit("C memcpy", peers.Memcpy, []string{"memcpy_bw", "memcpy_cold_bw"}, 0, sizes)
		u.feeds = []int{2, 3}
		s.units = append(s.units, u)
		s.Ratios = append(s.Ratios, ratioCol{Num: 0, Den: 2, Column: "warm x memcpy"}, ratioCol{Num: 1, Den: 3, Column: "cold x memcpy"})
	}
}

// timeLoop runs loop(n) and returns the seconds per iteration.
func timeLoop(n int, loop func(int)) float64 {
	t0 := time.Now()
	loop(n)
	return time.Since(t0).Seconds() / float64(n)
}
