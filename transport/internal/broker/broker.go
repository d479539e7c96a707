// Package broker is the protocol-independent part of the message-broker transports
// (transport/amqp for AMQP 0-9-1, transport/amqp10 for AMQP 1.0): the consumer's configuration
// defaults, which queues it consumes, its start/stop lifecycle and reconnect loop, and what it
// does with each delivery (decode, run the handler or file the reply, requeue with a backoff,
// back out at the threshold, dead-letter or park, park a backed-out command). A transport
// supplies a Protocol, which connects and subscribes, and the Delivery of each message it
// receives, which settles it the protocol's way.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/internal/plumbing"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/tracecontext"
)

// Config is what a transport's consumer configuration says, in protocol-independent terms.
type Config struct {
	// Name is the transport ("amqp", "amqp10"): it starts error messages, log messages and the
	// consumer names recorded with deliveries.
	Name string
	// URL is the broker. Required.
	URL string
	// Prefix starts every queue name; BackoutThreshold is the backout threshold. Both defaulted
	// by TopologyDefaults.
	Prefix           string
	BackoutThreshold int
	// Client runs the handlers and records outcomes. Required.
	Client *commandbus.Client
	// Domains whose command queues to consume. Default: DefaultDomains(Client).
	Domains        []string
	DefaultDomains func(*commandbus.Client) []string
	// Replies consumes the reply queue.
	Replies bool
	// ReconnectDelay (default 200ms), RequeueDelay (1s) and MaxRequeueDelay (30s): see the
	// transports' ConsumerConfig.
	ReconnectDelay  time.Duration
	RequeueDelay    time.Duration
	MaxRequeueDelay time.Duration
	Logger          *slog.Logger
	// BackoutBeforeProcessing: a command delivery whose Count has reached BackoutThreshold is
	// backed out before it is processed (the consumer moves it, as an IBM MQ application does).
	// Otherwise a delivery that fails with its Count at the threshold is backed out instead of
	// being given back (the broker moves it).
	BackoutBeforeProcessing bool
}

// TopologyDefaults defaults a topology's prefix (outbox.DefaultPrefix) and backout threshold (5).
func TopologyDefaults(prefix string, backoutThreshold int) (string, int) {
	if prefix == "" {
		prefix = outbox.DefaultPrefix
	}
	if backoutThreshold <= 0 {
		backoutThreshold = 5
	}
	return prefix, backoutThreshold
}

// WithDefaults checks cfg and fills in its defaults; errors name the transport and the setting
// (<Name>.url).
func (cfg Config) WithDefaults() (Config, error) {
	if cfg.URL == "" {
		return cfg, fmt.Errorf("%s: no broker URL; set %s.url", cfg.Name, cfg.Name)
	}
	if cfg.Client == nil {
		return cfg, fmt.Errorf("%s: the consumer needs the client whose handlers it runs", cfg.Name)
	}
	cfg.Prefix, cfg.BackoutThreshold = TopologyDefaults(cfg.Prefix, cfg.BackoutThreshold)
	if cfg.Domains == nil && cfg.DefaultDomains != nil {
		cfg.Domains = cfg.DefaultDomains(cfg.Client)
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
	return cfg, nil
}

// Subscription is one connection's (or channel's) worth of queues.
type Subscription struct {
	Domain   string // "" for the reply queue
	Queues   []string
	Prefetch int
	// Backout: the queues are the backout queues of the domain's command queues (of the reply
	// queue when Domain is "").
	Backout bool
}

// WorkQueues are the queues whose backout queues a backout subscription consumes, or the
// subscription's own queues.
func (s Subscription) WorkQueues() []string {
	work := make([]string, len(s.Queues))
	for i, q := range s.Queues {
		work[i] = q
		if s.Backout {
			work[i] = WorkQueue(q)
		}
	}
	return work
}

// WorkQueue is the work queue of a backout queue (<queue>.BACKOUT), or queue itself.
func WorkQueue(queue string) string { return strings.TrimSuffix(queue, ".BACKOUT") }

// Delivery is one received message, settled the protocol's way. The consumer settles it exactly
// once: Accept, Release, GiveBack, BackOut or MoveAside.
type Delivery interface {
	// Queue is the queue the message came from.
	Queue() string
	// MessageID is the message's id ("" when it has none).
	MessageID() string
	// Body is the message's payload, the envelope.
	Body() []byte
	// Count is how many earlier deliveries of the message failed.
	Count() int64
	// Accept settles the message as processed.
	Accept(ctx context.Context) error
	// Release returns the message to its queue without counting a failure (its command was
	// released: the consumer stopped).
	Release(ctx context.Context) error
	// GiveBack returns the message to its queue as a failed delivery.
	GiveBack(ctx context.Context) error
	// BackOut moves the message to its backout queue.
	BackOut(ctx context.Context, reason string) error
	// MoveAside moves the message to the dead-letter queue, or the parking queue when park,
	// with the reason.
	MoveAside(ctx context.Context, reason string, park bool) error
	// BackedOut says, of a message from a backout queue, which work queue it left and why.
	BackedOut() (queue, why string)
}

// Protocol connects to the broker.
type Protocol interface {
	// Consume runs one connection for sub until it fails or ctx ends. It calls connected once
	// every queue is consumed, and handle with each delivery (handle returns at once; done, when
	// not nil, is called once the delivery is settled).
	Consume(ctx context.Context, sub Subscription, connected func(), handle func(d Delivery, done func())) error
}

// Consumer is the protocol-independent consumer: the transports' Consumer wraps it.
type Consumer struct {
	cfg     Config
	proto   Protocol
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
	// lastErrors remembers why a message last failed (by message id), so that the reason of a
	// backed-out command names the failure.
	lastErrors sync.Map
}

// NewConsumer checks and defaults cfg and returns a consumer; Start connects.
func NewConsumer(cfg Config, proto Protocol) (*Consumer, error) {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	return &Consumer{cfg: cfg, proto: proto, metrics: plumbing.MessagingMetrics(cfg.Client), ready: make(chan struct{}), stopping: make(chan struct{})}, nil
}

// subscriptions are the consumer's queues, grouped: per enabled domain its command queues (with
// the domain's concurrent-messages as prefetch) and their backout queues, and the reply queue.
func (c *Consumer) subscriptions() []Subscription {
	var subs []Subscription
	for _, domain := range c.cfg.Domains {
		dc := c.cfg.Client.Config().Domain(domain)
		if !*dc.Enabled || !*c.cfg.Client.Config().Features.CommandHandlers {
			continue
		}
		sub := Subscription{Domain: domain, Prefetch: dc.ConcurrentMessages}
		for _, typ := range plumbing.CommandTypes(c.cfg.Client, domain) {
			sub.Queues = append(sub.Queues, outbox.CommandQueueName(c.cfg.Prefix, domain, typ))
		}
		if len(sub.Queues) > 0 {
			backout := Subscription{Domain: domain, Prefetch: 10, Backout: true}
			for _, q := range sub.Queues {
				backout.Queues = append(backout.Queues, outbox.BackoutQueueName(q))
			}
			subs = append(subs, sub, backout)
		}
	}
	if c.cfg.Replies {
		replies := outbox.ReplyQueueName(c.cfg.Prefix)
		subs = append(subs, Subscription{Queues: []string{replies}, Prefetch: 50},
			Subscription{Queues: []string{outbox.BackoutQueueName(replies)}, Prefetch: 10, Backout: true})
	}
	return subs
}

// Queues lists the queues the consumer consumes, backout queues included.
func (c *Consumer) Queues() []string {
	var out []string
	for _, s := range c.subscriptions() {
		out = append(out, s.Queues...)
	}
	return out
}

// Ready is closed once every queue has been consumed at least once since the last Start.
func (c *Consumer) Ready() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

// Start connects and consumes until Stop; it returns at once and reconnects in the background.
// A consumer may be started again after Stop.
func (c *Consumer) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		return fmt.Errorf("%s: consumer already started", c.cfg.Name)
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
func (c *Consumer) run(ctx context.Context, sub Subscription) {
	delay := c.cfg.ReconnectDelay
	first := true
	handle := func(d Delivery, done func()) {
		c.inflight.Add(1)
		go func() {
			defer c.inflight.Done()
			if done != nil {
				defer done()
			}
			switch {
			case sub.Backout && sub.Domain == "":
				c.handleReplyBackout(d)
				return
			case sub.Backout:
				c.handleBackout(d)
				return
			}
			c.handle(sub, d)
		}()
	}
	for ctx.Err() == nil {
		err := c.proto.Consume(ctx, sub, func() {
			delay = c.cfg.ReconnectDelay
			if first {
				first = false
				c.markReady()
			}
		}, handle)
		if ctx.Err() != nil {
			return
		}
		c.cfg.Logger.Warn(c.cfg.Name+" consumer: connection lost; reconnecting", "queues", sub.Queues, "error", err, "in", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// handle settles one delivery: accepted once its outcome is committed (or it is a duplicate),
// backed out at the backout threshold, dead-lettered or parked when it cannot be processed, given
// back after a backoff when the database failed.
func (c *Consumer) handle(sub Subscription, d Delivery) {
	ctx := c.workCtx
	queue, id, log := d.Queue(), d.MessageID(), c.cfg.Logger
	consumer := c.cfg.Name + ":" + queue
	settle := func(result string, err error) {
		if err != nil {
			log.Warn(c.cfg.Name+" consumer: settling a delivery failed; the broker will redeliver it", "queue", queue, "error", err)
		}
		c.metrics.Consumed.WithLabelValues(queue, result).Inc()
	}
	threshold := int64(c.cfg.BackoutThreshold)
	if n := d.Count(); c.cfg.BackoutBeforeProcessing && sub.Domain != "" && n >= threshold {
		reason := fmt.Sprintf("backout count %d reached the backout threshold %d", n, threshold)
		log.Error(c.cfg.Name+" consumer: message backed out", "queue", queue, "message_id", id, "reason", reason)
		settle("backed_out", d.BackOut(ctx, reason))
		return
	}
	env, err := outbox.Decode(d.Body())
	if err != nil {
		parked := errors.Is(err, outbox.ErrUnknownSchemaVersion)
		log.Error(c.cfg.Name+" consumer: undecodable message; moved aside", "queue", queue, "message_id", id, "error", err, "parked", parked)
		settle(moveAside(ctx, d, err, parked))
		return
	}
	if sc, ok := env.Headers.Trace(); ok {
		ctx = tracecontext.ContextWith(ctx, sc) // the inbox's span continues the sender's trace
	}
	var outcome commandbus.DeliveryOutcome
	if sub.Domain == "" {
		outcome, err = plumbing.DeliverReply(ctx, c.cfg.Client, env, consumer)
	} else {
		outcome, err = plumbing.ExecuteDelivered(ctx, c.cfg.Client, commandbus.Delivery{
			MessageID: env.MessageID.String(), Consumer: consumer, CommandID: env.CommandID, Domain: sub.Domain,
			ReplyTo: env.Headers.ReplyTo,
		})
	}
	var decodeErr *outbox.DecodeError
	switch {
	case errors.Is(err, commandbus.ErrNotFound) || errors.As(err, &decodeErr):
		log.Error(c.cfg.Name+" consumer: message cannot be processed; dead-lettered", "queue", queue, "message_id", id, "error", err)
		settle(moveAside(ctx, d, err, false))
	case err != nil && !c.cfg.BackoutBeforeProcessing && d.Count() >= threshold:
		// The last delivery the threshold allows: backed out at once (given back, it would only
		// go there after the backoff).
		log.Warn(c.cfg.Name+" consumer: processing failed on the last delivery; backed out", "queue", queue, "message_id", id,
			"deliveries", d.Count()+1, "error", err)
		c.lastErrors.Store(id, err.Error())
		settle("backed_out", d.BackOut(ctx, err.Error()))
	case err != nil:
		delay := c.requeueDelay(d)
		log.Warn(c.cfg.Name+" consumer: processing failed; given back after a backoff", "queue", queue, "message_id", id,
			"deliveries", d.Count()+1, "backoff", delay, "error", err)
		c.lastErrors.Store(id, err.Error())
		c.wait(delay)
		settle("requeued", d.GiveBack(ctx))
	case outcome == commandbus.DeliveryReleased:
		settle("released", d.Release(ctx))
	default:
		c.lastErrors.Delete(id)
		settle(string(outcome), d.Accept(ctx))
	}
}

// moveAside moves d to the dead-letter or the parking queue and says which (the metric's result).
func moveAside(ctx context.Context, d Delivery, reason error, park bool) (string, error) {
	result := "dead_lettered"
	if park {
		result = "parked"
	}
	return result, d.MoveAside(ctx, reason.Error(), park)
}

// handleBackout files a backed-out message: its command is parked in the troubleshooting queue
// with the reason, then the message is accepted. A message that is not a command, or names no
// command, is moved to the dead-letter queue (one of an unknown schema version to the parking
// queue); when the database fails the message is given back after a backoff (a backout queue
// has no backout threshold).
func (c *Consumer) handleBackout(d Delivery) {
	ctx := c.workCtx
	backoutQueue, id, log := d.Queue(), d.MessageID(), c.cfg.Logger
	queue, why := d.BackedOut()
	count := func(result string) { c.metrics.BrokerDeadLetters.WithLabelValues(queue, result).Inc() }
	env, err := outbox.Decode(d.Body())
	if err == nil && env.Type != outbox.TypeCommandRequested {
		err = &outbox.DecodeError{Code: outbox.CodeInvalidEnvelope, Field: "type", Message: "a command queue's backout queue holds a " + string(env.Type)}
	}
	if err != nil {
		log.Error(c.cfg.Name+" consumer: a backed-out message is not a command; dead-lettered", "queue", backoutQueue, "message_id", id, "error", err)
		count("kept")
		_, _ = moveAside(ctx, d, err, errors.Is(err, outbox.ErrUnknownSchemaVersion))
		return
	}
	if last, ok := c.lastErrors.LoadAndDelete(id); ok {
		why += "; last error: " + last.(string)
	}
	parked, err := c.cfg.Client.ParkBackedOut(ctx, env.CommandID, c.cfg.Name+":"+queue, why)
	switch {
	case errors.Is(err, commandbus.ErrNotFound):
		log.Error(c.cfg.Name+" consumer: a backed-out message names no command; dead-lettered", "queue", backoutQueue, "message_id", id, "error", err)
		count("kept")
		_, _ = moveAside(ctx, d, err, false)
	case err != nil:
		delay := c.requeueDelay(d)
		log.Warn(c.cfg.Name+" consumer: parking a backed-out command failed; given back after a backoff", "queue", backoutQueue, "command_id", env.CommandID, "backoff", delay, "error", err)
		c.wait(delay)
		_ = d.GiveBack(ctx)
	default:
		result := "already_done"
		if parked {
			result = "parked"
			log.Error(c.cfg.Name+" consumer: command parked: its message was backed out", "queue", queue, "command_id", env.CommandID, "reason", why)
		}
		count(result)
		_ = d.Accept(ctx)
	}
}

// handleReplyBackout files a reply the reply queue backed out (its deliveries kept failing, a
// database outage say): the process waiting for it must not wait out its reply timeout. It is
// filed as on the reply queue, once the database answers: a failure gives it back after a backoff
// (a backout queue has no backout threshold); a reply that cannot be filed (not an envelope,
// naming no command) is moved to the dead-letter queue with the reason.
func (c *Consumer) handleReplyBackout(d Delivery) {
	ctx := c.workCtx
	backoutQueue, id, log := d.Queue(), d.MessageID(), c.cfg.Logger
	queue := WorkQueue(backoutQueue)
	count := func(result string) { c.metrics.BrokerDeadLetters.WithLabelValues(queue, result).Inc() }
	env, err := outbox.Decode(d.Body())
	if err == nil {
		_, err = plumbing.DeliverReply(ctx, c.cfg.Client, env, c.cfg.Name+":"+queue)
	}
	var decodeErr *outbox.DecodeError
	switch {
	case errors.Is(err, commandbus.ErrNotFound) || errors.As(err, &decodeErr):
		log.Error(c.cfg.Name+" consumer: a backed-out reply cannot be filed; dead-lettered", "queue", backoutQueue, "message_id", id, "error", err)
		count("kept")
		_, _ = moveAside(ctx, d, err, errors.Is(err, outbox.ErrUnknownSchemaVersion))
	case err != nil:
		delay := c.requeueDelay(d)
		log.Warn(c.cfg.Name+" consumer: filing a backed-out reply failed; given back after a backoff", "queue", backoutQueue, "message_id", id, "backoff", delay, "error", err)
		c.wait(delay)
		_ = d.GiveBack(ctx)
	default:
		log.Warn(c.cfg.Name+" consumer: a backed-out reply was filed", "queue", queue, "message_id", id, "command_id", env.CommandID)
		count("filed")
		_ = d.Accept(ctx)
	}
}

// requeueDelay is RequeueDelay × 2^(earlier failed deliveries), capped at MaxRequeueDelay.
func (c *Consumer) requeueDelay(d Delivery) time.Duration {
	return Backoff(c.cfg.RequeueDelay, c.cfg.MaxRequeueDelay, d.Count())
}

// Backoff is first × 2^n, capped at most.
func Backoff(first, most time.Duration, n int64) time.Duration {
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
