package small_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/symheap/symheap/alloc"
	"github.com/symheap/symheap/alloc/small"
)

// FuzzRemote drives two handles on one region, the owner and another
// (another PE's), with operation sequences decoded from the input, against
// a model of the live blocks: after every operation the front end's Check
// passes, Stats counts the model's blocks, and every live block keeps its
// contents. Each operation takes 3 bytes, an opcode and two argument
// bytes:
//
//	op%8 0-2  the owner allocates (sizes mostly small, some large)
//	op%8 3-4  the owner frees the live block the arguments pick
//	op%8 5    the other handle frees it (onto its span's stack)
//	op%8 6    a double free of the block freed last, by either handle:
//	          ErrBadFree, nothing changed
//	op%8 7    a free of an offset inside a live block: ErrBadFree
func FuzzRemote(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 2, 0, 5, 0, 0, 6, 0, 0, 0, 1, 0, 3, 0, 0})
	f.Add([]byte("remote frees and double frees across two handles, mixed"))
	var seq []byte
	for i := range 80 {
		seq = append(seq, 0, byte(i*13), byte(i%3))
	}
	for i := range 80 {
		seq = append(seq, byte(3+2*(i%2)), byte(i*7), 0, 6, byte(i), 0)
	}
	f.Add(seq)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 3*300 {
			data = data[:3*300]
		}
		onOneP(t)
		p := newPair(t, 4<<20)
		type blk struct {
			size uint64
			tag  byte
		}
		live := map[alloc.Off]blk{}
		var last alloc.Off
		haveLast := false
		tag := byte(0)
		offs := func() []alloc.Off {
			o := make([]alloc.Off, 0, len(live))
			for off := range live {
				o = append(o, off)
			}
			slices.Sort(o)
			return o
		}
		free := func(h *small.Heap, off alloc.Off) {
			if err := h.Free(off); err != nil {
				t.Fatalf("free of live %#x: %v", off, err)
			}
			delete(live, off)
			last, haveLast = off, true
		}
		for ; len(data) >= 3; data = data[3:] {
			op, x, y := data[0], data[1], data[2]
			arg := uint64(x) | uint64(y)<<8
			o := offs()
			switch op % 8 {
			case 0, 1, 2:
				size := arg % 3000
				if y&0x80 != 0 {
					size = 4097 + arg%20000
				}
				off, err := p.owner.Alloc(size, 0)
				if err != nil {
					if errors.Is(err, alloc.ErrOutOfMemory) {
						continue
					}
					t.Fatal(err)
				}
				if _, dup := live[off]; dup {
					t.Fatalf("Alloc(%d) = %#x, which is live", size, off)
				}
				tag++
				live[off] = blk{size, tag}
				for i := uint64(0); i < size; i++ {
					p.mem[uint64(off)+i] = tag
				}
			case 3, 4, 5:
				if len(o) == 0 {
					continue
				}
				h := p.owner
				if op%8 == 5 {
					h = p.other
				}
				free(h, o[int(arg)%len(o)])
			case 6:
				if !haveLast {
					continue
				}
				if _, again := live[last]; again {
					continue // handed out again: not a double free now
				}
				h := p.owner
				if x&1 == 1 {
					h = p.other
				}
				before := p.owner.Stats()
				if err := h.Free(last); !errors.Is(err, alloc.ErrBadFree) {
					t.Fatalf("double free of %#x: %v, want ErrBadFree", last, err)
				}
				after := p.owner.Stats()
				before.Failed, after.Failed = 0, 0
				if before != after {
					t.Fatalf("a refused double free changed the heap:\n%+v\n%+v", before, after)
				}
			case 7:
				if len(o) == 0 {
					continue
				}
				off := o[int(arg)%len(o)]
				if live[off].size < 2 {
					continue
				}
				in := off + 1 + alloc.Off(uint64(y)%(live[off].size-1))
				if err := p.other.Free(in); !errors.Is(err, alloc.ErrBadFree) {
					t.Fatalf("free of %#x inside the live block %#x: %v, want ErrBadFree", in, off, err)
				}
			}
			if err := p.owner.Check(); err != nil {
				t.Fatal(err)
			}
			if st := p.owner.Stats(); st.Live != uint64(len(live)) {
				t.Fatalf("Stats.Live %d, model %d", st.Live, len(live))
			}
			for off, b := range live {
				if b.size > 0 && (p.mem[off] != b.tag || p.mem[uint64(off)+b.size-1] != b.tag) {
					t.Fatalf("live block %#x (%d bytes) lost its contents", off, b.size)
				}
			}
		}
	})
}
