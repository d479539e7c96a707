package amqp10

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	amqp "github.com/Azure/go-amqp"
	"github.com/google/uuid"

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
	// Default: the client's amqp10 domains (Client.AMQP10Domains).
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
	cfg     ConsumerConfig
	metrics *outbox.Metrics

	mu         sync.Mutex
	cancel     context.CancelFunc
	loops      sync.WaitGroup
	inflight   sync.WaitGroup
	workCtx    context.Context
	stopWork   context.CancelFunc
	ready      chan struct{}
	readyN     int
	stopping   chan struct{}
	started    bool
	lastErrors sync.Map // message id → why its last delivery failed
}

// subscription is one connection's worth of queues.
type subscription struct {
	domain   string // "" for the reply queue
	queues   []string
	prefetch int
	backout  bool // the queues are backout queues of the domain's command queues
}

// NewConsumer returns a consumer; Start connects.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	if cfg.URL == "" {
		return nil, errors.New("amqp10: no broker URL; set amqp10.url")
	}
	if cfg.Client == nil {
		return nil, errors.New("amqp10: the consumer needs the client whose handlers it runs")
	}
	cfg.Topology = cfg.Topology.withDefaults()
	if cfg.Domains == nil {
		cfg.Domains = cfg.Client.AMQP10Domains()
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

// Queues lists the queues the consumer consumes, backout queues included.
func (c *Consumer) Queues() []string {
	var out []string
	for _, s := range c.subscriptions() {
		out = append(out, s.queues...)
	}
	return out
}

// Ready is closed once every queue has been consumed at least once (since the last Start).
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
		return errors.New("amqp10: consumer already started")
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
	if cancel != nil {
		select {
		case <-c.stopping:
		default:
			close(c.stopping) // deliveries waiting out a backoff are given back now
		}
	}
	c.mu.Unlock()
	if cancel == nil {
		return nil
	}
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
		c.cfg.Logger.Warn("amqp10 consumer: connection lost; reconnecting", "queues", sub.queues, "error", err, "in", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// delivery is a message and the link it came on (settled there).
type delivery struct {
	queue string
	rcv   *amqp.Receiver
	msg   *amqp.Message
}

// consume runs one connection until it fails or ctx ends.
func (c *Consumer) consume(ctx context.Context, sub subscription, connected func()) error {
	sess, err := dial(ctx, c.cfg.URL, c.cfg.Topology)
	if err != nil {
		return err
	}
	defer sess.close()
	work := make([]string, len(sub.queues))
	for i, q := range sub.queues {
		work[i] = q
		if sub.backout {
			work[i] = strings.TrimSuffix(q, ".BACKOUT")
		}
	}
	if err := sess.declare(work...); err != nil {
		return err
	}
	out := &mover{sess: sess, senders: map[string]*amqp.Sender{}}
	deliveries := make(chan delivery)
	recvCtx, stopRecv := context.WithCancel(ctx)
	defer stopRecv()
	var receivers sync.WaitGroup
	failed := make(chan error, len(sub.queues))
	for _, queue := range sub.queues {
		rcv, err := sess.sess.NewReceiver(ctx, sess.address(queue), &amqp.ReceiverOptions{Credit: int32(max(sub.prefetch, 1))})
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
				case deliveries <- delivery{queue: queue, rcv: rcv, msg: msg}:
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
			c.inflight.Add(1)
			handlers.Add(1)
			go func() {
				defer c.inflight.Done()
				defer handlers.Done()
				if sub.backout {
					c.handleBackout(d, out)
					return
				}
				c.handle(sub, d, out)
			}()
		}
	}
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

// handle settles one delivery: accepted once its outcome is committed (or it is a duplicate),
// moved to the backout queue once its delivery-count reaches the threshold, to the dead-letter
// or parking queue when it cannot be processed, given back after a backoff when the database
// failed.
func (c *Consumer) handle(sub subscription, d delivery, out *mover) {
	consumer := "amqp10:" + d.queue
	ctx := c.workCtx
	settle := func(result string, err error) {
		if err != nil {
			c.cfg.Logger.Warn("amqp10 consumer: settling a delivery failed; the broker will redeliver it", "queue", d.queue, "error", err)
		}
		c.metrics.Consumed.WithLabelValues(d.queue, result).Inc()
	}
	id := messageID(d.msg)
	if n := deliveryCount(d.msg); sub.domain != "" && n >= int64(c.cfg.Topology.BackoutThreshold) {
		reason := fmt.Sprintf("backout count %d reached the backout threshold %d", n, c.cfg.Topology.BackoutThreshold)
		c.cfg.Logger.Error("amqp10 consumer: message backed out", "queue", d.queue, "message_id", id, "reason", reason)
		settle("backed_out", out.move(ctx, d, c.cfg.Topology.BackoutQueue(d.queue), reason))
		return
	}
	env, err := outbox.Decode(d.msg.GetData())
	if err != nil {
		parked := errors.Is(err, outbox.ErrUnknownSchemaVersion)
		c.cfg.Logger.Error("amqp10 consumer: undecodable message; moved aside", "queue", d.queue, "message_id", id, "error", err, "parked", parked)
		to, result := c.cfg.Topology.DeadLetterQueue(), "dead_lettered"
		if parked {
			to, result = c.cfg.Topology.ParkingQueue(), "parked"
		}
		settle(result, out.move(ctx, d, to, err.Error()))
		return
	}
	var outcome commandbus.DeliveryOutcome
	if sub.domain == "" {
		outcome, err = c.cfg.Client.DeliverReply(ctx, env, consumer)
	} else {
		outcome, err = c.cfg.Client.ExecuteDelivered(ctx, commandbus.Delivery{
			MessageID: env.MessageID.String(), Consumer: consumer, CommandID: env.CommandID, Domain: sub.domain,
		})
	}
	var decodeErr *outbox.DecodeError
	switch {
	case errors.Is(err, commandbus.ErrNotFound) || errors.As(err, &decodeErr):
		c.cfg.Logger.Error("amqp10 consumer: message cannot be processed; dead-lettered", "queue", d.queue, "message_id", id, "error", err)
		settle("dead_lettered", out.move(ctx, d, c.cfg.Topology.DeadLetterQueue(), err.Error()))
	case err != nil:
		delay := backoff(c.cfg.RequeueDelay, c.cfg.MaxRequeueDelay, deliveryCount(d.msg))
		c.cfg.Logger.Warn("amqp10 consumer: processing failed; given back after a backoff", "queue", d.queue, "message_id", id,
			"deliveries", deliveryCount(d.msg)+1, "backoff", delay, "error", err)
		c.lastErrors.Store(id, err.Error())
		c.wait(delay)
		settle("requeued", out.giveBack(d))
	case outcome == commandbus.DeliveryReleased:
		settle("released", d.rcv.ReleaseMessage(context.WithoutCancel(ctx), d.msg))
	default:
		c.lastErrors.Delete(id)
		settle(string(outcome), d.rcv.AcceptMessage(context.WithoutCancel(ctx), d.msg))
	}
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

// handleBackout files a backed-out message: its command is parked in the troubleshooting queue
// with the reason, then the message is accepted. A message that is not a command, or names no
// command, goes to the dead-letter queue; when the database fails the message is given back
// after a backoff.
func (c *Consumer) handleBackout(d delivery, out *mover) {
	queue := strings.TrimSuffix(d.queue, ".BACKOUT")
	ctx := c.workCtx
	count := func(result string) { c.metrics.BrokerDeadLetters.WithLabelValues(queue, result).Inc() }
	id := messageID(d.msg)
	env, err := outbox.Decode(d.msg.GetData())
	if err == nil && env.Type != outbox.TypeCommandRequested {
		err = &outbox.DecodeError{Code: outbox.CodeInvalidEnvelope, Field: "type", Message: "a command queue's backout queue holds a " + string(env.Type)}
	}
	if err != nil {
		c.cfg.Logger.Error("amqp10 consumer: a backed-out message is not a command; dead-lettered", "queue", d.queue, "message_id", id, "error", err)
		count("kept")
		_ = out.move(ctx, d, c.cfg.Topology.DeadLetterQueue(), err.Error())
		return
	}
	why, _ := d.msg.ApplicationProperties[HeaderError].(string)
	if why == "" {
		why = fmt.Sprintf("the broker's delivery limit (%d) was reached", c.cfg.Topology.BackoutThreshold)
	}
	why = fmt.Sprintf("the message was backed out of %s to %s: %s", queue, d.queue, why)
	if last, ok := c.lastErrors.LoadAndDelete(id); ok {
		why += "; last error: " + last.(string)
	}
	parked, err := c.cfg.Client.ParkBackedOut(ctx, env.CommandID, "amqp10:"+queue, why)
	switch {
	case errors.Is(err, commandbus.ErrNotFound):
		c.cfg.Logger.Error("amqp10 consumer: a backed-out message names no command; dead-lettered", "queue", d.queue, "message_id", id, "error", err)
		count("kept")
		_ = out.move(ctx, d, c.cfg.Topology.DeadLetterQueue(), err.Error())
	case err != nil:
		delay := backoff(c.cfg.RequeueDelay, c.cfg.MaxRequeueDelay, deliveryCount(d.msg))
		c.cfg.Logger.Warn("amqp10 consumer: parking a backed-out command failed; given back after a backoff", "queue", d.queue, "command_id", env.CommandID, "backoff", delay, "error", err)
		c.wait(delay)
		_ = out.giveBack(d)
	default:
		result := "already_done"
		if parked {
			result = "parked"
			c.cfg.Logger.Error("amqp10 consumer: command parked: its message was backed out", "queue", queue, "command_id", env.CommandID, "reason", why)
		}
		count(result)
		_ = d.rcv.AcceptMessage(context.WithoutCancel(ctx), d.msg)
	}
}

// mover sends copies of deliveries to other queues (backout, dead-letter, parking) and gives
// deliveries back.
type mover struct {
	sess    *session
	mu      sync.Mutex
	senders map[string]*amqp.Sender
}

// move sends a durable copy of d to queue with the reason, then accepts the original; when the
// copy cannot be sent the original is given back, to be delivered again.
func (m *mover) move(ctx context.Context, d delivery, queue, reason string) error {
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
func (m *mover) giveBack(d delivery) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if m.sess.rabbit3 {
		return d.rcv.ReleaseMessage(ctx, d.msg)
	}
	return d.rcv.ModifyMessage(ctx, d.msg, &amqp.ModifyMessageOptions{DeliveryFailed: true})
}
