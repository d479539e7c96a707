package process

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/orchestrate"
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
const replyResponseName = orchestrate.ReplyResponseName

// ProcessAsyncResponse delivers an asynchronous response to an execution.
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
	return orchestrate.Deliver(m.rt, ctx, id, name, payload)
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
	x.causedBy = reply.CommandID
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
