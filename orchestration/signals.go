package orchestration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/cbtype"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/execution"
)

// Signal sends a named signal with a JSON payload to an execution of any model. A signal sent
// before the execution waits for it is buffered, not lost; a signalID sent before is a no-op
// (duplicate is true). An empty signalID is generated. Errors: commandbus.ErrNotFound for an
// unknown execution, commandbus.ErrInvalidState for one that ended, a ValidationError for a
// missing name or a payload that is not JSON.
func (rt *Runtime) Signal(ctx context.Context, id uuid.UUID, name string, payload json.RawMessage, signalID string) (sentID string, duplicate bool, err error) {
	params := &driver.ExecutionSignalSendParams{ExecutionID: id, SignalID: signalID, Name: name, Payload: payload}
	switch {
	case name == "":
		return "", false, &commandbus.ValidationError{Field: "name", Message: "required"}
	case len(payload) > 0 && !json.Valid(payload):
		return "", false, &commandbus.ValidationError{Field: "payload", Message: "not valid JSON"}
	}
	res, err := rt.engine.SendSignal(ctx, params)
	if err != nil {
		return "", false, err
	}
	rt.client.Logger().Info("signal sent", "execution_id", id, "signal", name, "signal_id", res.SignalID, "duplicate", res.Duplicate)
	return res.SignalID, res.Duplicate, nil
}

// PendingSignals returns an execution's signals no step has consumed yet, in the order received.
func (rt *Runtime) PendingSignals(ctx context.Context, id uuid.UUID) ([]*cbtype.ExecutionSignalRow, error) {
	return rt.engine.PendingSignals(ctx, id)
}

// Timers returns an execution's pending durable timers, earliest first.
func (rt *Runtime) Timers(ctx context.Context, id uuid.UUID) ([]*cbtype.ExecutionTimerRow, error) {
	return rt.engine.PendingTimers(ctx, id)
}

// OpenWaits returns what an execution waits for (signals, timers, replies, children).
func (rt *Runtime) OpenWaits(ctx context.Context, id uuid.UUID) ([]*cbtype.ExecutionWaitRow, error) {
	return rt.engine.OpenWaits(ctx, id)
}

// CancelTimer cancels a pending timer of an execution (an operator action, audited): it never
// fires, and the execution runs at once so its model decides what the cancellation means (a
// workflow's sleep step completes). It returns execution.ErrBusy, changing nothing, while a
// runner holds the execution; commandbus.ErrNotFound for an unknown timer;
// commandbus.ErrInvalidState for one that fired or was cancelled.
func (rt *Runtime) CancelTimer(ctx context.Context, id uuid.UUID, timerID string, action commandbus.OperatorAction) error {
	if err := action.Validate(); err != nil {
		return err
	}
	lease, err := rt.engine.Acquire(ctx, id)
	if err != nil {
		return err
	}
	if err := rt.engine.CancelTimer(ctx, id, timerID); err != nil {
		_ = lease.Release(ctx)
		if errors.Is(err, driver.ErrNotFound) {
			return fmt.Errorf("%w: execution %s has no timer %q", commandbus.ErrNotFound, id, timerID)
		}
		return err
	}
	details, _ := json.Marshal(map[string]string{"timer": timerID})
	if err := rt.engine.Exec().AuditLogInsert(ctx, &driver.AuditLogInsertParams{
		EntityType: "execution", EntityID: id.String(), Action: "TIMER_CANCEL", Actor: action.Actor, Reason: action.Reason,
		Details: details, Now: rt.engine.Config().Now(),
	}); err != nil {
		rt.client.Logger().Error("writing the audit log failed", "execution_id", id, "action", "TIMER_CANCEL", "error", err)
	}
	rt.client.Logger().Info("operator action on execution", "execution_id", id, "action", "TIMER_CANCEL", "timer", timerID, "actor", action.Actor, "reason", action.Reason)
	cp := lease.Base()
	now := rt.engine.Config().Clock()
	cp.Release, cp.WakeAt = true, &now
	cp.Log = []*driver.ExecutionLogEntry{{EntryType: "TSQ_TIMER_CANCEL", Name: timerID, Actor: action.Actor, Reason: action.Reason}}
	if err := lease.Checkpoint(ctx, cp); err != nil && !errors.Is(err, execution.ErrFenced) {
		return err
	}
	rt.engine.Wake(ctx)
	return nil
}
