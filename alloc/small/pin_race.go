//go:build race

package small

import (
	"sync"
	"sync/atomic"
)

// Under the race detector pinning is a mutex and every goroutine is P 0:
// the detector cannot see the exclusion procPin gives.
type pinState struct{ mu sync.Mutex }

func (p *pinState) pin() int { p.mu.Lock(); return 0 }
func (p *pinState) unpin()   { p.mu.Unlock() }

func setA(w *atomic.Uint64, v uint64) { w.Store(v) }

func (p *pinState) quiet()   { p.mu.Lock() }
func (p *pinState) unquiet() { p.mu.Unlock() }
