package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/tracecontext"
)

// The transports a relay can publish to.
const (
	TransportAMQP  = "amqp"
	TransportKafka = "kafka"
	// TransportAMQP10 is AMQP 1.0 (transport/amqp10): IBM MQ's AMQP channel, Azure Service Bus,
	// ActiveMQ Artemis, RabbitMQ.
	TransportAMQP10 = "amqp10"
)

// The message categories: a command, a reply to a command's sender, an event.
const (
	CategoryCommand = driver.OutboxCategoryCommand
	CategoryReply   = driver.OutboxCategoryReply
	CategoryEvent   = driver.OutboxCategoryEvent
)

// NotifyTopic is the notification that wakes relays; Enqueue sends it with the transaction, so
// on PostgreSQL it is delivered when the transaction commits.
const NotifyTopic = "outbox"

// The transport headers every outbox message carries, derived from its envelope. Publishers map
// them onto their broker's message properties and headers.
const (
	HeaderMessageID     = "messageId"
	HeaderType          = "type"
	HeaderName          = "name"
	HeaderCommandID     = "commandId"
	HeaderCorrelationID = "correlationId"
	HeaderCausationID   = "causationId"
	HeaderReplyTo       = "replyTo"
	HeaderTenantID      = "tenantId"
	HeaderSchemaVersion = "schemaVersion"
	HeaderTraceparent   = tracecontext.Header
)

// ExchangeTopicPrefix starts the topic of an amqp message that goes to an exchange rather than
// a queue: "exchange:<name>" is published to the durable topic exchange <name>, with the
// message's type as routing key.
const ExchangeTopicPrefix = "exchange:"

// Message is one message to publish after the transaction that writes it commits.
type Message struct {
	Category driver.OutboxCategory
	// Transport is TransportAMQP or TransportKafka.
	Transport string
	// Topic is the AMQP queue or Kafka topic.
	Topic string
	// Key orders messages (and is the Kafka record key): messages of one key are published in
	// the order they were written. Default: the envelope's key.
	Key      string
	Envelope *Envelope
	// NextAt delays the publication (a scheduled command, a retry's backoff). Nil: at once.
	NextAt *time.Time
}

// InsertParams validates m and encodes it as the driver row to insert.
func (m *Message) InsertParams() (*driver.OutboxInsertParams, error) {
	if m.Envelope == nil {
		return nil, errors.New("outbox: message has no envelope")
	}
	switch m.Category {
	case CategoryCommand, CategoryReply, CategoryEvent:
	default:
		return nil, fmt.Errorf("outbox: category %q is not command, reply or event", m.Category)
	}
	if m.Transport == "" || m.Topic == "" {
		return nil, errors.New("outbox: message needs a transport and a topic")
	}
	payload, err := m.Envelope.Encode()
	if err != nil {
		return nil, fmt.Errorf("outbox: encoding envelope: %w", err)
	}
	key := m.Key
	if key == "" {
		key = m.Envelope.Key
	}
	return &driver.OutboxInsertParams{
		Category: m.Category, Transport: m.Transport, Topic: m.Topic, Key: key, Type: string(m.Envelope.Type),
		MessageID: m.Envelope.MessageID.String(), Payload: payload, Headers: m.Envelope.TransportHeaders(),
		NextAt: m.NextAt,
	}, nil
}

// TransportHeaders returns the headers a publisher puts on the broker message.
func (e *Envelope) TransportHeaders() map[string]string {
	h := map[string]string{
		HeaderMessageID: e.MessageID.String(), HeaderType: string(e.Type), HeaderName: e.Name,
		HeaderCommandID: e.CommandID.String(), HeaderSchemaVersion: e.Headers.SchemaVersion,
	}
	correlation := e.CorrelationID
	if correlation == uuid.Nil {
		correlation = e.CommandID
	}
	h[HeaderCorrelationID] = correlation.String()
	if e.CausationID != uuid.Nil {
		h[HeaderCausationID] = e.CausationID.String()
	}
	if e.Headers.ReplyTo != "" {
		h[HeaderReplyTo] = e.Headers.ReplyTo
	}
	if e.Headers.TenantID != "" {
		h[HeaderTenantID] = e.Headers.TenantID
	}
	if sc, ok := e.Headers.Trace(); ok {
		h[HeaderTraceparent] = sc.Traceparent()
	}
	return h
}

// Enqueue writes msgs to the outbox through exec, which should be the caller's transaction
// (drv.UnwrapTx(tx)) so the messages commit or roll back with the caller's writes, and wakes the
// relays when that transaction commits.
func Enqueue(ctx context.Context, exec driver.Executor, msgs ...*Message) error {
	if len(msgs) == 0 {
		return nil
	}
	params := make([]*driver.OutboxInsertParams, len(msgs))
	for i, m := range msgs {
		p, err := m.InsertParams()
		if err != nil {
			return err
		}
		params[i] = p
	}
	if _, err := exec.OutboxInsertMany(ctx, &driver.OutboxInsertManyParams{Messages: params}); err != nil {
		return err
	}
	return exec.Notify(ctx, []string{NotifyTopic})
}

// Queue and topic naming: DefaultPrefix starts every queue name (APP.CMD.<BC>.<Name>.Q);
// DefaultEventPrefix every event topic.
const (
	DefaultPrefix      = "APP"
	DefaultEventPrefix = "events."
)

// CommandQueueName is the queue of one command type of one bounded context:
// APP.CMD.<BC>.<Name>.Q, the bounded context upper-cased (CommandQueueName("APP", "fx", "BookFx")
// is "APP.CMD.FX.BookFx.Q").
func CommandQueueName(prefix, domain, commandType string) string {
	return prefix + ".CMD." + strings.ToUpper(domain) + "." + commandType + ".Q"
}

// ReplyQueueName is the shared reply queue: APP.CMD.REPLY.Q.
func ReplyQueueName(prefix string) string { return prefix + ".CMD.REPLY.Q" }

// DeadLetterQueueName receives messages that cannot be processed: APP.DLQ.
func DeadLetterQueueName(prefix string) string { return prefix + ".DLQ" }

// BackoutQueueName is a work queue's backout queue, as IBM MQ names its BOQNAME by convention:
// <queue>.BACKOUT. A message delivered more often than the queue's backout threshold without being
// processed is moved there, and its command is parked in the troubleshooting queue.
func BackoutQueueName(queue string) string { return queue + ".BACKOUT" }

// ParkingQueueName receives messages of an envelope version no consumer knows yet: APP.PARKED.Q.
func ParkingQueueName(prefix string) string { return prefix + ".PARKED.Q" }

// EventTopicName is a bounded context's event topic: events.<BC>, the bounded context in
// PascalCase (EventTopicName("events.", "fx-rates") is "events.FxRates").
func EventTopicName(prefix, domain string) string {
	var b strings.Builder
	b.WriteString(prefix)
	upper := true
	for _, r := range domain {
		if r == '-' || r == '_' {
			upper = true
			continue
		}
		if upper {
			r = unicode.ToUpper(r)
			upper = false
		}
		b.WriteRune(r)
	}
	return b.String()
}
