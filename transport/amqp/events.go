package amqp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/commandbus/commandbus/orchestration"
)

// EventReceiver receives inbound events; *orchestration.Runtime is one.
type EventReceiver interface {
	ReceiveEvent(ctx context.Context, transport string, body []byte) (*orchestration.EventReceipt, error)
}

// EventConsumerConfig configures an EventConsumer.
type EventConsumerConfig struct {
	// URL is the broker. Required.
	URL string
	// Queues are the queues inbound events arrive on. Required.
	Queues []string
	// Receiver starts the executions the events trigger (the client's runtime). Required.
	Receiver EventReceiver
	// Topology names the dead-letter queue (<prefix>.DLQ) and the delivery limit of the event
	// queues (BackoutThreshold).
	Topology Topology
	// Prefetch bounds the events delivered and not yet acknowledged. Default: 16.
	Prefetch int
	// ReconnectDelay is the first wait before reconnecting; it doubles up to 5s. Default: 200ms.
	ReconnectDelay time.Duration
	// RequeueDelay is how long an event whose handling failed for a database reason waits before
	// it is requeued; it doubles with every earlier delivery of the message up to 30s.
	// Default: 1s.
	RequeueDelay time.Duration
	// Logger receives the consumer's logs. Default: discards them.
	Logger *slog.Logger
}

// EventConsumer consumes inbound events (orchestration.InboundEvent, CloudEvents in structured
// mode: the message body is the JSON envelope) from AMQP queues and hands them to the runtime,
// which starts the executions their types trigger once per event. It is a commandbus.Service.
//
// Every event queue is declared as a quorum queue whose delivery limit is the topology's backout
// threshold, dead-lettering to <queue>.BACKOUT; bind it to the exchanges the events are
// published to. Events are handled one at a time (Prefetch bounds those delivered ahead). An event is acknowledged once handled: started, a duplicate, or of a type no
// definition is triggered by (counted, never retried). A malformed event is moved at once to the
// dead-letter queue <prefix>.DLQ with the reason in its x-commandbus-error header, and counted
// (commandbus_inbound_events_total{transport="amqp",outcome="malformed"}); an operator finds it
// there. An event whose handling fails in the database is requeued after a growing delay; past
// the delivery limit the broker moves it to <queue>.BACKOUT, from where an operator shovels it
// back once the database is well.
type EventConsumer struct {
	cfg    EventConsumerConfig
	cancel context.CancelFunc
	done   chan struct{}

	readyMu sync.Mutex
	ready   chan struct{}
}

// NewEventConsumer returns a consumer; Start connects.
func NewEventConsumer(cfg EventConsumerConfig) (*EventConsumer, error) {
	var problems []error
	if cfg.URL == "" {
		problems = append(problems, errors.New("URL is required"))
	}
	if len(cfg.Queues) == 0 {
		problems = append(problems, errors.New("Queues must name at least one queue"))
	}
	for i, q := range cfg.Queues {
		if q == "" {
			problems = append(problems, fmt.Errorf("Queues[%d] is empty", i))
		}
	}
	if cfg.Receiver == nil {
		problems = append(problems, errors.New("Receiver is required"))
	}
	if cfg.Prefetch < 0 || cfg.ReconnectDelay < 0 || cfg.RequeueDelay < 0 {
		problems = append(problems, errors.New("Prefetch, ReconnectDelay and RequeueDelay must not be negative"))
	}
	if err := errors.Join(problems...); err != nil {
		return nil, fmt.Errorf("amqp event consumer: %w", err)
	}
	cfg.Topology = cfg.Topology.withDefaults()
	if cfg.Prefetch == 0 {
		cfg.Prefetch = 16
	}
	if cfg.ReconnectDelay == 0 {
		cfg.ReconnectDelay = 200 * time.Millisecond
	}
	if cfg.RequeueDelay == 0 {
		cfg.RequeueDelay = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &EventConsumer{cfg: cfg, ready: make(chan struct{})}, nil
}

// Ready is closed once every event queue has been declared and subscribed since the last Start.
func (c *EventConsumer) Ready() <-chan struct{} {
	c.readyMu.Lock()
	defer c.readyMu.Unlock()
	return c.ready
}

// Start consumes until Stop; it returns at once and reconnects in the background.
func (c *EventConsumer) Start(context.Context) error {
	if c.done != nil {
		return errors.New("amqp event consumer: already started")
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.done = cancel, make(chan struct{})
	c.readyMu.Lock()
	select {
	case <-c.ready:
		c.ready = make(chan struct{})
	default:
	}
	c.readyMu.Unlock()
	go c.run(ctx)
	return nil
}

// Stop stops consuming and waits, until ctx ends, for the event in hand; an event not
// acknowledged returns to its queue.
func (c *EventConsumer) Stop(ctx context.Context) error {
	if c.done == nil {
		return nil
	}
	c.cancel()
	select {
	case <-c.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.done = nil
	return nil
}

func (c *EventConsumer) run(ctx context.Context) {
	defer close(c.done)
	delay := c.cfg.ReconnectDelay
	for {
		connected := false
		err := c.consume(ctx, func() { connected = true })
		if ctx.Err() != nil {
			return
		}
		if connected {
			delay = c.cfg.ReconnectDelay
		}
		c.cfg.Logger.Warn("amqp event consumer disconnected; reconnecting", "error", err, "queues", c.cfg.Queues, "retry_in", delay)
		if !sleep(ctx, delay) {
			return
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// sleep waits for d or ctx; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// consume runs one connection until it fails or ctx ends.
func (c *EventConsumer) consume(ctx context.Context, connected func()) error {
	conn, err := dial(c.cfg.URL)
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if err := ch.Qos(c.cfg.Prefetch, 0, false); err != nil {
		return err
	}
	pubCh, err := conn.Channel()
	if err == nil {
		err = pubCh.Confirm(false)
	}
	if err != nil {
		return err
	}
	topology := c.cfg.Topology
	if err := topology.DeclareDeadEnds(ch); err != nil {
		return err
	}
	dead := &deadEnd{ch: pubCh, topology: topology}
	deliveries := make(chan amqp.Delivery)
	var forwarders sync.WaitGroup
	for _, queue := range c.cfg.Queues {
		if err := topology.DeclareWorkQueue(ch, queue); err != nil {
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
	c.readyMu.Lock()
	select {
	case <-c.ready:
	default:
		close(c.ready)
	}
	c.readyMu.Unlock()
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	allDone := make(chan struct{})
	go func() { forwarders.Wait(); close(allDone) }()
	for {
		select {
		case <-ctx.Done():
			_ = ch.Close() // ends the deliveries; unacknowledged ones return to their queues
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
			if err := c.handle(ctx, d, dead); err != nil {
				_ = ch.Close()
				drain(deliveries, allDone)
				return err
			}
		}
	}
}

// handle hands one event to the receiver and settles its message.
func (c *EventConsumer) handle(ctx context.Context, d amqp.Delivery, dead *deadEnd) error {
	logger := c.cfg.Logger.With("queue", d.RoutingKey, "message_id", d.MessageId)
	receipt, err := c.cfg.Receiver.ReceiveEvent(withDeliveryTrace(ctx, d), orchestration.EventTransportAMQP, d.Body)
	switch {
	case err == nil:
		logger.Debug("inbound event handled", "event_id", receipt.EventID, "outcome", receipt.Outcome)
		return d.Ack(false)
	case errors.Is(err, orchestration.ErrMalformedEvent):
		logger.Warn("inbound event is malformed; moved to the dead-letter queue", "dead_letter_queue", c.cfg.Topology.DeadLetterQueue(), "reason", err)
		return dead.moveAside(ctx, d, err.Error(), false)
	default:
		if ctx.Err() != nil {
			return nil // stopping: the channel's close returns the message to its queue
		}
		wait := c.cfg.RequeueDelay << min(deliveryCount(d), 5)
		wait = min(wait, 30*time.Second)
		logger.Warn("inbound event failed; requeued after a delay", "error", err, "deliveries", deliveryCount(d)+1, "requeue_in", wait)
		sleep(ctx, wait)
		return d.Nack(false, true)
	}
}
