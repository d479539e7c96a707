package process

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/execution"
	"github.com/commandbus/commandbus/internal/plumbing"
)

// Log entry types and step statuses written by the process runtime.
const (
	entryStep          = "STEP"
	entryWait          = "WAIT"
	entrySideEffect    = "SIDE_EFFECT"
	entryCommand       = "COMMAND"
	entryAsyncResponse = "ASYNC_RESPONSE"
	entryCompensation  = "COMPENSATION"
	entryLifecycle     = "LIFECYCLE"
	entryTSQRetry      = "TSQ_RETRY"
	entryTSQCancel     = "TSQ_CANCEL"
	entryTSQComplete   = "TSQ_COMPLETE"

	statusCompleted    = "COMPLETED"
	statusFailed       = "FAILED"
	statusWaitingRetry = "WAITING_RETRY"
	statusSatisfied    = "SATISFIED"
	statusPending      = "PENDING"
	statusRecorded     = "RECORDED"
	statusSent         = "SENT"
	statusReplyFailed  = "REPLY_FAILED"
	// statusCommandParked records a command step's PARKED reply: its command waits in the
	// command troubleshooting queue.
	statusCommandParked = "COMMAND_PARKED"
	// statusCommandRetried records an operator's retry of a parked command from the process's
	// troubleshooting queue.
	statusCommandRetried = "RETRY_REQUESTED"
	statusSuccess        = "COMPENSATION_SUCCESS"
	statusCompFailed     = "COMPENSATION_FAILED"
	statusCompSkipped    = "COMPENSATION_SKIPPED"
	statusLate           = "LATE_ASYNC_RESPONSE"
	statusApplied        = "APPLIED"
	statusIgnored        = "IGNORED"
	// statusProcessCreated is the first entry of every execution's log, written when it is created.
	statusProcessCreated = "PROCESS_CREATED"
)

// Execution is one run of a process's Execute: the state, and the replay machinery behind the
// building blocks. It is only valid inside Execute (and compensations).
type Execution[S any] struct {
	// ID is the execution id; command steps use it as their correlation id.
	ID uuid.UUID
	// State is the process state; mutate it freely, it is saved at every checkpoint.
	State *S

	m     *Manager[S]
	lease *execution.Lease
	ctx   context.Context

	// recorded holds the log entries replay returns, in order: completed steps (and command
	// steps), satisfied waits, recorded side effects. cursor is the next one to meet.
	recorded []*driver.ExecutionLogEntry
	cursor   int
	// history is, per step name, what happened since the last operator retry.
	history map[string]*stepHistory
	// compensations are registered by completed steps, in order. compensated holds, per step,
	// the entry of its compensation in the current compensation pass: COMPENSATION_SUCCESS and
	// COMPENSATION_SKIPPED are done for good; COMPENSATION_FAILED is run again by the next pass
	// (an operator's retry or cancel), not by a resumption after a crash.
	compensations []compensation[S]
	compensated   map[string]*driver.ExecutionLogEntry
	// sends counts, per command step, the commands sent over the whole log (operator retries
	// included), so every send gets its own command idempotency key.
	sends map[string]int

	// pending holds log entries and commands for the next checkpoint.
	pendingLog      []*driver.ExecutionLogEntry
	pendingCommands []*driver.CommandInsertParams
	// pendingAttributes are search attributes set since the last checkpoint.
	pendingAttributes map[string]string

	// collectOnly replays to collect compensations and stops at the first new step.
	collectOnly bool
	now         time.Time
	// dirty marks progress (a completed step, a satisfied wait, a side effect) not yet written.
	// It is written before the next step's effect begins, or with the suspension or completion
	// that follows, whichever comes first: a step re-runs only if a crash falls between its
	// effect and that write, and no effect ever runs before the progress preceding it is durable.
	dirty     bool
	dirtyStep string
	// attemptStarted is when the failing attempt of a local step began, for its log entry.
	attemptStarted *time.Time
	// parkedAnswered is set when a reply answered a command step whose command had been parked:
	// an execution waiting in the troubleshooting queue for that command resumes.
	parkedAnswered bool
	// causedBy is the command whose reply this run applied: the cause of the commands it sends.
	causedBy uuid.UUID
}

type compensation[S any] struct {
	step string
	fn   func(x *Execution[S]) error
}

// stepHistory summarises a step's log entries since the last operator retry.
type stepHistory struct {
	failedAttempts int    // attempts that failed and were scheduled for retry
	last           string // status of the last entry: SENT, FAILED, WAITING_RETRY
	lastError      *driver.ExecutionLogEntry
	commandID      uuid.UUID // the command of the current attempt of a command step
	sentAt         time.Time // when that command was sent (zero until its entry is stored)
	attempt        int
}

// failedCompensations lists, in the order they ran, the steps whose compensation failed in the
// current compensation pass.
func (x *Execution[S]) failedCompensations() []string {
	var failed []string
	for i := len(x.compensations) - 1; i >= 0; i-- {
		if step := x.compensations[i].step; x.compensated[step] != nil && x.compensated[step].StepStatus == statusCompFailed {
			failed = append(failed, step)
		}
	}
	return failed
}

// Context returns the run's context. Steps get their own context with the step's timeout.
func (x *Execution[S]) Context() context.Context { return x.ctx }

// StepKey is the stable idempotency key of a step, "<execution id>:<step name>": the same on
// every attempt and every replay, so a downstream system can deduplicate on it.
func (x *Execution[S]) StepKey(step string) string { return x.ID.String() + ":" + step }

// Send queues a command to be sent atomically with the execution's next checkpoint (use it in
// compensations, or to notify another domain without waiting for a reply).
func (x *Execution[S]) Send(domain string, args commandbus.CommandArgs, opts *commandbus.SendOpts) error {
	o := commandbus.SendOpts{}
	if opts != nil {
		o = *opts
	}
	if o.CorrelationID == uuid.Nil {
		o.CorrelationID = x.ID
	}
	if o.CausationID == uuid.Nil {
		o.CausationID = x.causedBy
	}
	cmd, err := plumbing.BuildCommand(x.m.client, commandbus.SendParams{Domain: domain, Args: args, Opts: &o})
	if err != nil {
		return err
	}
	x.pendingCommands = append(x.pendingCommands, cmd)
	return nil
}

// SetAttribute sets a custom search attribute of the execution, written with its next
// checkpoint (the next step's, a wait's, or its end's); an empty value removes the attribute.
// Keys are 1 to 64 letters, digits, '_', '.' or '-'; values at most 1024 bytes. Execute runs again
// on replay, so calling it again with the same value is harmless.
func (x *Execution[S]) SetAttribute(key, value string) error {
	if err := driver.ValidateAttribute(key, value); err != nil {
		return fmt.Errorf("process: SetAttribute: %w", err)
	}
	if x.pendingAttributes == nil {
		x.pendingAttributes = map[string]string{}
	}
	x.pendingAttributes[key] = value
	return nil
}

func newExecution[S any](ctx context.Context, m *Manager[S], lease *execution.Lease, state *S, log []*driver.ExecutionLogEntry) *Execution[S] {
	x := &Execution[S]{
		ID: lease.Row.ID, State: state, m: m, lease: lease, ctx: ctx,
		history: map[string]*stepHistory{}, compensated: map[string]*driver.ExecutionLogEntry{}, sends: map[string]int{},
		now: lease.Engine().Config().Clock(),
	}
	for _, e := range log {
		x.observe(e)
	}
	return x
}

// observe folds one log entry (stored, or about to be) into the replay view.
func (x *Execution[S]) observe(e *driver.ExecutionLogEntry) {
	switch {
	case e.EntryType == entryTSQRetry:
		x.history = map[string]*stepHistory{} // a fresh attempt budget for every step
	case e.EntryType == entryStep && e.StepStatus == statusCompleted,
		e.EntryType == entryWait && e.StepStatus == statusSatisfied,
		e.EntryType == entrySideEffect && e.StepStatus == statusRecorded:
		x.recorded = append(x.recorded, e)
		delete(x.history, e.Name)
	case e.EntryType == entryStep && (e.StepStatus == statusFailed || e.StepStatus == statusWaitingRetry || e.StepStatus == statusReplyFailed):
		h := x.step(e.Name)
		h.last, h.lastError, h.attempt = e.StepStatus, e, e.Attempt
		if e.StepStatus == statusWaitingRetry {
			h.failedAttempts++
		}
	case e.EntryType == entryCommand && e.StepStatus == statusSent:
		x.sends[e.Name]++
		h := x.step(e.Name)
		h.last, h.attempt, h.sentAt = statusSent, e.Attempt, e.At
		var sent commandSent
		if json.Unmarshal(e.Request, &sent) == nil {
			h.commandID = sent.CommandID
		}
	case e.EntryType == entryCommand && e.StepStatus == statusCommandParked:
		h := x.step(e.Name)
		h.last, h.lastError = statusCommandParked, e
	case e.EntryType == entryCompensation:
		x.compensated[e.Name] = e
	case e.EntryType == entryLifecycle && e.StepStatus == string(driver.ExecutionCompensating):
		// A new compensation pass runs the compensations that failed in an earlier one again.
		for name, done := range x.compensated {
			if done.StepStatus == statusCompFailed {
				delete(x.compensated, name)
			}
		}
	}
}

func (x *Execution[S]) step(name string) *stepHistory {
	h := x.history[name]
	if h == nil {
		h = &stepHistory{}
		x.history[name] = h
	}
	return h
}

// createdEntry is the response of the PROCESS_CREATED log entry.
type createdEntry struct {
	BusinessKey string `json:"businessKey,omitempty"`
	Deferred    bool   `json:"deferred"`
}

// commandSent is the request of a COMMAND log entry.
type commandSent struct {
	CommandID uuid.UUID `json:"commandId"`
	Domain    string    `json:"domain"`
	Type      string    `json:"type"`
}

// replay returns the recorded entry at the cursor when the code calls kind/name there. It
// returns (nil, nil) at the frontier and a NondeterminismError when the code diverged.
func (x *Execution[S]) replay(kind, name string) (*driver.ExecutionLogEntry, error) {
	if x.cursor >= len(x.recorded) {
		return nil, nil
	}
	e := x.recorded[x.cursor]
	if e.EntryType != kind || e.Name != name {
		return nil, &NondeterminismError{Position: x.cursor + 1, Expected: e.EntryType + " " + e.Name, Got: kind + " " + name}
	}
	x.cursor++
	return e, nil
}

// log queues a log entry for the next checkpoint and folds it into the replay view.
func (x *Execution[S]) log(e *driver.ExecutionLogEntry) {
	x.pendingLog = append(x.pendingLog, e)
	x.observe(e)
}

// logMet logs an entry made at the frontier, which the replay has thereby already met.
// clock is the engine's now.
func (x *Execution[S]) clock() time.Time { return x.lease.Engine().Config().Clock() }

func (x *Execution[S]) logMet(e *driver.ExecutionLogEntry) {
	x.log(e)
	x.cursor = len(x.recorded)
}

// checkpoint writes the state, queued log entries and commands, with the given changes.
func (x *Execution[S]) checkpoint(change func(cp *driver.ExecutionCheckpoint)) error {
	state, err := json.Marshal(x.State)
	if err != nil {
		return &StepFailedError{Code: CodePermanentFailure, Message: "encoding state: " + err.Error(), Err: err}
	}
	cp := x.lease.Base()
	cp.State = state
	cp.Log = x.pendingLog
	cp.Commands = x.pendingCommands
	cp.Attributes = x.pendingAttributes
	cp.ErrorCode, cp.ErrorMessage = "", ""
	change(cp)
	if err := x.lease.Checkpoint(x.ctx, cp); err != nil {
		return err
	}
	x.pendingLog, x.pendingCommands, x.pendingAttributes = nil, nil, nil
	x.dirty = false
	return nil
}

// progressed records progress to be written with the next checkpoint.
func (x *Execution[S]) progressed(step string) {
	x.dirty, x.dirtyStep = true, step
}

// flush makes recorded progress durable before an effect runs. When an operator asked to
// suspend the execution (as that checkpoint, an earlier one or a heartbeat reported), no new
// effect starts: the execution is released, and the driver stores it SUSPENDED.
func (x *Execution[S]) flush() error {
	if x.dirty {
		if err := x.continueRunning(x.dirtyStep); err != nil {
			return err
		}
	}
	if x.lease.SuspendRequested() {
		status := driver.ExecutionExecuting
		if x.lease.Row.Status == driver.ExecutionCompensating {
			status = driver.ExecutionCompensating
		}
		return x.suspend("an operator suspended the execution", func(cp *driver.ExecutionCheckpoint) {
			cp.Status = status
			cp.NextRetryAt, cp.NextWaitTimeoutAt = nil, nil
		})
	}
	return nil
}

// suspend checkpoints a stop and returns the error that unwinds Execute.
func (x *Execution[S]) suspend(reason string, change func(cp *driver.ExecutionCheckpoint)) error {
	if err := x.checkpoint(func(cp *driver.ExecutionCheckpoint) {
		cp.Release = true
		change(cp)
	}); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s", ErrSuspended, reason)
}

// continueRunning checkpoints progress while the execution keeps running.
func (x *Execution[S]) continueRunning(step string) error {
	return x.checkpoint(func(cp *driver.ExecutionCheckpoint) {
		cp.Status = driver.ExecutionExecuting
		cp.Step = step
		cp.CurrentWait = ""
		cp.NextRetryAt, cp.NextWaitTimeoutAt = nil, nil
	})
}

// retryDue reports whether a scheduled retry may run now (a response can wake an execution
// before its retry is due).
func (x *Execution[S]) retryDue() bool {
	row := x.lease.Row
	return row.NextRetryAt == nil || !x.now.Before(*row.NextRetryAt)
}

// backoff is the retry delay before attempt: base·2^attempt, capped at 5 minutes.
func backoff(base time.Duration, attempt int) time.Duration {
	const cap = 5 * time.Minute
	d := base
	for range attempt {
		d *= 2
		if d >= cap {
			return cap
		}
	}
	return d
}
