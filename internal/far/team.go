package far

import (
	"fmt"
	"slices"
	"sync"

	"github.com/symheap/symheap/internal/calls"
	"github.com/symheap/symheap/internal/core"
	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/team"
)

// Teams and collectives in a job that spans nodes.
//
// The team layer (internal/team) synchronises through words in the
// node's segment, which PEs of other nodes never see. In a job that spans
// nodes the world team therefore synchronises with the hierarchical
// barrier (PE.Barrier), and its collectives are built here from that
// barrier and the one-sided operations, which reach every PE, local or
// far, through the transport seam:
//
//	Broadcast  barrier; every PE but root gets root's src into its dst; barrier
//	FCollect   barrier; every PE gets each member's src into its block of dst; barrier
//	AllToAll   barrier; every PE gets block me of each member's src into block j of dst; barrier
//	Reduce     barrier; every PE gets each member's src and folds it; barrier; dst = result
//
// except that what several members of a node need from other nodes
// crosses the network once: in Broadcast from a root on another node, in
// FCollect, and in a Reduce that is not in place, the team's members on a
// node meet their leader (the lowest of them) after it fetched the other
// nodes' data into its dst (Reduce: the result; PE.nodeShare, the node
// part of the split teams' barrier), and copy from the leader's dst in
// shared memory. Reduce folds the sources in rank order, so that every
// member gets the same bits. The closing barrier
// keeps every src (and, for Reduce, every dst that is also a src)
// unchanged until every member has read it. A get over the network costs
// a round trip; a tree among the nodes' leaders would scale better than
// these linear gets.
//
// Teams made by Split in such a job live here too (splitTeam), not in
// the team layer: a team is its members' world ranks, its barrier
// hierarchical (PE.teamSync: the members of each node meet their
// node's leader in shared memory, the leaders run a dissemination barrier
// over tagged messages), and the
// handle a *team.Team that the team layer never sees, only a key in the
// PE's table of such teams. Split needs no shared state: every member of
// the parent computes the same members, and the team's key (which keeps
// its messages apart from other teams') from the parent's key and the
// parent's count of Splits, which every member of the parent makes in the
// same order.

// splitTeam is a team made by Split in a job on several nodes.
// Guarded by the team's collective rule (one call at a time per PE).
type splitTeam struct {
	members   []int  // world ranks, by team rank
	rank      int    // this PE's team rank
	key       uint64 // distinguishes the team's messages
	splits    uint64 // Splits made on this team
	epoch     uint32 // Syncs made (PE.teamSync)
	destroyed bool
	local     []int // the members on this PE's node, increasing: local[0] leads them (teamSync)
	leaders   []int // the lowest member on each node, increasing
	// The calls made on the team, and the record of the current one
	// (calls.RecordOf; 0 between calls), which its barrier compares
	// (teamSync): such a team has no id, so no call word describes it.
	calls uint64
	rec   uint64
}

// teams is a PE's table of such teams.
type teams struct {
	mu     sync.Mutex
	byT    map[*team.Team]*splitTeam
	splits uint64 // Splits made on the world team
}

// splitTeamOf returns t's state if t is a team made by Split in a job on
// several nodes (else nil, the world team included).
func (l *Layer) splitTeamOf(t *team.Team) *splitTeam {
	l.teams.mu.Lock()
	defer l.teams.mu.Unlock()
	return l.teams.byT[t]
}

// members returns the members of t (world rank by team rank) and this
// PE's rank in it, for the world team or a far team; ok false if t is
// neither (a destroyed team, or a handle of another job).
func (l *Layer) members(t *team.Team) (members []int, rank int, ft *splitTeam, ok bool) {
	if t == l.rt.World() {
		all := make([]int, l.npes)
		for i := range all {
			all[i] = i
		}
		return all, l.rank, nil, true
	}
	ft = l.splitTeamOf(t)
	if ft == nil || ft.destroyed {
		return nil, -1, nil, false
	}
	return ft.members, ft.rank, ft, true
}

// teamBarrier is the barrier of t: the hierarchical one for the world
// team, the members' dissemination barrier for the others.
func (l *Layer) teamBarrier(ft *splitTeam) error {
	if ft == nil {
		return l.Barrier()
	}
	return l.teamSync(ft)
}

func (l *Layer) Split(t *team.Team, start, stride, size int) (*team.Team, error) {
	if err := l.rt.Check(); err != nil {
		return nil, err
	}
	parent, _, pft, ok := l.members(t)
	if !ok {
		return nil, fmt.Errorf("symheap: Split of a team that is not one of this job's (destroyed?): %w", errs.ErrBadArg)
	}
	n := len(parent)
	bad := func(why string) error {
		return fmt.Errorf("symheap: Split(start %d, stride %d, size %d) of a team of %d PEs: %w (%s)", start, stride, size, n, errs.ErrBadArg, why)
	}
	switch {
	case size < 1:
		return nil, bad("size must be at least 1")
	case start < 0 || start >= n:
		return nil, bad(fmt.Sprintf("start must be a rank of the parent, 0 to %d", n-1))
	case stride == 0 && size != 1:
		return nil, bad("stride 0 makes a team of one only")
	case size > n:
		return nil, bad("more members than the parent has")
	}
	if last := int64(start) + int64(stride)*int64(size-1); last < 0 || last >= int64(n) {
		return nil, bad("the last rank start+stride*(size-1) falls outside the parent")
	}
	l.teams.mu.Lock()
	var pkey, idx uint64
	if pft == nil {
		idx = l.teams.splits
		l.teams.splits++
	} else {
		pkey, idx = pft.key, pft.splits
		pft.splits++
	}
	l.teams.mu.Unlock()
	ft := &splitTeam{rank: -1, key: (pkey*131 + idx + 1) % 0xfff}
	if ft.key == 0 {
		ft.key = 0xfff
	}
	for i := range size {
		p := parent[start+stride*i]
		if p == l.rank {
			ft.rank = i
		}
		ft.members = append(ft.members, p)
	}
	ft.local = l.localOf(ft.members)
	byNode := map[int]int{} // node: its lowest member
	for _, p := range ft.members {
		if ld, ok := byNode[l.nodeOf[p]]; !ok || p < ld {
			byNode[l.nodeOf[p]] = p
		}
	}
	for _, ld := range byNode {
		ft.leaders = append(ft.leaders, ld)
	}
	slices.Sort(ft.leaders)
	// A parent barrier: Split synchronises the parent, as on one node.
	leave, err := l.enter(pft, calls.Split, 0)
	if err != nil {
		return nil, err
	}
	err = l.teamBarrier(pft)
	leave()
	if err != nil {
		return nil, fmt.Errorf("symheap: Split: %w", err)
	}
	if ft.rank < 0 {
		return nil, nil
	}
	h := new(team.Team) // the handle: a key in the table, never used by the team layer
	l.teams.mu.Lock()
	if l.teams.byT == nil {
		l.teams.byT = map[*team.Team]*splitTeam{}
	}
	l.teams.byT[h] = ft
	l.teams.mu.Unlock()
	return h, nil
}

func (l *Layer) Destroy(t *team.Team) error {
	if err := l.rt.Check(); err != nil {
		return err
	}
	if t == l.rt.World() {
		return fmt.Errorf("symheap: Destroy of the world team: %w (it lives until Close)", errs.ErrBadArg)
	}
	ft := l.splitTeamOf(t)
	if ft == nil || ft.destroyed {
		return fmt.Errorf("symheap: Destroy of a team that is not one of this job's (destroyed already?): %w", errs.ErrBadArg)
	}
	err := l.teamSync(ft)
	ft.destroyed = true
	l.teams.mu.Lock()
	delete(l.teams.byT, t)
	l.teams.mu.Unlock()
	if err != nil {
		return fmt.Errorf("symheap: Destroy: %w", err)
	}
	return nil
}

// enter publishes a collective call of kind k on the world team (ft
// nil) in this PE's call word (internal/calls), so that the checks of the
// other PEs, of this node and of others (pingCalls), find PEs that make
// different calls; it returns the call's end. Teams made by Split in such
// a job have no id of the team layer, and their calls are not published.
func (l *Layer) enter(ft *splitTeam, k calls.Kind, args uint64) (leave func(), err error) {
	if ft != nil {
		if err := l.rt.Calls().Broken(); err != nil {
			return nil, err
		}
		ft.calls++
		ft.rec = calls.RecordOf(k, ft.calls, args)
		return func() { ft.rec = 0 }, nil
	}
	if err := l.rt.Calls().Enter(k, 0, args); err != nil {
		return nil, err
	}
	return l.rt.Calls().Leave, nil
}

func (l *Layer) Sync(t *team.Team) error {
	if err := l.rt.Check(); err != nil {
		return err
	}
	_, _, ft, ok := l.members(t)
	if !ok {
		return fmt.Errorf("symheap: Sync on a team that is not one of this job's (destroyed?): %w", errs.ErrBadArg)
	}
	leave, err := l.enter(ft, calls.Sync, 0)
	if err != nil {
		return err
	}
	defer leave()
	if err := l.teamBarrier(ft); err != nil {
		return fmt.Errorf("symheap: Sync: %w", err)
	}
	return nil
}

// collective runs body between two barriers of the team, under the
// PE's call lock; body gets the members (world ranks by team rank), this
// PE's team rank, and the members on this PE's node, increasing (the
// first leads them in a node step). args is the call's record of its
// arguments (calls.Args), which the world's barrier compares (Barrier).
func (l *Layer) collective(t *team.Team, kind calls.Kind, args uint64, body func(members []int, me int, local []int) error) error {
	op := kind.String()
	if err := l.rt.Check(); err != nil {
		return err
	}
	members, me, ft, ok := l.members(t)
	if !ok {
		return fmt.Errorf("symheap: %s on a team that is not one of this job's (destroyed?): %w", op, errs.ErrBadArg)
	}
	leave, err := l.enter(ft, kind, args)
	if err != nil {
		return err
	}
	defer leave()
	l.rt.QuietAll()
	if err := l.teamBarrier(ft); err != nil {
		return fmt.Errorf("symheap: %s: %w", op, err)
	}
	local := l.local // the world's
	if ft != nil {
		local = ft.local
	}
	err = body(members, me, local)
	l.rt.QuietAll()
	if berr := l.teamBarrier(ft); err == nil && berr != nil {
		err = fmt.Errorf("symheap: %s: %w", op, berr)
	}
	return err
}

func Broadcast[T any](l *Layer, t *team.Team, dst, src []T, root int) error {
	if len(dst) != len(src) || root < 0 || root >= l.teamSize(t) {
		return fmt.Errorf("symheap: Broadcast of %d elements into %d from root %d of a team of %d: %w", len(src), len(dst), root, l.teamSize(t), errs.ErrBadArg)
	}
	return l.collective(t, calls.Broadcast, calls.Args(bytesOf(src), root), func(members []int, me int, local []int) error {
		r := members[root]
		if me == root {
			copy(dst, src)
			return nil
		}
		if l.onNode(r) || len(local) < 2 {
			return get(l, dst, src, r)
		}
		// The root is on another node: the node's leader fetches its
		// source once, the node's other members copy the leader's dst.
		if ld := local[0]; l.rank != ld {
			if err := l.nodeArrive(ld); err != nil {
				return err
			}
			return get(l, dst, dst, ld)
		}
		if err := get(l, dst, src, r); err != nil {
			return l.nodeFail(lostRank(err, r), err)
		}
		return l.nodeShare(local)
	})
}

// localOf returns the members of a team on this PE's node, increasing:
// the first leads them in a collective's node step.
func (l *Layer) localOf(members []int) []int {
	var local []int
	for _, p := range members {
		if l.onNode(p) {
			local = append(local, p)
		}
	}
	slices.Sort(local)
	return local
}

func FCollect[T any](l *Layer, t *team.Team, dst, src []T) error {
	n, size := len(src), l.teamSize(t)
	if len(dst) != n*size {
		return fmt.Errorf("symheap: FCollect of %d elements per PE into %d (want %d): %w", n, len(dst), n*size, errs.ErrBadArg)
	}
	return l.collective(t, calls.FCollect, calls.Args(bytesOf(src), -1), func(members []int, me int, local []int) error {
		// The node's leader fetches the other nodes' blocks once; the
		// node's other members copy them from the leader's dst, and
		// their own node's from each member's src, in shared memory.
		ld := local[0]
		if l.rank != ld {
			if err := l.nodeArrive(ld); err != nil {
				return err
			}
		}
		for j, p := range members {
			var err error
			switch {
			case l.onNode(p) || l.rank == ld:
				err = get(l, dst[j*n:(j+1)*n], src, p)
			default:
				err = get(l, dst[j*n:(j+1)*n], dst[j*n:(j+1)*n], ld)
			}
			if err != nil {
				if l.rank == ld {
					return l.nodeFail(lostRank(err, p), err)
				}
				return err
			}
		}
		if l.rank == ld && len(local) > 1 {
			return l.nodeShare(local)
		}
		return nil
	})
}

func AllToAll[T any](l *Layer, t *team.Team, dst, src []T) error {
	size := l.teamSize(t)
	if len(dst) != len(src) || size < 1 || len(src)%size != 0 {
		return fmt.Errorf("symheap: AllToAll of %d elements into %d on %d PEs: %w (equal lengths, a multiple of the team size)", len(src), len(dst), size, errs.ErrBadArg)
	}
	b := len(src) / size
	return l.collective(t, calls.AllToAll, calls.Args(bytesOf(src), -1), func(members []int, me int, local []int) error {
		for j, p := range members {
			if err := get(l, dst[j*b:(j+1)*b], src[me*b:(me+1)*b], p); err != nil {
				return err
			}
		}
		return nil
	})
}

func Reduce[T team.Number](l *Layer, t *team.Team, dst, src []T, op team.Op) error {
	if err := team.CheckOp[T](op); err != nil {
		return err
	}
	return ReduceWith(l, t, dst, src, func(acc, x []T) { team.Fold(acc, x, op) })
}

// ReduceWith is Reduce with the fold of another element-wise operation:
// fold(acc, x) combines x into acc (the C library's reductions, whose
// folds are its own, on bytes).
func ReduceWith[T any](l *Layer, t *team.Team, dst, src []T, fold func(acc, x []T)) error {
	if len(dst) != len(src) {
		return fmt.Errorf("symheap: Reduce of %d elements into %d: %w", len(src), len(dst), errs.ErrBadArg)
	}
	acc, tmp := make([]T, len(src)), make([]T, len(src))
	inPlace := core.Overlap(dst, src)
	done := false // this PE's dst holds the result already
	err := l.collective(t, calls.Reduce, calls.Args(bytesOf(src), -1), func(members []int, me int, local []int) error {
		// Unless dst is src (which others read until the closing
		// barrier), a node's leader reduces for the node into its own dst
		// and the node's other members copy it in shared memory, so that
		// the other nodes' sources cross the network once per node.
		share := !inPlace && len(local) > 1 && len(local) < len(members)
		if share && l.rank != local[0] {
			if err := l.nodeArrive(local[0]); err != nil {
				return err
			}
			done = true
			return get(l, dst, dst, local[0])
		}
		// Every member's source folded in rank order, so that every PE
		// gets the same bits.
		for j, p := range members {
			v := tmp
			if j == 0 {
				v = acc
			}
			if p == l.rank {
				copy(v, src)
			} else if err := get(l, v, src, p); err != nil {
				if share {
					return l.nodeFail(lostRank(err, p), err)
				}
				return err
			}
			if j > 0 {
				fold(acc, tmp)
			}
		}
		if share {
			copy(dst, acc)
			done = true
			return l.nodeShare(local)
		}
		return nil
	})
	if err == nil && !done {
		// After the closing barrier: nobody reads src (which may be dst)
		// any more.
		copy(dst, acc)
	}
	return err
}

// SplitTeam reports the members (world ranks, by team rank) of t and this
// PE's rank in it, if t is a team made by Split in this job; ok false
// otherwise (the world team included).
func (l *Layer) SplitTeam(t *team.Team) (members []int, rank int, ok bool) {
	if l == nil || t == nil {
		return nil, -1, false
	}
	ft := l.splitTeamOf(t)
	if ft == nil {
		return nil, -1, false
	}
	return ft.members, ft.rank, true
}

// teamSize is the number of members of t, the world team or a team made
// by Split.
func (l *Layer) teamSize(t *team.Team) int {
	if m, _, ok := l.SplitTeam(t); ok {
		return len(m)
	}
	return t.Size()
}

// get copies PE p's copy of the symmetric src into dst.
// bytesOf is the size of s in bytes, as a call's record has it.
func bytesOf[T any](s []T) uint64 { return uint64(len(s)) * core.SizeOf[T]() }

func get[T any](l *Layer, dst, src []T, p int) error {
	return l.rt.Get(core.Reinterpret[byte](dst), core.Reinterpret[byte](src), p)
}
