package process

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/execution"
	"github.com/commandbus/commandbus/internal/orchestrate"
)

// ErrBusy is returned by an operator action on an execution a runner holds right now; try again
// in a moment.
var ErrBusy = execution.ErrBusy

func validateAction(a commandbus.OperatorAction) error { return a.Validate() }

// acquireFor leases an execution of this type for an operator action, checking its status.
func (m *Manager[S]) acquireFor(ctx context.Context, id uuid.UUID, action commandbus.OperatorAction, allowed func(driver.ExecutionStatus) bool) (*execution.Lease, error) {
	if err := validateAction(action); err != nil {
		return nil, err
	}
	lease, err := m.engine.Acquire(ctx, id)
	if err != nil {
		return nil, orchestrate.Queued(ctx, m.engine, id, Model, m.typ, err)
	}
	row := lease.Row
	if row.Type != m.typ || !allowed(row.Status) {
		_ = lease.Release(ctx)
		if row.Type != m.typ {
			return nil, fmt.Errorf("%w: execution %s is a %q, not a %q", commandbus.ErrNotFound, id, row.Type, m.typ)
		}
		return nil, fmt.Errorf("%w: execution %s is %s", commandbus.ErrInvalidState, id, row.Status)
	}
	lease.TraceOperatorAction(ctx, action.Actor, action.Reason)
	return lease, nil
}

func (m *Manager[S]) audit(ctx context.Context, id uuid.UUID, action string, op commandbus.OperatorAction, details any) {
	if err := m.engine.Exec().AuditLogInsert(ctx, &driver.AuditLogInsertParams{
		EntityType: "execution", EntityID: id.String(), Action: action, Actor: op.Actor, Reason: op.Reason,
		Details: marshalOrNil(details), Now: m.engine.Config().Now(),
	}); err != nil {
		m.logger.Error("writing the audit log failed (the execution log has the action)", "execution_id", id, "action", action, "error", err)
	}
	m.logger.Info("operator action on execution", "execution_id", id, "action", action, "actor", op.Actor, "reason", op.Reason)
}

// Retry resumes an execution waiting in the troubleshooting queue: every step gets a fresh
// attempt budget and Execute replays from the top, in the caller's goroutine. An execution parked
// with COMPENSATION_FAILED runs its failed compensations again instead; if one fails again it
// stays parked and Retry returns ErrCompensationFailed.
func (m *Manager[S]) Retry(ctx context.Context, id uuid.UUID, action commandbus.OperatorAction) error {
	lease, err := m.acquireFor(ctx, id, action, func(s driver.ExecutionStatus) bool { return s == driver.ExecutionWaitingForTSQ })
	if err != nil {
		return err
	}
	retry := &driver.ExecutionLogEntry{EntryType: entryTSQRetry, Name: "retry", Actor: action.Actor, Reason: action.Reason}
	if lease.Row.ErrorCode == CodeCompensationFailed {
		return m.retryCompensations(ctx, lease, action, retry)
	}
	if lease.Row.ErrorCode == CodeCommandParked {
		if done, err := m.retryParkedCommand(ctx, lease, action); done || err != nil {
			return err
		}
	}
	m.audit(ctx, id, entryTSQRetry, action, nil)
	return m.run(ctx, lease, []*driver.ExecutionLogEntry{retry}, nil)
}

// retryParkedCommand retries, from the command troubleshooting queue, the command an execution
// parked with COMMAND_PARKED waits on: the command runs again and its reply resumes the
// execution, as when the operator retries the command itself. It reports false (and keeps the
// lease) when the command no longer waits there and has ended, so the step is sent again; a
// command that is still on its way (retried already) is refused, its reply will come.
func (m *Manager[S]) retryParkedCommand(ctx context.Context, lease *execution.Lease, action commandbus.OperatorAction) (bool, error) {
	x, err := m.load(ctx, lease)
	if err != nil {
		return true, m.abandon(ctx, lease, err)
	}
	var step string
	var h *stepHistory
	for name, sh := range x.history {
		if sh.last == statusCommandParked {
			step, h = name, sh
		}
	}
	if h == nil {
		return false, nil
	}
	cmd, err := m.client.GetCommand(ctx, h.commandID)
	if err != nil {
		_ = lease.Release(ctx)
		return true, fmt.Errorf("reading the parked command %s of step %q: %w", h.commandID, step, err)
	}
	switch {
	case cmd.Status.Terminal():
		return false, nil
	case cmd.Status != driver.CommandStatusInTSQ:
		_ = lease.Release(ctx)
		return true, fmt.Errorf("%w: the command %s of step %q is %s, no longer parked: its reply will resume execution %s",
			commandbus.ErrInvalidState, cmd.ID, step, cmd.Status, x.ID)
	}
	details := map[string]any{"step": step, "commandId": cmd.ID}
	// Not a TSQ_RETRY entry: the step keeps its attempt, so the command's reply answers it.
	x.log(&driver.ExecutionLogEntry{EntryType: entryCommand, Name: step, StepStatus: statusCommandRetried,
		Attempt: h.attempt, Actor: action.Actor, Reason: action.Reason, Request: marshalOrNil(details)})
	// The execution keeps waiting in the troubleshooting queue until the command's reply.
	if err := x.checkpoint(func(cp *driver.ExecutionCheckpoint) {
		cp.Status, cp.Release = driver.ExecutionWaitingForTSQ, true
		cp.ErrorCode, cp.ErrorMessage = lease.Row.ErrorCode, lease.Row.ErrorMessage
	}); err != nil {
		return true, err
	}
	m.audit(ctx, x.ID, entryTSQRetry, action, details)
	if _, err := m.client.TSQ().Retry(ctx, cmd.ID, action); err != nil {
		return true, fmt.Errorf("retrying the parked command %s of step %q: %w", cmd.ID, step, err)
	}
	return true, nil
}

// retryCompensations runs the failed compensations of an execution parked with
// COMPENSATION_FAILED again, in reverse order; it ends as the compensation pass meant to
// (COMPENSATED or CANCELLED), or parks again with ErrCompensationFailed.
func (m *Manager[S]) retryCompensations(ctx context.Context, lease *execution.Lease, action commandbus.OperatorAction, retry *driver.ExecutionLogEntry) error {
	x, pass, err := m.loadParkedCompensation(ctx, lease)
	if err != nil {
		return err
	}
	failed := x.failedCompensations()
	m.audit(ctx, x.ID, entryTSQRetry, action, map[string]any{"compensations": failed})
	retry.Request = marshalOrNil(map[string]any{"compensations": failed})
	x.log(retry)
	return m.compensate(x, pass.final, pass.code, pass.message, true)
}

// loadParkedCompensation loads an execution parked with COMPENSATION_FAILED and registers its
// compensations; on failure the lease is given back and the execution stays parked.
func (m *Manager[S]) loadParkedCompensation(ctx context.Context, lease *execution.Lease) (*Execution[S], compensationPass, error) {
	x, err := m.load(ctx, lease)
	if err != nil {
		return nil, compensationPass{}, m.abandon(ctx, lease, err)
	}
	pass := m.lastCompensationPass(x)
	if err := m.collect(x); err != nil {
		_ = m.abandon(ctx, lease, err)
		return nil, pass, fmt.Errorf("%w: execution %s cannot be compensated: its replay failed: %v", commandbus.ErrInvalidState, x.ID, err)
	}
	return x, pass, nil
}

// skipCompensations marks the failed compensations of an execution parked with
// COMPENSATION_FAILED as skipped (the operator undid the effects by hand) and ends it as the
// compensation pass meant to, COMPENSATED or CANCELLED.
func (m *Manager[S]) skipCompensations(ctx context.Context, lease *execution.Lease, step string, action commandbus.OperatorAction) error {
	x, pass, err := m.loadParkedCompensation(ctx, lease)
	if err != nil {
		return err
	}
	failed := x.failedCompensations()
	if len(failed) == 0 || step != lease.Row.Step && !slices.Contains(failed, step) {
		_ = lease.Release(ctx)
		return &commandbus.ValidationError{Field: "step", Message: fmt.Sprintf("execution %s has no failed compensation of step %q (failed: %s)",
			x.ID, step, strings.Join(failed, ", "))}
	}
	m.audit(ctx, x.ID, "SKIP", action, map[string]any{"step": step, "compensations": failed})
	x.log(&driver.ExecutionLogEntry{EntryType: entryTSQRetry, Name: "skip", Actor: action.Actor, Reason: action.Reason,
		Request: marshalOrNil(map[string]any{"step": step, "compensations": failed})})
	for _, name := range failed {
		x.log(&driver.ExecutionLogEntry{EntryType: entryCompensation, Name: name, StepStatus: statusCompSkipped,
			Actor: action.Actor, Reason: "skipped by operator: " + action.Reason})
	}
	return x.checkpoint(func(cp *driver.ExecutionCheckpoint) {
		cp.Status, cp.Release = pass.final, true
		cp.NextRetryAt, cp.NextWaitTimeoutAt, cp.CurrentWait = nil, nil, ""
		cp.ErrorCode, cp.ErrorMessage = pass.code, pass.message
	})
}

// CancelOverride cancels an execution that is not running or finished, optionally running the
// compensations of its completed steps first (in reverse order). It ends CANCELLED. With
// compensations, it refuses (ErrInvalidState, nothing changed) an execution whose compensations
// cannot be found because its replay fails, and returns ErrCompensationFailed when a compensation
// failed: the execution then waits in the troubleshooting queue with COMPENSATION_FAILED.
func (m *Manager[S]) CancelOverride(ctx context.Context, id uuid.UUID, runCompensations bool, action commandbus.OperatorAction) error {
	if done, err := orchestrate.CancelQueued(ctx, m.engine, id, Model, m.typ, action, entryTSQCancel,
		map[string]bool{"runCompensations": runCompensations}); done {
		return err
	}
	lease, err := m.acquireFor(ctx, id, action, func(s driver.ExecutionStatus) bool { return !s.Terminal() && s != driver.ExecutionCompensating })
	if err != nil {
		return err
	}
	x, err := m.load(ctx, lease)
	if err != nil {
		return m.abandon(ctx, lease, err)
	}
	if runCompensations {
		// Find the compensations before changing anything: an execution whose replay cannot be
		// trusted stays where it is, and the operator is told.
		if err := m.collect(x); err != nil {
			_ = m.abandon(ctx, lease, err)
			return fmt.Errorf("%w: execution %s cannot be compensated: its replay failed: %v", commandbus.ErrInvalidState, id, err)
		}
	}
	if !runCompensations {
		if err := m.end(x, driver.ExecutionCancelled); err != nil {
			return m.abandon(ctx, lease, err)
		}
	}
	m.audit(ctx, id, entryTSQCancel, action, map[string]bool{"runCompensations": runCompensations})
	x.log(&driver.ExecutionLogEntry{EntryType: entryTSQCancel, Name: "cancel", Actor: action.Actor, Reason: action.Reason,
		Request: marshalOrNil(map[string]bool{"runCompensations": runCompensations})})
	message := "cancelled by " + action.Actor + ": " + action.Reason
	if runCompensations {
		return m.compensate(x, driver.ExecutionCancelled, commandbus.CodeCancelled, message, true)
	}
	return x.checkpoint(func(cp *driver.ExecutionCheckpoint) {
		cp.Status, cp.Release = driver.ExecutionCancelled, true
		cp.NextRetryAt, cp.NextWaitTimeoutAt, cp.CurrentWait = nil, nil, ""
		cp.ErrorCode, cp.ErrorMessage = commandbus.CodeCancelled, message
	})
}

// CompleteOverride force-completes an execution that is not running or finished, first setting
// the given top-level state fields (by their JSON names) — the values an operator knows from
// outside, such as a reference confirmed by phone. Unknown fields are rejected and change nothing.
func (m *Manager[S]) CompleteOverride(ctx context.Context, id uuid.UUID, stateOverrides map[string]any, action commandbus.OperatorAction) error {
	if err := validateAction(action); err != nil {
		return err
	}
	lease, err := m.acquireFor(ctx, id, action, func(s driver.ExecutionStatus) bool { return !s.Terminal() && s != driver.ExecutionCompensating })
	if err != nil {
		return err
	}
	state, err := applyOverrides[S](lease.Row.State, stateOverrides)
	if err != nil {
		_ = lease.Release(ctx)
		return err
	}
	x, err := m.load(ctx, lease)
	if err != nil {
		return m.abandon(ctx, lease, err)
	}
	x.State = state
	if err := m.end(x, driver.ExecutionCompleted); err != nil {
		return m.abandon(ctx, lease, err)
	}
	m.audit(ctx, id, entryTSQComplete, action, stateOverrides)
	x.log(&driver.ExecutionLogEntry{EntryType: entryTSQComplete, Name: "complete", Actor: action.Actor, Reason: action.Reason, Request: marshalOrNil(stateOverrides)})
	return x.checkpoint(func(cp *driver.ExecutionCheckpoint) {
		cp.Status, cp.Release = driver.ExecutionCompleted, true
		cp.NextRetryAt, cp.NextWaitTimeoutAt, cp.CurrentWait = nil, nil, ""
	})
}

// applyOverrides merges top-level fields into the stored state and decodes it strictly.
func applyOverrides[S any](stored json.RawMessage, overrides map[string]any) (*S, error) {
	fields := map[string]json.RawMessage{}
	if err := json.Unmarshal(stored, &fields); err != nil {
		return nil, fmt.Errorf("state is not a JSON object; overrides need one: %w", err)
	}
	for name, value := range overrides {
		encoded, err := json.Marshal(value)
		if err != nil {
			return nil, &commandbus.ValidationError{Field: "stateOverrides." + name, Message: err.Error()}
		}
		fields[name] = encoded
	}
	merged, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	state := new(S)
	dec := json.NewDecoder(bytes.NewReader(merged))
	dec.DisallowUnknownFields()
	if err := dec.Decode(state); err != nil {
		return nil, &commandbus.ValidationError{Field: "stateOverrides", Message: err.Error()}
	}
	return state, nil
}

// Skip completes the step an execution is stuck on with an operator-supplied result (the
// operator's "skip to next"), then resumes it in the caller's goroutine: replay returns result for the step
// as if it had run. It applies to executions in the troubleshooting queue, waiting for a response
// or for a retry; step must be the one the execution is at. On an execution parked with
// COMPENSATION_FAILED, Skip marks every failed compensation skipped (step must be the one the
// execution is at or one whose compensation failed; result is ignored) and ends the execution as
// its compensation meant to, COMPENSATED or CANCELLED.
func (m *Manager[S]) Skip(ctx context.Context, id uuid.UUID, step string, result json.RawMessage, action commandbus.OperatorAction) error {
	if len(result) > 0 && !json.Valid(result) {
		return &commandbus.ValidationError{Field: "result", Message: "must be valid JSON"}
	}
	lease, err := m.acquireFor(ctx, id, action, func(s driver.ExecutionStatus) bool {
		return s == driver.ExecutionWaitingForTSQ || s == driver.ExecutionWaitingForAsync || s == driver.ExecutionWaitingForRetry
	})
	if err != nil {
		return err
	}
	if lease.Row.Status == driver.ExecutionWaitingForTSQ && lease.Row.ErrorCode == CodeCompensationFailed {
		return m.skipCompensations(ctx, lease, step, action)
	}
	if lease.Row.Step != step {
		_ = lease.Release(ctx)
		return &commandbus.ValidationError{Field: "step", Message: fmt.Sprintf("execution %s is at step %q, not %q", id, lease.Row.Step, step)}
	}
	m.audit(ctx, id, "SKIP", action, map[string]any{"step": step, "result": result})
	return m.run(ctx, lease, []*driver.ExecutionLogEntry{
		{EntryType: entryTSQRetry, Name: "skip", Actor: action.Actor, Reason: action.Reason, Request: marshalOrNil(map[string]string{"step": step})},
		{EntryType: entryStep, Name: step, StepStatus: statusCompleted, Response: result, Actor: action.Actor, Reason: "skipped by operator: " + action.Reason},
	}, nil)
}

// end tells a process that implements Ender how its execution is about to end.
func (m *Manager[S]) end(x *Execution[S], status driver.ExecutionStatus) error {
	if e, ok := m.process.(Ender[S]); ok {
		if err := e.End(x, status); err != nil {
			return fmt.Errorf("recording the end (%s) of execution %s: %w", status, x.ID, err)
		}
	}
	return nil
}
