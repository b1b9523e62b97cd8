package main

// The alloc+free pair workload of alloc/bench_test.go and
// bench/peers/csrc/malloc_bench.c, for `symheap bench`'s alloc test.
//
// A window of W slots holds live blocks. It is first filled with W
// allocations (not timed); then each step draws one 64-bit xorshift number
// r (shifts 13, 7, 17, fixed seed), frees the block in slot (r>>32)%W and
// allocates a new one there of size
//
//	base = lo << (r % 8)
//	size = base + (r>>8) % base
//
// and stores a byte into it. One step is one pair. Every contender sees the
// same sizes in the same order:
//
//	class   lo       sizes           W
//	small   16 B     16 B .. 4 KiB   256
//	large   4 KiB    4 KiB .. 1 MiB  64
//
// The contenders are our allocator components (tlsf, buddy, dlmalloc),
// formatted in this process over a fresh anonymous region aligned to
// alloc.MaxAlign, as the segment provides; SharedAlloc/SharedFree on a PE's
// local shared heap (bench_worker.go); and the C mallocs (glibc, jemalloc,
// mimalloc) in malloc_bench, one process each. Each loop is written out
// for its contender, without closures, so that no contender pays for an
// indirection the others do not.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/symheap/symheap"
	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/internal/unix"
)

const pairSeed = 0x9E3779B97F4A7C15

type pairClass struct {
	name   string
	lo     uint64
	window int
}

var pairClasses = []pairClass{
	{"small", 16, 256},
	{"large", 4096, 64},
}

func pairClassOf(lo int64) (pairClass, bool) {
	for _, c := range pairClasses {
		if int64(c.lo) == lo {
			return c, true
		}
	}
	return pairClass{}, false
}

type xorshift uint64

func (x *xorshift) next() uint64 {
	v := uint64(*x)
	v ^= v << 13
	v ^= v >> 7
	v ^= v << 17
	*x = xorshift(v)
	return v
}

func (c pairClass) size(r uint64) uint64 {
	base := c.lo << (r % 8)
	return base + (r>>8)%base
}

// pairRegion is the region a component manages in the in-process run: big
// enough for the large class's worst case (64 blocks of up to 1 MiB) under
// any component's rounding. It is mapped MAP_NORESERVE, so only the pages
// written cost memory.
const pairRegion = 256 << 20

// componentPairs formats component name over a fresh region and returns
// its ns per pair over pairs pairs of class c.
func componentPairs(name string, c pairClass, pairs int) (float64, error) {
	comp, ok := alloc.Lookup(name)
	if !ok {
		return 0, fmt.Errorf("no allocator component %q (have %v)", name, alloc.Names())
	}
	m, err := unix.MapAnonAligned(pairRegion, alloc.MaxAlign, true)
	if err != nil {
		return 0, fmt.Errorf("map %d bytes for %s: %w", pairRegion, name, err)
	}
	defer unix.Unmap(m)
	mem := m.Mem
	a, err := comp.Format(mem)
	if err != nil {
		return 0, fmt.Errorf("format %s: %w", name, err)
	}
	rng := xorshift(pairSeed)
	slots := make([]alloc.Off, c.window)
	for i := range slots {
		off, err := a.Alloc(c.size(rng.next()), 0)
		if err != nil {
			return 0, fmt.Errorf("%s fill: %w", name, err)
		}
		mem[off] = 1
		slots[i] = off
	}
	w := uint64(len(slots))
	start := time.Now()
	for i := 0; i < pairs; i++ {
		r := rng.next()
		s := (r >> 32) % w
		if err := a.Free(slots[s]); err != nil {
			return 0, fmt.Errorf("%s free: %w", name, err)
		}
		off, err := a.Alloc(c.size(r), 0)
		if err != nil {
			return 0, fmt.Errorf("%s alloc: %w", name, err)
		}
		mem[off] = byte(i)
		slots[s] = off
	}
	return float64(time.Since(start).Nanoseconds()) / float64(pairs), nil
}

// sharedPairs is the workload with SharedAlloc and SharedFree on pe's local
// shared heap; it frees what it allocated.
func sharedPairs(pe *symheap.PE, c pairClass, pairs int) (float64, error) {
	rng := xorshift(pairSeed)
	slots := make([][]byte, c.window)
	defer func() {
		for _, s := range slots {
			symheap.SharedFree(pe, s)
		}
	}()
	for i := range slots {
		s, err := symheap.SharedAlloc[byte](pe, int(c.size(rng.next())))
		if err != nil {
			return 0, err
		}
		s[0] = 1
		slots[i] = s
	}
	w := uint64(len(slots))
	start := time.Now()
	for i := 0; i < pairs; i++ {
		r := rng.next()
		k := (r >> 32) % w
		if err := symheap.SharedFree(pe, slots[k]); err != nil {
			slots[k] = nil
			return 0, err
		}
		s, err := symheap.SharedAlloc[byte](pe, int(c.size(r)))
		if err != nil {
			slots[k] = nil
			return 0, err
		}
		s[0] = byte(i)
		slots[k] = s
	}
	return float64(time.Since(start).Nanoseconds()) / float64(pairs), nil
}

// mallocPeers are the C mallocs of malloc_bench, by binary suffix.
var mallocPeers = []string{"glibc", "jemalloc", "mimalloc"}

// cMallocPairs runs malloc_bench_<name> in dir for pairs pairs of class c
// and returns its ns per pair (measured inside the process).
func cMallocPairs(ctx context.Context, dir, name string, c pairClass, pairs int) (float64, error) {
	bin := filepath.Join(dir, "malloc_bench_"+name)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, c.name, strconv.Itoa(pairs), strconv.Itoa(c.window))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("%s: %v %s", bin, err, strings.TrimSpace(stderr.String()))
	}
	f := strings.Fields(string(out))
	if len(f) != 2 || f[0] != "ns_per_pair" {
		return 0, fmt.Errorf("%s: unexpected output %q", bin, out)
	}
	return strconv.ParseFloat(f[1], 64)
}

// buildMallocPeers builds malloc_bench for the C mallocs into dir with the
// source tree's bench/peers/build-malloc.sh (it installs libjemalloc-dev
// and libmimalloc-dev when missing) and returns the names of the peers it
// has, or why it has none. The malloc harness is not embedded in the
// binary, so building needs the source tree; binaries already in dir are
// used without it.
func buildMallocPeers(ctx context.Context, dir string) ([]string, error) {
	var buildErr error
	if root, ok := sourceRoot(); ok {
		ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
		defer cancel()
		script := filepath.Join(root, "bench", "peers", "build-malloc.sh")
		out, err := exec.CommandContext(ctx, "bash", script, dir).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("%s %s: %v: %s", script, dir, err, lastLines(string(out), 3))
		}
	} else {
		buildErr = fmt.Errorf("bench/peers/build-malloc.sh not found: the C malloc harness is built from the symheap source tree, so run symheap bench inside it")
	}
	var have []string
	for _, n := range mallocPeers {
		if fi, err := os.Stat(filepath.Join(dir, "malloc_bench_"+n)); err == nil && fi.Mode()&0o111 != 0 {
			have = append(have, n)
		}
	}
	if len(have) == 0 {
		if buildErr == nil {
			buildErr = fmt.Errorf("build-malloc.sh built no malloc_bench in %s", dir)
		}
		return nil, buildErr
	}
	return have, nil
}

// sourceRoot finds the symheap source tree: the working directory, the
// executable's directory, or one of their parents holding the module's
// go.mod and bench/peers/build-malloc.sh.
func sourceRoot() (string, bool) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, d := range starts {
		for {
			mod, err := os.ReadFile(filepath.Join(d, "go.mod"))
			if err == nil && strings.Contains(string(mod), "module github.com/symheap/symheap\n") {
				if _, err := os.Stat(filepath.Join(d, "bench", "peers", "build-malloc.sh")); err == nil {
					return d, true
				}
			}
			parent := filepath.Dir(d)
			if parent == d {
				break
			}
			d = parent
		}
	}
	return "", false
}

// lastLines returns the last n non-empty lines of s, joined by " | ".
func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
