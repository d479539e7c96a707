package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/execution"
	"github.com/commandbus/commandbus/internal/orchestrate"
)

// ErrBusy is returned by an operator action on an execution a runner holds right now; try again
// in a moment.
var ErrBusy = execution.ErrBusy

// acquireFor leases an execution of this workflow for an operator action, checking its status.
func (m *Manager) acquireFor(ctx context.Context, id uuid.UUID, action commandbus.OperatorAction, allowed func(driver.ExecutionStatus) bool) (*execution.Lease, error) {
	return orchestrate.AcquireFor(ctx, m.engine, id, m.model, m.def.id, action, allowed)
}

func (m *Manager) audit(ctx context.Context, id uuid.UUID, action string, op commandbus.OperatorAction, details any) {
	orchestrate.Audit(ctx, m.engine, m.logger, id, action, op, details)
}

func parked(s driver.ExecutionStatus) bool { return s == driver.ExecutionWaitingForTSQ }

// Retry moves an execution out of the troubleshooting queue and runs it in the caller's
// goroutine: failed steps get a fresh attempt budget, failed compensations run again, and an
// execution parked with DEFINITION_CHANGED adopts the definition registered now.
func (m *Manager) Retry(ctx context.Context, id uuid.UUID, action commandbus.OperatorAction) error {
	lease, err := m.acquireFor(ctx, id, action, parked)
	if err != nil {
		return err
	}
	if lease.Row.ErrorCode == CodeCommandParked {
		if done, err := m.retryParkedCommand(ctx, lease, action); done || err != nil {
			return err
		}
	}
	m.audit(ctx, id, entryTSQRetry, action, nil)
	info, _ := json.Marshal(retryInfo{Hash: m.hash})
	entry := &driver.ExecutionLogEntry{EntryType: entryTSQRetry, Name: lease.Row.Step, Actor: action.Actor, Reason: action.Reason, Request: info}
	if lease.Row.ErrorCode == CodeCompensationFailed {
		lease.Row.Status = driver.ExecutionCompensating
	} else {
		lease.Row.Status = driver.ExecutionExecuting
		lease.Row.ErrorCode, lease.Row.ErrorMessage = "", ""
	}
	return m.run(ctx, lease, []*driver.ExecutionLogEntry{entry})
}

// CancelOverride cancels an execution that has not ended. With runCompensations, the
// compensations of its completed steps run first (in reverse completion order); it ends
// CANCELLED, or waits in the troubleshooting queue with COMPENSATION_FAILED if one failed.
func (m *Manager) CancelOverride(ctx context.Context, id uuid.UUID, runCompensations bool, action commandbus.OperatorAction) error {
	if done, err := orchestrate.CancelQueued(ctx, m.engine, id, m.model, m.def.id, action, entryTSQCancel,
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
	message := "cancelled by " + action.Actor + ": " + action.Reason
	if runCompensations {
		entries, err := lease.Log(ctx)
		if err != nil {
			return m.abandon(ctx, lease, err)
		}
		f := fold(entries)
		f.cancelled = true
		return m.compensate(ctx, lease, f, []*driver.ExecutionLogEntry{entry})
	}
	if err := m.ended(ctx, lease, driver.ExecutionCancelled); err != nil {
		return err
	}
	cp := lease.Base()
	cp.Status, cp.Release, cp.NextRetryAt = driver.ExecutionCancelled, true, nil
	cp.ErrorCode, cp.ErrorMessage, cp.Log = commandbus.CodeCancelled, message, []*driver.ExecutionLogEntry{entry}
	return lease.Checkpoint(ctx, cp)
}

// CompleteOverride force-completes an execution that has not ended. stateOverrides are merged
// into the workflow's input (a JSON object) by top-level key.
func (m *Manager) CompleteOverride(ctx context.Context, id uuid.UUID, stateOverrides map[string]any, action commandbus.OperatorAction) error {
	lease, err := m.acquireFor(ctx, id, action, func(s driver.ExecutionStatus) bool { return !s.Terminal() })
	if err != nil {
		return err
	}
	cp := lease.Base()
	if len(stateOverrides) > 0 {
		input := map[string]any{}
		if len(lease.Row.State) > 0 && string(lease.Row.State) != "null" {
			if err := json.Unmarshal(lease.Row.State, &input); err != nil {
				_ = lease.Release(ctx)
				return &commandbus.ValidationError{Field: "stateOverrides", Message: "the workflow input is not a JSON object, so it takes no overrides"}
			}
		}
		maps.Copy(input, stateOverrides)
		if cp.State, err = json.Marshal(input); err != nil {
			_ = lease.Release(ctx)
			return &commandbus.ValidationError{Field: "stateOverrides", Message: err.Error()}
		}
	}
	if err := m.ended(ctx, lease, driver.ExecutionCompleted); err != nil {
		return err
	}
	m.audit(ctx, id, entryTSQComplete, action, map[string]any{"stateOverrides": stateOverrides})
	entry := &driver.ExecutionLogEntry{EntryType: entryTSQComplete, Name: "complete", Actor: action.Actor, Reason: action.Reason}
	entry.Request, _ = json.Marshal(stateOverrides)
	cp.Status, cp.Release, cp.NextRetryAt, cp.ErrorCode, cp.ErrorMessage = driver.ExecutionCompleted, true, nil, "", ""
	cp.Log = []*driver.ExecutionLogEntry{entry}
	return lease.Checkpoint(ctx, cp)
}

// Skip records a failed step as completed with result (JSON, may be empty) and runs the
// execution on from there; for an execution parked with COMPENSATION_FAILED it gives up the
// named step's compensation instead.
func (m *Manager) Skip(ctx context.Context, id uuid.UUID, step string, result json.RawMessage, action commandbus.OperatorAction) error {
	if m.steps[step] == nil && !m.mayBeInstance(step) {
		return &commandbus.ValidationError{Field: "step", Message: fmt.Sprintf("%s %q has no step %q", m.model, m.def.id, step)}
	}
	if len(result) > 0 && !json.Valid(result) {
		return &commandbus.ValidationError{Field: "result", Message: "not valid JSON"}
	}
	lease, err := m.acquireFor(ctx, id, action, parked)
	if err != nil {
		return err
	}
	entries, err := lease.Log(ctx)
	if err != nil {
		return m.abandon(ctx, lease, err)
	}
	r := fold(entries).steps[step]
	compensation := lease.Row.ErrorCode == CodeCompensationFailed
	if r == nil || !compensation && r.status != statusFailed || compensation && r.compStat != statusFailed {
		_ = lease.Release(ctx)
		return fmt.Errorf("%w: step %q of execution %s has not failed", commandbus.ErrInvalidState, step, id)
	}
	m.audit(ctx, id, entryTSQSkip, action, map[string]string{"step": step})
	if len(result) == 0 {
		result = json.RawMessage("null")
	}
	entry := &driver.ExecutionLogEntry{EntryType: entryTSQSkip, Name: step, Actor: action.Actor, Reason: action.Reason, Response: result}
	if compensation {
		lease.Row.Status = driver.ExecutionCompensating
	} else {
		lease.Row.Status = driver.ExecutionExecuting
	}
	return m.run(ctx, lease, []*driver.ExecutionLogEntry{entry})
}

// mayBeInstance reports whether step names an instance of an expanded step (its id followed by
// ":key" or "#n"); whether the execution has that instance is known once it is leased.
func (m *Manager) mayBeInstance(step string) bool {
	for _, s := range m.def.steps {
		if s.expand != nil && len(step) > len(s.id)+1 && step[:len(s.id)] == s.id && (step[len(s.id)] == ':' || step[len(s.id)] == '#') {
			return true
		}
	}
	return false
}

// retryParkedCommand retries, from the command troubleshooting queue, the command an execution
// parked with COMMAND_PARKED waits on: the command runs again and its final reply resumes the
// execution, which waits parked meanwhile. It reports false (keeping the lease) when the command
// has ended, so its reply is applied by the run that follows; a command on its way already is
// refused (ErrInvalidState): its reply will come.
func (m *Manager) retryParkedCommand(ctx context.Context, lease *execution.Lease, action commandbus.OperatorAction) (bool, error) {
	entries, err := lease.Log(ctx)
	if err != nil {
		return true, m.abandon(ctx, lease, err)
	}
	step := lease.Row.Step
	r := fold(entries).steps[step]
	if r == nil || r.status != statusWaiting || r.commandID == uuid.Nil {
		return false, nil
	}
	cmd, err := m.client.GetCommand(ctx, r.commandID)
	if err != nil {
		_ = lease.Release(ctx)
		return true, fmt.Errorf("reading the parked command %s of step %q: %w", r.commandID, step, err)
	}
	switch {
	case cmd.Status.Terminal():
		return false, nil
	case cmd.Status != driver.CommandStatusInTSQ:
		_ = lease.Release(ctx)
		return true, fmt.Errorf("%w: the command %s of step %q is %s, no longer parked: its reply will resume execution %s",
			commandbus.ErrInvalidState, cmd.ID, step, cmd.Status, lease.Row.ID)
	}
	details := map[string]any{"step": step, "commandId": cmd.ID}
	m.audit(ctx, lease.Row.ID, entryTSQRetry, action, details)
	entry := &driver.ExecutionLogEntry{EntryType: entryLifecycle, Name: "COMMAND_RETRIED", StepStatus: string(driver.ExecutionWaitingForTSQ),
		Actor: action.Actor, Reason: action.Reason}
	entry.Request, _ = json.Marshal(details)
	cp := lease.Base()
	cp.Release, cp.Log = true, []*driver.ExecutionLogEntry{entry}
	if err := lease.Checkpoint(ctx, cp); err != nil {
		return true, err
	}
	if _, err := m.client.TSQ().Retry(ctx, cmd.ID, action); err != nil {
		return true, fmt.Errorf("retrying the parked command %s of step %q: %w", cmd.ID, step, err)
	}
	return true, nil
}

// ended tells the model an operator ends the execution without running it; an error refuses the
// action and gives the lease back.
func (m *Manager) ended(ctx context.Context, lease *execution.Lease, status driver.ExecutionStatus) error {
	if m.flow.OnEnd == nil {
		return nil
	}
	if err := m.flow.OnEnd(ctx, lease.Row, status); err != nil {
		_ = lease.Release(ctx)
		return fmt.Errorf("recording the end of execution %s: %w", lease.Row.ID, err)
	}
	return nil
}
