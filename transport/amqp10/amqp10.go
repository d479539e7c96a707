// Package amqp10 carries commandbus commands and replies over an AMQP 1.0 broker, with
// github.com/Azure/go-amqp. It has the role transport/amqp (AMQP 0-9-1) has, for the brokers
// that speak AMQP 1.0: IBM MQ through its AMQP channel, Azure Service Bus,
// ActiveMQ Artemis, and RabbitMQ (the rabbitmq_amqp1_0 plugin on 3.x, built in from 4.0). A
// domain whose transport is amqp10 has its commands written with an outbox row; the relay
// publishes them with the Publisher, and a Consumer runs the domain's handlers for what the
// broker delivers. Queue names are those transport/amqp uses: APP.CMD.<BC>.<Name>.Q per
// command type, APP.CMD.REPLY.Q for replies, APP.DLQ and APP.PARKED.Q.
//
// # IBM MQ semantics in AMQP 1.0
//
//   - Persistent messages (MQ's MQPER_PERSISTENT, JMS DeliveryMode.PERSISTENT): the message
//     header's durable flag is set on every message, and the publisher waits for the broker's
//     disposition (accepted) before the relay marks the outbox row published.
//   - Correlation id (MQMD CorrelId, JMSCorrelationID): the properties' correlation-id is the
//     command id; the message-id is the envelope's message id.
//   - Reply-to (MQMD ReplyToQ, JMSReplyTo): the properties' reply-to is the envelope's replyTo,
//     the reply queue's name (APP.CMD.REPLY.Q).
//   - Envelope fields: the body is the outbox.Envelope JSON in one data section
//     (content-type application/json); its transport headers (type, name, commandId,
//     correlationId, causationId, replyTo, tenantId, schemaVersion, traceparent) are also
//     application properties, and the subject is the envelope type.
//   - Backout count (MQMD BackoutCount): the message header's delivery-count, the number of
//     earlier failed deliveries. A delivery that fails for a database reason is given back
//     modified with delivery-failed (so the broker counts it) after a backoff that doubles with
//     the count, never at once. RabbitMQ 3.x refuses the modified outcome; there it is released,
//     and RabbitMQ counts the failure in its quorum queue.
//   - Backout threshold (BOTHRESH) and backout queue (BOQNAME): once a message's delivery-count
//     reaches Topology.BackoutThreshold, the consumer moves it to <queue>.BACKOUT and accepts the
//     original, as an MQ application does. The consumer drains the backout queues of its command
//     queues: each backed-out command is parked in the troubleshooting queue (IN_TSQ, a
//     command_dlq row with error BROKER_BACKOUT and the last failure), counted in
//     commandbus_transport_broker_dead_letters_total, so no command is left PENDING with its
//     message gone. On RabbitMQ the queue's delivery limit moves messages there too (when the
//     count is not visible to AMQP 1.0 clients, as on 3.x, or a consumer keeps crashing).
//   - A message that is not a valid envelope goes to APP.DLQ with the reason in its
//     x-commandbus-error application property; one of an unknown schema version to APP.PARKED.Q.
//
// # Addresses and queues
//
// AMQP 1.0 names nodes by address, and brokers differ: RabbitMQ 3.x addresses an existing queue
// as /amq/queue/NAME, RabbitMQ 4.x as /queues/NAME, IBM MQ, Service Bus and Artemis by its name.
// With AddressAuto (the default) the transport reads the broker's product and version from the
// connection's properties and picks the form. AMQP 1.0 cannot declare queues: on RabbitMQ the
// transport declares them over AMQP 0-9-1 on the same host and credentials (durable quorum
// queues with a delivery limit of BackoutThreshold, dead-lettering to <queue>.BACKOUT, a classic
// queue), as transport/amqp does; on IBM MQ an administrator defines them, for example
//
//	DEFINE QLOCAL('APP.CMD.FX.BookFx.Q') DEFPSIST(YES) BOTHRESH(5) BOQNAME('APP.CMD.FX.BookFx.Q.BACKOUT')
//	DEFINE QLOCAL('APP.CMD.FX.BookFx.Q.BACKOUT') DEFPSIST(YES)
//
// This transport is tested against RabbitMQ 3.10's AMQP 1.0 plugin only; the IBM MQ mapping
// above follows IBM's documentation of its AMQP channel and has not been run against IBM MQ.
package amqp10

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	amqp "github.com/Azure/go-amqp"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/outbox"
	amqp091t "github.com/commandbus/commandbus/transport/amqp"
	"github.com/commandbus/commandbus/transport/internal/broker"
)

// HeaderError is the application property of a message the consumer dead-lettered or parked: why.
const HeaderError = "x-commandbus-error"

// HeaderOriginalQueue is the application property naming the queue a moved message came from.
const HeaderOriginalQueue = "x-commandbus-original-queue"

// AddressStyle is how queue names become AMQP 1.0 addresses.
type AddressStyle string

// The address styles.
const (
	// AddressAuto picks the style from the broker's connection properties.
	AddressAuto AddressStyle = ""
	// AddressPlain uses the queue name (IBM MQ, Azure Service Bus, ActiveMQ Artemis).
	AddressPlain AddressStyle = "plain"
	// AddressRabbitMQ3 is RabbitMQ 3.x's plugin form, /amq/queue/NAME.
	AddressRabbitMQ3 AddressStyle = "rabbitmq3"
	// AddressRabbitMQ4 is RabbitMQ 4.x's form, /queues/NAME (percent-encoded).
	AddressRabbitMQ4 AddressStyle = "rabbitmq4"
)

// Address returns queue's address in style s (AddressAuto is treated as AddressPlain).
func (s AddressStyle) Address(queue string) string {
	switch s {
	case AddressRabbitMQ3:
		return "/amq/queue/" + queue
	case AddressRabbitMQ4:
		return "/queues/" + url.PathEscape(queue)
	}
	return queue
}

// DetectAddressStyle picks the address style from a broker's connection properties: RabbitMQ's
// product and version, or AddressPlain for any other broker.
func DetectAddressStyle(props map[string]any) AddressStyle {
	product, _ := props["product"].(string)
	if !strings.EqualFold(product, "RabbitMQ") {
		return AddressPlain
	}
	version, _ := props["version"].(string)
	if strings.HasPrefix(version, "3.") || strings.HasPrefix(version, "2.") {
		return AddressRabbitMQ3
	}
	return AddressRabbitMQ4
}

// Topology names the queues and says how to reach them.
type Topology struct {
	// Prefix starts every queue name. Default: outbox.DefaultPrefix ("APP").
	Prefix string
	// BackoutThreshold is how many deliveries a message may have; a message delivered that often
	// without being processed is moved to its backout queue. Default: 5.
	BackoutThreshold int
	// Addresses is the address style. Default: AddressAuto.
	Addresses AddressStyle
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

// BackoutQueue is queue's backout queue, <queue>.BACKOUT.
func (t Topology) BackoutQueue(queue string) string { return outbox.BackoutQueueName(queue) }

// session is one connection and session to the broker, with what was learned about it.
type session struct {
	conn    *amqp.Conn
	sess    *amqp.Session
	style   AddressStyle
	rabbit  bool
	rabbit3 bool
	url     string
	topo    Topology

	mu       sync.Mutex
	declared map[string]bool
}

// dial connects and opens a session; credentials come from the URL's user info.
func dial(ctx context.Context, rawURL string, topo Topology) (*session, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("amqp10: parsing the broker URL: %w", err)
	}
	opts := &amqp.ConnOptions{ContainerID: "commandbus", IdleTimeout: 30 * time.Second,
		Properties: map[string]any{"connection_name": "commandbus"}}
	if u.User != nil {
		password, _ := u.User.Password()
		opts.SASLType = amqp.SASLTypePlain(u.User.Username(), password)
	} else {
		opts.SASLType = amqp.SASLTypeAnonymous()
	}
	addr := u.Scheme + "://" + u.Host
	dialCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := amqp.Dial(dialCtx, addr, opts)
	if err != nil {
		return nil, fmt.Errorf("amqp10: connecting to %s: %w", addr, err)
	}
	sess, err := conn.NewSession(dialCtx, nil)
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("amqp10: opening a session: %w", err)
	}
	detected := DetectAddressStyle(conn.Properties())
	s := &session{conn: conn, sess: sess, style: topo.Addresses, url: rawURL, topo: topo, declared: map[string]bool{}}
	if s.style == AddressAuto {
		s.style = detected
	}
	s.rabbit = detected != AddressPlain
	s.rabbit3 = detected == AddressRabbitMQ3
	return s, nil
}

func (s *session) close() {
	if s != nil && s.conn != nil {
		_ = s.conn.Close()
	}
}

// address is queue's address on this broker.
func (s *session) address(queue string) string { return s.style.Address(queue) }

// declare makes sure queue (a work queue, with its backout queue) and the dead ends exist. On
// RabbitMQ it declares them over AMQP 0-9-1; other brokers' queues are defined by their
// administrators.
func (s *session) declare(queues ...string) error {
	if !s.rabbit {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var todo []string
	for _, q := range queues {
		if !s.declared[q] {
			todo = append(todo, q)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	conn, err := amqp091.DialConfig(s.url, amqp091.Config{Dial: amqp091.DefaultDial(10 * time.Second)})
	if err != nil {
		return fmt.Errorf("amqp10: declaring queues on RabbitMQ over AMQP 0-9-1: %w", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("amqp10: declaring queues: %w", err)
	}
	topo := amqp091t.Topology{Prefix: s.topo.Prefix, BackoutThreshold: s.topo.BackoutThreshold}
	if !s.declared[""] {
		if err := topo.DeclareDeadEnds(ch); err != nil {
			return fmt.Errorf("amqp10: %w", err)
		}
		s.declared[""] = true
	}
	for _, q := range todo {
		if err := topo.DeclareWorkQueue(ch, q); err != nil {
			return fmt.Errorf("amqp10: %w", err)
		}
		s.declared[q] = true
	}
	return nil
}

// Message is the AMQP 1.0 message of an outbox row: durable, JSON in one data section, its
// message id, the command id as correlation id, the envelope's replyTo as reply-to, the envelope
// type as subject, and every transport header as an application property.
func Message(m *driver.OutboxRow) *amqp.Message {
	msg := amqp.NewMessage(m.Payload)
	msg.Header = &amqp.MessageHeader{Durable: true}
	contentType := "application/json"
	typ := m.Type
	now := time.Now().UTC()
	msg.Properties = &amqp.MessageProperties{MessageID: m.MessageID, ContentType: &contentType, Subject: &typ, CreationTime: &now}
	if id := m.Headers[outbox.HeaderCommandID]; id != "" {
		msg.Properties.CorrelationID = id
	}
	if replyTo := m.Headers[outbox.HeaderReplyTo]; replyTo != "" {
		msg.Properties.ReplyTo = &replyTo
	}
	msg.ApplicationProperties = map[string]any{}
	for k, v := range m.Headers {
		msg.ApplicationProperties[k] = v
	}
	return msg
}

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// URL is the broker, amqp://user:password@host:5672 (amqps:// for TLS). Required.
	URL      string
	Topology Topology
}

// Publisher is an outbox.Publisher for the amqp10 transport. It connects on first use and again
// after the connection is lost; while the broker is down Publish fails and the relay backs off.
type Publisher struct {
	cfg PublisherConfig

	mu      sync.Mutex
	sess    *session
	senders map[string]*amqp.Sender
}

var _ outbox.Publisher = (*Publisher)(nil)

// NewPublisher returns a publisher; it connects lazily.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	if cfg.URL == "" {
		return nil, errors.New("amqp10: no broker URL; set amqp10.url")
	}
	cfg.Topology = cfg.Topology.withDefaults()
	return &Publisher{cfg: cfg}, nil
}

// Transport returns outbox.TransportAMQP10.
func (p *Publisher) Transport() string { return outbox.TransportAMQP10 }

// Close closes the connection.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reset()
	return nil
}

func (p *Publisher) reset() {
	p.sess.close()
	p.sess, p.senders = nil, nil
}

func (p *Publisher) sender(ctx context.Context, queue string) (*amqp.Sender, error) {
	if p.sess != nil {
		select {
		case <-p.sess.conn.Done():
			p.reset()
		default:
		}
	}
	if p.sess == nil {
		s, err := dial(ctx, p.cfg.URL, p.cfg.Topology)
		if err != nil {
			return nil, err
		}
		p.sess, p.senders = s, map[string]*amqp.Sender{}
	}
	if snd := p.senders[queue]; snd != nil {
		return snd, nil
	}
	if err := p.sess.declare(queue); err != nil {
		return nil, err
	}
	snd, err := p.sess.sess.NewSender(ctx, p.sess.address(queue), nil)
	if err != nil {
		return nil, fmt.Errorf("amqp10: attaching a sender to %s: %w", queue, err)
	}
	p.senders[queue] = snd
	return snd, nil
}

// Publish sends msgs in order and waits for the broker to accept each.
func (p *Publisher) Publish(ctx context.Context, msgs []*driver.OutboxRow) []error {
	errs := make([]error, len(msgs))
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, m := range msgs {
		snd, err := p.sender(ctx, m.Topic)
		if err == nil {
			err = snd.Send(ctx, Message(m), nil)
			if err != nil {
				err = fmt.Errorf("amqp10: publishing to %s: %w", m.Topic, err)
			}
		}
		if err != nil {
			p.reset() // a link or connection that failed is not trusted with the rest
			for j := i; j < len(msgs); j++ {
				errs[j] = err
			}
			return errs
		}
	}
	return errs
}
