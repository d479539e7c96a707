package commandbus

import (
	"context"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
)

// DLQ is the dead-letter queue of commands: the commands parked in the troubleshooting
// queue, each with the record (command_dlq) written by the statement that parked it: when, by
// whom, after how many attempts and with which error. A command is parked when it fails
// permanently, exhausts its attempts, or would retry past its domain's max-retry-window.
//
// Resubmitting puts the command back on its queue with a fresh attempt budget and the same
// idempotency key (so a handler that did complete its side effect sees the same key again), and
// removes the record; both are audited, on the command and in the audit log.
type DLQ struct {
	c *Client
}

// DLQ returns the dead-letter queue operations.
func (c *Client) DLQ() *DLQ { return &DLQ{c: c} }

// DLQEntry is a parked command with its dead-letter record.
type DLQEntry = driver.DLQRow

// DLQFilter narrows a listing; zero fields do not filter.
type DLQFilter struct {
	Domain   string
	Type     string
	TenantID string
	// After resumes a listing past the entry it names (the last one of the previous page); nil:
	// the first page. DLQEntryCursor makes it from an entry.
	After *DLQCursor
	Limit int
}

// DLQCursor is the position of a dead-letter entry in listing order.
type DLQCursor = driver.DLQCursor

// DLQEntryCursor returns the cursor that resumes a listing after e.
func DLQEntryCursor(e *DLQEntry) *DLQCursor {
	return &DLQCursor{ParkedAt: e.ParkedAt, CommandID: e.CommandID}
}

// List returns parked commands, most recently parked first.
func (d *DLQ) List(ctx context.Context, filter DLQFilter) ([]*DLQEntry, error) {
	return d.c.exec.DLQList(ctx, &driver.DLQListParams{Domain: filter.Domain, Type: filter.Type, TenantID: filter.TenantID, After: filter.After, Limit: filter.Limit})
}

// Get returns one parked command, or ErrNotFound when it is not parked.
func (d *DLQ) Get(ctx context.Context, id uuid.UUID) (*DLQEntry, error) {
	return d.c.exec.DLQGet(ctx, id)
}

// Depths counts parked commands by domain.
func (d *DLQ) Depths(ctx context.Context) ([]*driver.DLQDepth, error) {
	return d.c.exec.DLQDepths(ctx)
}

// Resubmit puts a parked command back on its queue (for an amqp domain: publishes it again),
// with a fresh attempt budget and its idempotency key unchanged. It returns ErrInvalidState when
// the command is not parked.
func (d *DLQ) Resubmit(ctx context.Context, id uuid.UUID, action OperatorAction) (*CommandRow, error) {
	return d.c.operatorAction(ctx, id, action, "DLQ_RESUBMIT", driver.CommandStatusPending, nil, "")
}
