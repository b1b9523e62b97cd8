package team

import (
	"bytes"
	"strings"
	"testing"

	"github.com/symheap/symheap/internal/cabi/cabitest"
	"github.com/symheap/symheap/internal/core"
)

// The tags of capi/tests/x_formats.c.
func tag32(n uint32) uint32    { return 0xc0de0000 | n }
func tagByte(line, j int) byte { return byte(line*31 + j*7 + 1) }

// postLines returns the post lines of s in the order of the C side's
// block (post, gather, done).
func postLines(s *teamSlot) []*postLine {
	var ls []*postLine
	for i := range s.post {
		ls = append(ls, &s.post[i])
	}
	ls = append(ls, &s.gather[0], &s.gather[1], &s.done)
	return ls
}

// postBuffer returns a team slot, its other bytes 0xee, whose every post
// line holds its tags (or their complements: what the C side writes),
// and the slot's bytes from its post lines on: the C side's block.
func postBuffer(flipped bool) (all, block []byte) {
	all = bytes.Repeat([]byte{0xee}, int(core.SizeOf[teamSlot]()))
	s := core.View[teamSlot](all)
	for l, pl := range postLines(s) {
		seq, sl := tag32(uint32(0x100+l)), tag32(uint32(0x200+l))
		if flipped {
			seq, sl = ^seq, ^sl
		}
		pl.seq.Store(seq)
		pl.sleepers.Store(sl)
		for j := range pl.data {
			pl.data[j] = tagByte(l, j)
			if flipped {
				pl.data[j] = ^pl.data[j]
			}
		}
	}
	return all, all[core.OffsetIn(s, &s.post):]
}

// TestCFormatsPost: a PE's post lines as this layer writes them through
// its types, read by a C program through the generated declarations
// (struct shmemi_post_block in capi/shmemi_formats.h), which checks every
// line and writes its own, read back here through the types.
func TestCFormatsPost(t *testing.T) {
	prog := cabitest.Build(t, "x_formats", []string{"capi/tests/x_formats.c"})
	_, block := postBuffer(false)
	got, err := cabitest.Exchange(t, prog, block, "post")
	if err != nil {
		t.Fatal(err)
	}
	all, want := postBuffer(true)
	copy(want, got) // the C side's block, in the slot's place
	s := core.View[teamSlot](all)
	for l, pl := range postLines(s) {
		if v, w := pl.seq.Load(), ^tag32(uint32(0x100+l)); v != w {
			t.Errorf("line %d: the C side wrote seq %#x, want %#x", l, v, w)
		}
		if v, w := pl.sleepers.Load(), ^tag32(uint32(0x200+l)); v != w {
			t.Errorf("line %d: the C side wrote sleepers %#x, want %#x", l, v, w)
		}
		for j, b := range pl.data {
			if w := ^tagByte(l, j); b != w {
				t.Errorf("line %d: the C side wrote data[%d] %#x, want %#x", l, j, b, w)
				break
			}
		}
	}
	_, flipped := postBuffer(true)
	if off, differ := cabitest.Diff(got, flipped); differ {
		t.Errorf("the block the C side wrote differs from the Go side's at byte %d", off)
	}

	// The done line before the gather lines, as the C library had them:
	// the test must see it.
	dir := cabitest.Altered(t, "shmemi_formats.h", func(b []byte) []byte {
		b = bytes.Replace(b, []byte("\tstruct shmemi_post_line gather[2]; /* 2048 */\n\tstruct shmemi_post_line done; /* 2176 */\n"),
			[]byte("\tstruct shmemi_post_line done;\n\tstruct shmemi_post_line gather[2];\n"), 1)
		var keep []string
		for _, line := range strings.SplitAfter(string(b), "\n") {
			if !strings.HasPrefix(line, "_Static_assert(") {
				keep = append(keep, line)
			}
		}
		return []byte(strings.Join(keep, ""))
	})
	bad := cabitest.Build(t, "x_formats_bad", []string{"capi/tests/x_formats.c"}, dir)
	_, err = cabitest.Exchange(t, bad, block, "post")
	if err == nil {
		t.Fatal("the C side read post lines laid out otherwise than the Go types and found nothing wrong")
	}
	if !strings.Contains(err.Error(), "line 34 (done) holds seq 0xc0de0120") {
		t.Errorf("the C side failed without naming the done line:\n%v", err)
	}
}
