package process

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
)

// Suspend pauses an execution of this process (any status but terminal or SUSPENDED). One no
// runner holds becomes SUSPENDED at once. One a runner holds is asked to stop: its running step
// finishes, no new step starts, and it becomes SUSPENDED when the runner lets go (unless it ends
// first). While suspended nothing runs it and async responses are recorded for later; its
// deadline and wait timeout keep counting, and their actions apply at once after Resume if they
// passed meanwhile. The action is audited (EXECUTION_SUSPEND) and logged. Errors:
// commandbus.ErrNotFound, and commandbus.ErrInvalidState when there is nothing to suspend.
func (m *Manager[S]) Suspend(ctx context.Context, id uuid.UUID, action commandbus.OperatorAction) error {
	if err := m.checkOwn(ctx, id, action); err != nil {
		return err
	}
	if _, err := m.engine.Suspend(ctx, id, action.Actor, action.Reason); err != nil {
		return fmt.Errorf("process: suspending execution %s: %w", id, err)
	}
	m.logger.Info("operator action on execution", "execution_id", id, "action", driver.AuditExecutionSuspend, "actor", action.Actor, "reason", action.Reason)
	return nil
}

// Resume continues a SUSPENDED execution of this process from where it was: it gets back the
// status it had, and runs again at once if it was running, responses arrived or its retry fell
// due; a deadline or wait timeout that passed during the suspension applies now. On an execution
// whose runner was asked to suspend but has not stopped yet, Resume cancels the request. The
// action is audited (EXECUTION_RESUME) and logged. Errors: commandbus.ErrNotFound, and
// commandbus.ErrInvalidState when the execution is neither suspended nor asked to be.
func (m *Manager[S]) Resume(ctx context.Context, id uuid.UUID, action commandbus.OperatorAction) error {
	if err := m.checkOwn(ctx, id, action); err != nil {
		return err
	}
	if _, err := m.engine.Resume(ctx, id, action.Actor, action.Reason); err != nil {
		return fmt.Errorf("process: resuming execution %s: %w", id, err)
	}
	m.logger.Info("operator action on execution", "execution_id", id, "action", driver.AuditExecutionResume, "actor", action.Actor, "reason", action.Reason)
	return nil
}

// checkOwn validates an operator action on an execution of this process type.
func (m *Manager[S]) checkOwn(ctx context.Context, id uuid.UUID, action commandbus.OperatorAction) error {
	if err := validateAction(action); err != nil {
		return err
	}
	row, err := m.engine.Exec().ExecutionGet(ctx, id)
	if err != nil {
		return err
	}
	if row.Type != m.typ {
		return fmt.Errorf("%w: execution %s is a %q, not a %q", commandbus.ErrNotFound, id, row.Type, m.typ)
	}
	return nil
}
