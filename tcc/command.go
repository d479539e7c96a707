package tcc

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/orchestrate"
	"github.com/commandbus/commandbus/internal/plumbing"
	"github.com/commandbus/commandbus/orchestration"
)

// The headers a command participant's commands carry (with orchestration.HeaderExecutionID);
// their replies carry them back.
const (
	HeaderParticipant = "commandbus-tcc-participant"
	HeaderPhase       = "commandbus-tcc-phase"
)

// BranchOf reads the branch and the phase a command participant's command is for from its
// headers (commandbus.Command.Headers), for the handler's Barrier; ok is false for a command a
// TCC transaction did not send.
func BranchOf(headers map[string]string) (branch BranchID, phase Phase, ok bool) {
	branch = BranchID{Transaction: headers[orchestration.HeaderExecutionID], Participant: headers[HeaderParticipant]}
	phase = Phase(headers[HeaderPhase])
	return branch, phase, branch.Transaction != "" && branch.Participant != "" && phase != ""
}

// waitID names the reply wait of a participant's phase.
func waitID(participant string, p Phase) string { return participant + ":" + string(p) }

// command builds a command participant's phase command for c.Attempt.
func (m *Manager) command(part *participant, p Phase, c *Context) (*driver.CommandInsertParams, error) {
	input, err := callRequest(part, c)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(input)
	if err != nil {
		return nil, commandbus.Permanent(commandbus.CodeInvalidData, fmt.Errorf("the %s request of participant %q cannot be encoded as JSON: %w", p, part.id, err))
	}
	cmd, err := plumbing.BuildCommand(m.rt.Client(), commandbus.SendParams{
		Domain: part.domain,
		Args:   commandbus.RawArgs{Type: part.commands.of(p), Data: data},
		Opts: &commandbus.SendOpts{
			CorrelationID:  c.ExecutionID,
			ReplyTo:        m.def.domain,
			IdempotencyKey: fmt.Sprintf("%s:%s:%s:%d", c.ExecutionID, part.id, p, c.Attempt),
			Headers: map[string]string{
				orchestration.HeaderExecutionID: c.ExecutionID.String(), HeaderParticipant: part.id, HeaderPhase: string(p),
			},
			Actor: "tcc:" + m.def.id,
		},
	})
	if err != nil {
		return nil, commandbus.Permanent(commandbus.CodeInvalidData, fmt.Errorf("participant %q: %w", part.id, err))
	}
	return cmd, nil
}

func callRequest(part *participant, c *Context) (in any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = commandbus.Permanent("PANIC", fmt.Errorf("the %s request of participant %q panicked: %v", c.Phase, part.id, r))
		}
	}()
	return part.request(c)
}

// loadArrivals reads, once per run, the replies the transaction received and its expired reply
// waits; every response read is marked applied with the next checkpoint.
func (t *txn) loadArrivals() error {
	if t.arrivalsLoaded {
		return nil
	}
	t.arrivalsLoaded = true
	t.replies = map[uuid.UUID]*commandbus.Reply{}
	t.expired = map[string]bool{}
	row := t.lease.Row
	responses, err := t.lease.Responses(t.ctx)
	if err != nil {
		return fmt.Errorf("reading responses: %w", err)
	}
	for _, r := range responses {
		row.ResponsesApplied = max(row.ResponsesApplied, r.Seq)
		if r.Name != orchestrate.ReplyResponseName {
			continue
		}
		var reply commandbus.Reply
		if json.Unmarshal(r.Payload, &reply) == nil {
			t.replies[reply.CommandID] = &reply
		}
	}
	expired, err := t.lease.ExpiredWaits(t.ctx)
	if err != nil {
		return fmt.Errorf("reading expired waits: %w", err)
	}
	for _, w := range expired {
		t.expired[w.WaitID] = true
	}
	return nil
}

// replyOf returns the outcome of a waiting command phase: its reply's, a reply timeout's, or nil
// while it still waits.
func (t *txn) replyOf(part *participant, p Phase, r phaseRecord) (*attempt, error) {
	if err := t.loadArrivals(); err != nil {
		return nil, err
	}
	key := waitID(part.id, p)
	started := r.sentAt
	if reply := t.replies[r.commandID]; reply != nil && reply.Outcome != commandbus.OutcomeParked {
		t.closeWaits = append(t.closeWaits, key)
		if reply.Succeeded() {
			result := reply.Result
			if len(result) == 0 {
				result = json.RawMessage("null")
			}
			return &attempt{started: started, result: result}, nil
		}
		msg := fmt.Errorf("%s replied %s: %s", reply.CommandType, reply.Outcome, reply.ErrorMessage)
		var err error
		switch reply.Outcome {
		case commandbus.OutcomeTimedOut:
			err = &commandbus.TransientError{Code: reply.ErrorCode, Err: msg}
		case commandbus.OutcomeCancelled:
			err = commandbus.Permanent(reply.ErrorCode, msg)
		default:
			err = &commandbus.BusinessRuleError{Code: reply.ErrorCode, Message: msg.Error()}
		}
		return &attempt{started: started, err: err}, nil
	}
	if t.expired[key] {
		t.closeWaits = append(t.closeWaits, key)
		return &attempt{started: started, err: &commandbus.TransientError{Code: "REPLY_TIMEOUT",
			Err: fmt.Errorf("no reply to the %s of %q within its timeout", p, part.id)}}, nil
	}
	return nil, nil
}

// send records a command phase's attempt as waiting and queues its command and reply wait for
// the checkpoint.
func (t *txn) send(part *participant, p Phase, c *Context, eff effective) error {
	cmd, err := t.m.command(part, p, c)
	if err != nil {
		return err
	}
	req, _ := json.Marshal(map[string]any{"commandId": cmd.ID, "domain": cmd.Domain, "type": cmd.Type})
	t.log(&driver.ExecutionLogEntry{EntryType: string(p), Name: part.id, StepStatus: statusWaiting, Attempt: c.Attempt,
		MaxAttempts: eff.retry.MaxAttempts, Request: req})
	t.f.rec(part.id, p).sentAt = t.m.engine.Config().Clock()
	t.commands = append(t.commands, cmd)
	t.openWaits = append(t.openWaits, &driver.WaitParams{ID: waitID(part.id, p), Kind: driver.WaitReply, Name: cmd.Type, Timeout: eff.timeout})
	return nil
}

// attempt is one phase attempt's outcome.
type attempt struct {
	started time.Time
	result  json.RawMessage
	err     error
}
