package symheap

import (
	"context"
	"fmt"

	"github.com/symheap/symheap/internal/errs"
	"github.com/symheap/symheap/internal/msg"
	"github.com/symheap/symheap/internal/team"
)

// Bounded waits: the blocking calls with a context.Context.
//
// Every blocking call has a twin named with Ctx whose first argument is a
// context: InitCtx, BarrierCtx, Team.SyncCtx, WaitUntilCtx, RecvCtx,
// Request.WaitCtx and SetLockCtx. A twin of a PE method is a function
// taking the PE after the context (the PE's method set stays small); the
// twins of Team's and Request's methods are methods. A nil context is
// ErrBadArg (context.Background() waits without a bound). A large Send,
// which waits for its receiver, is bounded as Isend then WaitCtx; Close
// has no twin (it is how a job whose collectives broke is left).
//
// # Mechanism
//
// Every wait of the runtime polls briefly, then sleeps on a futex in
// slices of at most shmsync.SleepSlice (50 ms), and runs its liveness
// check whenever a slice runs out or a slice has passed since the last
// check (shmsync: WaitWord, SleepFenced, WaitCount). A bounded call's
// check asks ctx.Err() first, so the context's end takes the path a lost
// PE takes: it is seen within one slice of Done, also by a PE asleep on
// a futex, with no goroutine or timer per call. As for a lost PE, the
// wait re-tests its condition after a failed check (shmsync.Lost): a wait
// whose condition holds then ends normally. A call whose context is done
// before it begins does not begin, but a receive still takes a message
// that has arrived and a wait whose condition holds still succeeds, as
// x/sync/semaphore.Acquire may.
//
// # After a cancelled call
//
//	WaitUntilCtx  nothing changed
//	RecvCtx       the receive withdrawn: no message taken, a later
//	              receive gets it; but a large message already matched is
//	              being copied into buf, and the call receives it to the
//	              end as Recv would (its copy cannot be undone)
//	WaitCtx       the request still pending: Wait, Test or WaitCtx later
//	SetLockCtx    the lock not held by this PE and usable by the others:
//	              the ticket taken is passed on when its turn comes
//	              (lock.go, "Abandoned tickets")
//	BarrierCtx,   this PE's collective calls are broken for good: later
//	SyncCtx       collectives and Free return the cancellation's error at
//	              once, and the other PEs' collectives that need this PE
//	              end with ErrDiverged naming the cancelled call instead of
//	              hanging (internal/calls, "Cancelled calls"); Close still
//	              releases everything (it returns the error too)
//	InitCtx       nothing left behind: no PE, no segment of this PE's
//	              making; the PEs that joined with it fail their Init
//
// The returned error wraps ctx.Err() (errors.Is with context.Canceled or
// context.DeadlineExceeded) and names what the call was waiting for; a
// cancelled collective's wraps ErrDiverged too.
//
// In a job that spans nodes the waits across nodes are not bounded yet:
// BarrierCtx, SyncCtx, RecvCtx, WaitCtx and SetLockCtx (when PE 0 is on
// another node) return ErrNotSupported there without doing anything;
// WaitUntilCtx works, and InitCtx bounds this node's part of Init.

// InitCtx is Init that ctx bounds: if ctx ends while this PE waits for the
// other PEs of its node to join, it returns an error wrapping ctx.Err(),
// having left nothing behind. A nil ctx is ErrBadArg.
func InitCtx(ctx context.Context, cfg Config) (*PE, error) {
	if err := nilCtx(ctx, "InitCtx"); err != nil {
		return nil, err
	}
	return initPE(cfg, stopOf(ctx))
}

// BarrierCtx is PE.Barrier that ctx bounds. If ctx ends first it returns
// an error wrapping ctx.Err() and ErrDiverged, and this PE's collective
// calls are broken for good (see the package documentation, "Bounded
// waits"); if ctx is done before the call, it returns at once and nothing
// changes.
func BarrierCtx(ctx context.Context, pe *PE) error {
	if err := nilCtx(ctx, "BarrierCtx"); err != nil {
		return err
	}
	if err := pe.check(); err != nil {
		return err
	}
	if err := spansNodes(pe, "BarrierCtx", "Barrier"); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("symheap: Barrier on PE %d: %w (not begun: nothing changed)", pe.rank, err)
	}
	pe.syncCacheStats()
	if pe.npes == 1 {
		pe.rma.quietAll()
		return nil
	}
	return pe.ext.teams.BarrierStop(stopOf(ctx))
}

// SyncCtx is Sync that ctx bounds, as BarrierCtx is PE.Barrier: if ctx
// ends first, this PE's collective calls are broken for good.
func (t *Team) SyncCtx(ctx context.Context) error {
	if err := nilCtx(ctx, "SyncCtx"); err != nil {
		return err
	}
	if farTeam(t) != nil {
		return fmt.Errorf("symheap: SyncCtx: the job spans nodes: %w (bounded waits across nodes are not supported yet; call Sync)", errs.ErrNotSupported)
	}
	return (*team.Team)(t).SyncStop(stopOf(ctx))
}

// WaitUntilCtx is WaitUntil that ctx bounds. If ctx ends first it returns
// an error wrapping ctx.Err(), and nothing has changed.
func WaitUntilCtx[T Integer](ctx context.Context, pe *PE, p *T, cmp Cmp, v T) error {
	if err := nilCtx(ctx, "WaitUntilCtx"); err != nil {
		return err
	}
	return waitUntil(pe, p, cmp, v, stopOf(ctx))
}

// RecvCtx is PE.Recv that ctx bounds. If ctx ends first it returns an
// error wrapping ctx.Err(), and no message was taken: a later receive
// gets the one this one would have. A large message that has already
// matched the receive is being copied into buf; RecvCtx then receives it
// to the end, as Recv would, and returns it.
func RecvCtx(ctx context.Context, pe *PE, buf []byte, source, tag int) (Status, error) {
	if err := nilCtx(ctx, "RecvCtx"); err != nil {
		return Status{}, err
	}
	if err := pe.checkOpen(); err != nil {
		return Status{}, err
	}
	if err := spansNodes(pe, "RecvCtx", "Recv"); err != nil {
		return Status{}, err
	}
	st, err := pe.ext.msg.RecvStop(buf, source, tag, stopOf(ctx))
	return Status(st), err
}

// WaitCtx is Wait that ctx bounds. If ctx ends first it returns an error
// wrapping ctx.Err(), and the request is still pending: Wait, Test or
// WaitCtx it again later.
func (r *Request) WaitCtx(ctx context.Context) (Status, error) {
	if err := nilCtx(ctx, "WaitCtx"); err != nil {
		return Status{}, err
	}
	if farJob.Load() != nil {
		return Status{}, fmt.Errorf("symheap: WaitCtx: the job spans nodes: %w (bounded waits across nodes are not supported yet; call Wait)", errs.ErrNotSupported)
	}
	st, err := (*msg.Request)(r).WaitStop(stopOf(ctx))
	return Status(st), err
}

// SetLockCtx is PE.SetLock that ctx bounds. If ctx ends first it returns
// an error wrapping ctx.Err(); the lock is not held by this PE and stays
// usable by the others (the ticket this call took is passed on when its
// turn comes).
func SetLockCtx(ctx context.Context, pe *PE, l *int64) error {
	if err := nilCtx(ctx, "SetLockCtx"); err != nil {
		return err
	}
	if farLock(pe) {
		return fmt.Errorf("symheap: SetLockCtx: the lock's state lives on PE 0, on another node: %w (bounded waits across nodes are not supported yet; call SetLock)", errs.ErrNotSupported)
	}
	return setLock(pe, l, stopOf(ctx))
}

// stopOf returns the stop function of a bounded wait: ctx's error, asked
// first by the wait's liveness check.
func stopOf(ctx context.Context) func() error { return ctx.Err }

// nilCtx refuses a nil context.
func nilCtx(ctx context.Context, op string) error {
	if ctx == nil {
		return fmt.Errorf("symheap: %s with a nil context: %w (pass context.Background() to wait without a bound)", op, ErrBadArg)
	}
	return nil
}

// spansNodes refuses a bounded call op in a job that spans nodes, where
// its wait is not bounded yet (plain names the unbounded call).
func spansNodes(pe *PE, op, plain string) error {
	if pe.far == nil {
		return nil
	}
	return fmt.Errorf("symheap: %s: the job spans nodes: %w (bounded waits across nodes are not supported yet; call %s)", op, errs.ErrNotSupported, plain)
}

// waitStop is waitSignal on PE 0's signal whose wait stop can end: stop
// is asked first in the liveness check. cause is stop's error when it
// ended the wait (err is then the same).
func waitStop(r *rmaLayer, cond func() bool, live, stop func() error) (err, cause error) {
	err = r.waitSignal(0, cond, func() error {
		if err := stop(); err != nil {
			cause = err
			return err
		}
		return live()
	})
	if err == nil {
		cause = nil // the wait ended well after all (shmsync.Lost)
	}
	return err, cause
}
