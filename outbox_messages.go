package commandbus

import (
	"context"
	"errors"
	"fmt"

	"github.com/commandbus/commandbus/driver"
)

// OutboxMessages lists outbox messages newest first: brokered commands and replies, lifecycle
// events, webhooks. Filter by status (FAILED is where undelivered messages wait for an
// operator), transport and topic.
func (c *Client) OutboxMessages(ctx context.Context, params *driver.OutboxListParams) ([]*driver.OutboxRow, error) {
	if params == nil {
		params = &driver.OutboxListParams{}
	}
	return c.drv.Executor().OutboxList(ctx, params)
}

// OutboxMessage returns one outbox message, or ErrNotFound.
func (c *Client) OutboxMessage(ctx context.Context, id int64) (*driver.OutboxRow, error) {
	row, err := c.drv.Executor().OutboxGet(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("outbox message %d: %w", id, err)
	}
	return row, nil
}

// ResendOutboxMessage puts a FAILED outbox message (a dead-lettered webhook, a message the
// broker refused) back in line: NEW, due at once, with a fresh attempt budget. The action's actor
// and reason are validated first and logged with the message's id. A message that is not FAILED
// is refused with ErrInvalidState and left alone; an unknown id gives ErrNotFound.
func (c *Client) ResendOutboxMessage(ctx context.Context, id int64, action OperatorAction) (*driver.OutboxRow, error) {
	if err := action.Validate(); err != nil {
		return nil, err
	}
	exec := c.drv.Executor()
	resent, err := exec.OutboxResend(ctx, &driver.OutboxResendParams{IDs: []int64{id}})
	if err != nil {
		return nil, err
	}
	row, err := c.OutboxMessage(ctx, id)
	if err != nil {
		return nil, err
	}
	if len(resent) == 0 {
		return row, fmt.Errorf("outbox message %d is %s, not FAILED: %w", id, row.Status, ErrInvalidState)
	}
	c.logger.Info("outbox message resent by an operator", "outbox_id", id, "message_id", row.MessageID,
		"transport", row.Transport, "topic", row.Topic, "actor", action.Actor, "reason", action.Reason)
	if err := exec.Notify(ctx, []string{"outbox"}); err != nil && !errors.Is(err, context.Canceled) {
		c.logger.Warn("waking the outbox relays failed; they will poll", "error", err)
	}
	return row, nil
}
