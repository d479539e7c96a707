package commandbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
)

// CodeBrokerBackout is the error code of a command parked because its broker gave up on its
// message: delivered more times than the queue's backout threshold without being processed
// (IBM MQ's backout queue; a quorum queue's delivery limit on RabbitMQ).
const CodeBrokerBackout = "BROKER_BACKOUT"

// ParkBackedOut parks the command of a message the broker backed out: a PENDING or RUNNING
// command moves to the troubleshooting queue (IN_TSQ) with a command_dlq row whose error is
// CodeBrokerBackout and reason, audited as DLQ_PARK by actor (the consumer). It returns false
// when there was nothing to park: the command had already ended or been parked (its message was
// backed out after its outcome was recorded). A command that does not exist gives an error
// matching ErrNotFound. An operator takes a parked command from there (commandbus dlq, resubmit).
func (c *Client) ParkBackedOut(ctx context.Context, commandID uuid.UUID, actor, reason string) (bool, error) {
	parked := false
	err := driver.WithTx(ctx, c.exec, func(tx driver.ExecutorTx) error {
		current, err := tx.CommandGetByID(ctx, commandID)
		if errors.Is(err, driver.ErrNotFound) {
			return fmt.Errorf("%w: the backed-out command %s does not exist in this database", ErrNotFound, commandID)
		}
		if err != nil {
			return err
		}
		if current.Status != driver.CommandStatusPending && current.Status != driver.CommandStatusRunning {
			return nil
		}
		params := &driver.CommandOperatorParams{
			ID: commandID, FromStatuses: []driver.CommandStatus{driver.CommandStatusPending, driver.CommandStatusRunning},
			ToStatus: driver.CommandStatusInTSQ, Event: "BROKER_BACKOUT", Actor: actor, Reason: reason,
			ErrorCode: CodeBrokerBackout, ErrorMessage: reason, Now: c.now(),
		}
		if notifiesParked(current.Headers) {
			params.Reply = c.replyFor(current, OutcomeParked, nil, CodeBrokerBackout, reason)
		}
		if _, err := tx.CommandOperatorAction(ctx, params); err != nil {
			if errors.Is(err, driver.ErrConflict) {
				return nil
			}
			return err
		}
		details, _ := json.Marshal(map[string]any{"from": current.Status, "to": driver.CommandStatusInTSQ,
			"domain": current.Domain, "type": current.Type, "errorCode": CodeBrokerBackout})
		if err := tx.AuditLogInsert(ctx, &driver.AuditLogInsertParams{
			EntityType: "command", EntityID: commandID.String(), Action: "DLQ_PARK", Actor: actor,
			Reason: reason, Details: details, Now: c.now(),
		}); err != nil {
			return err
		}
		parked = true
		if params.Reply != nil {
			return tx.Notify(ctx, []string{queueTopic(params.Reply.Queue)})
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	if parked {
		c.logger.Warn("command parked: its broker message was backed out", "command_id", commandID, "reason", reason)
	}
	return parked, nil
}
