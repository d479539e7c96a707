package execution

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/cbtype"
	"github.com/commandbus/commandbus/driver"
)

// SuspendRequested reports whether an operator asked to suspend the execution while this lease
// holds it, as the last acquire, checkpoint or heartbeat saw it. A runner that sees it starts no
// new step and releases the execution: the driver then stores it SUSPENDED.
func (l *Lease) SuspendRequested() bool { return l.suspendRequested.Load() }

// applySuspension mirrors what a committed checkpoint reported about a suspend request: a release
// with a non-terminal status stored SUSPENDED instead, remembering the released status.
func (l *Lease) applySuspension(cp *driver.ExecutionCheckpoint) {
	if !cp.SuspendRequested {
		l.suspendRequested.Store(false)
		return
	}
	if cp.Release || cp.Status.Terminal() {
		l.suspendRequested.Store(false)
		if cp.Release && !cp.Status.Terminal() && cp.Status != driver.ExecutionSuspended {
			l.Row.SuspendedFrom = driver.SuspendedFromStatus(cp.Status)
			l.Row.Status = driver.ExecutionSuspended
		}
		return
	}
	l.suspendRequested.Store(true)
}

// Heartbeat renews the lease without writing progress, so a step that runs longer than the lease
// keeps its execution. It returns ErrFenced when the lease was lost (another runner took the
// execution, or it was released). It touches only the lease's end in the database and the
// suspend request here, so it may run beside the lease's own checkpoints.
func (l *Lease) Heartbeat(ctx context.Context) error {
	requested, err := l.engine.cfg.Exec.ExecutionHeartbeat(ctx, &driver.ExecutionHeartbeatParams{
		ID: l.Row.ID, Fence: l.Row.Fence, Lease: l.engine.cfg.Lease, Now: l.engine.cfg.Now(),
	})
	if errors.Is(err, driver.ErrNotFound) {
		return ErrFenced
	}
	if err != nil {
		return err
	}
	l.suspendRequested.Store(requested)
	return nil
}

// KeepAlive heartbeats the lease every third of the lease in a goroutine until stop is called
// (or ctx ends, or the lease is lost); run it around work that may outlast the lease, such as a
// step's function. stop waits for the goroutine, so no heartbeat runs after it returns.
func (l *Lease) KeepAlive(ctx context.Context) (stop func()) {
	interval := l.engine.cfg.Lease / 3
	if interval <= 0 {
		return func() {}
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			// Worth waiting for as long as the lease lasts: a renewal that lands late still
			// renews it if nobody took the execution meanwhile (the fence decides).
			hbCtx, cancel := context.WithTimeout(ctx, l.engine.cfg.Lease)
			err := l.Heartbeat(hbCtx)
			cancel()
			switch {
			case errors.Is(err, ErrFenced):
				l.engine.cfg.Logger.Warn("lease lost while a step ran; its checkpoint will be refused", "execution_id", l.Row.ID)
				return
			case err != nil && ctx.Err() == nil:
				l.engine.cfg.Logger.Warn("renewing the lease failed; trying again", "execution_id", l.Row.ID, "error", err)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-exited
		})
	}
}

// Suspend suspends an execution, or asks the runner holding it to (see driver.ExecutionStatus),
// and returns the row after. It is audited and logged by the driver. Errors: driver.ErrNotFound,
// and driver.ErrConflict when the execution is terminal or already suspended.
func (e *Engine) Suspend(ctx context.Context, id uuid.UUID, actor, reason string) (*driver.ExecutionRow, error) {
	var events bool
	row, err := e.cfg.Exec.ExecutionSuspend(ctx, &driver.ExecutionSuspendParams{ID: id, Actor: actor, Reason: reason, Now: e.cfg.Now(),
		Outbox: e.changeOutbox(cbtype.EventSuspended, actor, reason, &events)})
	if err != nil {
		return nil, err
	}
	if events {
		e.notifyOutbox(ctx)
	}
	if row.Status == driver.ExecutionSuspended {
		e.logs.forget(id) // the log grew outside a lease
		e.cfg.Logger.Info("execution suspended", "execution_id", id, "from", row.SuspendedFrom, "actor", actor)
	} else {
		e.cfg.Logger.Info("execution suspend requested; its runner stops after the running step", "execution_id", id, "actor", actor)
	}
	return row, nil
}

// Resume gives a suspended execution back the status it had and returns the row after. One with
// work waiting (runnable, responses arrived, retry due) is woken at once; one whose deadline or
// wait timeout passed during the suspension gets that action now, here, when this engine runs its
// type (else the pollers apply it). On an execution whose runner was only asked to suspend, it
// cancels the request. Errors: driver.ErrNotFound, and driver.ErrConflict when there is nothing
// to resume.
func (e *Engine) Resume(ctx context.Context, id uuid.UUID, actor, reason string) (*driver.ExecutionRow, error) {
	var events bool
	row, err := e.cfg.Exec.ExecutionResume(ctx, &driver.ExecutionResumeParams{ID: id, Actor: actor, Reason: reason, Now: e.cfg.Now(),
		Outbox: e.changeOutbox(cbtype.EventResumed, actor, reason, &events)})
	if err != nil {
		return nil, err
	}
	if events {
		e.notifyOutbox(ctx)
	}
	if row.LeaseUntil != nil {
		e.cfg.Logger.Info("execution suspend request cancelled", "execution_id", id, "actor", actor)
		return row, nil // a runner holds it: only its pending request was cancelled
	}
	e.logs.forget(id)
	e.cfg.Logger.Info("execution resumed", "execution_id", id, "status", row.Status, "actor", actor)
	now := e.cfg.Clock()
	deadlineDue := row.DeadlineAt != nil && !now.Before(*row.DeadlineAt) && !driver.DeadlineHandled(row)
	timeoutDue := row.Status == driver.ExecutionWaitingForAsync && row.NextWaitTimeoutAt != nil &&
		!now.Before(*row.NextWaitTimeoutAt) && row.ResponsesReceived <= row.ResponsesApplied
	if (deadlineDue || timeoutDue) && e.runner(row.Type) != nil {
		if err := e.applyDueAfterResume(ctx, id, deadlineDue); err != nil {
			return nil, err
		}
		if after, err := e.cfg.Exec.ExecutionGet(ctx, id); err == nil {
			row = after
		}
		return row, nil
	}
	if row.WakeAt != nil && !row.WakeAt.After(row.UpdatedAt) {
		e.Wake(ctx) // woken by the resume (which stamps both with its now), or earlier
	}
	return row, nil
}

// applyDueAfterResume applies the deadline action (or the wait timeout) that fell due while the
// execution was suspended. A runner that took it meanwhile leaves it to the pollers.
func (e *Engine) applyDueAfterResume(ctx context.Context, id uuid.UUID, deadline bool) error {
	lease, err := e.Acquire(ctx, id)
	if errors.Is(err, ErrBusy) {
		return nil
	}
	if err != nil {
		return err
	}
	if deadline {
		err = e.deadline(ctx, lease)
	} else {
		err = e.waitTimedOut(ctx, lease)
	}
	if errors.Is(err, ErrFenced) {
		return nil
	}
	return err
}
