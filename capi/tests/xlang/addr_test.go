// Package xlang holds the cross-language test of address translation:
// the C library's (shmemi_addr in capi/shmem_internal.h and its slow
// cases in capi/addr.c) against the Go runtime's (core.Space.Target), on
// the same layout and the same inputs. The formats' own cross-language
// tests are with their Go types (the root's TestCFormats, internal/team's
// TestCFormatsPost).
package xlang

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/symheap/symheap/internal/cabi/cabitest"
	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/segment"
)

// Kinds of result: an address, or the kind of the error.
const (
	errPE       = "err: bad PE"         // "PE n does not exist"
	errNotSym   = "err: not symmetric"  // "not symmetric", "run past the end"
	errNoStatic = "err: static, no way" // "static data, which PE p cannot reach"
)

// kindOf reads the C side's line: "ok ADDR" as it is, an error as its kind.
func kindOf(line string) string {
	switch {
	case strings.HasPrefix(line, "ok "):
		return line
	case strings.Contains(line, "does not exist"):
		return errPE
	case strings.Contains(line, "are not symmetric"), strings.Contains(line, "run past the end"):
		return errNotSym
	case strings.Contains(line, "static data, which PE"):
		return errNoStatic
	}
	return "unknown: " + line
}

func okAt(a uintptr) string { return fmt.Sprintf("ok %#x", a) }

// input is one translation: the n bytes at p, for PE pe. Static data are
// C's alone (the Go runtime has none): their expected result is the
// test's model (static), and Go's translator is not asked.
type input struct {
	name   string
	ptr    core.Ptr // in the segment, or Go memory
	addr   uintptr  // static data (fake windows: C only does arithmetic on them)
	n      uint64
	pe     int
	static string // the expected result of static data; "" for the heap
	// cOnly: the C library takes this address, the Go translator does
	// not (an address in the writable alias of protected mode, which
	// shmemi_locate accepts as a copy of a PE's heap): the C result is
	// this, and Go's a refusal.
	cOnly string
}

// at is the input's address as a number.
func (x input) at() uintptr {
	if x.ptr != nil {
		return uintptr(x.ptr)
	}
	return x.addr
}

// TestCAddrMatchesGo runs the C library's translation and the Go
// runtime's on the edges of a 4-PE layout seen from PE 1: the first and
// last byte of this PE's heap and of others', the whole heap, ranges
// that straddle a heap's end or run past it, the bytes just outside the
// partitions, Go memory, PEs -1 and 4, static data (first, last byte,
// straddling, a peer without a window, an address in a peer's window),
// with and without the protected mode's writable alias.
func TestCAddrMatchesGo(t *testing.T) {
	prog := cabitest.Build(t, "x_addr", []string{"capi/tests/x_addr.c", "capi/addr.c"})
	for _, protect := range []bool{false, true} {
		t.Run(fmt.Sprintf("protect=%v", protect), func(t *testing.T) { compare(t, prog, protect) })
	}
}

func compare(t *testing.T, prog string, protect bool) {
	const npes, me = 4, 1
	seg, err := segment.Open(segment.Params{
		Job:  fmt.Sprintf("xlang-%d-%d", os.Getpid(), time.Now().UnixNano()),
		Rank: me, NPEs: npes, Local: []int{me}, HeapSize: 1 << 20, SharedSize: 1 << 20,
		CBSize: core.CBSize(npes), Allocator: "test", Protect: protect,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := seg.Close(); err != nil {
			t.Error(err)
		}
	})
	sp := core.NewSpace(seg, me, npes)
	l := sp.Lay
	basePtr, _ := core.SliceData(sp.Mem())
	wbasePtr, _ := core.SliceData(sp.WMem())
	base, wbase := uintptr(basePtr), uintptr(wbasePtr)
	if protect && wbase == base {
		t.Fatal("protected mode without a writable alias")
	}
	heap := func(pe int, off uint64) core.Ptr { return core.Add(basePtr, l.PartOff+uint64(pe)*l.PartStride+off) }
	H := l.HeapSize

	// Static data: fake windows (C only does arithmetic on them), far
	// from the segment; PE 2 has none.
	const size = 8192
	lo := uintptr(0x10000000)
	peers := []uintptr{0x20000000, lo, 0, 0x40000000}
	for _, w := range append(peers, lo) {
		if w != 0 && w+size > base && w < base+uintptr(len(sp.Mem())) {
			t.Fatalf("the static windows overlap the segment at %#x", base)
		}
	}
	var goVar uint64
	ins := []input{
		{name: "own heap, first byte", ptr: heap(me, 0), n: 1, pe: 2},
		{name: "own heap, first byte, self", ptr: heap(me, 0), n: 1, pe: me},
		{name: "own heap, last byte", ptr: heap(me, H-1), n: 1, pe: 3},
		{name: "own heap, last word", ptr: heap(me, H-8), n: 8, pe: 0},
		{name: "own heap, whole", ptr: heap(me, 0), n: H, pe: 0},
		{name: "own heap, no bytes at the start", ptr: heap(me, 0), n: 0, pe: 3},
		{name: "own heap, no bytes at the end", ptr: heap(me, H), n: 0, pe: 3},
		{name: "own heap, straddling the end", ptr: heap(me, H-4), n: 8, pe: 0},
		{name: "own heap, past the end", ptr: heap(me, 0), n: H + 1, pe: 0},
		{name: "own heap, PE -1", ptr: heap(me, 0), n: 1, pe: -1},
		{name: "own heap, PE npes", ptr: heap(me, 0), n: 1, pe: npes},
		{name: "PE 0's heap, first byte", ptr: heap(0, 0), n: 1, pe: 3},
		{name: "PE 0's heap, last byte, self", ptr: heap(0, H-1), n: 1, pe: me},
		{name: "PE 2's heap, straddling the end", ptr: heap(2, H-1), n: 2, pe: 0},
		{name: "last PE's heap, last byte", ptr: heap(npes-1, H-1), n: 1, pe: 2},
		{name: "last PE's heap, first byte of its shared heap", ptr: heap(npes-1, l.SharedOff), n: 1, pe: 2},
		{name: "past the last partition", ptr: heap(npes, 0), n: 1, pe: 0},
		{name: "before the first partition", ptr: core.Add(basePtr, l.PartOff-1), n: 1, pe: 0},
		{name: "the segment's header", ptr: basePtr, n: 8, pe: 0},
		{name: "Go memory", ptr: core.AddrOf(&goVar), n: 8, pe: 0},
		{name: "own heap, PE npes, straddling", ptr: heap(me, H-1), n: 2, pe: npes},

		{name: "static, first byte", addr: lo, n: 1, pe: 0, static: okAt(peers[0])},
		{name: "static, first byte, self", addr: lo, n: 1, pe: me, static: okAt(lo)},
		{name: "static, last byte", addr: lo + size - 1, n: 1, pe: 3, static: okAt(peers[3] + size - 1)},
		{name: "static, whole", addr: lo, n: size, pe: 3, static: okAt(peers[3])},
		{name: "static, straddling the end", addr: lo + size - 4, n: 8, pe: 0, static: errNotSym},
		{name: "static, past the end", addr: lo + size, n: 1, pe: 0, static: errNotSym},
		{name: "static, a PE without a window", addr: lo + 16, n: 8, pe: 2, static: errNoStatic},
		{name: "static, PE npes", addr: lo, n: 1, pe: npes, static: errPE},
		{name: "static, PE -1", addr: lo, n: 1, pe: -1, static: errPE},
		{name: "static, in PE 3's window", addr: peers[3] + 100, n: 4, pe: 0, static: okAt(peers[0] + 100)},
	}
	if protect {
		alias := func(pe int, off uint64) core.Ptr { return core.Add(wbasePtr, l.PartOff+uint64(pe)*l.PartStride+off) }
		ins = append(ins,
			input{name: "alias of PE 2's heap", ptr: alias(2, 64), n: 8, pe: 3, cOnly: okAt(uintptr(alias(3, 64)))},
			input{name: "alias of PE 2's heap, self", ptr: alias(2, 64), n: 8, pe: me, cOnly: okAt(uintptr(heap(me, 64)))},
		)
	}

	// The C side, all at once.
	var in strings.Builder
	fmt.Fprintf(&in, "L %#x %#x %#x %#x %#x %d %d %#x %#x\nP", base, wbase, l.PartOff, l.PartStride, H, me, npes, lo, size)
	for _, p := range peers {
		fmt.Fprintf(&in, " %#x", p)
	}
	in.WriteString("\n")
	for _, x := range ins {
		fmt.Fprintf(&in, "Q %#x %d %d\n", x.at(), x.n, x.pe)
	}
	cmd := exec.Command(prog)
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the C side: %v", err)
	}
	var lines []string
	for sc := bufio.NewScanner(strings.NewReader(string(out))); sc.Scan(); {
		lines = append(lines, sc.Text())
	}
	if len(lines) != len(ins) {
		t.Fatalf("the C side answered %d of %d inputs:\n%s", len(lines), len(ins), out)
	}

	for i, x := range ins {
		c := kindOf(lines[i])
		var g string
		switch {
		case x.static != "":
			g = x.static
		default:
			r, ok := sp.Target(x.ptr, x.n, x.pe)
			switch {
			case ok:
				g = okAt(uintptr(r))
			case uint(x.pe) >= npes:
				g = errPE
			default:
				g = errNotSym
			}
		}
		if x.cOnly != "" {
			if g != errNotSym || c != x.cOnly {
				t.Errorf("%s (%d bytes at %#x for PE %d): C %s (want %s), Go %s (want %s)", x.name, x.n, x.at(), x.pe, c, x.cOnly, g, errNotSym)
			}
			continue
		}
		if c != g {
			t.Errorf("%s (%d bytes at %#x for PE %d): C %s, Go %s (C said %q)", x.name, x.n, x.at(), x.pe, c, g, lines[i])
		}
	}
}
