package symheap

// Team is a set of PEs that run collectives together.
type Team struct {
	pe *PE
}

type teamState struct{}

func newWorld(pe *PE) *Team { return &Team{pe: pe} }

// teamAreaSize is the bytes of each control block reserved for teams.
func teamAreaSize(npes int) uint64 { return 0 }

// World returns the team of every PE.
func (pe *PE) World() *Team { return pe.world }
