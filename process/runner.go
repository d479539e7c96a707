package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/execution"
)

// engineRunner is the manager as the execution core's runner; it keeps Run and Deadline, which
// take a lease only the core can make, off the manager's API.
type engineRunner[S any] struct{ m *Manager[S] }

// Type implements the runtime's runner.
func (r engineRunner[S]) Type() string { return r.m.typ }

// Run continues a leased execution: it applies the async responses that arrived, then replays
// Execute.
func (r engineRunner[S]) Run(ctx context.Context, lease *execution.Lease) error {
	return r.m.run(ctx, lease, nil, nil)
}

// Deadline applies the deadline action to an execution whose deadline passed.
func (r engineRunner[S]) Deadline(ctx context.Context, lease *execution.Lease) error {
	return r.m.deadline(ctx, lease)
}

// RunWithResponse runs an execution with a response handed over in memory.
func (r engineRunner[S]) RunWithResponse(ctx context.Context, lease *execution.Lease, resp *driver.ExecutionResponseRow) error {
	return r.m.run(ctx, lease, nil, []*driver.ExecutionResponseRow{resp})
}

// run drives a leased execution; extra log entries (an operator's retry) go into its first
// checkpoint, and injected responses (a command-step reply handed over directly) are applied
// after the stored ones.
func (m *Manager[S]) runUntraced(ctx context.Context, lease *execution.Lease, extra []*driver.ExecutionLogEntry, injected []*driver.ExecutionResponseRow) error {
	if lease.Row.Status == driver.ExecutionSuspended {
		return m.leaveSuspended(ctx, lease, injected)
	}
	if err := lease.Load(ctx); err != nil {
		return m.abandon(ctx, lease, fmt.Errorf("reading log: %w", err))
	}
	x, err := m.load(ctx, lease)
	if err != nil {
		return m.abandon(ctx, lease, err)
	}
	for _, e := range extra {
		x.log(e)
	}
	from := lease.Row.ClaimedFrom
	if from == "" {
		from = lease.Row.Status
	}
	if extra != nil {
		from = driver.ExecutionExecuting
	}
	if err := m.applyResponses(ctx, x, from, injected); err != nil {
		return m.abandon(ctx, lease, err)
	}
	switch {
	case from == driver.ExecutionWaitingForTSQ && x.parkedAnswered && lease.Row.ErrorCode == CodeCommandParked:
		// The operator's action on the parked command answered it: the execution resumes.
		x.log(&driver.ExecutionLogEntry{EntryType: entryLifecycle, Name: "resumed", StepStatus: string(driver.ExecutionExecuting),
			ErrorCode: lease.Row.ErrorCode, ErrorMessage: "the parked command was answered: " + lease.Row.ErrorMessage})
		return m.finish(x, m.execute(x))
	case from.Terminal(), from == driver.ExecutionWaitingForTSQ:
		// Late responses update the state; nothing replays.
		return x.checkpoint(func(cp *driver.ExecutionCheckpoint) {
			cp.Status, cp.Release = from, true
			cp.ErrorCode, cp.ErrorMessage = lease.Row.ErrorCode, lease.Row.ErrorMessage
		})
	case from == driver.ExecutionCompensating:
		pass := m.lastCompensationPass(x)
		if err := m.collect(x); err != nil {
			return m.finish(x, err)
		}
		return m.runnerResult(m.compensate(x, pass.final, pass.code, pass.message, false))
	}
	return m.finish(x, m.execute(x))
}

// leaveSuspended lets go of a suspended execution without running it. A response handed over
// directly is recorded first, to be applied after the resume.
func (m *Manager[S]) leaveSuspended(ctx context.Context, lease *execution.Lease, injected []*driver.ExecutionResponseRow) error {
	for _, r := range injected {
		if _, err := m.engine.Exec().ExecutionResponseInsert(ctx, &driver.ExecutionResponseInsertParams{
			ExecutionID: lease.Row.ID, Name: r.Name, Payload: r.Payload, Now: m.engine.Config().Now(),
		}); err != nil {
			_ = lease.Release(ctx)
			return fmt.Errorf("recording a response for suspended execution %s: %w", lease.Row.ID, err)
		}
	}
	if err := lease.Release(ctx); err != nil && !errors.Is(err, execution.ErrFenced) {
		return err
	}
	return nil
}

// load reads the log and state of a leased execution.
func (m *Manager[S]) load(ctx context.Context, lease *execution.Lease) (*Execution[S], error) {
	log, err := lease.Log(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading log: %w", err)
	}
	state := new(S)
	if err := json.Unmarshal(lease.Row.State, state); err != nil {
		return nil, fmt.Errorf("decoding state of execution %s: %w", lease.Row.ID, err)
	}
	return newExecution(ctx, m, lease, state, log), nil
}

// abandon releases an execution the runner could not even start on; the error is logged and the
// lease given back so a later attempt (or an operator) can act.
func (m *Manager[S]) abandon(ctx context.Context, lease *execution.Lease, err error) error {
	m.logger.Error("execution could not be run", "execution_id", lease.Row.ID, "error", err)
	if releaseErr := lease.Release(ctx); releaseErr != nil && !errors.Is(releaseErr, execution.ErrFenced) {
		m.logger.Warn("releasing the execution failed; its lease will expire", "execution_id", lease.Row.ID, "error", releaseErr)
	}
	return err
}

// execute calls the process's Execute, turning a panic into a permanent failure.
func (m *Manager[S]) execute(x *Execution[S]) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &StepFailedError{Code: CodePanic, Message: fmt.Sprintf("Execute panicked: %v", r), Err: fmt.Errorf("panic: %v\n%s", r, debug.Stack())}
		}
	}()
	return m.process.Execute(x)
}

// collect replays Execute only to register the compensations of completed steps. The replay
// ends at the frontier, or where Execute returned the error that stopped the execution: a step's
// failure, or an error Execute returns itself from its state (a network's permanent answer read
// from a satisfied wait). Either way the compensations before that point are registered. Only a
// replay that cannot be trusted fails: code that diverged from the log, or a panic.
func (m *Manager[S]) collect(x *Execution[S]) error {
	x.collectOnly = true
	err := m.execute(x)
	x.collectOnly = false
	var nondeterminism *NondeterminismError
	var failed *StepFailedError
	switch {
	case err == nil, errors.Is(err, errStopReplay):
		return nil
	case errors.As(err, &nondeterminism), errors.As(err, &failed) && failed.Code == CodePanic,
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded) && x.ctx.Err() != nil:
		return err
	}
	return nil // the recorded failure point: compensations before it are registered
}

// finish settles the outcome of a replay.
func (m *Manager[S]) finish(x *Execution[S], err error) error {
	var nondeterminism *NondeterminismError
	var business *BusinessFailureError
	var failed *StepFailedError
	var parked *commandParkedError
	switch {
	case err == nil:
		if x.cursor < len(x.recorded) {
			e := x.recorded[x.cursor]
			return m.toTSQ(x, CodeNondeterministic, (&NondeterminismError{Position: x.cursor + 1, Expected: e.EntryType + " " + e.Name}).Error())
		}
		m.logger.Debug("execution completed", "execution_id", x.ID)
		return x.checkpoint(func(cp *driver.ExecutionCheckpoint) {
			cp.Status, cp.Release = driver.ExecutionCompleted, true
			cp.CurrentWait, cp.NextRetryAt, cp.NextWaitTimeoutAt = "", nil, nil
		})
	case errors.Is(err, execution.ErrFenced), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded) && x.ctx.Err() != nil:
		m.logger.Warn("execution stopped: its lease was lost or the runner is stopping", "execution_id", x.ID, "error", err)
		return err
	case errors.Is(err, ErrSuspended):
		return nil
	case errors.As(err, &nondeterminism):
		return m.toTSQ(x, CodeNondeterministic, nondeterminism.Error())
	case errors.As(err, &parked):
		return m.toTSQ(x, CodeCommandParked, parked.message)
	case errors.As(err, &business):
		return m.runnerResult(m.compensate(x, driver.ExecutionCompensated, business.Code, business.Error(), true))
	case errors.As(err, &failed):
		return m.toTSQ(x, failed.Code, failed.Error())
	}
	if m.classify(err) == Business {
		return m.runnerResult(m.compensate(x, driver.ExecutionCompensated, errorCode(err, CodeBusinessFailure), err.Error(), true))
	}
	return m.toTSQ(x, errorCode(err, CodePermanentFailure), err.Error())
}

// toTSQ parks the execution for an operator.
func (m *Manager[S]) toTSQ(x *Execution[S], code, message string) error {
	m.logger.Warn("execution moved to the troubleshooting queue", "execution_id", x.ID, "error_code", code, "error", message)
	x.log(&driver.ExecutionLogEntry{EntryType: entryLifecycle, Name: "troubleshooting queue", StepStatus: string(driver.ExecutionWaitingForTSQ), ErrorCode: code, ErrorMessage: message})
	return x.checkpoint(func(cp *driver.ExecutionCheckpoint) {
		cp.Status, cp.Release = driver.ExecutionWaitingForTSQ, true
		cp.NextRetryAt, cp.NextWaitTimeoutAt = nil, nil
		cp.ErrorCode, cp.ErrorMessage = code, message
	})
}

// compensate runs the registered compensations in reverse order, each recorded as
// COMPENSATION_SUCCESS or COMPENSATION_FAILED; a failure does not stop the others. When all
// succeeded the execution ends in final; when any failed it waits in the troubleshooting queue
// with COMPENSATION_FAILED, naming them, where a retry runs them again and a skip marks them
// skipped (ErrCompensationFailed is returned then). begin says whether a new compensation pass
// starts (false when resuming one after a crash: what it recorded is not run again).
func (m *Manager[S]) compensate(x *Execution[S], final driver.ExecutionStatus, code, message string, begin bool) error {
	setError := func(cp *driver.ExecutionCheckpoint) { cp.ErrorCode, cp.ErrorMessage = code, message }
	if begin {
		m.logger.Info("compensating", "execution_id", x.ID, "compensations", len(x.compensations), "final_status", final)
		x.log(&driver.ExecutionLogEntry{EntryType: entryLifecycle, Name: "compensation", StepStatus: string(driver.ExecutionCompensating),
			Response: marshalOrNil(map[string]string{"finalStatus": string(final)}), ErrorCode: code, ErrorMessage: message})
		if err := x.checkpoint(func(cp *driver.ExecutionCheckpoint) {
			cp.Status = driver.ExecutionCompensating
			cp.NextRetryAt, cp.NextWaitTimeoutAt, cp.CurrentWait = nil, nil, ""
			setError(cp)
		}); err != nil {
			return err
		}
	}
	for i := len(x.compensations) - 1; i >= 0; i-- {
		c := x.compensations[i]
		if x.compensated[c.step] != nil {
			continue // done before a crash, or in an earlier pass
		}
		if err := x.flush(); err != nil {
			return err
		}
		err := tracedCompensation(x, c.step, c.fn)
		entry := &driver.ExecutionLogEntry{EntryType: entryCompensation, Name: c.step, StepStatus: statusSuccess}
		if err != nil {
			m.logger.Error("compensation failed; continuing with the others", "execution_id", x.ID, "step", c.step, "error", err)
			entry.StepStatus, entry.ErrorCode, entry.ErrorMessage = statusCompFailed, errorCode(err, CodeCompensationFailed), err.Error()
		}
		x.log(entry)
		if err := x.checkpoint(func(cp *driver.ExecutionCheckpoint) {
			cp.Status = driver.ExecutionCompensating
			setError(cp)
		}); err != nil {
			return err
		}
	}
	if failed := x.failedCompensations(); len(failed) > 0 {
		return m.compensationFailed(x, final, code, message, failed)
	}
	return x.checkpoint(func(cp *driver.ExecutionCheckpoint) {
		cp.Status, cp.Release = final, true
		cp.NextRetryAt, cp.NextWaitTimeoutAt, cp.CurrentWait = nil, nil, ""
		setError(cp)
	})
}

// compensationFailed parks an execution whose compensations failed: it waits in the
// troubleshooting queue with COMPENSATION_FAILED, at the step of the first failed compensation,
// its message naming every failed one with its error and the status the execution was heading
// for.
func (m *Manager[S]) compensationFailed(x *Execution[S], final driver.ExecutionStatus, code, message string, failed []string) error {
	errs := make([]string, len(failed))
	for i, step := range failed {
		errs[i] = step
		if e := x.compensated[step]; e.ErrorMessage != "" {
			errs[i] += " (" + e.ErrorMessage + ")"
		}
	}
	text := fmt.Sprintf("compensation failed for %s; the execution was heading for %s after %s: %s",
		strings.Join(errs, ", "), final, code, message)
	m.logger.Warn("execution moved to the troubleshooting queue: compensations failed", "execution_id", x.ID, "failed", failed)
	x.log(&driver.ExecutionLogEntry{EntryType: entryLifecycle, Name: "troubleshooting queue", StepStatus: string(driver.ExecutionWaitingForTSQ),
		Response: marshalOrNil(map[string]any{"failedCompensations": failed, "finalStatus": final}), ErrorCode: CodeCompensationFailed, ErrorMessage: text})
	if err := x.checkpoint(func(cp *driver.ExecutionCheckpoint) {
		cp.Status, cp.Release = driver.ExecutionWaitingForTSQ, true
		cp.Step = failed[0]
		cp.NextRetryAt, cp.NextWaitTimeoutAt, cp.CurrentWait = nil, nil, ""
		cp.ErrorCode, cp.ErrorMessage = CodeCompensationFailed, text
	}); err != nil {
		return err
	}
	return fmt.Errorf("%w: execution %s waits in the troubleshooting queue: %s", ErrCompensationFailed, x.ID, text)
}

// runnerResult is the result of a compensation the runtime started itself: failed compensations
// are parked for an operator, which is the outcome, not an error of the run.
func (m *Manager[S]) runnerResult(err error) error {
	if errors.Is(err, ErrCompensationFailed) || errors.Is(err, ErrSuspended) {
		return nil
	}
	return err
}

func callCompensation[S any](x *Execution[S], fn func(*Execution[S]) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("compensation panicked: %v", r)
		}
	}()
	return fn(x)
}

// compensationPass is what the latest compensation pass was started for: the status it ends in
// and the error code and message the execution keeps.
type compensationPass struct {
	final         driver.ExecutionStatus
	code, message string
}

// lastCompensationPass reads the latest compensation pass from the log (COMPENSATED when none is
// recorded).
func (m *Manager[S]) lastCompensationPass(x *Execution[S]) compensationPass {
	pass := compensationPass{final: driver.ExecutionCompensated, code: x.lease.Row.ErrorCode, message: x.lease.Row.ErrorMessage}
	log, err := x.lease.Log(x.ctx)
	if err != nil {
		return pass
	}
	for _, e := range log {
		if e.EntryType == entryLifecycle && e.StepStatus == string(driver.ExecutionCompensating) {
			var r struct {
				FinalStatus driver.ExecutionStatus `json:"finalStatus"`
			}
			if json.Unmarshal(e.Response, &r) == nil && r.FinalStatus.Terminal() {
				pass.final = r.FinalStatus
			}
			pass.code, pass.message = e.ErrorCode, e.ErrorMessage
		}
	}
	return pass
}

// deadline applies the deadline action to an execution whose deadline passed.
func (m *Manager[S]) deadline(ctx context.Context, lease *execution.Lease) error {
	x, err := m.load(ctx, lease)
	if err != nil {
		return m.abandon(ctx, lease, err)
	}
	action := m.deadlineAction()
	message := fmt.Sprintf("deadline %s passed", lease.Row.DeadlineAt.UTC().Format("2006-01-02T15:04:05Z07:00"))
	if row := lease.Row; row.Status == driver.ExecutionWaitingForTSQ {
		// Parked for another reason: the deadline action applies all the same (once: an
		// execution parked by it is not due again), and the message keeps the first cause.
		message += " while in the troubleshooting queue for " + row.ErrorCode
		if row.ErrorMessage != "" {
			message += ": " + row.ErrorMessage
		}
	}
	m.logger.Warn("execution deadline passed", "execution_id", x.ID, "action", action, "status", lease.Row.Status)
	x.log(&driver.ExecutionLogEntry{EntryType: entryLifecycle, Name: "deadline", StepStatus: string(action), ErrorCode: CodeDeadlineExceeded, ErrorMessage: message})
	switch action {
	case DeadlineCompensate:
		if err := m.collect(x); err != nil {
			return m.finish(x, err)
		}
		return m.runnerResult(m.compensate(x, driver.ExecutionCompensated, CodeDeadlineExceeded, message, true))
	case DeadlineFail:
		if err := m.end(x, driver.ExecutionFailed); err != nil {
			return m.abandon(ctx, lease, err)
		}
		return x.checkpoint(func(cp *driver.ExecutionCheckpoint) {
			cp.Status, cp.Release = driver.ExecutionFailed, true
			cp.NextRetryAt, cp.NextWaitTimeoutAt, cp.CurrentWait = nil, nil, ""
			cp.ErrorCode, cp.ErrorMessage = CodeDeadlineExceeded, message
		})
	}
	return m.toTSQ(x, CodeDeadlineExceeded, message)
}
