package segment

import (
	"errors"
	"fmt"

	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/shmsync"
)

// BarrierCheck is Barrier with a further check, made after the check for
// dead PEs and before the one for PEs that left (the runtime's: do the PEs make the same call?). Its
// error ends the wait and breaks the barrier as a lost PE does, in this
// PE's name: this PE leaves without the barrier.
func (s *Segment) BarrierCheck(extra func() error) error {
	err := s.h.barrier.Wait(len(s.local), func() (int, error) {
		// A death first; then the further check, before PEs that left:
		// a PE that left because of what it found is also gone for the
		// liveness check, which would not say why.
		var lost = -1
		if err := s.checkPeers(nil, &lost, false); err != nil {
			return lost, err
		}
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
