package amqp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/outbox"
)

// ConsumerConfig configures a Consumer.
type ConsumerConfig struct {
	// URL is the broker. Required.
	URL      string
	Topology Topology
	// Client runs the handlers and records outcomes. Required.
	Client *commandbus.Client
	// Domains whose command queues to consume: one queue per command type with a handler.
	// Default: the client's amqp domains (Client.AMQPDomains).
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
	cfg     ConsumerConfig
	metrics *outbox.Metrics

	mu       sync.Mutex
	cancel   context.CancelFunc
	loops    sync.WaitGroup
	inflight sync.WaitGroup
	workCtx  context.Context
	stopWork context.CancelFunc
	ready    chan struct{}
	readyN   int
	stopping chan struct{}
	started  bool
	// lastErrors remembers why a message was last requeued (by message id), so that the reason
	// of a backed-out command names the failure.
	lastErrors sync.Map
}

// subscription is one channel's worth of queues.
type subscription struct {
	domain   string // "" for the reply queue
	queues   []string
	prefetch int
	// backout: the queues are the backout queues of the domain's command queues.
	backout bool
}

// NewConsumer returns a consumer; Start connects.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	if cfg.URL == "" {
		return nil, errors.New("amqp: no broker URL; set amqp.url")
	}
	if cfg.Client == nil {
		return nil, errors.New("amqp: the consumer needs the client whose handlers it runs")
	}
	cfg.Topology = cfg.Topology.withDefaults()
	if cfg.Domains == nil {
		cfg.Domains = cfg.Client.AMQPDomains()
	}
	if cfg.ReconnectDelay <= 0 {
		cfg.ReconnectDelay = 200 * time.Millisecond
	}
	if cfg.RequeueDelay <= 0 {
		cfg.RequeueDelay = time.Second
	}
	if cfg.MaxRequeueDelay <= 0 {
		cfg.MaxRequeueDelay = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = cfg.Client.Logger()
	}
	return &Consumer{cfg: cfg, metrics: cfg.Client.MessagingMetrics(), ready: make(chan struct{}), stopping: make(chan struct{})}, nil
}

func (c *Consumer) subscriptions() []subscription {
	var subs []subscription
	for _, domain := range c.cfg.Domains {
		dc := c.cfg.Client.Config().Domain(domain)
		if !*dc.Enabled || !*c.cfg.Client.Config().Features.CommandHandlers {
			continue
		}
		sub := subscription{domain: domain, prefetch: dc.ConcurrentMessages}
		for _, typ := range c.cfg.Client.CommandTypes(domain) {
			sub.queues = append(sub.queues, outbox.CommandQueueName(c.cfg.Topology.Prefix, domain, typ))
		}
		if len(sub.queues) > 0 {
			backout := subscription{domain: domain, prefetch: 10, backout: true}
			for _, q := range sub.queues {
				backout.queues = append(backout.queues, c.cfg.Topology.BackoutQueue(q))
			}
			subs = append(subs, sub, backout)
		}
	}
	if c.cfg.Replies {
		subs = append(subs, subscription{queues: []string{c.cfg.Topology.ReplyQueue()}, prefetch: 50})
	}
	return subs
}

// Queues lists the queues the consumer consumes.
func (c *Consumer) Queues() []string {
	var out []string
	for _, s := range c.subscriptions() {
		out = append(out, s.queues...)
	}
	return out
}

// Ready is closed once every queue has been consumed at least once (declared and subscribed)
// since the last Start.
func (c *Consumer) Ready() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

// Start connects and consumes until Stop; it returns at once and reconnects in the background.
func (c *Consumer) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		return errors.New("amqp: consumer already started")
	}
	if c.started {
		// Started again after Stop: fresh readiness and a fresh stop signal.
		c.ready, c.stopping = make(chan struct{}), make(chan struct{})
	}
	c.started = true
	subs := c.subscriptions()
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel = cancel
	c.workCtx, c.stopWork = context.WithCancel(context.WithoutCancel(ctx))
	c.readyN = len(subs)
	if c.readyN == 0 {
		close(c.ready)
	}
	for _, sub := range subs {
		c.loops.Add(1)
		go func() {
			defer c.loops.Done()
			c.run(loopCtx, sub)
		}()
	}
	return nil
}

func (c *Consumer) markReady() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.readyN > 0 {
		c.readyN--
		if c.readyN == 0 {
			close(c.ready)
		}
	}
}

// Stop stops consuming, lets handlers in flight finish until ctx ends (then interrupts them: their
// commands are released and their messages redelivered), and closes the connections.
func (c *Consumer) Stop(ctx context.Context) error {
	c.mu.Lock()
	cancel := c.cancel
	c.mu.Unlock()
	if cancel == nil {
		return nil
	}
	c.mu.Lock()
	select {
	case <-c.stopping:
	default:
		close(c.stopping) // deliveries waiting to be requeued are requeued now
	}
	c.mu.Unlock()
	done := make(chan struct{})
	go func() { c.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	c.stopWork()
	cancel()
	c.loops.Wait()
	c.mu.Lock()
	c.cancel = nil // it may be started again
	c.mu.Unlock()
	return nil
}

// run keeps one subscription consumed, reconnecting with backoff.
func (c *Consumer) run(ctx context.Context, sub subscription) {
	delay := c.cfg.ReconnectDelay
	first := true
	for ctx.Err() == nil {
		err := c.consume(ctx, sub, func() {
			delay = c.cfg.ReconnectDelay
			if first {
				first = false
				c.markReady()
			}
		})
		if ctx.Err() != nil {
			return
		}
		c.cfg.Logger.Warn("amqp consumer: connection lost; reconnecting", "queues", sub.queues, "error", err, "in", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// consume runs one connection until it fails or ctx ends.
func (c *Consumer) consume(ctx context.Context, sub subscription, connected func()) error {
	conn, err := dial(c.cfg.URL)
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if err := ch.Qos(sub.prefetch, 0, false); err != nil {
		return err
	}
	pubCh, err := conn.Channel()
	if err == nil {
		err = pubCh.Confirm(false)
	}
	if err != nil {
		return err
	}
	if err := c.cfg.Topology.DeclareDeadEnds(ch); err != nil {
		return err
	}
	deadEnd := &deadEnd{ch: pubCh, topology: c.cfg.Topology}
	deliveries := make(chan amqp.Delivery)
	var forwarders sync.WaitGroup
	for _, queue := range sub.queues {
		work := queue
		if sub.backout {
			work = strings.TrimSuffix(queue, ".BACKOUT")
		}
		if err := c.cfg.Topology.DeclareWorkQueue(ch, work); err != nil {
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
			c.drain(deliveries, allDone)
			return ctx.Err()
		case err := <-closed:
			c.drain(deliveries, allDone)
			if err == nil {
				return errors.New("connection closed")
			}
			return err
		case <-allDone:
			return errors.New("deliveries ended")
		case d := <-deliveries:
			c.inflight.Add(1)
			go func() {
				defer c.inflight.Done()
				if sub.backout {
					c.handleBackout(d, deadEnd)
					return
				}
				c.handle(sub, d, deadEnd)
			}()
		}
	}
}

// drain discards deliveries still being forwarded so the forwarders can end; the broker
// redelivers them.
func (c *Consumer) drain(deliveries <-chan amqp.Delivery, allDone <-chan struct{}) {
	for {
		select {
		case <-deliveries:
		case <-allDone:
			return
		}
	}
}

// handle settles one delivery: acknowledged once its outcome is committed (or it is a duplicate),
// dead-lettered or parked when it cannot be processed, requeued when the database failed.
func (c *Consumer) handle(sub subscription, d amqp.Delivery, dead *deadEnd) {
	consumer := "amqp:" + d.RoutingKey
	settle := func(result string, settleErr error) {
		if settleErr != nil {
			c.cfg.Logger.Warn("amqp consumer: settling a delivery failed; the broker will redeliver it", "queue", d.RoutingKey, "error", settleErr)
		}
		c.metrics.Consumed.WithLabelValues(d.RoutingKey, result).Inc()
	}
	env, err := outbox.Decode(d.Body)
	if err != nil {
		parked := errors.Is(err, outbox.ErrUnknownSchemaVersion)
		c.cfg.Logger.Error("amqp consumer: undecodable message; moved aside", "queue", d.RoutingKey, "message_id", d.MessageId, "error", err, "parked", parked)
		settle(dead.moveAside(c.workCtx, d, err, parked))
		return
	}
	var outcome commandbus.DeliveryOutcome
	if sub.domain == "" {
		outcome, err = c.cfg.Client.DeliverReply(c.workCtx, env, consumer)
	} else {
		outcome, err = c.cfg.Client.ExecuteDelivered(c.workCtx, commandbus.Delivery{
			MessageID: env.MessageID.String(), Consumer: consumer, CommandID: env.CommandID, Domain: sub.domain,
		})
	}
	var decodeErr *outbox.DecodeError
	switch {
	case errors.Is(err, commandbus.ErrNotFound) || errors.As(err, &decodeErr):
		c.cfg.Logger.Error("amqp consumer: message cannot be processed; dead-lettered", "queue", d.RoutingKey, "message_id", d.MessageId, "error", err)
		settle(dead.moveAside(c.workCtx, d, err, false))
	case err != nil && deliveryCount(d) >= int64(c.cfg.Topology.BackoutThreshold):
		// The last delivery the threshold allows: rejected, the broker moves it to the backout
		// queue at once (a requeue would only come back there after the backoff).
		c.cfg.Logger.Warn("amqp consumer: processing failed on the last delivery; backed out", "queue", d.RoutingKey, "message_id", d.MessageId,
			"deliveries", deliveryCount(d)+1, "error", err)
		c.lastErrors.Store(d.MessageId, err.Error())
		settle("backed_out", d.Reject(false))
	case err != nil:
		delay := c.requeueDelay(d)
		c.cfg.Logger.Warn("amqp consumer: processing failed; requeued after a backoff", "queue", d.RoutingKey, "message_id", d.MessageId,
			"deliveries", deliveryCount(d)+1, "backoff", delay, "error", err)
		c.lastErrors.Store(d.MessageId, err.Error())
		c.wait(delay)
		settle("requeued", d.Nack(false, true))
	case outcome == commandbus.DeliveryReleased:
		settle("released", d.Nack(false, true))
	default:
		c.lastErrors.Delete(d.MessageId)
		settle(string(outcome), d.Ack(false))
	}
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

// requeueDelay is RequeueDelay × 2^(earlier deliveries), capped at MaxRequeueDelay.
func (c *Consumer) requeueDelay(d amqp.Delivery) time.Duration {
	return backoff(c.cfg.RequeueDelay, c.cfg.MaxRequeueDelay, deliveryCount(d))
}

func backoff(first, most time.Duration, n int64) time.Duration {
	delay := first
	for i := int64(0); i < n && delay < most; i++ {
		delay *= 2
	}
	return min(delay, most)
}

// wait waits d, or less when the consumer stops.
func (c *Consumer) wait(d time.Duration) {
	c.mu.Lock()
	stopping := c.stopping
	c.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-stopping:
	}
}

// handleBackout files a message the broker backed out: its command is parked in the
// troubleshooting queue with the reason, then the message is acknowledged. A message whose
// command cannot be found or that is not a command is moved to the dead-letter queue; when the
// database fails the message is requeued after a backoff (a backout queue has no delivery limit).
func (c *Consumer) handleBackout(d amqp.Delivery, dead *deadEnd) {
	backoutQueue := d.RoutingKey
	queue, deaths, reason := deathOf(d)
	if queue == "" {
		queue = strings.TrimSuffix(backoutQueue, ".BACKOUT")
	}
	count := func(result string) { c.metrics.BrokerDeadLetters.WithLabelValues(queue, result).Inc() }
	env, err := outbox.Decode(d.Body)
	if err == nil && env.Type != outbox.TypeCommandRequested {
		err = &outbox.DecodeError{Code: outbox.CodeInvalidEnvelope, Field: "type", Message: "a command queue's backout queue holds a " + string(env.Type)}
	}
	if err != nil {
		c.cfg.Logger.Error("amqp consumer: a backed-out message is not a command; dead-lettered", "queue", backoutQueue, "message_id", d.MessageId, "error", err)
		count("kept")
		_, _ = dead.moveAside(c.workCtx, d, err, errors.Is(err, outbox.ErrUnknownSchemaVersion))
		return
	}
	if deaths <= 1 {
		deaths = int64(c.cfg.Topology.BackoutThreshold) + 1 // the broker dropped the count on the way
	}
	why := fmt.Sprintf("the broker backed out the message after %d deliveries on %s (backout threshold %d, %s); moved to %s",
		deaths, queue, c.cfg.Topology.BackoutThreshold, reason, backoutQueue)
	if last, ok := c.lastErrors.LoadAndDelete(d.MessageId); ok {
		why += "; last error: " + last.(string)
	}
	parked, err := c.cfg.Client.ParkBackedOut(c.workCtx, env.CommandID, "amqp:"+queue, why)
	switch {
	case errors.Is(err, commandbus.ErrNotFound):
		c.cfg.Logger.Error("amqp consumer: a backed-out message names no command; dead-lettered", "queue", backoutQueue, "message_id", d.MessageId, "error", err)
		count("kept")
		_, _ = dead.moveAside(c.workCtx, d, err, false)
	case err != nil:
		delay := backoff(c.cfg.RequeueDelay, c.cfg.MaxRequeueDelay, deliveryCount(d))
		c.cfg.Logger.Warn("amqp consumer: parking a backed-out command failed; requeued after a backoff", "queue", backoutQueue, "command_id", env.CommandID, "backoff", delay, "error", err)
		c.wait(delay)
		_ = d.Nack(false, true)
	default:
		result := "already_done"
		if parked {
			result = "parked"
			c.cfg.Logger.Error("amqp consumer: command parked: the broker backed out its message", "queue", queue, "command_id", env.CommandID, "reason", why)
		}
		count(result)
		_ = d.Ack(false)
	}
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
func (d *deadEnd) moveAside(ctx context.Context, delivery amqp.Delivery, reason error, park bool) (string, error) {
	queue, result := d.topology.DeadLetterQueue(), "dead_lettered"
	if park {
		queue, result = d.topology.ParkingQueue(), "parked"
	}
	headers := amqp.Table{}
	for k, v := range delivery.Headers {
		headers[k] = v
	}
	headers[HeaderError] = reason.Error()
	headers["x-commandbus-original-queue"] = delivery.RoutingKey
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
		return result, delivery.Reject(false)
	}
	return result, delivery.Ack(false)
}
