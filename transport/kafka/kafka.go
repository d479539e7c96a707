// Package kafka publishes commandbus events to Kafka, the event log, with franz-go: one
// topic per bounded context (events.<BC>), records keyed by business key so one key's events stay
// in one partition in order, with correlation and trace context headers, from an idempotent
// producer that waits for every in-sync replica.
//
//	pub, err := kafka.NewPublisher(kafka.Config{Brokers: []string{"localhost:9092"}})
//	relay, err := outbox.NewRelay(drv.Executor(), outbox.RelayConfig{Publishers: []outbox.Publisher{pub}, ...})
package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/outbox"
)

// Config configures a Publisher.
type Config struct {
	// Brokers are the seed brokers. Required.
	Brokers []string
	// ClientID names the producer to the cluster. Default: commandbus-relay.
	ClientID string
	// Options are passed to the franz-go client after the publisher's own (TLS, SASL, ...).
	Options []kgo.Opt
}

// Publisher is an outbox.Publisher for the kafka transport.
type Publisher struct {
	client *kgo.Client
}

var _ outbox.Publisher = (*Publisher)(nil)

// NewPublisher connects an idempotent producer. Close it when done.
func NewPublisher(cfg Config) (*Publisher, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("kafka: no brokers; set kafka.brokers")
	}
	if cfg.ClientID == "" {
		cfg.ClientID = "commandbus-relay"
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		// Idempotent writes are franz-go's default; they need acks from all in-sync replicas.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.AllowAutoTopicCreation(),
		kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)), // Java-compatible murmur2 of the key
	}
	client, err := kgo.NewClient(append(opts, cfg.Options...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	return &Publisher{client: client}, nil
}

// Transport returns outbox.TransportKafka.
func (p *Publisher) Transport() string { return outbox.TransportKafka }

// Client returns the underlying franz-go client.
func (p *Publisher) Client() *kgo.Client { return p.client }

// Close flushes nothing (Publish waits for its records) and closes the client.
func (p *Publisher) Close() { p.client.Close() }

// Publish produces one record per message and waits until each is acknowledged. The producer
// keeps the order of records of one partition, so one key's events stay in order.
func (p *Publisher) Publish(ctx context.Context, msgs []*driver.OutboxRow) []error {
	errs := make([]error, len(msgs))
	var wg sync.WaitGroup
	wg.Add(len(msgs))
	for i, m := range msgs {
		record := Record(m)
		p.client.Produce(ctx, record, func(_ *kgo.Record, err error) {
			if err != nil && isPermanent(err) {
				err = outbox.Permanent(err)
			}
			errs[i] = err
			wg.Done()
		})
	}
	wg.Wait()
	return errs
}

// Record is the Kafka record of an outbox message: its topic, its key, the envelope as value, and
// the transport headers (messageId, type, correlationId, traceparent, ...).
func Record(m *driver.OutboxRow) *kgo.Record {
	r := &kgo.Record{Topic: m.Topic, Value: m.Payload}
	if m.Key != "" {
		r.Key = []byte(m.Key)
	}
	r.Headers = make([]kgo.RecordHeader, 0, len(m.Headers))
	for _, k := range sortedKeys(m.Headers) {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(m.Headers[k])})
	}
	return r
}

// isPermanent reports errors that no retry fixes: the record is too large, or invalid.
func isPermanent(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge) ||
		errors.Is(err, kerr.InvalidRecord)
}

// Header returns the value of a record header, or "".
func Header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
