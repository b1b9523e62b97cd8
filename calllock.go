package symheap

import "github.com/symheap/symheap/internal/team"

// callLock is the mutex of this PE's collective allocation calls and its
// heap (PE.mu): the team layer's CallLock, which serialises a team's
// collectives there. Both guard calls that synchronise with other PEs, so
// both want its cheap uncontended path (internal/team/calllock.go).
type callLock = team.CallLock
