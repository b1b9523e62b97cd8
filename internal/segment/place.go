package segment

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/symheap/symheap/internal/config"
	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/shmsync"
	"github.com/symheap/symheap/internal/unix"
)

// The window from which same-address proposals are drawn: above the Go
// heap's arena hints (0xc000000000 upward) and the race detector's shadow,
// below the region where the kernel places mmap(NULL) and shared libraries.
const (
	windowLo = 0x1000_0000_0000
	windowHi = 0x6000_0000_0000
)

// place is step 5 of Open: agree on one address, or fall back to offsets.
func (s *Segment) place() error {
	h, n := s.h, s.lay.NPEs
	attach := len(s.local) // the ranks that take part: this node's
	total := int(s.lay.Total)
	// InitTimeout bounds a wait in which nothing moves: with hundreds of
	// PEs on a few cores they attach over many seconds, and each PE that
	// attaches or arrives in a round restarts the clock.
	deadline := time.Now().Add(s.p.InitTimeout)
	progress := uint64(0)
	moved := func() bool {
		v := uint64(h.attached.Load())
		for r := range h.arrived {
			v += uint64(h.arrived[r].Load())
		}
		if v == progress {
			return false
		}
		progress = v
		return true
	}
	if s.p.ForceOffset {
		h.forceOffset.Store(1)
	}
	waitFor := func(what string, cond func() bool) error {
		return shmsync.WaitWord(&h.roundWord, &h.roundSleepers, cond, func() error {
			if s.p.Stop != nil {
				if err := s.p.Stop(); err != nil {
					return fmt.Errorf("segment: %s (%d of %d PEs attached): %w", what, h.attached.Load(), attach, err)
				}
			}
			if h.state.Load() == stateFailed {
				return fmt.Errorf("segment: %s: %w", getString(h.failMsg[:]), errs.ErrSegment)
			}
			for pe := 0; pe < n; pe++ {
				if h.pes[pe].state.Load() != slotEmpty && !s.Alive(pe) {
					return fmt.Errorf("segment: PE %d died while the job was starting (%s): %w", pe, what, errs.ErrPeerLost)
				}
			}
			if moved() {
				deadline = time.Now().Add(s.p.InitTimeout)
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("segment: timed out after %v %s (%d of %d PEs attached; are all PEs started with the same job id? raise %s if they start slowly): %w",
					s.p.InitTimeout, what, h.attached.Load(), attach, config.EnvInitTimeout, errs.ErrSegment)
			}
			return nil
		})
	}
	for r := 0; r < MaxRounds; r++ {
		if s.p.Rank == s.local[0] {
			addr := noAddress
			if h.forceOffset.Load() == 0 {
				if a, err := propose(uint64(total), h.gen, r); err == nil {
					addr = a
				}
			}
			// Publish the proposal; pairs with the loads below.
			h.proposal[r].Store(addr)
			shmsync.Wake(&h.roundWord, &h.roundSleepers)
		}
		if err := waitFor("waiting for an address proposal", func() bool { return h.proposal[r].Load() != 0 }); err != nil {
			return err
		}
		addr := h.proposal[r].Load()
		ok := false
		if addr != noAddress && h.forceOffset.Load() == 0 {
			m, err := unix.MapShared(s.fd, total, uintptr(addr), 0)
			if err == nil {
				s.m, ok = m, true
			}
		}
		if !ok {
			h.failed[r].Add(1)
		}
		// Arrive; pairs with every PE's wait for n arrivals.
		h.arrived[r].Add(1)
		shmsync.Wake(&h.roundWord, &h.roundSleepers)
		if err := waitFor("agreeing on an address", func() bool { return h.arrived[r].Load() == uint32(attach) }); err != nil {
			return err
		}
		if h.failed[r].Load() == 0 {
			h.base.Store(addr)
			h.mode.Store(ModeSameAddress)
			return nil
		}
		if ok {
			unix.Unmap(s.m)
			s.m = unix.Mapping{}
		}
		if addr == noAddress || h.forceOffset.Load() != 0 {
			break
		}
	}
	// Offset mode: anywhere, but aligned, so offsets keep their alignment.
	m, err := mapAligned(s.fd, total, 0)
	if err != nil {
		return err
	}
	s.m = m
	h.mode.Store(ModeOffset)
	return nil
}

// mapAligned maps total bytes of fd anywhere, at an Align-aligned address
// (over a reservation of its own, so that no other thread of the process
// can take the address in between).
func mapAligned(fd, total, prot int) (unix.Mapping, error) {
	m, err := unix.MapSharedAlignedProt(fd, uintptr(total), Align, prot)
	if err != nil {
		return unix.Mapping{}, mapError("map "+FormatSize(uint64(total)), err)
	}
	return m, nil
}

// propose picks an Align-aligned address for size bytes that is free in
// this process's address space, inside the window. Different rounds pick
// different addresses.
func propose(size, gen uint64, round int) (uint64, error) {
	maps, err := unix.SelfMaps()
	if err != nil {
		return 0, err
	}
	const guard = 1 << 30 // keep a gigabyte away from any existing mapping
	rng := rand.New(rand.NewPCG(gen, uint64(round)))
	const gran = 1 << 30
	for try := 0; try < 64; try++ {
		a := windowLo + rng.Uint64N((windowHi-windowLo-size)/gran)*gran
		if a+size > windowHi {
			continue
		}
		free := true
		for _, m := range maps {
			if uint64(m.Start) < a+size+guard && uint64(m.End)+guard > a {
				free = false
				break
			}
		}
		if free {
			return a, nil
		}
	}
	return 0, fmt.Errorf("segment: no free window of %s", FormatSize(size))
}
