package symheap

import (
	"fmt"

	"github.com/symheap/symheap/internal/team"
)

// Teams and collectives in a job that spans nodes (far_ucx.go).
//
// The team layer (internal/team) synchronises through words in the
// node's segment, which PEs of other nodes never see. In a job that spans
// nodes the world team therefore synchronises with the hierarchical
// barrier (PE.farBarrier), and its collectives are built here from that
// barrier and the one-sided operations, which reach every PE, local or
// far, through the transport seam:
//
//	Broadcast  barrier; every PE but root gets root's src into its dst; barrier
//	FCollect   barrier; every PE gets each member's src into its block of dst; barrier
//	AllToAll   barrier; every PE gets block me of each member's src into block j of dst; barrier
//	Reduce     barrier; every PE gets each member's src and folds it; barrier; dst = result
//
// The closing barrier keeps every src (and, for Reduce, every dst that
// is also a src) unchanged until every member has read it. Gets cost a
// round trip each; these are correct, not fast, and a tree would scale
// better. Teams made by Split are not available across nodes yet.

// farTeam returns the PE when t is a team of a job that spans nodes.
func farTeam(t *Team) *PE {
	pe := farJob.Load()
	if pe == nil || t == nil {
		return nil
	}
	return pe
}

// farWorld checks that t is the world team of a multi-node job.
func (pe *PE) farWorld(t *Team, op string) error {
	if err := pe.check(); err != nil {
		return err
	}
	if (*team.Team)(t) != pe.ext.teams.World() {
		return fmt.Errorf("symheap: %s on a team made by Split, in a job on %d nodes: %w (only the world team spans nodes yet)", op, pe.Nodes(), ErrNotSupported)
	}
	return nil
}

func farSync(pe *PE, t *Team) error {
	if err := pe.farWorld(t, "Sync"); err != nil {
		return err
	}
	if err := pe.farBarrier(); err != nil {
		return fmt.Errorf("symheap: Sync: %w", err)
	}
	return nil
}

// farCollective runs body between two barriers, under the PE's call lock.
func farCollective(pe *PE, t *Team, op string, body func() error) error {
	if err := pe.farWorld(t, op); err != nil {
		return err
	}
	pe.mu.Lock()
	defer pe.mu.Unlock()
	pe.rma.quietAll()
	if err := pe.farBarrier(); err != nil {
		return fmt.Errorf("symheap: %s: %w", op, err)
	}
	err := body()
	pe.rma.quietAll()
	if berr := pe.farBarrier(); err == nil && berr != nil {
		err = fmt.Errorf("symheap: %s: %w", op, berr)
	}
	return err
}

func farBroadcast[T any](pe *PE, t *Team, dst, src []T, root int) error {
	if len(dst) != len(src) || root < 0 || root >= pe.npes {
		return fmt.Errorf("symheap: Broadcast of %d elements into %d from root %d of %d: %w", len(src), len(dst), root, pe.npes, ErrBadArg)
	}
	return farCollective(pe, t, "Broadcast", func() error {
		if pe.rank == root {
			copy(dst, src)
			return nil
		}
		return Get(pe, dst, src, root)
	})
}

func farFCollect[T any](pe *PE, t *Team, dst, src []T) error {
	n := len(src)
	if len(dst) != n*pe.npes {
		return fmt.Errorf("symheap: FCollect of %d elements per PE into %d (want %d): %w", n, len(dst), n*pe.npes, ErrBadArg)
	}
	return farCollective(pe, t, "FCollect", func() error {
		for j := range pe.npes {
			if err := Get(pe, dst[j*n:(j+1)*n], src, j); err != nil {
				return err
			}
		}
		return nil
	})
}

func farAllToAll[T any](pe *PE, t *Team, dst, src []T) error {
	if len(dst) != len(src) || len(src)%pe.npes != 0 {
		return fmt.Errorf("symheap: AllToAll of %d elements into %d on %d PEs: %w (equal lengths, a multiple of the team size)", len(src), len(dst), pe.npes, ErrBadArg)
	}
	b := len(src) / pe.npes
	me := pe.rank
	return farCollective(pe, t, "AllToAll", func() error {
		for j := range pe.npes {
			if err := Get(pe, dst[j*b:(j+1)*b], src[me*b:(me+1)*b], j); err != nil {
				return err
			}
		}
		return nil
	})
}

func farReduce[T Number](pe *PE, t *Team, dst, src []T, op Op) error {
	if err := team.CheckOp[T](op); err != nil {
		return err
	}
	if len(dst) != len(src) {
		return fmt.Errorf("symheap: Reduce of %d elements into %d: %w", len(src), len(dst), ErrBadArg)
	}
	acc := append([]T(nil), src...)
	tmp := make([]T, len(src))
	err := farCollective(pe, t, "Reduce", func() error {
		for j := range pe.npes {
			if j == pe.rank {
				continue
			}
			if err := Get(pe, tmp, src, j); err != nil {
				return err
			}
			team.Fold(acc, tmp, op)
		}
		return nil
	})
	if err == nil {
		// After the closing barrier: nobody reads src (which may be dst)
		// any more.
		copy(dst, acc)
	}
	return err
}
