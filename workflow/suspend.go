package workflow

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
)

// Suspend pauses an execution of this workflow. If no runner holds it, it is SUSPENDED at once;
// otherwise its runner lets the steps already running finish, starts no other, and releases it
// SUSPENDED. Its timeout keeps counting, but the deadline action waits for the resume. The action
// is audited and logged. Errors: commandbus.ErrNotFound, commandbus.ErrInvalidState for an
// execution that ended or is already suspended.
func (m *Manager) Suspend(ctx context.Context, id uuid.UUID, action commandbus.OperatorAction) error {
	if err := m.checkOwn(ctx, id, action); err != nil {
		return err
	}
	if _, err := m.engine.Suspend(ctx, id, action.Actor, action.Reason); err != nil {
		return fmt.Errorf("workflow: suspending execution %s: %w", id, err)
	}
	m.logger.Info("operator action on execution", "execution_id", id, "action", "suspend", "actor", action.Actor, "reason", action.Reason)
	return nil
}

// Resume continues a suspended execution of this workflow where it stopped: the steps not run
// yet run, and a timeout that passed meanwhile applies now. On an execution whose runner was
// asked to suspend but has not stopped yet, it cancels the request. Audited and logged.
func (m *Manager) Resume(ctx context.Context, id uuid.UUID, action commandbus.OperatorAction) error {
	if err := m.checkOwn(ctx, id, action); err != nil {
		return err
	}
	if _, err := m.engine.Resume(ctx, id, action.Actor, action.Reason); err != nil {
		return fmt.Errorf("workflow: resuming execution %s: %w", id, err)
	}
	m.logger.Info("operator action on execution", "execution_id", id, "action", "resume", "actor", action.Actor, "reason", action.Reason)
	return nil
}

// checkOwn validates an operator action on an execution of this workflow.
func (m *Manager) checkOwn(ctx context.Context, id uuid.UUID, action commandbus.OperatorAction) error {
	if err := action.Validate(); err != nil {
		return err
	}
	row, err := m.engine.Exec().ExecutionGet(ctx, id)
	if err != nil {
		return err
	}
	if row.Model != m.model || row.Type != m.def.id {
		return fmt.Errorf("%w: execution %s is a %s %q, not %s %q", commandbus.ErrNotFound, id, row.Model, row.Type, m.model, m.def.id)
	}
	return nil
}

// Signal sends a signal to an execution of this workflow: a gate waiting for name completes
// with payload (JSON-encoded) as its result; sent before the gate opens, it waits for it.
// signalID makes the send idempotent (empty: generated); duplicate reports a repeat.
func (m *Manager) Signal(ctx context.Context, id uuid.UUID, name string, payload any, signalID string) (duplicate bool, err error) {
	row, err := m.engine.Exec().ExecutionGet(ctx, id)
	if err != nil {
		return false, err
	}
	if row.Model != m.model || row.Type != m.def.id {
		return false, fmt.Errorf("%w: execution %s is a %s %q, not %s %q", commandbus.ErrNotFound, id, row.Model, row.Type, m.model, m.def.id)
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return false, &commandbus.ValidationError{Field: "payload", Message: "cannot be encoded as JSON: " + err.Error()}
	}
	_, duplicate, err = m.rt.Signal(ctx, id, name, raw, signalID)
	return duplicate, err
}
