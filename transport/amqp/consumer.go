package amqp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

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
	// Default: the client's domains whose transport is amqp.
	Domains []string
	// Replies consumes the reply queue, filing each reply on the queue its command named as
	// replyTo (the sender's side). Default: false.
	Replies bool
	// ReconnectDelay is the first wait before reconnecting; it doubles up to 5s. Default: 200ms.
	ReconnectDelay time.Duration
	// RequeueDelay is how long a delivery that failed for a database reason waits before it is
	// requeued; it doubles with every earlier delivery of the message (x-delivery-count) up to
	// MaxRequeueDelay. With the defaults (1s, 30s) and a backout threshold of 5, a message
	// survives about 30s of database outage before it is backed out.
	RequeueDelay    time.Duration
	MaxRequeueDelay time.Duration
	Logger          *slog.Logger
}

// Consumer consumes commands (and optionally replies) for a client. It is a commandbus.Service:
// client.AddService(consumer). Each domain's queues are consumed on their own channel with the
// domain's concurrent-messages as prefetch, so a domain never runs more handlers at once.
type Consumer struct {
	core *broker.Consumer
	cfg  ConsumerConfig
}

// NewConsumer returns a consumer; Start connects.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	cfg.Topology = cfg.Topology.withDefaults()
	c := &Consumer{cfg: cfg}
	core, err := broker.NewConsumer(broker.Config{
		Name: "amqp", URL: cfg.URL, Prefix: cfg.Topology.Prefix, BackoutThreshold: cfg.Topology.BackoutThreshold,
		Client: cfg.Client, Domains: cfg.Domains, DefaultDomains: plumbing.AMQPDomains, Replies: cfg.Replies,
		ReconnectDelay: cfg.ReconnectDelay, RequeueDelay: cfg.RequeueDelay, MaxRequeueDelay: cfg.MaxRequeueDelay, Logger: cfg.Logger,
	}, protocol{c})
	if err != nil {
		return nil, err
	}
	c.core = core
	return c, nil
}

// Queues lists the queues the consumer consumes, backout queues included.
func (c *Consumer) Queues() []string { return c.core.Queues() }

// Ready is closed once every queue has been consumed at least once (declared and subscribed)
// since the last Start.
func (c *Consumer) Ready() <-chan struct{} { return c.core.Ready() }

// Start connects and consumes until Stop; it returns at once and reconnects in the background.
func (c *Consumer) Start(ctx context.Context) error { return c.core.Start(ctx) }

// Stop stops consuming, lets handlers in flight finish until ctx ends (then interrupts them: their
// commands are released and their messages redelivered), and closes the connections.
func (c *Consumer) Stop(ctx context.Context) error { return c.core.Stop(ctx) }

// protocol is the consumer's AMQP 0-9-1 side.
type protocol struct{ c *Consumer }

// Consume runs one connection until it fails or ctx ends.
func (p protocol) Consume(ctx context.Context, sub broker.Subscription, connected func(), handle func(broker.Delivery, func())) error {
	topology := p.c.cfg.Topology
	conn, err := dial(p.c.cfg.URL)
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if err := ch.Qos(sub.Prefetch, 0, false); err != nil {
		return err
	}
	pubCh, err := conn.Channel()
	if err == nil {
		err = pubCh.Confirm(false)
	}
	if err != nil {
		return err
	}
	if err := topology.DeclareDeadEnds(ch); err != nil {
		return err
	}
	dead := &deadEnd{ch: pubCh, topology: topology}
	deliveries := make(chan amqp.Delivery)
	var forwarders sync.WaitGroup
	work := sub.WorkQueues()
	for i, queue := range sub.Queues {
		if err := topology.DeclareWorkQueue(ch, work[i]); err != nil {
			return err
		}
		ds, err := ch.Consume(queue, "", false, false, false, false, nil)
		if err != nil {
			return fmt.Errorf("consuming %s: %w", queue, err)
		}
		forwarders.Add(1)
		go func() {
			defer forwarders.Done()
			for d := range ds {
				deliveries <- d
			}
		}()
	}
	connected()
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	allDone := make(chan struct{})
	go func() { forwarders.Wait(); close(allDone) }()
	for {
		select {
		case <-ctx.Done():
			_ = ch.Close() // ends the deliveries; unacked ones return to the queue
			drain(deliveries, allDone)
			return ctx.Err()
		case err := <-closed:
			drain(deliveries, allDone)
			if err == nil {
				return errors.New("connection closed")
			}
			return err
		case <-allDone:
			return errors.New("deliveries ended")
		case d := <-deliveries:
			handle(&delivery{d: d, dead: dead}, nil)
		}
	}
}

// drain discards deliveries still being forwarded so the forwarders can end; the broker
// redelivers them.
func drain(deliveries <-chan amqp.Delivery, allDone <-chan struct{}) {
	for {
		select {
		case <-deliveries:
		case <-allDone:
			return
		}
	}
}

// delivery is a broker.Delivery of AMQP 0-9-1.
type delivery struct {
	d    amqp.Delivery
	dead *deadEnd
}

func (d *delivery) Queue() string     { return d.d.RoutingKey }
func (d *delivery) MessageID() string { return d.d.MessageId }
func (d *delivery) Body() []byte      { return d.d.Body }

// Count is the quorum queue's x-delivery-count header (0 on the first delivery).
func (d *delivery) Count() int64                          { return deliveryCount(d.d) }
func (d *delivery) Accept(context.Context) error          { return d.d.Ack(false) }
func (d *delivery) Release(context.Context) error         { return d.d.Nack(false, true) }
func (d *delivery) GiveBack(context.Context) error        { return d.d.Nack(false, true) }
func (d *delivery) BackOut(context.Context, string) error { return d.d.Reject(false) } // the broker dead-letters it to the backout queue

func (d *delivery) MoveAside(ctx context.Context, reason string, park bool) error {
	return d.dead.moveAside(ctx, d.d, reason, park)
}

// BackedOut reads the broker's x-death header: the queue the message left, after how many
// deliveries, and why.
func (d *delivery) BackedOut() (queue, why string) {
	threshold := d.dead.topology.BackoutThreshold
	queue, deaths, reason := deathOf(d.d)
	if queue == "" {
		queue = broker.WorkQueue(d.d.RoutingKey)
	}
	if deaths <= 1 {
		deaths = int64(threshold) + 1 // the broker dropped the count on the way
	}
	return queue, fmt.Sprintf("the broker backed out the message after %d deliveries on %s (backout threshold %d, %s); moved to %s",
		deaths, queue, threshold, reason, d.d.RoutingKey)
}

// deliveryCount is how many times the broker delivered d before (a quorum queue's
// x-delivery-count header; 0 on the first delivery).
func deliveryCount(d amqp.Delivery) int64 {
	return toInt64(d.Headers["x-delivery-count"])
}

func toInt64(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case int32:
		return int64(n)
	case int:
		return int64(n)
	case int16:
		return int64(n)
	case int8:
		return int64(n)
	case uint8:
		return int64(n)
	case uint16:
		return int64(n)
	case uint32:
		return int64(n)
	}
	return 0
}

// deathOf reads the broker's x-death header of a dead-lettered message: the queue it left, how
// many times it was delivered there, and why it was dead-lettered.
func deathOf(d amqp.Delivery) (queue string, deliveries int64, reason string) {
	deaths, _ := d.Headers["x-death"].([]any)
	for _, x := range deaths {
		death, ok := x.(amqp.Table)
		if !ok {
			continue
		}
		queue, _ = death["queue"].(string)
		reason, _ = death["reason"].(string)
		break
	}
	deliveries = deliveryCount(d) + 1
	if reason == "" {
		reason = "delivery_limit"
	}
	return queue, deliveries, reason
}

// deadEnd publishes undecodable and unprocessable messages to the dead-letter or parking queue.
type deadEnd struct {
	mu       sync.Mutex
	ch       *amqp.Channel
	topology Topology
}

// moveAside publishes a copy with the reason, then acknowledges the original; when the copy
// cannot be published the original is rejected, and the broker dead-letters it itself.
func (d *deadEnd) moveAside(ctx context.Context, delivery amqp.Delivery, reason string, park bool) error {
	queue := d.topology.DeadLetterQueue()
	if park {
		queue = d.topology.ParkingQueue()
	}
	headers := amqp.Table{}
	for k, v := range delivery.Headers {
		headers[k] = v
	}
	headers[HeaderError] = reason
	headers[HeaderOriginalQueue] = delivery.RoutingKey
	messageID := delivery.MessageId
	if messageID == "" {
		messageID = uuid.NewString()
	}
	d.mu.Lock()
	dc, err := d.ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, false, false, amqp.Publishing{
		ContentType: delivery.ContentType, DeliveryMode: amqp.Persistent, MessageId: messageID,
		CorrelationId: delivery.CorrelationId, ReplyTo: delivery.ReplyTo, Type: delivery.Type, Timestamp: time.Now(),
		Headers: headers, Body: delivery.Body,
	})
	d.mu.Unlock()
	if err == nil {
		var ok bool
		if ok, err = dc.WaitContext(ctx); err == nil && !ok {
			err = errors.New("nacked")
		}
	}
	if err != nil {
		return delivery.Reject(false)
	}
	return delivery.Ack(false)
}
