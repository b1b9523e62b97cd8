package memhook

import (
	"os"
	"testing"

	"github.com/symheap/symheap/internal/unix"
)

// BenchmarkPublish: what an allocator pays per free to publish it, with
// nobody listening and with one (trivial) subscriber.
func BenchmarkPublish(b *testing.B) {
	b.Run("no-subscriber", func(b *testing.B) {
		m := newMonitor(b)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			m.PublishFree(0x1000, 64)
		}
	})
	b.Run("one-subscriber", func(b *testing.B) {
		m := newMonitor(b)
		n := 0
		defer m.Subscribe(func(Kind, Range) { n++ })()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			m.PublishFree(0x1000, 64)
		}
	})
}

// BenchmarkMunmap: unmap one page of a mapping, unwatched and watched
// through userfaultfd. The difference is how long the unmapping thread waits
// for the reader to read the event (plus the reader's own work, on a
// machine with few cores).
func BenchmarkMunmap(b *testing.B) {
	for _, watched := range []bool{false, true} {
		name := "unwatched"
		if watched {
			name = "watched"
		}
		b.Run(name, func(b *testing.B) {
			m := newMonitor(b)
			if watched {
				if err := m.Userfault(); err != nil {
					b.Skipf("userfaultfd backend unavailable: %v", err)
				}
			}
			const batch = 1024
			page := os.Getpagesize()
			for done := 0; done < b.N; {
				b.StopTimer()
				mp, err := unix.MapAnon(batch * page)
				if err != nil {
					b.Fatal(err)
				}
				if watched {
					if err := m.Watch(RangeOf(mp.Mem)); err != nil {
						b.Fatal(err)
					}
				}
				for i := 0; i < batch; i++ {
					mp.Mem[i*page] = 1
				}
				n := min(batch, b.N-done)
				b.StartTimer()
				for i := 0; i < batch; i++ {
					if i == n {
						b.StopTimer() // the rest of the batch is not counted
					}
					// Every other page first, so that each munmap splits
					// the mapping instead of trimming its end.
					k := (2*i)%batch + (2*i)/batch
					unix.Unmap(unix.Mapping{Mem: mp.Mem[k*page : (k+1)*page]})
				}
				done += n
			}
		})
	}
}
