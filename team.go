package symheap

import "github.com/symheap/symheap/internal/team"

// Teams: World, Split, Sync, Destroy. The layer lives in internal/team,
// whose package comment is its design (the team area, full barriers,
// arrivals, Split step by step, its locks and the lock order); this file
// is the public API over it, and what the layer asks of the PE
// (teamRuntime). The collectives are in collective.go.

const (
	// MaxTeams bounds the teams alive at once in a job, the world team
	// included. Split fails with ErrOutOfMemory when all are in use.
	MaxTeams = 64
)

// MaxTeams is the layer's: the difference must be zero.
var (
	_ [MaxTeams - team.MaxTeams]struct{}
	_ [team.MaxTeams - MaxTeams]struct{}
)

// Team is a set of PEs that run collectives together: the world team of
// every PE, or a team made by Split. A *Team is this PE's handle of its
// membership; the collectives on one team must be called by every member
// in the same order, and not concurrently from several goroutines of one
// PE (OpenSHMEM's rule for the threads of a PE). Overlapping collectives
// are serialised; Sync and PE.Barrier, which take no lock so as to stay
// fast, return ErrBadArg when they find another call of the PE in
// progress on the team (best effort: see "Full barriers" in
// internal/team).
type Team team.Team

// World returns the team of every PE of the job, in PE order.
func (pe *PE) World() *Team { return (*Team)(pe.ext.teams.World()) }

// Rank returns this PE's number in the team, 0 to Size()-1; -1 for a nil
// team (a PE that is not a member).
func (t *Team) Rank() int {
	if _, r, ok := farOf().SplitTeam((*team.Team)(t)); ok {
		return r
	}
	return (*team.Team)(t).Rank()
}

// Size returns the number of PEs in the team; 0 for a nil team.
func (t *Team) Size() int {
	if m, _, ok := farOf().SplitTeam((*team.Team)(t)); ok {
		return len(m)
	}
	return (*team.Team)(t).Size()
}

// WorldRank returns the world PE number of the team's rank r, or -1 if r
// is not a rank of the team (shmem_team_translate_pe to the world team).
func (t *Team) WorldRank(r int) int {
	if m, _, ok := farOf().SplitTeam((*team.Team)(t)); ok {
		if r < 0 || r >= len(m) {
			return -1
		}
		return m[r]
	}
	return (*team.Team)(t).WorldRank(r)
}

// TeamRank returns the rank in the team of world PE p, or -1 if p is not a
// member.
func (t *Team) TeamRank(p int) int {
	if m, _, ok := farOf().SplitTeam((*team.Team)(t)); ok {
		for i, q := range m {
			if q == p {
				return i
			}
		}
		return -1
	}
	return (*team.Team)(t).TeamRank(p)
}

// Sync waits until every member of the team has called Sync
// (shmem_team_sync). It orders memory only as a barrier does; it does not
// complete outstanding non-blocking puts (PE.Barrier and Quiet do). It
// takes no lock: a Sync that finds another call of this PE in progress on
// the team returns ErrBadArg (see Team).
func (t *Team) Sync() error {
	if pe := farTeam(t); pe != nil {
		return pe.far.Sync((*team.Team)(t))
	}
	return (*team.Team)(t).Sync()
}

// Split makes a new team of the parent's ranks start, start+stride, ...,
// size of them (shmem_team_split_strided). It is collective over the
// parent: every member calls it with the same triplet. Members of the new
// team get their handle, the other PEs of the parent a nil *Team and a nil
// error. The new team's rank i is the parent's rank start+stride*i; a
// negative stride makes a team in reverse order; a stride of 0 is allowed
// for a team of one. A triplet that leaves the parent (or wraps around) is
// ErrBadArg on every PE; when MaxTeams teams are alive it is
// ErrOutOfMemory on every PE.
func (t *Team) Split(start, stride, size int) (*Team, error) {
	if pe := farTeam(t); pe != nil {
		nt, err := pe.far.Split((*team.Team)(t), start, stride, size)
		return (*Team)(nt), err
	}
	nt, err := (*team.Team)(t).Split(start, stride, size)
	return (*Team)(nt), err
}

// Destroy ends the team (shmem_team_destroy). It is collective over the
// team; afterwards its id can be reused and the handle is unusable. A nil
// team (a PE that is not a member) does nothing. The world team cannot be
// destroyed.
func (t *Team) Destroy() error {
	if pe := farTeam(t); pe != nil {
		return pe.far.Destroy((*team.Team)(t))
	}
	return (*team.Team)(t).Destroy()
}

// teamRuntime is the PE as the team layer sees it: team.Runtime.
type teamRuntime PE

var _ team.Runtime = (*teamRuntime)(nil)

func (r *teamRuntime) Check() error               { return (*PE)(r).check() }
func (r *teamRuntime) CheckPeers(pes []int) error { return r.seg.CheckPeers(pes) }
func (r *teamRuntime) CheckDead(pes []int) error  { return r.seg.CheckDead(pes) }
func (r *teamRuntime) WakeSleepers()              { r.rma.wakeSleepers() }
func (r *teamRuntime) Quiet()                     { r.rma.quietAll() }
