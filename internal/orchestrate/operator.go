package orchestrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/google/uuid"

	commandbus "github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/execution"
)

// AcquireFor leases execution id for an operator action on a (model, type) the caller owns: the
// action must be valid, the execution of that model and type (commandbus.ErrNotFound otherwise)
// and in a status allowed accepts (commandbus.ErrInvalidState otherwise). A refused lease is
// released.
func AcquireFor(ctx context.Context, engine *execution.Engine, id uuid.UUID, model, typ string,
	action commandbus.OperatorAction, allowed func(driver.ExecutionStatus) bool) (*execution.Lease, error) {
	if err := action.Validate(); err != nil {
		return nil, err
	}
	lease, err := engine.Acquire(ctx, id)
	if err != nil {
		return nil, Queued(ctx, engine, id, model, typ, err)
	}
	row := lease.Row
	if row.Model != model || row.Type != typ {
		_ = lease.Release(ctx)
		return nil, fmt.Errorf("%w: execution %s is a %s %q, not %s %q", commandbus.ErrNotFound, id, row.Model, row.Type, model, typ)
	}
	if !allowed(row.Status) {
		_ = lease.Release(ctx)
		return nil, fmt.Errorf("%w: execution %s is %s", commandbus.ErrInvalidState, id, row.Status)
	}
	lease.TraceOperatorAction(ctx, action.Actor, action.Reason)
	return lease, nil
}

// Audit records an operator action on execution id in the audit log (details, when not nil, as
// JSON) and logs it. A failed audit write is logged, not returned: the execution's own log has
// the action.
func Audit(ctx context.Context, engine *execution.Engine, logger *slog.Logger, id uuid.UUID, action string, op commandbus.OperatorAction, details any) {
	var raw json.RawMessage
	if details != nil {
		raw, _ = json.Marshal(details)
	}
	if err := engine.Exec().AuditLogInsert(ctx, &driver.AuditLogInsertParams{
		EntityType: "execution", EntityID: id.String(), Action: action, Actor: op.Actor, Reason: op.Reason,
		Details: raw, Now: engine.Config().Now(),
	}); err != nil {
		logger.Error("writing the audit log failed (the execution log has the action)", "execution_id", id, "action", action, "error", err)
	}
	logger.Info("operator action on execution", "execution_id", id, "action", action, "actor", op.Actor, "reason", op.Reason)
}

// Queued turns the error of an acquire for an operator action on a (model, type) into
// commandbus.ErrInvalidState when the execution is a QUEUED one of them (waiting for a slot of
// its tenant: no runner holds it, it is just not runnable yet, and only a cancel applies), and
// into commandbus.ErrNotFound when it is a QUEUED one of another; other errors are returned as
// they are.
func Queued(ctx context.Context, engine *execution.Engine, id uuid.UUID, model, typ string, err error) error {
	if !errors.Is(err, execution.ErrBusy) {
		return err
	}
	row, getErr := engine.Exec().ExecutionGet(ctx, id)
	if getErr != nil || row.Status != driver.ExecutionQueued {
		return err
	}
	if row.Model != model || row.Type != typ {
		return fmt.Errorf("%w: execution %s is a %s %q, not %s %q", commandbus.ErrNotFound, id, row.Model, row.Type, model, typ)
	}
	return fmt.Errorf("%w: execution %s is QUEUED, waiting for a slot of tenant %q: it can only be cancelled", commandbus.ErrInvalidState, id, row.TenantID)
}

// CancelQueued cancels execution id if it is a QUEUED execution of (model, typ), for an operator
// (see execution.Engine.CancelQueued): the log entry and the audit row are of type entry, with
// details as JSON. done reports whether the call settled the action (cancelled, or an error to
// return); when false, the execution is not a queued one of (model, typ) and the caller takes
// its leased path, which reports a missing or mismatched execution.
func CancelQueued(ctx context.Context, engine *execution.Engine, id uuid.UUID, model, typ string,
	action commandbus.OperatorAction, entry string, details any) (done bool, err error) {
	if err := action.Validate(); err != nil {
		return true, err
	}
	var raw json.RawMessage
	if details != nil {
		if raw, err = json.Marshal(details); err != nil {
			return true, err
		}
	}
	_, err = engine.CancelQueued(ctx, id, model, typ, entry, action.Actor, action.Reason, raw)
	if errors.Is(err, driver.ErrConflict) || errors.Is(err, driver.ErrNotFound) {
		return false, nil
	}
	return true, err
}
