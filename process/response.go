package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/execution"
)

// AsyncResponse is an external event for a waiting execution (an L1 confirmation, a manual
// approval). ResponseName routes it to the applier registered with OnResponse and is persisted,
// so keep it stable. The response itself is stored as JSON the moment it arrives.
type AsyncResponse interface {
	ResponseName() string
}

func responseName(r AsyncResponse) (name string) {
	defer func() {
		if recover() != nil {
			name = fmt.Sprintf("%T", r)
		}
	}()
	return r.ResponseName()
}

// replyResponseName routes a command step's reply.
const replyResponseName = "commandbus.command-reply"

// ProcessAsyncResponse delivers a response to an execution (seed 000's processAsyncResponse).
// If no runner holds the execution, it runs in the caller's goroutine: the registered applier
// updates the state and Execute replays, and the first checkpoint records the response with its
// effect, so when ProcessAsyncResponse returns nil the response is durable. If a runner holds it,
// the response is stored first and that runner applies it before it lets go, so concurrent
// responses are serialized and each replay sees every earlier one. A response to a finished
// execution updates its state without replay (LATE_ASYNC_RESPONSE). On an error the response may
// not be recorded: deliver it again.
func (m *Manager[S]) ProcessAsyncResponse(ctx context.Context, id uuid.UUID, resp AsyncResponse) error {
	if resp == nil {
		return &commandbus.ValidationError{Field: "response", Message: "nil"}
	}
	name := responseName(resp)
	if m.applier(name) == nil {
		return &commandbus.ValidationError{Field: "response", Message: fmt.Sprintf("no OnResponse applier registered for %q on process %q", name, m.typ)}
	}
	payload, err := json.Marshal(resp)
	if err != nil {
		return &commandbus.ValidationError{Field: "response", Message: "cannot be encoded as JSON: " + err.Error()}
	}
	return m.rt.deliver(ctx, id, name, payload)
}

// deliver hands a response to an execution: straight into a run when nobody holds it (the run's
// first checkpoint records it durably), or stored for the runner that holds it.
func (rt *runtime) deliver(ctx context.Context, id uuid.UUID, name string, payload json.RawMessage) error {
	lease, err := rt.engine.AcquireLoad(ctx, id)
	switch {
	case errors.Is(err, execution.ErrBusy):
		if _, err := rt.engine.Exec().ExecutionResponseInsert(ctx, &driver.ExecutionResponseInsertParams{
			ExecutionID: id, Name: name, Payload: payload, Now: rt.engine.Config().Now(),
		}); err != nil {
			return fmt.Errorf("recording response for execution %s: %w", id, err)
		}
		return nil // the runner holding it applies the response before letting go
	case err != nil:
		return fmt.Errorf("delivering response to execution %s: %w", id, err)
	}
	runner := rt.replyRunner(lease.Row.Type)
	if runner == nil {
		_ = lease.Release(ctx)
		return fmt.Errorf("no process manager for type %q on this instance", lease.Row.Type)
	}
	return runner.runWithResponse(ctx, lease, &driver.ExecutionResponseRow{ExecutionID: id, Name: name, Payload: payload})
}

// handleReply receives replies on a process domain's reply queue and resumes the execution that
// sent the command.
func (rt *runtime) handleReply(ctx context.Context, msg *commandbus.ReplyMessage) error {
	idText := msg.Reply.Headers[HeaderExecutionID]
	if idText == "" {
		return commandbus.Permanent("NOT_A_COMMAND_STEP_REPLY", fmt.Errorf("reply to command %s carries no %s header; register a reply handler for %q", msg.Reply.CommandID, HeaderExecutionID, msg.Reply.CommandType))
	}
	id, err := uuid.Parse(idText)
	if err != nil {
		return commandbus.Permanent("NOT_A_COMMAND_STEP_REPLY", fmt.Errorf("header %s: %w", HeaderExecutionID, err))
	}
	payload, err := json.Marshal(msg.Reply)
	if err != nil {
		return commandbus.Permanent(commandbus.CodeInvalidData, err)
	}
	// The reply message stays RUNNING until the run's checkpoints (which record the reply's
	// effect) have committed; if the run fails, the error makes the reply redeliver, so the reply
	// is never lost.
	if err := rt.deliver(ctx, id, replyResponseName, payload); err != nil {
		if errors.Is(err, driver.ErrNotFound) {
			return commandbus.Permanent("EXECUTION_NOT_FOUND", err)
		}
		return err
	}
	return nil
}

// replyRunner runs an execution with a response handed over in memory.
type replyRunner interface {
	runWithResponse(ctx context.Context, lease *execution.Lease, r *driver.ExecutionResponseRow) error
}

func (m *Manager[S]) runWithResponse(ctx context.Context, lease *execution.Lease, r *driver.ExecutionResponseRow) error {
	return m.run(ctx, lease, nil, []*driver.ExecutionResponseRow{r})
}

func (rt *runtime) replyRunner(typ string) replyRunner {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, m := range rt.managers {
		if m.Type() == typ {
			if r, ok := m.(replyRunner); ok {
				return r
			}
		}
	}
	return nil
}

// applyResponses applies, in order, the responses that arrived since the last run. Command-step
// replies become the step's outcome in the log; other responses go through their applier. On a
// finished execution they only update the state (LATE_ASYNC_RESPONSE).
func (m *Manager[S]) applyResponses(ctx context.Context, x *Execution[S], from driver.ExecutionStatus, injected []*driver.ExecutionResponseRow) error {
	responses, err := x.lease.Responses(ctx)
	if err != nil {
		return fmt.Errorf("reading responses: %w", err)
	}
	stored := len(responses)
	for i, r := range append(responses, injected...) {
		if r.Name == replyResponseName {
			m.applyReply(x, r)
		} else {
			entry := &driver.ExecutionLogEntry{EntryType: entryAsyncResponse, Name: r.Name, StepStatus: statusApplied, Response: r.Payload}
			if from.Terminal() {
				entry.StepStatus = statusLate
			}
			if apply := m.applier(r.Name); apply == nil {
				entry.StepStatus, entry.ErrorCode, entry.ErrorMessage = statusIgnored, "NO_APPLIER", "no OnResponse applier registered for "+r.Name
			} else if err := apply(x.State, r.Payload); err != nil {
				entry.StepStatus, entry.ErrorCode, entry.ErrorMessage = statusIgnored, "APPLY_FAILED", err.Error()
			}
			x.log(entry)
		}
		if i < stored {
			x.lease.Row.ResponsesApplied = r.Seq
		}
	}
	return nil
}

// applyReply records a command step's reply as the step's outcome, if it answers the command of
// the step's current attempt; a stale or duplicate reply is logged and ignored.
func (m *Manager[S]) applyReply(x *Execution[S], r *driver.ExecutionResponseRow) {
	var reply commandbus.Reply
	if err := json.Unmarshal(r.Payload, &reply); err != nil {
		x.log(&driver.ExecutionLogEntry{EntryType: entryAsyncResponse, Name: "reply", StepStatus: statusIgnored, ErrorCode: commandbus.CodeInvalidData, ErrorMessage: err.Error(), Response: r.Payload})
		return
	}
	step := reply.Headers[HeaderStep]
	h := x.history[step]
	if h == nil || h.last != statusSent && h.last != statusCommandParked || h.commandID != reply.CommandID {
		x.log(&driver.ExecutionLogEntry{EntryType: entryAsyncResponse, Name: step, StepStatus: statusIgnored,
			ErrorMessage: "reply to command " + reply.CommandID.String() + " does not answer the step's current attempt", Response: r.Payload})
		return
	}
	if reply.Outcome == commandbus.OutcomeParked {
		if h.last == statusSent {
			x.log(&driver.ExecutionLogEntry{EntryType: entryCommand, Name: step, StepStatus: statusCommandParked, Attempt: h.attempt,
				ErrorCode: reply.ErrorCode, ErrorMessage: reply.ErrorMessage,
				Request: marshalOrNil(commandSent{CommandID: reply.CommandID, Domain: reply.Domain, Type: reply.CommandType})})
		}
		return
	}
	if h.last == statusCommandParked {
		x.parkedAnswered = true
	}
	var sent *time.Time // the step ran from its command's send to this reply
	if !h.sentAt.IsZero() {
		sent = &h.sentAt
	}
	if reply.Succeeded() {
		x.log(&driver.ExecutionLogEntry{EntryType: entryStep, Name: step, StepStatus: statusCompleted, StartedAt: sent, Attempt: h.attempt, Response: reply.Result})
		return
	}
	outcome := marshalOrNil(map[string]any{"outcome": reply.Outcome, "commandId": reply.CommandID})
	x.log(&driver.ExecutionLogEntry{EntryType: entryStep, Name: step, StepStatus: statusReplyFailed, StartedAt: sent, Attempt: h.attempt,
		ErrorCode: reply.ErrorCode, ErrorMessage: reply.ErrorMessage, Response: outcome})
}
