package process

import (
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/plumbing"
	"github.com/commandbus/commandbus/orchestration"
)

// Headers a command step puts on its command; replies carry them back.
const (
	HeaderExecutionID = orchestration.HeaderExecutionID
	HeaderStep        = "commandbus-step"
	// HeaderStepKey is the step's stable idempotency key (execution id : step name): the same on
	// every attempt, for the handler to deduplicate its side effect on.
	HeaderStepKey = commandbus.HeaderStepKey
)

// CommandStep sends a command to another domain and suspends the execution (WAITING_FOR_ASYNC,
// current_wait = name) until its reply arrives on the process domain's reply queue; then the
// execution resumes and CommandStep returns the reply's result. The rate limit is the target
// domain's concurrency. A failure reply is classified like any step error: FAILED
// replies are business failures, TIMED_OUT replies transient, CANCELLED permanent.
//
// domain, commandType and the reply timeout default to the configuration's command-steps.<name>
// entry when empty or zero.
//
// Its compensation (Compensate) is registered once its command was sent, not only once it
// completed: a step whose reply was a failure, whose command was parked, or whose command is
// still unanswered when the process unwinds (an operator's cancel, a deadline) may have taken
// effect all the same, so its compensation runs too. A command step's compensation must
// therefore be idempotent and cope with a step that took no effect (the step's result is then
// unknown: key the undo on the step key, StepKey(name), not on the result). Each attempt sends a new command (command idempotency key
// "<execution>:<step>:<n>" for its n-th send, counted across operator retries, so a resubmitted
// step is a new command); the step key header stays "<execution>:<step>". The command carries the
// traceparent of the request that started the execution.
func CommandStep[S, Req, Resp any](x *Execution[S], name, domain, commandType string, req Req, opts ...StepOption) (Resp, error) {
	var zero Resp
	o := stepOpts(opts)
	recorded, err := x.replay(entryStep, name)
	if err != nil {
		return zero, err
	}
	if recorded != nil {
		var resp Resp
		if len(recorded.Response) > 0 {
			if err := json.Unmarshal(recorded.Response, &resp); err != nil {
				return zero, &StepFailedError{Step: name, Code: CodePermanentFailure, Message: "decoding recorded reply: " + err.Error(), Err: err}
			}
		}
		return resp, x.register(name, o)
	}
	if x.collectOnly {
		// Collecting compensations (an operator's cancel, a deadline) with the step's command
		// sent and unanswered: it may still take effect, so its compensation is registered.
		if x.sends[name] > 0 {
			if err := x.register(name, o); err != nil {
				return zero, err
			}
		}
		return zero, errStopReplay
	}
	timeout := o.timeout
	if cfg := x.m.client.Config().CommandStep(name); cfg != nil {
		if domain == "" {
			domain = cfg.Domain
		}
		if commandType == "" {
			commandType = cfg.CommandType
		}
		if !hasTimeout(opts) {
			timeout = cfg.Timeout.Std()
		}
	}
	h := x.step(name)
	switch h.last {
	case statusSent:
		// Sent and not answered yet: woken by something else. Keep waiting.
		return zero, x.waitFor(name, timeout, "reply to "+name)
	case statusCommandParked:
		// The command waits in the command troubleshooting queue: so does the execution, until
		// the operator's action on the command answers it.
		if err := x.register(name, o); err != nil {
			return zero, err
		}
		return zero, parkedCommand(name, h.lastError)
	case statusReplyFailed:
		// A failure reply arrived: decide now, as for any step error. A failure reply does not
		// prove that nothing took effect (an earlier attempt of the same step key may land
		// after it, a provider may have booked while the handler timed out), so when the
		// process unwinds the step's compensation runs too.
		if err := x.register(name, o); err != nil {
			return zero, err
		}
		return zero, x.stepFailed(name, h.attempt, o, replyError(h.lastError))
	case statusWaitingRetry:
		if !x.retryDue() {
			return zero, x.suspendRetry(name, h.failedAttempts, 0)
		}
	}
	attempt := h.failedAttempts + 1
	data, err := json.Marshal(req)
	if err != nil {
		return zero, &StepFailedError{Step: name, Code: CodePermanentFailure, Message: "encoding command: " + err.Error(), Err: err}
	}
	cmd, err := plumbing.BuildCommand(x.m.client, commandbus.SendParams{
		Domain: domain,
		Args:   commandbus.RawArgs{Type: commandType, Data: data},
		Opts: &commandbus.SendOpts{
			CorrelationID:  x.ID,
			CausationID:    x.causedBy,
			ReplyTo:        x.m.domain,
			IdempotencyKey: fmt.Sprintf("%s:%s:%d", x.ID, name, x.sends[name]+1),
			Headers: map[string]string{
				HeaderExecutionID: x.ID.String(), HeaderStep: name, HeaderStepKey: x.StepKey(name),
				commandbus.HeaderNotifyParked: "true",
			},
			Actor: "process:" + x.m.typ,
		},
	})
	if err != nil {
		return zero, &StepFailedError{Step: name, Code: CodePermanentFailure, Message: "building command: " + err.Error(), Err: err}
	}
	x.pendingCommands = append(x.pendingCommands, cmd)
	x.log(&driver.ExecutionLogEntry{EntryType: entryCommand, Name: name, StepStatus: statusSent,
		Attempt: attempt, MaxAttempts: o.maxAttempts, Request: marshalOrNil(commandSent{CommandID: cmd.ID, Domain: domain, Type: commandType})})
	return zero, x.waitFor(name, timeout, "reply to "+name)
}

// parkedCommand is the error that parks an execution whose command step's command was parked,
// naming the command and why it was parked.
func parkedCommand(step string, e *driver.ExecutionLogEntry) error {
	var cmd commandSent
	_ = json.Unmarshal(e.Request, &cmd)
	name := cmd.Type
	if name == "" {
		name = step
	}
	msg := "waiting on parked command " + name
	if e.ErrorCode != "" {
		msg += ": " + e.ErrorCode
	}
	if e.ErrorMessage != "" {
		msg += ": " + e.ErrorMessage
	}
	if cmd.CommandID != uuid.Nil {
		msg += " (command " + cmd.CommandID.String() + ")"
	}
	return &commandParkedError{step: step, message: msg}
}

func hasTimeout(opts []StepOption) bool {
	probe := &stepOptions{}
	for _, opt := range opts {
		opt(probe)
	}
	return probe.timeout != 0
}

// replyError turns a failure reply recorded in the log back into a classifiable error.
func replyError(e *driver.ExecutionLogEntry) error {
	if e == nil {
		return &commandbus.PermanentError{Code: CodePermanentFailure, Err: fmt.Errorf("failure reply without details")}
	}
	var outcome struct {
		Outcome commandbus.Outcome `json:"outcome"`
	}
	_ = json.Unmarshal(e.Response, &outcome)
	switch outcome.Outcome {
	case commandbus.OutcomeTimedOut:
		return &commandbus.TransientError{Code: e.ErrorCode, Err: fmt.Errorf("%s", e.ErrorMessage)}
	case commandbus.OutcomeCancelled:
		return &commandbus.PermanentError{Code: e.ErrorCode, Err: fmt.Errorf("%s", e.ErrorMessage)}
	}
	return &commandbus.BusinessRuleError{Code: e.ErrorCode, Message: e.ErrorMessage}
}
