// Package amqp carries commandbus commands and replies over an AMQP 0-9-1 broker: RabbitMQ here,
// in the role of an IBM MQ queue manager. Each command type has its queue, APP.CMD.<BC>.<Name>.Q;
// replies share APP.CMD.REPLY.Q. Messages are persistent and published with publisher confirms;
// the message's correlation id is the command id and its reply-to the envelope's replyTo header,
// as JMS request/reply has it.
//
// Queues are quorum queues with a delivery limit, IBM MQ's backout threshold: a message delivered
// more than BackoutThreshold times without being acknowledged (a consumer that keeps crashing, or
// whose database keeps failing) is dead-lettered by the broker to the queue's own backout queue,
// <queue>.BACKOUT (IBM MQ's BOQNAME). The consumer drains the backout queues of its command
// queues: each backed-out command is parked in the troubleshooting queue (IN_TSQ, a command_dlq row
// with error BROKER_BACKOUT and the last failure), so no command is left PENDING with its message
// gone; an operator resubmits it from there. A delivery that fails for a database reason is
// requeued only after a backoff that grows with its delivery count (x-delivery-count), never in a
// tight loop. A message that is not a valid envelope is dead-lettered to APP.DLQ by the consumer
// at once, with the reason in its x-commandbus-error header; one of an unknown schema version is
// parked in APP.PARKED.Q. Nothing is dropped: ListDeadLetters shows what waits in those two
// queues, RedriveDeadLetters moves it back once its cause is fixed, and DeadLetterCollector
// exports their depth. The reply queue's backout queue is drained too: a reply backed out while
// the database was down is filed once it answers.
//
// Queues declared by an earlier version dead-lettered to APP.DLQ; RabbitMQ refuses to redeclare a
// queue with other arguments, so delete (or drain and delete) them before upgrading.
//
// The Publisher is an outbox.Publisher for the relay; the Consumer is a commandbus.Service that
// runs a client's handlers for what its queues deliver. Both reconnect after a broker restart.
// The EventConsumer consumes inbound events from event queues and starts the executions they
// trigger (orchestration.Runtime.ReceiveEvent).
package amqp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/brokerclean"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/transport/internal/broker"
)

// HeaderError is the header of a message the consumer dead-lettered or parked: why.
const HeaderError = "x-commandbus-error"

// Topology names the queues and how they are declared.
type Topology struct {
	// Prefix starts every queue name. Default: outbox.DefaultPrefix ("APP").
	Prefix string
	// BackoutThreshold is the delivery limit of every work queue. Default: 5.
	BackoutThreshold int
}

func (t Topology) withDefaults() Topology {
	t.Prefix, t.BackoutThreshold = broker.TopologyDefaults(t.Prefix, t.BackoutThreshold)
	return t
}

// DeadLetterQueue is the prefix's dead-letter queue.
func (t Topology) DeadLetterQueue() string {
	return outbox.DeadLetterQueueName(t.withDefaults().Prefix)
}

// ParkingQueue is the prefix's parking queue.
func (t Topology) ParkingQueue() string { return outbox.ParkingQueueName(t.withDefaults().Prefix) }

// ReplyQueue is the prefix's reply queue.
func (t Topology) ReplyQueue() string { return outbox.ReplyQueueName(t.withDefaults().Prefix) }

// DeclareDeadEnds declares the dead-letter and parking queues.
func (t Topology) DeclareDeadEnds(ch *amqp.Channel) error {
	for _, name := range []string{t.DeadLetterQueue(), t.ParkingQueue()} {
		brokerclean.Declared(name)
		if _, err := ch.QueueDeclare(name, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
			return fmt.Errorf("declaring queue %s: %w", name, err)
		}
	}
	return nil
}

// BackoutQueue is queue's backout queue, <queue>.BACKOUT.
func (t Topology) BackoutQueue(queue string) string { return outbox.BackoutQueueName(queue) }

// DeclareWorkQueue declares a command or reply queue (a durable quorum queue) whose messages go
// to its backout queue after more than BackoutThreshold deliveries, and that backout queue (a
// durable classic queue: it has no delivery limit, so what reaches it stays until it is drained).
func (t Topology) DeclareWorkQueue(ch *amqp.Channel, name string) error {
	t = t.withDefaults()
	backout := t.BackoutQueue(name)
	brokerclean.Declared(backout)
	brokerclean.Declared(name)
	if _, err := ch.QueueDeclare(backout, true, false, false, false, amqp.Table{"x-queue-type": "classic"}); err != nil {
		return fmt.Errorf("declaring queue %s: %w", backout, err)
	}
	_, err := ch.QueueDeclare(name, true, false, false, false, amqp.Table{
		"x-queue-type":              "quorum",
		"x-delivery-limit":          int32(t.BackoutThreshold),
		"x-dead-letter-exchange":    "",
		"x-dead-letter-routing-key": backout,
	})
	if err != nil {
		return fmt.Errorf("declaring queue %s: %w", name, err)
	}
	return nil
}

// dial connects with a timeout.
func dial(url string) (*amqp.Connection, error) {
	return amqp.DialConfig(url, amqp.Config{Heartbeat: 5 * time.Second, Dial: amqp.DefaultDial(5 * time.Second), Properties: amqp.Table{"connection_name": "commandbus"}})
}

// Publishing is the AMQP message of an outbox row: persistent, JSON, its message id, the command
// id as correlation id, the envelope's replyTo as reply-to, and every transport header.
func Publishing(m *driver.OutboxRow) amqp.Publishing {
	headers := amqp.Table{}
	for k, v := range m.Headers {
		headers[k] = v
	}
	return amqp.Publishing{
		ContentType: "application/json", DeliveryMode: amqp.Persistent, Timestamp: time.Now(),
		MessageId: m.MessageID, CorrelationId: m.Headers[outbox.HeaderCommandID], ReplyTo: m.Headers[outbox.HeaderReplyTo],
		Type: m.Type, AppId: "commandbus", Headers: headers, Body: m.Payload,
	}
}

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// URL is the broker. Required.
	URL      string
	Topology Topology
}

// Publisher is an outbox.Publisher for the amqp transport. It connects on first use and again
// after the connection is lost; while the broker is down Publish fails and the relay backs off.
type Publisher struct {
	cfg PublisherConfig

	mu       sync.Mutex
	conn     *amqp.Connection
	ch       *amqp.Channel
	declared map[string]bool
}

var _ outbox.Publisher = (*Publisher)(nil)

// NewPublisher returns a publisher; it connects lazily.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	if cfg.URL == "" {
		return nil, errors.New("amqp: no broker URL; set amqp.url")
	}
	cfg.Topology = cfg.Topology.withDefaults()
	return &Publisher{cfg: cfg}, nil
}

// Transport returns outbox.TransportAMQP.
func (p *Publisher) Transport() string { return outbox.TransportAMQP }

// Close closes the connection.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reset()
	return nil
}

func (p *Publisher) reset() {
	if p.conn != nil {
		_ = p.conn.Close()
	}
	p.conn, p.ch, p.declared = nil, nil, nil
}

func (p *Publisher) channel() (*amqp.Channel, error) {
	if p.ch != nil && !p.ch.IsClosed() && !p.conn.IsClosed() {
		return p.ch, nil
	}
	p.reset()
	conn, err := dial(p.cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("amqp: connecting: %w", err)
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err == nil {
		err = p.cfg.Topology.DeclareDeadEnds(ch)
	}
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("amqp: opening a confirm channel: %w", err)
	}
	p.conn, p.ch, p.declared = conn, ch, map[string]bool{}
	return ch, nil
}

// Publish sends msgs in order on one confirm channel and waits for the broker's confirms.
func (p *Publisher) Publish(ctx context.Context, msgs []*driver.OutboxRow) []error {
	errs := make([]error, len(msgs))
	fail := func(err error) []error {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return errs
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ch, err := p.channel()
	if err != nil {
		return fail(err)
	}
	confirms := make([]*amqp.DeferredConfirmation, len(msgs))
	for i, m := range msgs {
		exchange, routingKey := "", m.Topic
		name, toExchange := strings.CutPrefix(m.Topic, outbox.ExchangeTopicPrefix)
		if toExchange {
			// A durable topic exchange, routed by the message's type: the bound queues decide.
			exchange, routingKey = name, m.Type
		}
		if !p.declared[m.Topic] {
			var err error
			if toExchange {
				brokerclean.DeclaredExchange(name)
				err = ch.ExchangeDeclare(name, amqp.ExchangeTopic, true, false, false, false, nil)
			} else {
				err = p.cfg.Topology.DeclareWorkQueue(ch, m.Topic)
			}
			if err != nil {
				p.reset()
				return fail(err)
			}
			p.declared[m.Topic] = true
		}
		confirms[i], err = ch.PublishWithDeferredConfirmWithContext(ctx, exchange, routingKey, false, false, Publishing(m))
		if err != nil {
			p.reset()
			return fail(fmt.Errorf("amqp: publishing: %w", err))
		}
	}
	for i, dc := range confirms {
		ok, err := dc.WaitContext(ctx)
		switch {
		case err != nil:
			errs[i] = fmt.Errorf("amqp: waiting for the broker's confirm: %w", err)
		case !ok:
			errs[i] = errors.New("amqp: the broker refused the message (nack)")
		}
	}
	if errs[len(errs)-1] != nil {
		p.reset() // a channel that lost confirms is not to be trusted with the next batch
	}
	return errs
}

// DeleteQueues deletes queues (benchmarks and tests clean up with it); errors are ignored.
func DeleteQueues(url string, queues ...string) {
	conn, err := dial(url)
	if err != nil {
		return
	}
	defer conn.Close()
	for _, q := range queues {
		ch, err := conn.Channel()
		if err != nil {
			return
		}
		_, _ = ch.QueueDelete(q, false, false, false)
		_ = ch.Close()
	}
}
