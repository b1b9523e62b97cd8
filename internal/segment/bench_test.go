package segment

import (
	"fmt"
	"sync"
	"testing"
)

// BenchmarkBarrier runs the world barrier between n ranks opened in this
// process (one goroutine each): the barrier's own cost, without process
// start-up or scheduling across processes.
func BenchmarkBarrier(b *testing.B) {
	for _, n := range []int{2, 4} {
		b.Run(fmt.Sprintf("ranks=%d", n), func(b *testing.B) {
			job := fmt.Sprintf("segbench-%d-%d", n, b.N)
			var segs []*Segment
			var mu sync.Mutex
			var wg sync.WaitGroup
			for r := 0; r < n; r++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s, err := Open(Params{Job: job, Rank: r, NPEs: n, HeapSize: 1 << 20, SharedSize: 1 << 20, CBSize: 4096, ForceOffset: true})
					if err != nil {
						b.Error(err)
						return
					}
					mu.Lock()
					segs = append(segs, s)
					mu.Unlock()
				}()
			}
			wg.Wait()
			if b.Failed() {
				return
			}
			b.ResetTimer()
			for _, s := range segs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < b.N; i++ {
						if err := s.Barrier(); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			for _, s := range segs {
				s.Close()
			}
		})
	}
}
