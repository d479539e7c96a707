package commandbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/input"
	"github.com/commandbus/commandbus/outbox"
)

// TSQ is the troubleshooting queue: commands that failed permanently or ran out of retries wait
// here for an operator to retry, cancel or complete them. Every action is audited with its actor
// and reason, on the command and in the audit log.
type TSQ struct {
	c *Client
}

// TSQ returns the troubleshooting queue operations.
func (c *Client) TSQ() *TSQ { return &TSQ{c: c} }

// MaxReasonLength is the most characters an operator action's reason may have. A reason is
// stored in the audit log and may be copied into an execution's error message, so it is kept to
// a sentence or two.
const MaxReasonLength = 500

// OperatorAction says who acts and why. Both are required.
type OperatorAction struct {
	Actor  string
	Reason string
}

// Validate returns every problem of the action at once: the actor and the reason are required,
// printable (the reason may span lines) and the reason has at most MaxReasonLength characters.
func (a OperatorAction) Validate() error {
	var errs []error
	if strings.TrimSpace(a.Actor) == "" {
		errs = append(errs, &ValidationError{Field: "actor", Message: "required: every operator action is audited with who took it"})
	} else if msg := input.Identifier.Check(a.Actor); msg != "" {
		errs = append(errs, &ValidationError{Field: "actor", Message: msg})
	}
	if strings.TrimSpace(a.Reason) == "" {
		errs = append(errs, &ValidationError{Field: "reason", Message: "required: every operator action is audited with why it was taken"})
	} else if msg := (input.Text{Max: MaxReasonLength, Multiline: true}).Check(a.Reason); msg != "" {
		errs = append(errs, &ValidationError{Field: "reason", Message: msg})
	}
	return errors.Join(errs...)
}

// TSQFilter narrows a TSQ listing. Zero fields do not filter.
type TSQFilter struct {
	Domain   string
	Type     string
	TenantID string
	BatchID  uuid.UUID
	Limit    int
}

// List returns commands waiting in the troubleshooting queue, newest first.
func (t *TSQ) List(ctx context.Context, filter TSQFilter) ([]*CommandRow, error) {
	return t.c.exec.CommandList(ctx, &driver.CommandListParams{
		Statuses: []driver.CommandStatus{driver.CommandStatusInTSQ},
		Domain:   filter.Domain, Type: filter.Type, TenantID: filter.TenantID, BatchID: filter.BatchID,
		Limit: filter.Limit,
	})
}

// Retry puts a command back on its queue with a fresh attempt budget.
func (t *TSQ) Retry(ctx context.Context, id uuid.UUID, action OperatorAction) (*CommandRow, error) {
	return t.c.operatorAction(ctx, id, action, "TSQ_RETRY", driver.CommandStatusPending, nil, "")
}

// Cancel ends a command CANCELLED; its sender is told with a CANCELLED reply.
func (t *TSQ) Cancel(ctx context.Context, id uuid.UUID, action OperatorAction) (*CommandRow, error) {
	return t.c.operatorAction(ctx, id, action, "TSQ_CANCEL", driver.CommandStatusCancelled, nil, OutcomeCancelled)
}

// Complete ends a command COMPLETED with an operator-supplied result, and sends the success reply
// as if the handler had returned that result. result must be JSON (empty for none).
func (t *TSQ) Complete(ctx context.Context, id uuid.UUID, result json.RawMessage, action OperatorAction) (*CommandRow, error) {
	if len(result) > 0 && !json.Valid(result) {
		return nil, &ValidationError{Field: "result", Message: "must be valid JSON"}
	}
	return t.c.operatorAction(ctx, id, action, "TSQ_COMPLETE", driver.CommandStatusCompleted, result, OutcomeSuccess)
}

func (c *Client) operatorActionUntraced(ctx context.Context, id uuid.UUID, action OperatorAction, event string, to driver.CommandStatus, result json.RawMessage, outcome Outcome) (*CommandRow, error) {
	if err := action.Validate(); err != nil {
		return nil, err
	}
	var updated *CommandRow
	var topics []string
	err := driver.WithTx(ctx, c.exec, func(tx driver.ExecutorTx) error {
		current, err := tx.CommandGetByID(ctx, id)
		if err != nil {
			return err
		}
		if current.Status != driver.CommandStatusInTSQ {
			return fmt.Errorf("%w: command %s is %s, not in the troubleshooting queue", ErrInvalidState, id, current.Status)
		}
		params := &driver.CommandOperatorParams{
			ID: id, FromStatuses: []driver.CommandStatus{driver.CommandStatusInTSQ}, ToStatus: to,
			Event: event, Actor: action.Actor, Reason: action.Reason, Result: result,
			ResetAttempts: to == driver.CommandStatusPending, Now: c.now(),
		}
		if outcome != "" {
			code, message := "", ""
			if outcome == OutcomeCancelled {
				code, message = CodeCancelled, "cancelled by "+action.Actor+": "+action.Reason
			}
			params.Reply = c.replyFor(current, outcome, result, code, message)
		}
		if err := c.routeOperatorAction(current, params); err != nil {
			return err
		}
		if updated, err = tx.CommandOperatorAction(ctx, params); err != nil {
			return err
		}
		details, _ := json.Marshal(map[string]any{"from": current.Status, "to": to, "domain": current.Domain, "type": current.Type})
		if err := tx.AuditLogInsert(ctx, &driver.AuditLogInsertParams{
			EntityType: "command", EntityID: id.String(), Action: event, Actor: action.Actor,
			Reason: action.Reason, Details: details, Now: c.now(),
		}); err != nil {
			return err
		}
		if to == driver.CommandStatusPending {
			topics = append(topics, queueTopic(current.Queue))
		}
		if params.Reply != nil {
			topics = append(topics, queueTopic(params.Reply.Queue))
		}
		if len(params.Outbox) > 0 {
			topics = append(topics, outbox.NotifyTopic)
		}
		return tx.Notify(ctx, topics)
	})
	if err != nil {
		return nil, err
	}
	c.logger.Info("operator action on command", "command_id", id, "action", event, "actor", action.Actor, "reason", action.Reason)
	return updated, nil
}
