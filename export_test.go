package symheap

// What the tests need that is not part of the API.

// TeamHandles reports how many teams made by Split this PE is a member of
// and has not destroyed (team_test.go checks that none leak).
func (pe *PE) TeamHandles() int { return pe.ext.teams.Handles() }
