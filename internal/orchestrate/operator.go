package orchestrate

import (
	"context"
	"encoding/json"
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
		return nil, err
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
