package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/commandbus/commandbus/orchestration"
)

// HeaderError is the header of a record the event consumer dead-lettered: why.
const HeaderError = "x-commandbus-error"

// DefaultEventGroup is the consumer group of the event consumer when none is configured.
const DefaultEventGroup = "commandbus-events"

// EventReceiver receives inbound events; *orchestration.Runtime is one.
type EventReceiver interface {
	ReceiveEvent(ctx context.Context, transport string, body []byte) (*orchestration.EventReceipt, error)
}

// EventConsumerConfig configures an EventConsumer.
type EventConsumerConfig struct {
	// Brokers are the seed brokers. Required.
	Brokers []string
	// Topics are the topics inbound events arrive on. Required.
	Topics []string
	// Group is the consumer group; the instances of one deployment share it, so each event is
	// handled by one of them. Default: DefaultEventGroup.
	Group string
	// Receiver starts the executions the events trigger (the client's runtime). Required.
	Receiver EventReceiver
	// DeadLetterSuffix names the topic a malformed event of topic T goes to: T + suffix.
	// Default: ".DLQ".
	DeadLetterSuffix string
	// RetryDelay is the first wait before handling again an event whose handling failed in the
	// database; it doubles up to 30s. The event's partition waits meanwhile (its order is kept).
	// Default: 1s.
	RetryDelay time.Duration
	// ClientID names the consumer to the cluster. Default: commandbus-events.
	ClientID string
	// Options are passed to the franz-go client after the consumer's own (TLS, SASL, ...).
	Options []kgo.Opt
	// Logger receives the consumer's logs. Default: discards them.
	Logger *slog.Logger
}

// EventConsumer consumes inbound events (orchestration.InboundEvent, CloudEvents in structured
// mode: the record value is the JSON envelope) from Kafka topics in a consumer group and hands
// them to the runtime, which starts the executions their types trigger once per event. It is a
// commandbus.Service.
//
// Records are handled one at a time, in order per partition, and their offsets committed after
// they are handled (a new group starts at the earliest offset), so delivery is at least once and a redelivered event starts nothing new. An event of
// a type no definition is triggered by is committed and counted, never retried. A malformed
// event is produced to the dead-letter topic <topic>.DLQ with the reason in its
// x-commandbus-error header (and its origin in x-commandbus-original-topic, -partition and
// -offset), counted (commandbus_inbound_events_total{transport="kafka",outcome="malformed"}),
// then committed; an operator finds it there. An event whose handling fails in the database is
// retried with a growing delay until it succeeds or the consumer stops.
type EventConsumer struct {
	cfg    EventConsumerConfig
	client *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	assignedOnce sync.Once
	assigned     chan struct{}
}

// NewEventConsumer returns a consumer; Start joins the group.
func NewEventConsumer(cfg EventConsumerConfig) (*EventConsumer, error) {
	var problems []error
	if len(cfg.Brokers) == 0 {
		problems = append(problems, errors.New("brokers are required; set kafka.brokers"))
	}
	if len(cfg.Topics) == 0 {
		problems = append(problems, errors.New("topics must name at least one topic; set kafka.event-topics"))
	}
	for i, topic := range cfg.Topics {
		if topic == "" {
			problems = append(problems, fmt.Errorf("topic %d is empty", i))
		}
	}
	if cfg.Receiver == nil {
		problems = append(problems, errors.New("a receiver is required"))
	}
	if cfg.RetryDelay < 0 {
		problems = append(problems, errors.New("the retry delay must not be negative"))
	}
	if err := errors.Join(problems...); err != nil {
		return nil, fmt.Errorf("kafka event consumer: %w", err)
	}
	if cfg.Group == "" {
		cfg.Group = DefaultEventGroup
	}
	if cfg.DeadLetterSuffix == "" {
		cfg.DeadLetterSuffix = ".DLQ"
	}
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = time.Second
	}
	if cfg.ClientID == "" {
		cfg.ClientID = "commandbus-events"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &EventConsumer{cfg: cfg}, nil
}

// Assigned is closed once the group gave this consumer partitions, after Start.
func (c *EventConsumer) Assigned() <-chan struct{} { return c.assigned }

// Start joins the consumer group and consumes in the background until Stop.
func (c *EventConsumer) Start(context.Context) error {
	if c.done != nil {
		return errors.New("kafka event consumer: already started")
	}
	c.assigned, c.assignedOnce = make(chan struct{}), sync.Once{}
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.cfg.Brokers...),
		kgo.ClientID(c.cfg.ClientID),
		kgo.ConsumerGroup(c.cfg.Group),
		kgo.ConsumeTopics(c.cfg.Topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Offsets are marked once their event is handled and committed from the marks.
		kgo.AutoCommitMarks(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			c.assignedOnce.Do(func() { close(c.assigned) })
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
			if err := cl.CommitMarkedOffsets(ctx); err != nil {
				c.cfg.Logger.Warn("committing event offsets on revoke failed; their events will be delivered again (and deduplicated)", "error", err)
			}
		}),
		kgo.AllowAutoTopicCreation(), // the dead-letter topics
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
	}
	client, err := kgo.NewClient(append(opts, c.cfg.Options...)...)
	if err != nil {
		return fmt.Errorf("kafka event consumer: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.client, c.cancel, c.done = client, cancel, make(chan struct{})
	go c.run(ctx)
	return nil
}

// Stop stops consuming, commits the offsets of the events handled and leaves the group, within
// ctx.
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
	err := c.client.CommitMarkedOffsets(ctx)
	c.client.Close()
	c.done = nil
	if err != nil {
		return fmt.Errorf("kafka event consumer: committing offsets: %w", err)
	}
	return nil
}

func (c *EventConsumer) run(ctx context.Context) {
	defer close(c.done)
	for {
		fetches := c.client.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			c.client.AllowRebalance()
			return
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			c.cfg.Logger.Warn("fetching events failed", "topic", topic, "partition", partition, "error", err)
		})
		stopped := false
		fetches.EachRecord(func(r *kgo.Record) {
			if stopped {
				return
			}
			if !c.handle(ctx, r) {
				stopped = true
				return
			}
			c.client.MarkCommitRecords(r)
		})
		c.client.AllowRebalance()
		if stopped {
			return
		}
	}
}

// handle hands one event to the receiver until it is handled, retrying database failures; it
// returns false when the consumer stops first (the record stays unmarked and is delivered again).
func (c *EventConsumer) handle(ctx context.Context, r *kgo.Record) bool {
	logger := c.cfg.Logger.With("topic", r.Topic, "partition", r.Partition, "offset", r.Offset)
	delay := c.cfg.RetryDelay
	for {
		receipt, err := c.cfg.Receiver.ReceiveEvent(withRecordTrace(ctx, r), orchestration.EventTransportKafka, r.Value)
		switch {
		case err == nil:
			logger.Debug("inbound event handled", "event_id", receipt.EventID, "outcome", receipt.Outcome)
			return true
		case errors.Is(err, orchestration.ErrMalformedEvent):
			if err = c.deadLetter(ctx, r, err.Error()); err == nil {
				logger.Warn("inbound event is malformed; produced to the dead-letter topic", "dead_letter_topic", r.Topic+c.cfg.DeadLetterSuffix)
				return true
			}
			err = fmt.Errorf("producing to the dead-letter topic: %w", err)
		}
		if ctx.Err() != nil {
			return false
		}
		logger.Warn("inbound event failed; trying again after a delay", "error", err, "retry_in", delay)
		timer := time.NewTimer(delay)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return false
		}
		delay = min(2*delay, 30*time.Second)
	}
}

// deadLetter produces r, with the reason, to its topic's dead-letter topic.
func (c *EventConsumer) deadLetter(ctx context.Context, r *kgo.Record, reason string) error {
	headers := append([]kgo.RecordHeader(nil), r.Headers...)
	headers = append(headers,
		kgo.RecordHeader{Key: HeaderError, Value: []byte(reason)},
		kgo.RecordHeader{Key: "x-commandbus-original-topic", Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: "x-commandbus-original-partition", Value: []byte(strconv.Itoa(int(r.Partition)))},
		kgo.RecordHeader{Key: "x-commandbus-original-offset", Value: []byte(strconv.FormatInt(r.Offset, 10))})
	dead := &kgo.Record{Topic: r.Topic + c.cfg.DeadLetterSuffix, Key: r.Key, Value: r.Value, Headers: headers}
	return c.client.ProduceSync(ctx, dead).FirstErr()
}
