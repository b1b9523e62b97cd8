package symheap

import (
	"github.com/symheap/symheap/internal/far"
	"github.com/symheap/symheap/internal/team"
)

// Collectives on teams: Broadcast, Reduce, FCollect and AllToAll, with the
// semantics of OpenSHMEM 1.5's team-based routines. The layer lives in
// internal/team (collective.go there has the shapes of a call); these are
// the generic functions over it. Broadcast, FCollect and AllToAll only
// copy: the layer gets their slices as bytes and an element size
// (team.VecOf), and this package's verdict on the element type. Reduce
// folds elements: the layer's Reduce is generic too.

// Number is the element types of reductions: integers and floats.
type Number = team.Number

// Op is a reduction operation; its String names it ("sum", "xor").
type Op = team.Op

// Reduction operations. The bitwise ones (OpAnd, OpOr, OpXor) are defined
// on integers only: on floats they are ErrBadOp.
const (
	OpSum  = team.OpSum
	OpProd = team.OpProd
	OpMin  = team.OpMin
	OpMax  = team.OpMax
	OpAnd  = team.OpAnd
	OpOr   = team.OpOr
	OpXor  = team.OpXor
)

// Broadcast copies root's src into dst on every member of the team, root
// included (shmem_broadcast). root is a rank of the team. dst and src are
// symmetric, of equal length; they may be the same array but may not
// partly overlap. On return dst holds the data and src may be reused.
func Broadcast[T any](t *Team, dst, src []T, root int) error {
	if pe := farTeam(t); pe != nil {
		if err := plainData[T](); err != nil {
			return err
		}
		return farCollective(pe, func() error { return far.Broadcast(pe.far, (*team.Team)(t), dst, src, root) })
	}
	return (*team.Team)(t).Broadcast(team.VecOf(dst), team.VecOf(src), root, plainData[T]())
}

// Reduce combines src of every member element by element with op and
// leaves the result in dst on every member (shmem_TYPE_OP_reduce, which
// 1.5 defines as an all-reduce). dst and src are symmetric, of equal
// length; they may be the same array but may not partly overlap.
func Reduce[T Number](t *Team, dst, src []T, op Op) error {
	if pe := farTeam(t); pe != nil {
		return farCollective(pe, func() error { return far.Reduce(pe.far, (*team.Team)(t), dst, src, op) })
	}
	return team.Reduce((*team.Team)(t), dst, src, op)
}

// FCollect concatenates every member's src into dst on every member, in
// rank order (shmem_fcollect): dst has Size()*len(src) elements. dst and
// src are symmetric and may not overlap.
func FCollect[T any](t *Team, dst, src []T) error {
	if pe := farTeam(t); pe != nil {
		if err := plainData[T](); err != nil {
			return err
		}
		return farCollective(pe, func() error { return far.FCollect(pe.far, (*team.Team)(t), dst, src) })
	}
	return (*team.Team)(t).FCollect(team.VecOf(dst), team.VecOf(src), plainData[T]())
}

// AllToAll exchanges blocks (shmem_alltoall): src and dst hold Size()
// blocks of len(src)/Size() elements each, and block j of member i's src
// becomes block i of member j's dst. dst and src are symmetric, of equal
// length (a multiple of the team size), and may not overlap.
func AllToAll[T any](t *Team, dst, src []T) error {
	if pe := farTeam(t); pe != nil {
		if err := plainData[T](); err != nil {
			return err
		}
		return farCollective(pe, func() error { return far.AllToAll(pe.far, (*team.Team)(t), dst, src) })
	}
	return (*team.Team)(t).AllToAll(team.VecOf(dst), team.VecOf(src), plainData[T]())
}

// farTeam returns the PE when t is a team of a job that spans nodes: its
// collectives are the multi-node layer's (internal/far).
func farTeam(t *Team) *PE {
	pe := farJob.Load()
	if pe == nil || t == nil {
		return nil
	}
	return pe
}

// farCollective runs a collective of the multi-node layer under the PE's
// call lock, as the team layer's run under its own.
func farCollective(pe *PE, c func() error) error {
	if err := pe.check(); err != nil {
		return err
	}
	pe.mu.Lock()
	defer pe.mu.Unlock()
	return c()
}
