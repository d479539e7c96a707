package tcc

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/execution"
	"github.com/commandbus/commandbus/internal/orchestrate"
)

// ErrBusy is returned by an operator action on a transaction a runner holds right now; try again
// in a moment.
var ErrBusy = execution.ErrBusy

// acquireFor leases a transaction of this type for an operator action, checking its status.
func (m *Manager) acquireFor(ctx context.Context, id uuid.UUID, action commandbus.OperatorAction, allowed func(driver.ExecutionStatus) bool) (*execution.Lease, error) {
	return orchestrate.AcquireFor(ctx, m.engine, id, Model, m.def.id, action, allowed)
}

func (m *Manager) audit(ctx context.Context, id uuid.UUID, action string, op commandbus.OperatorAction, details any) {
	orchestrate.Audit(ctx, m.engine, m.logger, id, action, op, details)
}

func parked(s driver.ExecutionStatus) bool { return s == driver.ExecutionWaitingForTSQ }

// Retry moves a transaction out of the troubleshooting queue and runs it in the caller's
// goroutine: failed cancels run again with a fresh attempt budget, and a transaction parked
// with DEFINITION_CHANGED adopts the definition registered now.
func (m *Manager) Retry(ctx context.Context, id uuid.UUID, action commandbus.OperatorAction) error {
	lease, err := m.acquireFor(ctx, id, action, parked)
	if err != nil {
		return err
	}
	m.audit(ctx, id, entryTSQRetry, action, nil)
	info, _ := json.Marshal(retryInfo{Hash: m.hash})
	entry := &driver.ExecutionLogEntry{EntryType: entryTSQRetry, Name: lease.Row.Step, Actor: action.Actor, Reason: action.Reason, Request: info}
	lease.Row.Status = driver.ExecutionExecuting
	if lease.Row.ErrorCode == CodeCancelFailed {
		lease.Row.Status = driver.ExecutionCompensating
	}
	return m.run(ctx, lease, []*driver.ExecutionLogEntry{entry})
}

// CancelOverride cancels a transaction that has not ended and is not cancelling already. With
// runCompensations, the participants whose try succeeded and that have not confirmed are
// cancelled first (in reverse order); the transaction ends CANCELLED, or waits in the
// troubleshooting queue with CANCEL_FAILED if a cancel failed. Without, it ends CANCELLED at
// once and no cancel runs.
func (m *Manager) CancelOverride(ctx context.Context, id uuid.UUID, runCompensations bool, action commandbus.OperatorAction) error {
	if done, err := orchestrate.CancelQueued(ctx, m.engine, id, Model, m.def.id, action, entryTSQCancel,
		map[string]bool{"runCompensations": runCompensations}); done {
		return err
	}
	lease, err := m.acquireFor(ctx, id, action, func(s driver.ExecutionStatus) bool { return !s.Terminal() && s != driver.ExecutionCompensating })
	if err != nil {
		return err
	}
	m.audit(ctx, id, entryTSQCancel, action, map[string]bool{"runCompensations": runCompensations})
	entry := &driver.ExecutionLogEntry{EntryType: entryTSQCancel, Name: "cancel", Actor: action.Actor, Reason: action.Reason}
	entry.Request, _ = json.Marshal(map[string]bool{"runCompensations": runCompensations})
	if runCompensations {
		entries, err := lease.Log(ctx)
		if err != nil {
			return m.abandon(ctx, lease, err)
		}
		if f := fold(entries); f.phase == PhaseCancel {
			_ = lease.Release(ctx)
			return fmt.Errorf("%w: transaction %s is cancelling already", commandbus.ErrInvalidState, id)
		}
		start := &driver.ExecutionLogEntry{EntryType: entryPhase, Name: string(PhaseCancel), StepStatus: statusStarted}
		lease.Row.Status = driver.ExecutionCompensating
		return m.run(ctx, lease, []*driver.ExecutionLogEntry{entry, start})
	}
	cp := lease.Base()
	cp.Status, cp.Release, cp.NextRetryAt = driver.ExecutionCancelled, true, nil
	cp.ErrorCode, cp.ErrorMessage, cp.Log = commandbus.CodeCancelled, "cancelled by "+action.Actor+": "+action.Reason, []*driver.ExecutionLogEntry{entry}
	return lease.Checkpoint(ctx, cp)
}

// CompleteOverride force-completes a transaction that has not ended. A TCC transaction's input
// takes no overrides.
func (m *Manager) CompleteOverride(ctx context.Context, id uuid.UUID, stateOverrides map[string]any, action commandbus.OperatorAction) error {
	if len(stateOverrides) > 0 {
		return &commandbus.ValidationError{Field: "stateOverrides", Message: "a TCC transaction takes no state overrides"}
	}
	lease, err := m.acquireFor(ctx, id, action, func(s driver.ExecutionStatus) bool { return !s.Terminal() })
	if err != nil {
		return err
	}
	m.audit(ctx, id, entryTSQComplete, action, nil)
	cp := lease.Base()
	cp.Status, cp.Release, cp.NextRetryAt, cp.ErrorCode, cp.ErrorMessage = driver.ExecutionCompleted, true, nil, "", ""
	cp.Log = []*driver.ExecutionLogEntry{{EntryType: entryTSQComplete, Name: "complete", Actor: action.Actor, Reason: action.Reason}}
	return lease.Checkpoint(ctx, cp)
}

// Skip gives up the failed cancel of a participant of a transaction parked with CANCEL_FAILED
// (the operator undid the reservation by other means) and runs the transaction on: the other
// failed cancels run again, and with none left it ends CANCELED. result is ignored.
func (m *Manager) Skip(ctx context.Context, id uuid.UUID, step string, result json.RawMessage, action commandbus.OperatorAction) error {
	if m.byID[step] == nil {
		return &commandbus.ValidationError{Field: "step", Message: fmt.Sprintf("TCC %q has no participant %q", m.def.id, step)}
	}
	lease, err := m.acquireFor(ctx, id, action, parked)
	if err != nil {
		return err
	}
	entries, err := lease.Log(ctx)
	if err != nil {
		return m.abandon(ctx, lease, err)
	}
	if lease.Row.ErrorCode != CodeCancelFailed || fold(entries).peek(step, PhaseCancel).status != statusFailed {
		_ = lease.Release(ctx)
		return fmt.Errorf("%w: the cancel of participant %q of transaction %s has not failed", commandbus.ErrInvalidState, step, id)
	}
	m.audit(ctx, id, entryTSQSkip, action, map[string]string{"participant": step})
	skip := &driver.ExecutionLogEntry{EntryType: entryTSQSkip, Name: step, Actor: action.Actor, Reason: action.Reason}
	// The other failed cancels get a fresh budget, as with Retry.
	retry := &driver.ExecutionLogEntry{EntryType: entryTSQRetry, Name: step, Actor: action.Actor, Reason: action.Reason}
	lease.Row.Status = driver.ExecutionCompensating
	return m.run(ctx, lease, []*driver.ExecutionLogEntry{skip, retry})
}

// Suspend pauses a transaction: a runner holding it finishes the phase attempt it runs and
// starts no other; nothing runs it until Resume. Audited and logged.
func (m *Manager) Suspend(ctx context.Context, id uuid.UUID, action commandbus.OperatorAction) error {
	if err := m.checkOwn(ctx, id, action); err != nil {
		return err
	}
	if _, err := m.engine.Suspend(ctx, id, action.Actor, action.Reason); err != nil {
		return fmt.Errorf("tcc: suspending transaction %s: %w", id, err)
	}
	m.logger.Info("operator action on execution", "execution_id", id, "action", "suspend", "actor", action.Actor, "reason", action.Reason)
	return nil
}

// Resume continues a suspended transaction where it stopped, or cancels a pending suspend
// request. Audited and logged.
func (m *Manager) Resume(ctx context.Context, id uuid.UUID, action commandbus.OperatorAction) error {
	if err := m.checkOwn(ctx, id, action); err != nil {
		return err
	}
	if _, err := m.engine.Resume(ctx, id, action.Actor, action.Reason); err != nil {
		return fmt.Errorf("tcc: resuming transaction %s: %w", id, err)
	}
	m.logger.Info("operator action on execution", "execution_id", id, "action", "resume", "actor", action.Actor, "reason", action.Reason)
	return nil
}

func (m *Manager) checkOwn(ctx context.Context, id uuid.UUID, action commandbus.OperatorAction) error {
	if err := action.Validate(); err != nil {
		return err
	}
	row, err := m.engine.Exec().ExecutionGet(ctx, id)
	if err != nil {
		return err
	}
	if row.Model != Model || row.Type != m.def.id {
		return fmt.Errorf("%w: execution %s is a %s %q, not TCC %q", commandbus.ErrNotFound, id, row.Model, row.Type, m.def.id)
	}
	return nil
}
