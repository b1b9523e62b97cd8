// Command pipeline passes records between PEs without copying them: the
// producers build each record in their local shared heap and send its
// position (a SharedPtr: the record's address itself when the job has the
// same-address mapping) to a consumer in an 8-byte message; the consumer
// works on the record where it lies and frees it into the producer's heap.
// At the end the consumers report to PE 0, which checks every record was
// seen exactly once with the right contents.
//
//	shrun -n 4 ./examples/pipeline
//
// The first half of the PEs produce, the others consume (one producer and
// one consumer with two PEs).
//
// It needs every PE on one node: a record lives in its producer's local
// shared heap, which only the PEs of the producer's node can reach, and
// pipeline says so and exits with status 1 in a job on several nodes.
package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"time"
	"unsafe"

	"github.com/symheap/symheap"
)

// record is plain data: it may live in shared memory.
type record struct {
	Seq      int64 // number of the record at its producer
	Producer int64
	Values   [14]float64
}

// Tags of the messages.
const (
	tagRecord = 1 // 8 bytes: the SharedPtr of a record
	tagDone   = 2 // empty: the producer has no more records
	tagTotals = 3 // a consumer's totals, to PE 0
)

const perProducer = 5000

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "pipeline:", err)
		os.Exit(1)
	}
}

func run() error {
	pe, err := symheap.Init(symheap.Config{})
	if err != nil {
		return err
	}
	defer pe.Close()
	me, n := pe.Rank(), pe.Size()
	if n < 2 {
		return errors.New("needs at least 2 PEs (shrun -n 4 ./examples/pipeline)")
	}
	if pe.Nodes() > 1 {
		return fmt.Errorf("the job runs on %d nodes, and pipeline needs every PE on one: its records live in the producers' local shared heaps, which only the PEs of their node can reach", pe.Nodes())
	}
	producers := n / 2
	var t totals
	if me < producers {
		err = produce(pe, me, producers, n)
	} else {
		t, err = consume(pe, producers)
	}
	if err != nil {
		return fmt.Errorf("PE %d: %w", me, err)
	}
	return report(pe, producers, t)
}

// value is what producer p puts at index j of record seq.
func value(p, seq, j int) float64 { return float64(p*1_000_003+seq) + float64(j)/16 }

// produce builds records and hands each to a consumer, round robin.
func produce(pe *symheap.PE, me, producers, n int) error {
	consumers := n - producers
	var msg [8]byte
	for seq := 0; seq < perProducer; seq++ {
		rec, err := allocRecord(pe)
		if err != nil {
			return err
		}
		r := &rec[0]
		r.Seq, r.Producer = int64(seq), int64(me)
		for j := range r.Values {
			r.Values[j] = value(me, seq, j)
		}
		p, err := symheap.SharedPtrOf(pe, rec)
		if err != nil {
			return err
		}
		if seq == 0 {
			fmt.Printf("PE %d (producer): first record at %p, sent as %#x\n", me, r, uint64(p))
		}
		binary.LittleEndian.PutUint64(msg[:], uint64(p))
		if err := pe.Send(msg[:], producers+(me+seq)%consumers, tagRecord); err != nil {
			return err
		}
	}
	for c := producers; c < n; c++ {
		if err := pe.Send(nil, c, tagDone); err != nil {
			return err
		}
	}
	return nil
}

// allocRecord takes a record from this PE's shared heap, waiting for the
// consumers to free some if it is full.
func allocRecord(pe *symheap.PE) ([]record, error) {
	for tries := 0; ; tries++ {
		rec, err := symheap.SharedAlloc[record](pe, 1)
		if err == nil || !errors.Is(err, symheap.ErrOutOfMemory) || tries == 10000 {
			return rec, err
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// totals is what a consumer saw.
type totals struct {
	Count, SeqSum int64
	Sum           float64
}

// consume works on records until every producer is done.
func consume(pe *symheap.PE, producers int) (totals, error) {
	var t totals
	var msg [8]byte
	for done := 0; done < producers; {
		st, err := pe.Recv(msg[:], symheap.AnySource, symheap.AnyTag)
		if err != nil {
			return t, err
		}
		if st.Tag == tagDone {
			done++
			continue
		}
		// The record itself, where the producer built it: no copy.
		p := symheap.SharedPtr(binary.LittleEndian.Uint64(msg[:]))
		rec, err := symheap.SharedAt[record](pe, p, 1)
		if err != nil {
			return t, err
		}
		r := &rec[0]
		if t.Count == 0 {
			fmt.Printf("PE %d (consumer): first record at %p, from PE %d\n", pe.Rank(), r, st.Source)
		}
		if r.Producer != int64(st.Source) {
			return t, fmt.Errorf("record at %#x says producer %d, the message came from PE %d", uint64(p), r.Producer, st.Source)
		}
		for j, v := range r.Values {
			if v != value(int(r.Producer), int(r.Seq), j) {
				return t, fmt.Errorf("record %d of PE %d: value %d is %v", r.Seq, r.Producer, j, v)
			}
			t.Sum += v
		}
		t.Count++
		t.SeqSum += r.Seq
		// Free it into the producer's heap.
		if err := symheap.SharedFree(pe, rec); err != nil {
			return t, err
		}
	}
	return t, nil
}

// report sends the consumers' totals to PE 0, which checks them.
func report(pe *symheap.PE, producers int, t totals) error {
	me, n := pe.Rank(), pe.Size()
	const sz = int(unsafe.Sizeof(totals{}))
	if me >= producers {
		var b [sz]byte
		binary.LittleEndian.PutUint64(b[0:], uint64(t.Count))
		binary.LittleEndian.PutUint64(b[8:], uint64(t.SeqSum))
		binary.LittleEndian.PutUint64(b[16:], math.Float64bits(t.Sum))
		if err := pe.Send(b[:], 0, tagTotals); err != nil {
			return err
		}
	}
	if me == 0 {
		var all totals
		for c := producers; c < n; c++ {
			var b [sz]byte
			if _, err := pe.Recv(b[:], c, tagTotals); err != nil {
				return err
			}
			all.Count += int64(binary.LittleEndian.Uint64(b[0:]))
			all.SeqSum += int64(binary.LittleEndian.Uint64(b[8:]))
			all.Sum += math.Float64frombits(binary.LittleEndian.Uint64(b[16:]))
		}
		var want totals
		for p := 0; p < producers; p++ {
			for seq := 0; seq < perProducer; seq++ {
				want.Count++
				want.SeqSum += int64(seq)
				for j := 0; j < len(record{}.Values); j++ {
					want.Sum += value(p, seq, j)
				}
			}
		}
		if all.Count != want.Count || all.SeqSum != want.SeqSum || math.Abs(all.Sum-want.Sum) > 1e-6*want.Sum {
			return fmt.Errorf("consumers saw %+v, want %+v", all, want)
		}
		mode := "offset translation (SharedPtr is an offset)"
		if pe.SameAddress() {
			mode = "same address in every PE (SharedPtr is the pointer)"
		}
		fmt.Printf("pipeline: ok: %d records from %d producers to %d consumers, none copied; %s\n",
			all.Count, producers, n-producers, mode)
	}
	// Every block went back to its producer's heap.
	if err := pe.Barrier(); err != nil {
		return err
	}
	return pe.CheckHeaps()
}
