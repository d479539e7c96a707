package commandbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
)

// SendOpts are the optional fields of a command.
type SendOpts struct {
	// ID of the command; generated (UUIDv7) when zero.
	ID uuid.UUID
	// CorrelationID ties the command to a process or conversation; replies carry it.
	CorrelationID uuid.UUID
	// CausationID is the message that caused this one.
	CausationID uuid.UUID
	// ReplyTo is a domain or its reply queue ("payments" or "payments__replies"); the command's
	// reply goes there.
	ReplyTo string
	// MaxAttempts overrides the domain's max-attempts.
	MaxAttempts int
	// TenantID is carried through to replies.
	TenantID string
	// BatchID puts the command in a batch (see CreateBatch).
	BatchID uuid.UUID
	// Headers are free-form metadata, carried to replies.
	Headers map[string]string
	// IdempotencyKey is unique per domain: sending the same key again returns the first
	// command's id and creates nothing.
	IdempotencyKey string
	// ScheduledAt delays the first attempt.
	ScheduledAt *time.Time
	// Deadline ends the command TIMED_OUT if it has not completed by then.
	Deadline *time.Time
	// Actor is recorded in the command's SENT audit entry. Default: the client's worker id.
	Actor string
}

// SendParams is one command of a batch send.
type SendParams struct {
	Domain string
	Args   CommandArgs
	Opts   *SendOpts
}

// SendResult is the outcome of sending one command.
type SendResult struct {
	// ID is the command's id; for a duplicate it is the first command's id.
	ID uuid.UUID
	// Duplicate is true when the idempotency key matched an existing command; nothing was created.
	Duplicate bool
}

// Send durably accepts one command: when Send returns, the command exists.
func (c *Client) Send(ctx context.Context, domain string, args CommandArgs, opts *SendOpts) (*SendResult, error) {
	results, err := c.SendBatch(ctx, []SendParams{{Domain: domain, Args: args, Opts: opts}})
	if err != nil {
		return nil, err
	}
	return &results[0], nil
}

// SendTx sends a command inside a transaction the caller began (pgx.Tx on PostgreSQL, *sql.Tx on
// SQLite): the command commits or rolls back with the caller's own writes.
func (c *Client) SendTx(ctx context.Context, tx any, domain string, args CommandArgs, opts *SendOpts) (*SendResult, error) {
	results, err := c.SendBatchTx(ctx, tx, []SendParams{{Domain: domain, Args: args, Opts: opts}})
	if err != nil {
		return nil, err
	}
	return &results[0], nil
}

// SendBatch sends many commands in one round trip (COPY on PostgreSQL when none has an
// idempotency key). Every command is validated before anything is written; results are in input
// order.
func (c *Client) SendBatch(ctx context.Context, params []SendParams) ([]SendResult, error) {
	return c.sendBatch(ctx, c.exec, false, params)
}

// SendBatchTx is SendBatch inside the caller's transaction.
func (c *Client) SendBatchTx(ctx context.Context, tx any, params []SendParams) ([]SendResult, error) {
	exec, err := c.drv.UnwrapTx(tx)
	if err != nil {
		return nil, err
	}
	return c.sendBatch(ctx, exec, true, params)
}

// SendWithExecutor sends inside an executor a service already holds (a driver transaction).
// Notifications are delivered when that transaction commits.
func (c *Client) SendWithExecutor(ctx context.Context, exec driver.Executor, params []SendParams) ([]SendResult, error) {
	return c.sendBatch(ctx, exec, true, params)
}

func (c *Client) sendBatch(ctx context.Context, exec driver.Executor, inTx bool, params []SendParams) ([]SendResult, error) {
	if len(params) == 0 {
		return nil, nil
	}
	inserts, err := c.buildInserts(params)
	if err != nil {
		return nil, err
	}
	results, err := exec.CommandInsertMany(ctx, &driver.CommandInsertManyParams{Commands: inserts, Now: c.now()})
	if err != nil {
		return nil, fmt.Errorf("sending commands: %w", err)
	}
	out := make([]SendResult, len(results))
	topics := map[string]struct{}{}
	for i, r := range results {
		out[i] = SendResult{ID: r.ID, Duplicate: !r.Inserted}
		if r.Inserted {
			topics[queueTopic(inserts[i].Queue)] = struct{}{}
		}
	}
	// Inside a transaction PostgreSQL delivers the notification at commit; outside, the insert
	// has committed already.
	if err := exec.Notify(ctx, mapKeys(topics)); err != nil {
		if inTx {
			return nil, fmt.Errorf("notifying workers: %w", err)
		}
		c.logger.Warn("notifying workers failed; they will poll", "error", err)
	}
	for i, r := range out {
		if r.Duplicate {
			c.logger.Debug("duplicate idempotency key; command not created", "domain", params[i].Domain, "command_id", r.ID)
		}
	}
	return out, nil
}

func (c *Client) buildInserts(params []SendParams) ([]*driver.CommandInsertParams, error) {
	inserts := make([]*driver.CommandInsertParams, len(params))
	var errs []error
	for i, p := range params {
		insert, err := c.buildInsert(p)
		if err != nil {
			if len(params) > 1 {
				err = fmt.Errorf("command %d: %w", i, err)
			}
			errs = append(errs, err)
			continue
		}
		inserts[i] = insert
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return inserts, nil
}

func (c *Client) buildInsert(p SendParams) (*driver.CommandInsertParams, error) {
	if !validName(p.Domain) {
		return nil, &ValidationError{Field: "domain", Message: fmt.Sprintf("%q must be lower-case letters, digits, '-' or '_', starting with a letter", p.Domain)}
	}
	if p.Args == nil {
		return nil, &ValidationError{Field: "args", Message: "nil"}
	}
	kind := p.Args.Kind()
	if kind == "" {
		return nil, &ValidationError{Field: "type", Message: "Kind() returned an empty string"}
	}
	data, err := json.Marshal(p.Args)
	if err != nil {
		return nil, &ValidationError{Field: "data", Message: "cannot be encoded as JSON: " + err.Error()}
	}
	if !json.Valid(data) || len(data) == 0 || data[0] != '{' {
		return nil, &ValidationError{Field: "data", Message: "must be a JSON object"}
	}
	opts := p.Opts
	if opts == nil {
		opts = &SendOpts{}
	}
	replyQueue, _, err := normalizeReplyTo(opts.ReplyTo)
	if err != nil {
		return nil, err
	}
	if opts.MaxAttempts < 0 {
		return nil, &ValidationError{Field: "maxAttempts", Message: "must not be negative"}
	}
	if len(opts.IdempotencyKey) > 200 {
		return nil, &ValidationError{Field: "idempotencyKey", Message: "must be at most 200 characters"}
	}
	maxAttempts := opts.MaxAttempts
	if maxAttempts == 0 {
		maxAttempts = c.config.Domain(p.Domain).MaxAttempts
	}
	id := opts.ID
	if id == uuid.Nil {
		id = uuid.Must(uuid.NewV7())
	}
	actor := opts.Actor
	if actor == "" {
		actor = c.config.WorkerID
	}
	return &driver.CommandInsertParams{
		ID: id, Kind: driver.CommandKindCommand, Domain: p.Domain, Queue: CommandQueue(p.Domain),
		Type: kind, Data: data, CorrelationID: opts.CorrelationID, CausationID: opts.CausationID,
		ReplyTo: replyQueue, MaxAttempts: maxAttempts, TenantID: opts.TenantID, BatchID: opts.BatchID,
		Headers: opts.Headers, IdempotencyKey: opts.IdempotencyKey, VisibleAt: opts.ScheduledAt,
		DeadlineAt: opts.Deadline, Actor: actor,
	}, nil
}

func mapKeys(m map[string]struct{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// BuildCommand validates one command and returns the row a driver inserts, without writing it.
// Services that send commands atomically with their own writes (a process checkpoint) use it.
func (c *Client) BuildCommand(p SendParams) (*driver.CommandInsertParams, error) {
	return c.buildInsert(p)
}
