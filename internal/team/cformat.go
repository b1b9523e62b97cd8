package team

import (
	"reflect"

	"github.com/symheap/symheap/internal/cabi"
)

// The post lines as the C library lays them out too (capi/coll.c): a post
// line is postLine, and its block of a PE's post lines is a teamSlot from
// its post lines on (post, gather, done); the barrier area's head, count
// and round lines are barrierHead, barrierCount and barrierRound; all
// generated into
// capi/shmemi_formats.h from these types (internal/cabi, capi/gen).
func init() {
	cabi.RegisterStruct(cabi.Struct{Name: "post_block", Type: reflect.TypeFor[teamSlot](), From: "post",
		Doc: "a PE's post lines (internal/team, teamSlot from post on; \"Post lines\" in team.go, post.go)"})
	// The full barrier's area (dissem.go): a PE's head, then per team id
	// a count line and BarrierRounds round lines (cabi.Layout).
	cabi.RegisterStruct(cabi.Struct{Type: reflect.TypeFor[barrierHead](),
		Doc: "the head of a PE's barrier area: its topology key (internal/team, dissem.go, topo.go)"})
	cabi.RegisterStruct(cabi.Struct{Type: reflect.TypeFor[barrierCount](),
		Doc: "a PE's count of full barriers on one team id, owner only (internal/team, dissem.go)"})
	cabi.RegisterStruct(cabi.Struct{Type: reflect.TypeFor[barrierRound](),
		Doc: "a PE's post lines of one barrier round for one team id, by the parity of its count (internal/team, dissem.go)"})
	cabi.RegisterStruct(cabi.Struct{Type: reflect.TypeFor[agreeRound](),
		Doc: "a PE's post lines of one round of the allocation records' agreement, by the parity of the phase, each in a 128-byte pair of its own (internal/team, agree.go)"})
	// The arrived word and scratch buffers of a team slot: the C
	// library's world broadcasts of SHMEMI_POST_DATA+1 to
	// SHMEMI_SCRATCH_SIZE bytes run treeBcast on a block of this format.
	cabi.RegisterStruct(cabi.Struct{Name: "scratch_head", Type: reflect.TypeFor[scratchHead](),
		Doc: "a team slot's arrived word and scratch buffers (internal/team, teamSlot; treeBcast in collective.go)"})
	cabi.RegisterConst("SCRATCH_SIZE", scratchSize, "bytes of a scratch buffer: broadcasts of more than SHMEMI_POST_DATA and at most this many go down treeBcast's tree above SHMEMI_POST_FLAT PEs")
	cabi.RegisterConst("BARRIER_TEAMS", MaxTeams, "team ids in a barrier area, each a count line then the round lines; the agreement's round lines follow them (agree.go)")
	cabi.RegisterConst("AGREE_FLAT", AgreeFlat, "largest job whose collective allocations read every PE's record line; larger ones on one node run the agreement")
	cabi.RegisterConst("AGREE_WORDS", AgreeWords, "words of an allocation record that the agreement's post lines carry: call, kind, size, align, in, out, hints")
	cabi.RegisterConst("POST_RING", postRing, "post lines of a PE's ring for small broadcasts")
	cabi.RegisterConst("POST_DATA", postData, "bytes a post line carries: broadcasts and reductions of at most this many go through post lines")
	cabi.RegisterConst("POST_FLAT", postFlat, "largest team whose small reductions fold every member's gather line; larger ones go up and down a binomial tree")
	cabi.RegisterConst("POST_AHEAD", postAhead, "calls ahead a reader of a root's ring asks for a line")
	cabi.RegisterConst("POST_DONE_PAUSES", donePauses, "pauses between a waiting root's reads of a done line")
	cabi.RegisterConst("BARRIER_RECORD_OFF", barrierRecordOff, "offset in a barrier round line's data of the call record it carries (internal/calls, Arguments)")
}
