package msg

import (
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/symheap/symheap/alloc/alloctest"
)

// TestRingAdversarial drives one ring (queue.go) between two
// goroutines over mapped memory: records of random sizes, so that they
// wrap and need skip records, whose payloads are crafted to look like
// valid headers of later positions in every cell. If a payload cell were
// ever read as a record (the invariant of queue.go broken), the
// consumer would see a record out of sequence. The consumer gives cells
// back lazily, as progress does.
func TestRingAdversarial(t *testing.T) {
	const cells = 256
	mem := alloctest.NewRegion(t, lineSize+cells*cellSize)
	tx := &txRing{head: u64At(mem, 0), data: mem[lineSize:], cells: cells, mask: cells - 1}
	rx := &rxRing{head: u64At(mem, 0), data: mem[lineSize:], mask: cells - 1}
	n := 200000
	if testing.Short() {
		n = 20000
	}
	sizeOf := func(i int) uint64 {
		return uint64(rand.New(rand.NewPCG(uint64(i), 9)).IntN(cells/4*cellSize - recHdrSize + 1)) // as the eager limit allows
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < n; i++ {
			size := sizeOf(i)
			nc := cellsFor(size)
			off, ok := tx.reserve(nc)
			for !ok {
				runtime.Gosched()
				off, ok = tx.reserve(nc)
			}
			// Every payload word that starts a cell claims to be a record
			// at that cell's position one and two laps on; the others
			// carry the message number.
			for w := uint64(recHdrSize); w+8 <= recHdrSize+size; w += 8 {
				v := uint64(i)
				if (off+w)%cellSize == 0 {
					pos := tx.tail + (off+w)/cellSize - off/cellSize
					v = word0(pos+cells*(w/8%2+1), 1, recEager)
				}
				binary.LittleEndian.PutUint64(tx.data[off+w:], v)
			}
			tx.commit(off, nc, recEager, uint64(i%(1<<31))|size<<32)
		}
	}()
	var idle int
	for i := 0; i < n; {
		w0, off, ok := rx.peek()
		if !ok {
			if rx.release() || idle%64 == 0 {
				runtime.Gosched()
			}
			idle++
			continue
		}
		if recKind(w0) == recSkip {
			rx.consumed(w0)
			continue
		}
		w1 := rx.w1(off)
		if got := int(uint32(w1)); got != i {
			t.Fatalf("record %d read where record %d was due (cell %d)", got, i, off/cellSize)
		}
		if size := w1 >> 32; size != sizeOf(i) || recCells(w0) != cellsFor(size) {
			t.Fatalf("record %d: %d bytes in %d cells, want %d bytes", i, size, recCells(w0), sizeOf(i))
		}
		rx.consumed(w0)
		if rx.pos-rx.published >= cells/4 {
			rx.release()
		}
		i++
	}
	<-done
}
