package commandbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/tracecontext"
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
	// Key is the business key (a payment id) the command's envelopes and events are keyed by on a
	// brokered transport, kept in the HeaderBusinessKey header. Default: the correlation id, or
	// the command id.
	Key string
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

// sendWithExecutor sends inside an executor a caller already holds (a driver transaction).
// Notifications are delivered when that transaction commits.
func (c *Client) sendWithExecutor(ctx context.Context, exec driver.Executor, params []SendParams) ([]SendResult, error) {
	return c.sendBatch(ctx, exec, true, params)
}

func (c *Client) sendBatchUntraced(ctx context.Context, exec driver.Executor, inTx bool, params []SendParams) ([]SendResult, error) {
	if len(params) == 0 {
		return nil, nil
	}
	inserts, err := c.buildInserts(params)
	if err != nil {
		return nil, err
	}
	if sc, ok := tracecontext.FromContext(ctx); ok {
		traceparent := sc.Traceparent()
		for _, ins := range inserts {
			if _, set := ins.Headers[tracecontext.Header]; !set {
				ins.Headers = withHeader(ins.Headers, tracecontext.Header, traceparent)
			}
		}
	}
	if c.routing.any && c.anyAMQP(inserts) {
		return c.sendBrokered(ctx, exec, inTx, inserts)
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
	headers := opts.Headers
	if opts.Key != "" {
		headers = withHeader(headers, HeaderBusinessKey, opts.Key)
	}
	return &driver.CommandInsertParams{
		ID: id, Kind: driver.CommandKindCommand, Domain: p.Domain, Queue: CommandQueue(p.Domain),
		Type: kind, Data: data, CorrelationID: opts.CorrelationID, CausationID: opts.CausationID,
		ReplyTo: replyQueue, MaxAttempts: maxAttempts, TenantID: opts.TenantID, BatchID: opts.BatchID,
		Headers: headers, IdempotencyKey: opts.IdempotencyKey, VisibleAt: opts.ScheduledAt,
		DeadlineAt: opts.Deadline, Actor: actor,
	}, nil
}

// withHeader returns a copy of headers with key set: the caller's map is never changed.
func withHeader(headers map[string]string, key, value string) map[string]string {
	out := make(map[string]string, len(headers)+1)
	for k, v := range headers {
		out[k] = v
	}
	out[key] = value
	return out
}

func (c *Client) anyAMQP(inserts []*driver.CommandInsertParams) bool {
	for _, ins := range inserts {
		if c.isAMQP(ins.Domain) {
			return true
		}
	}
	return false
}

// sendBrokered writes the commands and, for those of amqp domains, their CommandRequested outbox
// messages in one transaction: a command and its outbox message commit together or not at all.
func (c *Client) sendBrokered(ctx context.Context, exec driver.Executor, inTx bool, inserts []*driver.CommandInsertParams) ([]SendResult, error) {
	var out []SendResult
	write := func(tx driver.Executor) error {
		results, err := tx.CommandInsertMany(ctx, &driver.CommandInsertManyParams{Commands: inserts, Now: c.now()})
		if err != nil {
			return fmt.Errorf("sending commands: %w", err)
		}
		out = make([]SendResult, len(results))
		topics := map[string]struct{}{}
		var messages []*driver.OutboxInsertParams
		for i, r := range results {
			out[i] = SendResult{ID: r.ID, Duplicate: !r.Inserted}
			if !r.Inserted {
				continue
			}
			ins := inserts[i]
			if !c.isAMQP(ins.Domain) {
				topics[queueTopic(ins.Queue)] = struct{}{}
				continue
			}
			msg, err := c.commandRequested(commandRow(ins), ins.VisibleAt, 0)
			if err != nil {
				return err
			}
			messages = append(messages, msg)
		}
		if len(messages) > 0 {
			if _, err := tx.OutboxInsertMany(ctx, &driver.OutboxInsertManyParams{Messages: messages}); err != nil {
				return fmt.Errorf("writing the commands' outbox messages: %w", err)
			}
			topics[outbox.NotifyTopic] = struct{}{}
		}
		return tx.Notify(ctx, mapKeys(topics))
	}
	var err error
	if inTx {
		err = write(exec)
	} else {
		err = driver.WithTx(ctx, exec, func(tx driver.ExecutorTx) error { return write(tx) })
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

func mapKeys(m map[string]struct{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
