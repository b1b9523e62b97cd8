package symheap

// What the tests need that is not part of the API.

// TeamHandles reports how many teams made by Split this PE is a member of
// and has not destroyed (team_test.go checks that none leak).
func (pe *PE) TeamHandles() int { return pe.ext.teams.Handles() }

// ProbeWord returns the word this node's first two PEs bounced to measure
// the transfer time at Init (probe.go): 0 if they did not, else
// 1<<63 | the time in ns (0 ns: the probe gave up).
func (pe *PE) ProbeWord() uint64 { return pe.ctl[pe.topo.local[0]].probe.Load() }
