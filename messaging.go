package commandbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/batching"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/tracecontext"
)

// HeaderBusinessKey is the command header that holds SendOpts.Key, the business key its
// envelopes and Kafka events are keyed by.
const HeaderBusinessKey = "businessKey"

// HeaderStepKey is the command header that holds the stable idempotency key of a command a
// process, saga, TCC or workflow step issues: "<executionId>:<step>", the same for every resend of
// the step's command. A brokered command's envelope carries it as its idempotencyKey, so a
// handler written against the envelope alone can guard its side effect with it.
const HeaderStepKey = "commandbus-step-key"

// CodeRetryWindowExceeded parks a command whose next retry would start past its domain's
// max-retry-window.
const CodeRetryWindowExceeded = "RETRY_WINDOW_EXCEEDED"

// brokerRouting is what the configuration says about brokered transports, computed once.
type brokerRouting struct {
	// any is false when no broker is configured: the hot path then checks nothing else.
	any         bool
	amqpDomains map[string]bool
	// amqp10Domains are the domains whose transport is amqp10.
	amqp10Domains map[string]bool
}

func newBrokerRouting(cfg *Config) brokerRouting {
	r := brokerRouting{amqpDomains: map[string]bool{}, amqp10Domains: map[string]bool{}}
	for name, d := range cfg.Domains {
		if d.Transport == TransportAMQP {
			r.amqpDomains[name] = true
			r.any = true
		}
		if d.Transport == TransportAMQP10 {
			r.amqp10Domains[name] = true
			r.any = true
		}
		if d.Events == EventsKafka {
			r.any = true
		}
	}
	if cfg.Events == EventsKafka {
		r.any = true
	}
	return r
}

// amqpDomains lists the domains whose transport is amqp, sorted.
func (c *Client) amqpDomains() []string { return sortedKeys(c.routing.amqpDomains) }

// commandTypes lists the command types with handlers in domain, sorted.
func (c *Client) commandTypes(domain string) []string {
	c.handlers.mu.RLock()
	defer c.handlers.mu.RUnlock()
	return sortedKeys(c.handlers.commands[domain])
}

// amqp10Domains lists the domains whose transport is amqp10, sorted.
func (c *Client) amqp10Domains() []string { return sortedKeys(c.routing.amqp10Domains) }

// brokeredDomains lists the domains whose commands go through a broker (amqp or amqp10), sorted.
func (c *Client) brokeredDomains() []string {
	return append(c.amqpDomains(), c.amqp10Domains()...)
}

// isAMQP reports whether domain's commands go through a broker: amqp (0-9-1) or amqp10.
func (c *Client) isAMQP(domain string) bool {
	return c.routing.amqpDomains[domain] || c.routing.amqp10Domains[domain]
}

// commandTransport is the outbox transport of domain's commands and replies, and its queue
// prefix.
func (c *Client) commandTransport(domain string) (transport, prefix string) {
	if c.routing.amqp10Domains[domain] {
		return outbox.TransportAMQP10, c.config.AMQP10.Prefix
	}
	return outbox.TransportAMQP, c.config.AMQP.Prefix
}

// businessKey is what a command's messages are keyed by: its business key, else its
// correlation id (so a process's messages stay in order), else its id.
func businessKey(row *CommandRow) string {
	if k := row.Headers[HeaderBusinessKey]; k != "" {
		return k
	}
	if row.CorrelationID != uuid.Nil {
		return row.CorrelationID.String()
	}
	return row.ID.String()
}

func (c *Client) envelope(typ outbox.Type, row *CommandRow, causation uuid.UUID, payload json.RawMessage) *outbox.Envelope {
	e := &outbox.Envelope{
		MessageID: uuid.Must(uuid.NewV7()), Type: typ, Name: row.Type, CommandID: row.ID,
		CorrelationID: row.CorrelationID, CausationID: causation, OccurredAt: c.Now(), Key: businessKey(row),
		Headers: outbox.Headers{TenantID: row.TenantID, SchemaVersion: outbox.SchemaVersion, IdempotencyKey: row.IdempotencyKey},
		Payload: payload,
	}
	if k := row.Headers[HeaderStepKey]; k != "" {
		e.Headers.IdempotencyKey = k
	}
	if len(payload) == 0 {
		e.Payload = json.RawMessage(`{}`)
	}
	if row.ReplyTo != "" && c.isAMQP(row.Domain) {
		_, prefix := c.commandTransport(row.Domain)
		e.Headers.ReplyTo = outbox.ReplyQueueName(prefix)
	}
	if sc, ok := tracecontext.FromHeaders(row.Headers); ok {
		e.Headers.TraceID, e.Headers.SpanID = sc.TraceID.String(), sc.SpanID.String()
	}
	return e
}

// commandRequested is the outbox message that delivers a command of an amqp domain. Commands are
// not ordered by key: each command type has its own queue, and a retry waiting for its backoff must
// not hold back anything else.
func (c *Client) commandRequested(row *CommandRow, nextAt *time.Time, delay time.Duration) (*driver.OutboxInsertParams, error) {
	transport, prefix := c.commandTransport(row.Domain)
	m := &outbox.Message{
		Category: outbox.CategoryCommand, Transport: transport,
		Topic:    outbox.CommandQueueName(prefix, row.Domain, row.Type),
		Envelope: c.envelope(outbox.TypeCommandRequested, row, row.CausationID, row.Data), NextAt: nextAt,
	}
	p, err := m.InsertParams()
	if err != nil {
		return nil, err
	}
	p.Key, p.Delay = "", delay
	return p, nil
}

// commandRow is the row ins inserts, as far as its outbox message needs it.
func commandRow(ins *driver.CommandInsertParams) *CommandRow {
	return &CommandRow{ID: ins.ID, Kind: ins.Kind, Domain: ins.Domain, Queue: ins.Queue, Type: ins.Type,
		Data: ins.Data, CorrelationID: ins.CorrelationID, CausationID: ins.CausationID, ReplyTo: ins.ReplyTo,
		TenantID: ins.TenantID, Headers: ins.Headers, IdempotencyKey: ins.IdempotencyKey}
}

// checkpointOutbox returns the CommandRequested outbox messages of the commands of brokered
// domains among cmds: an execution checkpoint that inserts cmds writes them in its transaction,
// so a process's command reaches its broker exactly as one sent with Send does.
func (c *Client) checkpointOutbox(cmds []*driver.CommandInsertParams) ([]*driver.OutboxInsertParams, error) {
	if !c.routing.any {
		return nil, nil
	}
	var out []*driver.OutboxInsertParams
	for _, ins := range cmds {
		if ins.Kind != driver.CommandKindCommand || !c.isAMQP(ins.Domain) {
			continue
		}
		row := commandRow(ins)
		if _, traced := tracecontext.FromHeaders(row.Headers); !traced && row.CorrelationID != uuid.Nil {
			row.Headers = withHeader(row.Headers, tracecontext.Header, executionTrace(row.CorrelationID))
		}
		msg, err := c.commandRequested(row, ins.VisibleAt, 0)
		if err != nil {
			return nil, fmt.Errorf("the outbox message of command %s: %w", ins.ID, err)
		}
		out = append(out, msg)
	}
	return out, nil
}

// executionTrace is the trace context of the envelopes of an execution started without one: the
// trace id is the execution id's 16 bytes and the span id its last 8, so every message of the
// execution shares one trace a broker-side consumer can follow.
func executionTrace(execution uuid.UUID) string {
	var sc tracecontext.SpanContext
	copy(sc.TraceID[:], execution[:])
	copy(sc.SpanID[:], execution[8:])
	sc.Sampled = true
	return sc.Traceparent()
}

// outcomeMessages are the outbox messages announcing that row ended in status: its reply on the
// AMQP reply queue (when the domain is brokered and the command has a replyTo, replacing the
// command-table reply) and its event on Kafka (when the domain's events go there).
func (c *Client) outcomeMessages(row *CommandRow, status driver.CommandStatus, reply **driver.CommandInsertParams, result json.RawMessage, code, message string) []*driver.OutboxInsertParams {
	if row.Kind == driver.CommandKindReply {
		return nil
	}
	var typ outbox.Type
	var outcome Outcome
	switch status {
	case driver.CommandStatusCompleted:
		typ, outcome = outbox.TypeCommandCompleted, OutcomeSuccess
	case driver.CommandStatusFailed:
		typ, outcome = outbox.TypeCommandFailed, OutcomeFailed
	case driver.CommandStatusCancelled:
		typ, outcome = outbox.TypeCommandFailed, OutcomeCancelled
	case driver.CommandStatusTimedOut:
		typ, outcome = outbox.TypeCommandTimedOut, OutcomeTimedOut
	default:
		return nil
	}
	var data json.RawMessage
	if *reply != nil {
		data = (*reply).Data
	} else {
		data = encodeReply(&Reply{CommandID: row.ID, CorrelationID: row.CorrelationID, Domain: row.Domain,
			CommandType: row.Type, Outcome: outcome, Result: result, ErrorCode: code, ErrorMessage: message, Headers: row.Headers})
	}
	var out []*driver.OutboxInsertParams
	add := func(m *outbox.Message) {
		p, err := m.InsertParams()
		if err != nil {
			c.logger.Error("building an outbox message failed; it is not sent", "command_id", row.ID, "error", err)
			return
		}
		out = append(out, p)
	}
	if *reply != nil && c.isAMQP(row.Domain) {
		transport, prefix := c.commandTransport(row.Domain)
		add(&outbox.Message{Category: outbox.CategoryReply, Transport: transport,
			Topic: outbox.ReplyQueueName(prefix), Envelope: c.envelope(typ, row, row.ID, data)})
		*reply = nil
	}
	if c.config.DomainEvents(row.Domain) == EventsKafka {
		add(&outbox.Message{Category: outbox.CategoryEvent, Transport: outbox.TransportKafka,
			Topic: outbox.EventTopicName(c.config.Kafka.TopicPrefix, row.Domain), Envelope: c.envelope(typ, row, row.ID, data)})
	}
	return out
}

// routeCompletion adds a completion's brokered messages: the redelivery of a retried command of
// an amqp domain, and the reply and event of an outcome.
func (c *Client) routeCompletion(row *CommandRow, comp *driver.CommandCompletion) {
	if !c.routing.any {
		return
	}
	if comp.Status == driver.CommandStatusPending {
		if c.isAMQP(row.Domain) && row.Kind == driver.CommandKindCommand && !comp.Release {
			msg, err := c.commandRequested(row, nil, comp.RetryDelay)
			if err != nil {
				c.logger.Error("building the redelivery of a command failed", "command_id", row.ID, "error", err)
				return
			}
			comp.Outbox = append(comp.Outbox, msg)
		}
		return
	}
	comp.Outbox = append(comp.Outbox, c.outcomeMessages(row, comp.Status, &comp.Reply, comp.Result, comp.ErrorCode, comp.ErrorMessage)...)
}

// routeOperatorAction does the same for an operator's (or the watchdog's) action.
func (c *Client) routeOperatorAction(row *CommandRow, params *driver.CommandOperatorParams) error {
	if !c.routing.any {
		return nil
	}
	if params.ToStatus == driver.CommandStatusPending {
		if c.isAMQP(row.Domain) && row.Kind == driver.CommandKindCommand {
			msg, err := c.commandRequested(row, nil, 0)
			if err != nil {
				return err
			}
			params.Outbox = append(params.Outbox, msg)
		}
		return nil
	}
	params.Outbox = append(params.Outbox, c.outcomeMessages(row, params.ToStatus, &params.Reply, params.Result, params.ErrorCode, params.ErrorMessage)...)
	return nil
}

// DeliveryOutcome is what the client did with a message a broker delivered (a command or a reply);
// a consumer acknowledges every outcome except DeliveryReleased.
type DeliveryOutcome string

// The delivery outcomes.
const (
	// DeliveryProcessed: the handler ran and its outcome committed with the inbox record.
	DeliveryProcessed DeliveryOutcome = "processed"
	// DeliveryDuplicate: the message, or the command it carries, was already processed.
	DeliveryDuplicate DeliveryOutcome = "duplicate"
	// DeliveryInProgress: another delivery of the command holds a live lease; it will finish it.
	DeliveryInProgress DeliveryOutcome = "in_progress"
	// DeliveryRescheduled: the command is not due yet; a new message is scheduled for when it is.
	DeliveryRescheduled DeliveryOutcome = "rescheduled"
	// DeliveryReleased: shutdown interrupted the handler; the command was given back and the
	// message must be redelivered (nack with requeue).
	DeliveryReleased DeliveryOutcome = "released"
)

// Delivery is a command message a broker delivered.
type Delivery struct {
	// MessageID is the envelope's message id; Consumer names the consumer in the inbox, so one
	// message is processed at most once per consumer.
	MessageID string
	Consumer  string
	CommandID uuid.UUID
	// Domain is the domain whose queue delivered it; its visibility timeout is the lease.
	Domain string
	// ReplyTo is the reply-to the message named (the envelope's replyTo header): the command's
	// reply is published there. Empty: the configured reply queue.
	ReplyTo string
}

// executeDelivered runs the command a broker delivered, as a worker runs a claimed one: it dedupes
// through the inbox, claims the command by id (fenced, leased for the domain's visibility
// timeout), runs its handler, and commits the outcome with the inbox record and the outbox
// messages of its reply and event. An error means nothing was committed: the consumer should
// let the broker redeliver. A command that does not exist gives an error matching ErrNotFound.
func (c *Client) executeDelivered(ctx context.Context, d Delivery) (DeliveryOutcome, error) {
	// The inbox check is part of the claim: a message the consumer processed claims nothing.
	lease := c.config.Domain(d.Domain).VisibilityTimeout.Std()
	row, err := c.claimDelivered(ctx, &driver.CommandClaimByIDParams{ID: d.CommandID, Lease: lease, WorkerID: c.config.WorkerID, Now: c.now(),
		Inbox: &driver.InboxInsertParams{MessageID: d.MessageID, Handler: d.Consumer}})
	switch {
	case errors.Is(err, driver.ErrDuplicate):
		return DeliveryDuplicate, nil
	case errors.Is(err, driver.ErrNotFound):
		return "", fmt.Errorf("%w: the delivered command %s does not exist in this database", ErrNotFound, d.CommandID)
	case errors.Is(err, driver.ErrConflict):
		return c.unclaimable(ctx, d)
	case err != nil:
		return "", fmt.Errorf("claiming the delivered command: %w", err)
	}
	c.metrics.claimed(row.Domain, row.Queue, 1)
	runCtx, cancel := context.WithTimeout(ctx, lease)
	comp := c.runCommand(runCtx, row)
	cancel()
	if ctx.Err() != nil && !comp.Status.Terminal() {
		comp = &driver.CommandCompletion{ID: row.ID, Fence: row.Fence, Status: driver.CommandStatusPending, Event: "RELEASED_ON_SHUTDOWN", Release: true}
		writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := c.exec.CommandCompleteMany(writeCtx, &driver.CommandCompleteManyParams{Completions: []*driver.CommandCompletion{comp}, Now: c.now()}); err != nil {
			c.logger.Warn("releasing a delivered command failed; its lease will expire", "command_id", row.ID, "error", err)
		}
		return DeliveryReleased, nil
	}
	if d.ReplyTo != "" {
		for _, m := range comp.Outbox {
			if m.Category == driver.OutboxCategoryReply {
				m.Topic = d.ReplyTo
			}
		}
	}
	comp.Inbox = &driver.InboxInsertParams{MessageID: d.MessageID, Handler: d.Consumer}
	applied, err := c.writeDelivered(ctx, comp)
	if err != nil {
		return "", fmt.Errorf("writing the outcome of command %s: %w", row.ID, err)
	}
	if !applied {
		c.metrics.fenceRejected()
		c.logger.Warn("outcome discarded: the command moved on (watchdog or operator)", "command_id", row.ID)
	}
	return DeliveryProcessed, nil
}

// deliveredOutcome is the outcome of a delivered command waiting to be written with others.
type deliveredOutcome struct {
	comp *driver.CommandCompletion
	done chan deliveredWritten
}

// deliveredWritten says whether an outcome's fence matched, or why its batch failed.
type deliveredWritten struct {
	applied bool
	err     error
}

// Delivered outcomes are group-committed: one statement and one commit for the outcomes that
// arrive while others are being written, as the workers' completer does for claimed commands.
// Unlike the completer's, each caller waits until its outcome is durable, because the broker's
// message is only acknowledged then.
const (
	maxDeliveredBatch   = 200
	maxDeliveredFlushes = 2
)

// writeDelivered writes a delivered command's outcome (with its inbox record and outbox
// messages) in the next batch and reports whether its fence matched. An error means the batch
// did not commit; the broker redelivers and the inbox deduplicates if it did after all.
func (c *Client) writeDelivered(ctx context.Context, comp *driver.CommandCompletion) (bool, error) {
	c.deliveredOnce.Do(func() {
		c.delivered = batching.New(maxDeliveredBatch, maxDeliveredFlushes, c.flushDelivered)
	})
	req := &deliveredOutcome{comp: comp, done: make(chan deliveredWritten, 1)}
	c.delivered.Submit(req)
	select {
	case w := <-req.done:
		return w.applied, w.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// flushDelivered writes a batch of delivered outcomes in one statement and tells each caller.
func (c *Client) flushDelivered(batch []*deliveredOutcome) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	comps := make([]*driver.CommandCompletion, len(batch))
	wroteOutbox := false
	for i, req := range batch {
		comps[i] = req.comp
		wroteOutbox = wroteOutbox || len(req.comp.Outbox) > 0
	}
	ids, err := c.exec.CommandCompleteMany(ctx, &driver.CommandCompleteManyParams{Completions: comps, Now: c.now()})
	applied := make(map[uuid.UUID]bool, len(ids))
	for _, id := range ids {
		applied[id] = true
	}
	if err == nil {
		c.notifyOutbox(ctx, wroteOutbox)
	}
	for _, req := range batch {
		req.done <- deliveredWritten{applied: applied[req.comp.ID], err: err}
	}
}

// unclaimable decides what a delivery of a command that cannot be claimed means.
func (c *Client) unclaimable(ctx context.Context, d Delivery) (DeliveryOutcome, error) {
	row, err := c.exec.CommandGetByID(ctx, d.CommandID)
	if err != nil {
		return "", err
	}
	switch {
	case row.Status.Terminal() || row.Status == driver.CommandStatusInTSQ:
		c.inbox.Duplicate(d.Consumer)
		return DeliveryDuplicate, nil
	case row.Status == driver.CommandStatusPending:
		msg, err := c.commandRequested(row, &row.VisibleAt, 0)
		if err != nil {
			return "", err
		}
		if _, err := c.exec.OutboxInsertMany(ctx, &driver.OutboxInsertManyParams{Messages: []*driver.OutboxInsertParams{msg}}); err != nil {
			return "", err
		}
		return DeliveryRescheduled, nil
	}
	return DeliveryInProgress, nil
}

func (c *Client) notifyOutbox(ctx context.Context, wrote bool) {
	if !wrote {
		return
	}
	if err := c.exec.Notify(ctx, []string{outbox.NotifyTopic}); err != nil {
		c.logger.Warn("waking the outbox relay failed; it will poll", "error", err)
	}
}

// deliverReply files a reply a broker delivered (from the AMQP reply queue) as a reply row on the
// queue the command named as its replyTo, where the domain's reply handlers take it, exactly once
// per consumer: the inbox record commits with it.
func (c *Client) deliverReply(ctx context.Context, env *outbox.Envelope, consumer string) (DeliveryOutcome, error) {
	if env.Type == outbox.TypeCommandRequested {
		return "", &outbox.DecodeError{Code: outbox.CodeInvalidEnvelope, Field: "type", Message: "a reply queue received a CommandRequested"}
	}
	cmd, err := c.exec.CommandGetByID(ctx, env.CommandID)
	if err != nil {
		return "", fmt.Errorf("the command %s of the reply: %w", env.CommandID, err)
	}
	var replies *driver.CommandInsertManyParams
	if cmd.ReplyTo != "" {
		domain := trimReplySuffix(cmd.ReplyTo)
		reply := &driver.CommandInsertParams{
			ID: uuid.Must(uuid.NewV7()), Kind: driver.CommandKindReply, Domain: domain, Queue: cmd.ReplyTo,
			Type: cmd.Type, Data: replyData(env, cmd), CorrelationID: cmd.CorrelationID, CausationID: cmd.ID,
			MaxAttempts: c.config.Domain(domain).MaxAttempts, TenantID: cmd.TenantID, Actor: consumer,
		}
		if sc, ok := env.Headers.Trace(); ok {
			reply.Headers = map[string]string{tracecontext.Header: sc.Traceparent()}
		}
		replies = &driver.CommandInsertManyParams{Commands: []*driver.CommandInsertParams{reply}, Now: c.now()}
	}
	wake := func(exec driver.Executor) error {
		if replies == nil {
			return nil
		}
		return exec.Notify(ctx, []string{queueTopic(cmd.ReplyTo)})
	}
	if cmd.Status != driver.CommandStatusPending {
		// The usual case: this deployment ran the command, so the reply only needs filing. One
		// statement writes the inbox record and the reply row, or neither for a redelivery.
		first, err := c.inboxRecordWith(ctx, env.MessageID.String(), consumer, replies)
		if err != nil || !first {
			return DeliveryDuplicate, err
		}
		return DeliveryProcessed, wake(c.exec)
	}
	outcome := DeliveryDuplicate
	err = driver.WithTx(ctx, c.exec, func(tx driver.ExecutorTx) error {
		first, err := c.inboxRecord(ctx, tx, env.MessageID.String(), consumer)
		if err != nil || !first {
			return err
		}
		outcome = DeliveryProcessed
		if err := c.completeByReply(ctx, tx, cmd, env, consumer); err != nil {
			return err
		}
		if replies == nil {
			return nil
		}
		if _, err := tx.CommandInsertMany(ctx, replies); err != nil {
			return err
		}
		return wake(tx)
	})
	if err != nil {
		return "", err
	}
	return outcome, nil
}

// completeByReply records the outcome a reply reports on its command when the command is still
// PENDING: a handler outside this deployment (one that speaks only the envelope) ran it, so the
// reply is the only news of its end. A command this deployment ran has ended already (its reply
// commits with its outcome) and is left as it is.
func (c *Client) completeByReply(ctx context.Context, tx driver.ExecutorTx, cmd *CommandRow, env *outbox.Envelope, actor string) error {
	if cmd.Status != driver.CommandStatusPending {
		return nil
	}
	params := &driver.CommandOperatorParams{ID: cmd.ID, FromStatuses: []driver.CommandStatus{driver.CommandStatusPending},
		Event: "REPLY_RECEIVED", Actor: actor, Reason: "the reply " + env.MessageID.String() + " reported its outcome", Now: c.now()}
	var reply Reply
	if err := json.Unmarshal(replyData(env, cmd), &reply); err != nil {
		return err
	}
	switch reply.Outcome {
	case OutcomeSuccess:
		params.ToStatus, params.Result = driver.CommandStatusCompleted, reply.Result
	case OutcomeFailed:
		params.ToStatus, params.ErrorCode, params.ErrorMessage = driver.CommandStatusFailed, reply.ErrorCode, reply.ErrorMessage
	default:
		return nil
	}
	_, err := tx.CommandOperatorAction(ctx, params)
	if errors.Is(err, driver.ErrConflict) {
		return nil
	}
	return err
}

// replyData is the reply a delivered reply envelope files. The replies this library publishes
// carry the whole Reply as their payload; a handler that speaks only the envelope (another
// language, another platform) sends its result, or for a CommandFailed its errorCode and
// errorMessage, as the payload: its reply is rebuilt from the envelope's type and the command
// row, whose headers route it back to the process that sent the command.
func replyData(env *outbox.Envelope, cmd *CommandRow) json.RawMessage {
	var own Reply
	if json.Unmarshal(env.Payload, &own) == nil && own.CommandID == cmd.ID && own.Outcome != "" {
		return env.Payload
	}
	r := &Reply{CommandID: cmd.ID, CorrelationID: cmd.CorrelationID, Domain: cmd.Domain, CommandType: cmd.Type, Headers: cmd.Headers}
	switch env.Type {
	case outbox.TypeCommandCompleted:
		r.Outcome, r.Result = OutcomeSuccess, env.Payload
	case outbox.TypeCommandTimedOut:
		r.Outcome = OutcomeTimedOut
	default:
		var failure struct {
			ErrorCode    string `json:"errorCode"`
			ErrorMessage string `json:"errorMessage"`
		}
		_ = json.Unmarshal(env.Payload, &failure)
		r.Outcome, r.ErrorCode, r.ErrorMessage = OutcomeFailed, failure.ErrorCode, failure.ErrorMessage
		if r.ErrorCode == "" {
			r.ErrorCode = "FAILED"
		}
	}
	return encodeReply(r)
}
