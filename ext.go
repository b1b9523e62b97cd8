package symheap

import (
	"github.com/symheap/symheap/internal/msg"
	"github.com/symheap/symheap/internal/team"
)

// peExt gathers the state of the layers built on the runtime core, each
// defined in its own file: the symmetric heap and RMA (rma.go), the local
// shared heap (shared.go), the teams and collectives (internal/team,
// through team.go and collective.go) and messages (internal/msg, through
// msg.go).
type peExt struct {
	sym    symHeap    // the symmetric heap and its allocation records (symalloc.go)
	teams  team.Layer // internal/team
	shared sharedHeap
	msg    msg.Layer // internal/msg
	hooks  hookState
	// tickets: the lock tickets SetLockCtx abandoned (lock.go).
	tickets tickets
}

// initExt prepares the layers once the segment is mapped and the heaps are
// formatted, before the barrier that ends Init.
func (pe *PE) initExt() error {
	return pe.initMsg()
}

// closeExt releases the layers' resources in Close, after its barrier.
func (pe *PE) closeExt() {
	// Messaging: requests still outstanding are abandoned (Close is
	// collective, so every PE has stopped sending).
	pe.ext.msg.Close()
	pe.closeHooks()
}
