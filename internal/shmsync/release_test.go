package shmsync

import (
	"fmt"
	"sync/atomic"
	"testing"
)

func TestStoreRelease(t *testing.T) {
	var w32 atomic.Uint32
	var w64 atomic.Uint64
	for _, v := range []uint64{1, 1 << 31, 1<<32 + 7, ^uint64(0)} {
		StoreRelease32(&w32, uint32(v))
		StoreRelease64(&w64, v)
		if got := w32.Load(); got != uint32(v) {
			t.Errorf("StoreRelease32(%#x): loaded %#x", uint32(v), got)
		}
		if got := w64.Load(); got != v {
			t.Errorf("StoreRelease64(%#x): loaded %#x", v, got)
		}
	}
}

// TestStoreReleaseOrder checks the release order between goroutines: a
// reader that sees the publishing word sees the payload stored before it.
func TestStoreReleaseOrder(t *testing.T) {
	var payload, seq atomic.Uint64
	const n = 200000
	done := make(chan error, 1)
	go func() {
		for i := uint64(1); i <= n; {
			if s := seq.Load(); s >= i {
				if p := payload.Load(); p < s {
					done <- fmt.Errorf("saw seq %d with payload %d", s, p)
					return
				}
				i = s + 1
			}
		}
		done <- nil
	}()
	for i := uint64(1); i <= n; i++ {
		StoreRelease64(&payload, i)
		StoreRelease64(&seq, i)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
