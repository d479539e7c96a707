package amqp10

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	amqp "github.com/Azure/go-amqp"
	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/internal/plumbing"
	"github.com/commandbus/commandbus/transport/internal/broker"
)

// ConsumerConfig configures a Consumer.
type ConsumerConfig struct {
	// URL is the broker. Required.
	URL      string
	Topology Topology
	// Client runs the handlers and records outcomes. Required.
	Client *commandbus.Client
	// Domains whose command queues to consume: one queue per command type with a handler.
	// Default: the client's domains whose transport is amqp10.
	Domains []string
	// Replies consumes the reply queue, filing each reply on the queue its command named as
	// replyTo (the sender's side). Default: false.
	Replies bool
	// ReconnectDelay is the first wait before reconnecting; it doubles up to 5s. Default: 200ms.
	ReconnectDelay time.Duration
	// RequeueDelay is how long a delivery that failed for a database reason waits before it is
	// given back; it doubles with the message's delivery-count up to MaxRequeueDelay. Defaults:
	// 1s and 30s.
	RequeueDelay    time.Duration
	MaxRequeueDelay time.Duration
	Logger          *slog.Logger
}

// Consumer consumes commands (and optionally replies) for a client over AMQP 1.0. It is a
// commandbus.Service: client.AddService(consumer). Each domain's queues are consumed on their
// own connection with the domain's concurrent-messages as link credit, so a domain never runs
// more handlers at once; the backout queues of its command queues are drained on another.
type Consumer struct {
	core *broker.Consumer
	cfg  ConsumerConfig
}

// NewConsumer returns a consumer; Start connects.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	cfg.Topology = cfg.Topology.withDefaults()
	c := &Consumer{cfg: cfg}
	core, err := broker.NewConsumer(broker.Config{
		Name: "amqp10", URL: cfg.URL, Prefix: cfg.Topology.Prefix, BackoutThreshold: cfg.Topology.BackoutThreshold,
		Client: cfg.Client, Domains: cfg.Domains, DefaultDomains: plumbing.AMQP10Domains, Replies: cfg.Replies,
		ReconnectDelay: cfg.ReconnectDelay, RequeueDelay: cfg.RequeueDelay, MaxRequeueDelay: cfg.MaxRequeueDelay, Logger: cfg.Logger,
		BackoutBeforeProcessing: true,
	}, protocol{c})
	if err != nil {
		return nil, err
	}
	c.core = core
	return c, nil
}

// Queues lists the queues the consumer consumes, backout queues included.
func (c *Consumer) Queues() []string { return c.core.Queues() }

// Ready is closed once every queue has been consumed at least once (since the last Start).
func (c *Consumer) Ready() <-chan struct{} { return c.core.Ready() }

// Start connects and consumes until Stop; it returns at once and reconnects in the background.
func (c *Consumer) Start(ctx context.Context) error { return c.core.Start(ctx) }

// Stop stops consuming, lets handlers in flight finish until ctx ends (then interrupts them: their
// commands are released and their messages redelivered), and closes the connections.
func (c *Consumer) Stop(ctx context.Context) error { return c.core.Stop(ctx) }

// protocol is the consumer's AMQP 1.0 side.
type protocol struct{ c *Consumer }

// Consume runs one connection until it fails or ctx ends.
func (p protocol) Consume(ctx context.Context, sub broker.Subscription, connected func(), handle func(broker.Delivery, func())) error {
	sess, err := dial(ctx, p.c.cfg.URL, p.c.cfg.Topology)
	if err != nil {
		return err
	}
	defer sess.close()
	if err := sess.declare(sub.WorkQueues()...); err != nil {
		return err
	}
	out := &mover{sess: sess, topology: p.c.cfg.Topology, senders: map[string]*amqp.Sender{}}
	deliveries := make(chan *delivery)
	recvCtx, stopRecv := context.WithCancel(ctx)
	defer stopRecv()
	var receivers sync.WaitGroup
	failed := make(chan error, len(sub.Queues))
	for _, queue := range sub.Queues {
		rcv, err := sess.sess.NewReceiver(ctx, sess.address(queue), &amqp.ReceiverOptions{Credit: int32(max(sub.Prefetch, 1))})
		if err != nil {
			stopRecv()
			receivers.Wait()
			return fmt.Errorf("consuming %s: %w", queue, err)
		}
		receivers.Add(1)
		go func() {
			defer receivers.Done()
			for {
				msg, err := rcv.Receive(recvCtx, nil)
				if err != nil {
					failed <- fmt.Errorf("receiving from %s: %w", queue, err)
					return
				}
				select {
				case deliveries <- &delivery{queue: queue, rcv: rcv, msg: msg, out: out}:
				case <-recvCtx.Done():
					return // the unsettled message returns to the queue with the connection
				}
			}
		}()
	}
	connected()
	var handlers sync.WaitGroup
	defer func() {
		stopRecv()
		receivers.Wait()
		handlers.Wait() // settle on this connection before closing it
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-sess.conn.Done():
			return fmt.Errorf("connection closed: %w", sess.conn.Err())
		case err := <-failed:
			return err
		case d := <-deliveries:
			handlers.Add(1)
			handle(d, handlers.Done)
		}
	}
}

// delivery is a broker.Delivery of AMQP 1.0: a message and the link it came on (settled there).
type delivery struct {
	queue string
	rcv   *amqp.Receiver
	msg   *amqp.Message
	out   *mover
}

func (d *delivery) Queue() string     { return d.queue }
func (d *delivery) MessageID() string { return messageID(d.msg) }
func (d *delivery) Body() []byte      { return d.msg.GetData() }

// Count is the message header's delivery-count, the deliveries that failed before this one.
func (d *delivery) Count() int64 { return deliveryCount(d.msg) }

func (d *delivery) Accept(ctx context.Context) error {
	return d.rcv.AcceptMessage(context.WithoutCancel(ctx), d.msg)
}

func (d *delivery) Release(ctx context.Context) error {
	return d.rcv.ReleaseMessage(context.WithoutCancel(ctx), d.msg)
}

func (d *delivery) GiveBack(context.Context) error { return d.out.giveBack(d) }

// BackOut moves the message to its backout queue, as an IBM MQ application does.
func (d *delivery) BackOut(ctx context.Context, reason string) error {
	return d.out.move(ctx, d, d.out.topology.BackoutQueue(d.queue), reason)
}

func (d *delivery) MoveAside(ctx context.Context, reason string, park bool) error {
	to := d.out.topology.DeadLetterQueue()
	if park {
		to = d.out.topology.ParkingQueue()
	}
	return d.out.move(ctx, d, to, reason)
}

// BackedOut reads the reason the consumer that moved the message gave (the x-commandbus-error
// application property), or says the broker's delivery limit moved it.
func (d *delivery) BackedOut() (queue, why string) {
	queue = broker.WorkQueue(d.queue)
	why, _ = d.msg.ApplicationProperties[HeaderError].(string)
	if why == "" {
		why = fmt.Sprintf("the broker's delivery limit (%d) was reached", d.out.topology.BackoutThreshold)
	}
	return queue, fmt.Sprintf("the message was backed out of %s to %s: %s", queue, d.queue, why)
}

// deliveryCount is the message's backout count: its header's delivery-count, the deliveries
// that failed before this one.
func deliveryCount(msg *amqp.Message) int64 {
	if msg.Header == nil {
		return 0
	}
	return int64(msg.Header.DeliveryCount)
}

func messageID(msg *amqp.Message) string {
	if msg.Properties == nil || msg.Properties.MessageID == nil {
		return ""
	}
	return fmt.Sprint(msg.Properties.MessageID)
}

// mover sends copies of deliveries to other queues (backout, dead-letter, parking) and gives
// deliveries back.
type mover struct {
	sess     *session
	topology Topology
	mu       sync.Mutex
	senders  map[string]*amqp.Sender
}

// move sends a durable copy of d to queue with the reason, then accepts the original; when the
// copy cannot be sent the original is given back, to be delivered again.
func (m *mover) move(ctx context.Context, d *delivery, queue, reason string) error {
	copyMsg := &amqp.Message{Header: &amqp.MessageHeader{Durable: true}, Properties: d.msg.Properties, Data: d.msg.Data,
		ApplicationProperties: map[string]any{}}
	if copyMsg.Properties == nil {
		copyMsg.Properties = &amqp.MessageProperties{MessageID: uuid.NewString()}
	}
	for k, v := range d.msg.ApplicationProperties {
		copyMsg.ApplicationProperties[k] = v
	}
	copyMsg.ApplicationProperties[HeaderError] = reason
	copyMsg.ApplicationProperties[HeaderOriginalQueue] = d.queue
	copyMsg.ApplicationProperties["x-commandbus-delivery-count"] = deliveryCount(d.msg) + 1
	err := m.send(ctx, queue, copyMsg)
	if err != nil {
		_ = m.giveBack(d)
		return fmt.Errorf("moving a message to %s: %w", queue, err)
	}
	return d.rcv.AcceptMessage(context.WithoutCancel(ctx), d.msg)
}

func (m *mover) send(ctx context.Context, queue string, msg *amqp.Message) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	snd := m.senders[queue]
	if snd == nil {
		var err error // the queue was declared with the work queues (RabbitMQ) or by an administrator
		if snd, err = m.sess.sess.NewSender(ctx, m.sess.address(queue), nil); err != nil {
			return err
		}
		m.senders[queue] = snd
	}
	sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return snd.Send(sendCtx, msg, nil)
}

// giveBack returns d to its queue as a failed delivery: modified with delivery-failed, so the
// broker counts it in the delivery-count; released on RabbitMQ 3.x, which refuses modified and
// counts the release itself.
func (m *mover) giveBack(d *delivery) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if m.sess.rabbit3 {
		return d.rcv.ReleaseMessage(ctx, d.msg)
	}
	return d.rcv.ModifyMessage(ctx, d.msg, &amqp.ModifyMessageOptions{DeliveryFailed: true})
}
