package main

// The copy test of `symheap bench` (--tests copy): Go's copy (the
// runtime's memmove), symheap's copy of large blocks (internal/memcopy,
// which large Puts, Gets and message copies use) and glibc's memcpy
// (bench/peers' memcpy_bench), per size, three ways, alternating round by
// round:
//
//   - warm: the same two private buffers copied again and again, so that
//     sizes that fit a cache measure that cache (as a loop of puts of one
//     buffer does);
//   - odd: warm, with the destination 8 bytes past a 16-byte boundary
//     (a copy into s[1:] of an int64 slice), where the runtime's memmove
//     changes method;
//   - cold: each copy takes the next size-byte slice of two pools of
//     coldPool bytes (or 4 x the largest size), so that its source and
//     destination were last touched a whole pool ago: memory, not cache.
//
// Every side counts iterations as the other tests do (benchParams): a
// timed warm-up gives the count, the best of Reps repetitions is the
// figure, in MB/s = 10^6 bytes copied per second.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/symheap/symheap/bench/peers"
	"github.com/symheap/symheap/internal/memcopy"
)

// coldPool is the size of each pool of the cold copy (COLD_POOL in
// bench/peers/csrc/memcpy_bench.c): well above the caches of the machines
// this runs on (on the 2-core VM of docs/bench, copies from pools of 64
// MiB and more run at memory speed).
const coldPool = 256 << 20

// copyModes are the three ways, with their metric suffixes.
var copyModes = []struct{ name, suffix string }{{"warm", ""}, {"odd", "_odd"}, {"cold", "_cold"}}

// copyBufs are the buffers of the Go side of the copy test: two pools,
// allocated and touched once per run and shared by every unit and round,
// so that no unit pays for (or runs beside) another's allocation and
// garbage collection. Warm copies use the pools' first bytes, odd ones
// the destination pool from byte 8, cold ones every slice in turn.
type copyBufs struct{ dst, src []byte }

func newCopyBufs(sizes []int64, pool int64) *copyBufs {
	n := max(pool, 4*maxSize(sizes)) + 64
	return &copyBufs{dst: touched(n), src: touched(n)}
}

// goCopyBW measures one copier (Go's copy, or memcopy.Bytes when ours)
// at each size in one mode, in this process.
func goCopyBW(p benchParams, sizes []int64, mode string, ours bool, b *copyBufs) []peers.Result {
	dst, src := b.dst, b.src
	if mode == "odd" {
		dst = dst[8:]
	}
	cp := func(d, s []byte) { copy(d, s) }
	metric := "gocopy"
	if ours {
		cp, metric = func(d, s []byte) { memcopy.Bytes(d, s) }, "copy"
	}
	for _, m := range copyModes {
		if m.name == mode {
			metric += m.suffix + "_bw"
		}
	}
	var out []peers.Result
	for _, s := range sizes {
		if s <= 0 {
			continue
		}
		d, sr := dst[:s], src[:s]
		loop := func(n int) {
			for i := 0; i < n; i++ {
				cp(d, sr)
			}
		}
		if mode == "cold" {
			slots, slot := int64(len(dst)-64)/s, int64(0)
			loop = func(n int) {
				for i := 0; i < n; i++ {
					off := slot * s
					cp(dst[off:off+s], src[off:off+s])
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

// copySection: Go copy, symheap's copy and glibc memcpy, warm, odd and
// cold. The units alternate: Go, glibc, ours, Go, glibc, ours...
func (r *runner) copySection(s *section) {
	s.Title, s.Unit, s.Better, s.PEs = "Copy bandwidth", "MB/s", "higher", 0
	p := r.params
	sizes := r.copySizes
	pool := int64(coldPool)
	if r.quick {
		pool = 16 << 20 // a quick run checks the plumbing, not the memory
	}
	s.What = fmt.Sprintf("Go copy (runtime memmove), symheap's copy (internal/memcopy) and glibc memcpy between private buffers, one process; "+
		"warm: the same buffers again and again; odd: warm, destination 8 bytes off a 16-byte boundary; "+
		"cold: the next slice of two pools of %d MiB (glibc: %d MiB) each time; MB/s = 10^6 B/s", pool>>20, coldPool>>20)
	rep, from := memcopy.Rule()
	var parts []string
	if memcopy.Vector() {
		parts = append(parts, fmt.Sprintf("64-byte vector moves (AVX-512) from %d B to %d KiB", memcopy.Small, memcopy.VecMax>>10))
	}
	if below := memcopy.VectorBelow(); below != 0 {
		parts = append(parts, fmt.Sprintf("64-byte vector moves from %d MiB to %.1f MiB (a quarter of the L3, AMD), streaming stores (the runtime's) above", memcopy.Large>>20, float64(below)/(1<<20)))
	}
	if rep {
		parts = append(parts, fmt.Sprintf("REP MOVSB for a destination off a 16-byte boundary from %d MiB to %.1f MiB, streaming stores from %.1f MiB (glibc's non-temporal threshold)",
			memcopy.Large>>20, float64(from)/(1<<20), float64(from)/(1<<20)))
	}
	if len(parts) == 0 {
		s.Notes = append(s.Notes, "symheap's copy on this CPU: the runtime's memmove at every size (neither the vector nor the REP MOVSB rule applies)")
	} else {
		s.Notes = append(s.Notes, "symheap's copy on this CPU: "+strings.Join(parts, "; ")+"; else the runtime's memmove")
	}
	idx := map[string]int{}
	for _, m := range copyModes {
		for _, c := range []struct{ label, col, metric string }{
			{"Go copy", "Go", "gocopy"}, {"symheap copy", "ours", "copy"},
		} {
			s.Series = append(s.Series, &series{Label: c.label + ", " + m.name, Column: m.name + " " + c.col, Ours: true, Harness: ourHarness, Metric: c.metric + m.suffix + "_bw"})
			idx[c.metric+m.suffix] = len(s.Series) - 1
		}
	}
	var bufs *copyBufs // made by the first unit that runs
	unit := func(label string, ours bool) *runUnit {
		var feeds []int
		for _, m := range copyModes {
			if ours {
				feeds = append(feeds, idx["copy"+m.suffix])
			} else {
				feeds = append(feeds, idx["gocopy"+m.suffix])
			}
		}
		return &runUnit{label: label, ours: true, feeds: feeds, run: func(ctx context.Context) ([]peers.Result, error) {
			if bufs == nil {
				bufs = newCopyBufs(sizes, pool)
			}
			var rs []peers.Result
			for _, m := range copyModes {
				rs = append(rs, goCopyBW(p, sizes, m.name, ours, bufs)...)
				if ctx.Err() != nil {
					break
				}
			}
			return rs, ctx.Err()
		}}
	}
	s.units = append(s.units, unit("Go copy", false))
	if r.peers {
		var tests []string
		var feeds []int
		for _, m := range copyModes {
			metric := "memcpy" + m.suffix + "_bw"
			s.Series = append(s.Series, &series{Label: "glibc memcpy, " + m.name, Column: m.name + " glibc", Harness: peers.Memcpy, Metric: metric})
			idx["glibc"+m.suffix] = len(s.Series) - 1
			tests, feeds = append(tests, metric), append(feeds, len(s.Series)-1)
		}
		u := r.peerUnit("C memcpy", peers.Memcpy, tests, 0, sizes)
		u.feeds = feeds
		s.units = append(s.units, u)
		for _, m := range copyModes {
			s.Ratios = append(s.Ratios,
				ratioCol{Num: idx["gocopy"+m.suffix], Den: idx["glibc"+m.suffix], Column: m.name + " Go x glibc"},
				ratioCol{Num: idx["copy"+m.suffix], Den: idx["glibc"+m.suffix], Column: m.name + " ours x glibc"})
		}
	}
	s.units = append(s.units, unit("symheap copy", true))
}

// timeLoop runs loop(n) and returns the seconds per iteration.
func timeLoop(n int, loop func(int)) float64 {
	t0 := time.Now()
	loop(n)
	return time.Since(t0).Seconds() / float64(n)
}
