package segment

import (
	"errors"
	"fmt"

	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/shmsync"
)

// BarrierCheck is Barrier with a further check, made before every
// liveness check of the wait (the runtime's: do the PEs make the same call?). Its
// error ends the wait and breaks the barrier as a lost PE does, in this
// PE's name: this PE leaves without the barrier.
func (s *Segment) BarrierCheck(extra func() error) error {
	err := s.h.barrier.Wait(len(s.local), func() (int, error) {
		// The further check first: a PE that left because of what it
		// found is also gone for the liveness check, which would not say
		// why.
		if err := extra(); err != nil {
			return s.p.Rank, err
		}
		return s.LostPeer(nil)
	})
	if errors.Is(err, shmsync.ErrBroken) {
		m, _ := s.h.barrier.Broken()
		return fmt.Errorf("PE %d (pid %d) of job %q is gone: %w", m, s.Pid(m), s.p.Job, errs.ErrPeerLost)
	}
	return err
}
