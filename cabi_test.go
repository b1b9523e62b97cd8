package symheap

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/symheap/symheap/internal/cabi/cabitest"
	"github.com/symheap/symheap/internal/core"
)

// The tags the cross-language test writes, one per field (the formulas of
// capi/tests/x_formats.c).
func tag32(n uint32) uint32 { return 0xc0de0000 | n }
func tag64(n uint64) uint64 { return 0xc0de000000000000 | n<<32 | n }

type (
	word32 = interface {
		Load() uint32
		Store(uint32)
	}
	word64 = interface {
		Load() uint64
		Store(uint64)
	}
)

// controlWord is one word of the control block's fixed part, reached
// through the Go type.
type controlWord struct {
	name  string
	tag   uint64
	bits  int
	load  func(c *control) uint64
	store func(c *control, v uint64)
}

// flipped is the word the C side writes back: the tag's complement.
func (w controlWord) flipped() uint64 { return ^w.tag & (1<<w.bits - 1) }

// controlWords are every word of control, with its tag.
func controlWords() []controlWord {
	w32 := func(name string, n uint32, f func(c *control) word32) controlWord {
		return controlWord{name, uint64(tag32(n)), 32,
			func(c *control) uint64 { return uint64(f(c).Load()) },
			func(c *control, v uint64) { f(c).Store(uint32(v)) }}
	}
	w64 := func(name string, n uint64, f func(c *control) word64) controlWord {
		return controlWord{name, tag64(n), 64,
			func(c *control) uint64 { return f(c).Load() },
			func(c *control, v uint64) { f(c).Store(v) }}
	}
	ws := []controlWord{
		w32("exitCode", 1, func(c *control) word32 { return &c.exitCode }),
		w32("exitWord", 2, func(c *control) word32 { return &c.exitWord }),
		w32("exitSleepers", 3, func(c *control) word32 { return &c.exitSleepers }),
		w32("watchStop", 4, func(c *control) word32 { return &c.watchStop }),
		w32("exitReady", 5, func(c *control) word32 { return &c.exitReady }),
		{"farLost", tag64(6), 64, func(c *control) uint64 { return uint64(c.farLost.Load()) }, func(c *control, v uint64) { c.farLost.Store(int64(v)) }},
		w32("sig.word", 7, func(c *control) word32 { return &c.sig.word }),
		w32("sig.sleepers", 8, func(c *control) word32 { return &c.sig.sleepers }),
		w32("sleeping", 9, func(c *control) word32 { return &c.sleeping }),
		w64("probe", 10, func(c *control) word64 { return &c.probe }),
	}
	for k := range 2 {
		for j, name := range [...]string{"seq", "call", "kind", "size", "align", "in", "out", "hints"} {
			ws = append(ws, w64(fmt.Sprintf("allocRec[%d].%s", k, name), uint64(16+8*k+j), func(c *control) word64 {
				r := &c.allocRec[k].allocRecord
				return [...]word64{&r.seq, &r.call, &r.kind, &r.size, &r.align, &r.in, &r.out, &r.hints}[j]
			}))
		}
	}
	return ws
}

// controlBuffer returns the fixed part of a control block whose padding
// holds 0xee and whose every word holds its tag, or the tag's complement
// (flipped: what the C side writes).
func controlBuffer(flipped bool) []byte {
	b := bytes.Repeat([]byte{0xee}, core.ControlSize)
	c := core.View[control](b)
	for _, w := range controlWords() {
		v := w.tag
		if flipped {
			v = w.flipped()
		}
		w.store(c, v)
	}
	return b
}

// TestCFormats: the control block's fixed part, the allocation records
// among it, as the runtime writes them through its types, read by a C
// program through the generated declarations (capi/shmemi_formats.h),
// which checks every word and writes its own (the complement of each),
// read back here through the types; and the same program compiled
// against a header whose layout differs fails.
func TestCFormats(t *testing.T) {
	exchange := func(t *testing.T, prog string) error {
		got, err := cabitest.Exchange(t, prog, controlBuffer(false), "control")
		if err != nil {
			return err
		}
		c := core.View[control](got)
		for _, w := range controlWords() {
			if v, want := w.load(c), w.flipped(); v != want {
				t.Errorf("C wrote %#x in %s, want %#x", v, w.name, want)
			}
		}
		// Nothing else: the padding is as the Go side left it.
		if off, differ := cabitest.Diff(got, controlBuffer(true)); differ {
			t.Errorf("the buffer the C side wrote differs from the Go side's at byte %d", off)
		}
		return nil
	}
	prog := cabitest.Build(t, "x_formats", []string{"capi/tests/x_formats.c"})
	if err := exchange(t, prog); err != nil {
		t.Fatal(err)
	}

	// A header whose layout differs from the Go types' (its assertions
	// taken out, which would refuse to compile it) must fail the test.
	noAsserts := regexp.MustCompile(`(?m)^_Static_assert\(.*\n`)
	for _, c := range []struct{ name, from, to, says string }{
		{"in and out swapped", "\tuint64_t in; /* 40 */\n\tuint64_t out; /* 48 */\n", "\tuint64_t out; /* 40 */\n\tuint64_t in; /* 48 */\n", "r->in is"},
		{"allocation records 8 bytes further", "unsigned char pad_132[124];", "unsigned char pad_132[132];", "r->seq is"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := cabitest.Altered(t, "shmemi_formats.h", func(b []byte) []byte {
				return noAsserts.ReplaceAll(bytes.Replace(b, []byte(c.from), []byte(c.to), 1), nil)
			})
			bad := cabitest.Build(t, "x_formats_bad", []string{"capi/tests/x_formats.c"}, dir)
			err := exchange(t, bad)
			if err == nil {
				t.Fatal("the C side read a layout that differs from the Go types' and found nothing wrong")
			}
			if !strings.Contains(err.Error(), c.says) {
				t.Errorf("the C side failed without naming the field (%q):\n%v", c.says, err)
			}
		})
	}
}
