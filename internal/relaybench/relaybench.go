// Package relaybench measures the outbox relay: how many messages per second it publishes to a
// broker, and the latency from a message's commit to the broker's acknowledgement. It backs
// `commandbus bench relay` and the package's Go benchmarks.
package relaybench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/inprocesskafka"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/transport/amqp"
	"github.com/commandbus/commandbus/transport/kafka"
)

// The targets.
const (
	TargetKafka = "kafka"
	TargetAMQP  = "amqp"
)

// Config configures a run.
type Config struct {
	// Target is kafka or amqp.
	Target string `json:"target"`
	// Messages is how many messages are relayed. Default: 20000.
	Messages int `json:"messages"`
	// Rate, when positive, writes that many messages per second, one per transaction, while the
	// relay runs (the latency measurement). Zero writes them all first, in transactions of
	// WriteBatch, and then times the relay draining them (the throughput measurement).
	Rate int `json:"rate"`
	// WriteBatch is the messages per transaction when Rate is zero. Default: 1000.
	WriteBatch int `json:"write_batch"`
	// BatchSize, Workers and PollInterval configure the relay. Defaults: 2000, 2, 1s.
	BatchSize    int           `json:"batch_size"`
	Workers      int           `json:"workers"`
	PollInterval time.Duration `json:"poll_interval_ns"`
	// Brokers are real Kafka brokers; empty starts an in-process kfake cluster (see package
	// inprocesskafka: test binaries and builds with -tags kfake have one).
	Brokers []string `json:"brokers,omitempty"`
	// AMQPURL is the broker for the amqp target. Default: amqp://guest:guest@127.0.0.1:5672/.
	AMQPURL string `json:"-"`
	// Keys is how many distinct business keys the messages spread over. Default: 10000.
	Keys int `json:"keys"`

	Logger   *slog.Logger `json:"-"`
	Progress io.Writer    `json:"-"`
}

// Result is what a run measured.
type Result struct {
	Driver       string  `json:"driver"`
	Config       Config  `json:"config"`
	Messages     int     `json:"messages"`
	ElapsedS     float64 `json:"elapsed_s"`
	MessagesPerS float64 `json:"messages_per_s"`
	// Commit→publish latency: from the writing transaction's commit returning to the broker's
	// acknowledgement of the message.
	P50Ms      float64 `json:"commit_to_publish_p50_ms"`
	P99Ms      float64 `json:"commit_to_publish_p99_ms"`
	MaxMs      float64 `json:"commit_to_publish_max_ms"`
	GoMaxProcs int     `json:"gomaxprocs"`
}

func (c *Config) withDefaults() {
	if c.Messages <= 0 {
		c.Messages = 20000
	}
	if c.WriteBatch <= 0 {
		c.WriteBatch = 1000
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 2000
	}
	if c.Workers <= 0 {
		c.Workers = 2
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.Keys <= 0 {
		c.Keys = 10000
	}
	if c.AMQPURL == "" {
		c.AMQPURL = "amqp://guest:guest@127.0.0.1:5672/"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Run relays cfg.Messages messages through drv's outbox to the target.
func Run(ctx context.Context, drv driver.Driver, cfg Config) (*Result, error) {
	cfg.withDefaults()
	transport, topic := outbox.TransportKafka, "events.Bench"
	var publisher outbox.Publisher
	switch cfg.Target {
	case TargetKafka:
		brokers := cfg.Brokers
		if len(brokers) == 0 {
			started, stop, err := inprocesskafka.Start(topic)
			if err != nil {
				return nil, err
			}
			defer stop()
			brokers = started
		}
		pub, err := kafka.NewPublisher(kafka.Config{Brokers: brokers})
		if err != nil {
			return nil, err
		}
		defer pub.Close()
		publisher = pub
	case TargetAMQP:
		transport = outbox.TransportAMQP
		topology := amqp.Topology{Prefix: "BENCH" + uuid.NewString()[:8]}
		topic = topology.Prefix + ".CMD.BENCH.Relay.Q"
		pub, err := amqp.NewPublisher(amqp.PublisherConfig{URL: cfg.AMQPURL, Topology: topology})
		if err != nil {
			return nil, err
		}
		defer pub.Close()
		defer amqp.DeleteQueues(cfg.AMQPURL, topic, topology.DeadLetterQueue(), topology.ParkingQueue())
		publisher = pub
	default:
		return nil, fmt.Errorf("relaybench: target %q is not kafka or amqp", cfg.Target)
	}

	var mu sync.Mutex
	committed := make(map[int64]time.Time, cfg.Messages)
	var latencies []time.Duration
	published := 0
	done := make(chan struct{})
	var finished time.Time
	onPublished := func(msgs []*driver.OutboxRow, at time.Time) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			if c, ok := committed[m.ID]; ok {
				latencies = append(latencies, at.Sub(c))
			}
		}
		published += len(msgs)
		if published >= cfg.Messages && finished.IsZero() {
			finished = at
			close(done)
		}
	}
	relay, err := outbox.NewRelay(drv.Executor(), outbox.RelayConfig{
		Publishers: []outbox.Publisher{publisher}, BatchSize: cfg.BatchSize, Workers: cfg.Workers,
		PollInterval: cfg.PollInterval, OnPublished: onPublished, Logger: cfg.Logger,
		Subscribe: subscriber(drv),
	})
	if err != nil {
		return nil, err
	}

	payload := json.RawMessage(`{"paymentId":"p-1","amount":{"currency":"EUR","value":"100.00"}}`)
	message := func(i int) *outbox.Message {
		return &outbox.Message{Category: outbox.CategoryEvent, Transport: transport, Topic: topic, Envelope: &outbox.Envelope{
			MessageID: uuid.Must(uuid.NewV7()), Type: outbox.TypeCommandCompleted, Name: "BookFx", CommandID: uuid.Must(uuid.NewV7()),
			OccurredAt: time.Now(), Key: fmt.Sprintf("payment-%d", i%cfg.Keys),
			Headers: outbox.Headers{SchemaVersion: outbox.SchemaVersion}, Payload: payload,
		}}
	}
	write := func(from, to int) error {
		params := make([]*driver.OutboxInsertParams, 0, to-from)
		for i := from; i < to; i++ {
			p, err := message(i).InsertParams()
			if err != nil {
				return err
			}
			params = append(params, p)
		}
		tx, err := drv.Executor().Begin(ctx)
		if err != nil {
			return err
		}
		ids, err := tx.OutboxInsertMany(ctx, &driver.OutboxInsertManyParams{Messages: params})
		if err == nil {
			err = tx.Notify(ctx, []string{outbox.NotifyTopic})
		}
		if err != nil {
			_ = tx.Rollback(ctx)
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		at := time.Now()
		mu.Lock()
		for _, id := range ids {
			committed[id] = at
		}
		mu.Unlock()
		return nil
	}

	var start time.Time
	if cfg.Rate <= 0 {
		for i := 0; i < cfg.Messages; i += cfg.WriteBatch {
			if err := write(i, min(i+cfg.WriteBatch, cfg.Messages)); err != nil {
				return nil, fmt.Errorf("writing the outbox: %w", err)
			}
		}
		mu.Lock()
		committed = map[int64]time.Time{} // draining a backlog measures throughput, not latency
		mu.Unlock()
		start = time.Now()
		if err := relay.Start(ctx); err != nil {
			return nil, err
		}
		relay.Kick()
	} else {
		if err := relay.Start(ctx); err != nil {
			return nil, err
		}
		start = time.Now()
		// Producers share the rate, one message per transaction each: a transaction takes a few
		// round trips, more than one producer's share of a second at high rates.
		producers := max(1, (cfg.Rate+199)/200)
		interval := time.Second * time.Duration(producers) / time.Duration(cfg.Rate)
		var wg sync.WaitGroup
		errs := make(chan error, producers)
		for p := range producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				next := start.Add(interval * time.Duration(p) / time.Duration(producers))
				for i := p; i < cfg.Messages; i += producers {
					if wait := time.Until(next); wait > 0 {
						time.Sleep(wait) // pacing the producer, not waiting for a result
					}
					next = next.Add(interval)
					if err := write(i, i+1); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			_ = relay.Stop(ctx)
			return nil, fmt.Errorf("writing the outbox: %w", err)
		}
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		_ = relay.Stop(ctx)
		return nil, errors.New("relaybench: the relay did not publish every message within 5 minutes")
	case <-ctx.Done():
		_ = relay.Stop(context.Background())
		return nil, ctx.Err()
	}
	if err := relay.Stop(ctx); err != nil {
		return nil, err
	}
	elapsed := finished.Sub(start)
	res := &Result{Driver: drv.Name(), Config: cfg, Messages: cfg.Messages, ElapsedS: elapsed.Seconds(),
		MessagesPerS: float64(cfg.Messages) / elapsed.Seconds(), GoMaxProcs: runtime.GOMAXPROCS(0)}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	if n := len(latencies); n > 0 {
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		res.P50Ms, res.P99Ms, res.MaxMs = ms(latencies[n/2]), ms(latencies[min(n-1, n*99/100)]), ms(latencies[n-1])
	}
	return res, nil
}

// subscriber wakes the relay on the driver's notifications (the fast path after commit).
func subscriber(drv driver.Driver) func(topic string) (<-chan struct{}, func()) {
	return func(topic string) (<-chan struct{}, func()) {
		return listen(drv, topic)
	}
}
