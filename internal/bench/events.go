package bench

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/inprocesskafka"
	"github.com/commandbus/commandbus/internal/plumbing"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/transport/kafka"
)

// EventsConfig configures the lifecycle events benchmark: the workflow benchmark with events on.
type EventsConfig struct {
	WorkflowConfig
}

// EventsResult is what the lifecycle events benchmark prints.
type EventsResult struct {
	Driver        string  `json:"driver"`
	Workflows     int     `json:"workflows"`
	Shape         string  `json:"shape"`
	Events        int     `json:"events"`
	ElapsedS      float64 `json:"elapsed_s"`
	WorkflowsPerS float64 `json:"workflows_per_s"`
	EventsPerS    float64 `json:"events_per_s"`
	// P50Ms, P99Ms and MaxMs are the latency from an event's write in its checkpoint's
	// transaction (the row's created_at, just before the commit) to Kafka's acknowledgement.
	// Claims and EmptyClaims count the relay's claims of the outbox, and those that found nothing.
	Claims      int64 `json:"claims"`
	EmptyClaims int64 `json:"empty_claims"`
	// HandedOff counts the events' outbox rows handed to the relay after their commit, and
	// HandedOffLeft those of them it left to its claims.
	HandedOff     int64        `json:"handed_off"`
	HandedOffLeft int64        `json:"handed_off_left"`
	P50Ms         float64      `json:"p50_ms"`
	P99Ms         float64      `json:"p99_ms"`
	MaxMs         float64      `json:"max_ms"`
	Config        EventsConfig `json:"config"`
	GoMaxProcs    int          `json:"gomaxprocs"`
}

// RunEvents runs the workflow benchmark with lifecycle events published to an in-process Kafka
// (kfake, see package inprocesskafka) and measures each event's commit → publish latency.
func RunEvents(ctx context.Context, drv driver.Driver, cfg EventsConfig) (*EventsResult, error) {
	cfg.Events = true
	cfg.WorkflowConfig = cfg.WithDefaults()
	res, latencies, err := runWorkflow(ctx, drv, cfg.WorkflowConfig)
	if err != nil {
		return nil, err
	}
	slices.Sort(latencies)
	ms := func(d time.Duration) float64 { return round(float64(d.Microseconds())/1000, 1) }
	out := &EventsResult{
		Driver: res.Driver, Workflows: res.Workflows, Shape: res.Shape, Events: res.Events, ElapsedS: res.ElapsedS,
		WorkflowsPerS: res.WorkflowsPerS, EventsPerS: round(float64(res.Events)/res.ElapsedS, 0),
		Claims: res.RelayClaims, EmptyClaims: res.EmptyRelayClaims, HandedOff: res.HandedOff, HandedOffLeft: res.HandedOffLeft,
		P50Ms: ms(percentile(latencies, 0.50)), P99Ms: ms(percentile(latencies, 0.99)), Config: cfg, GoMaxProcs: runtime.GOMAXPROCS(0),
	}
	if len(latencies) > 0 {
		out.MaxMs = ms(latencies[len(latencies)-1])
	}
	return out, nil
}

// eventSink is an in-process Kafka and the relay publishing the lifecycle events to it, recording
// each event's latency.
type eventSink struct {
	stopKafka func()
	publisher *kafka.Publisher
	relay     *outbox.Relay
	metrics   *outbox.Metrics

	mu        sync.Mutex
	latencies []time.Duration
}

func startEventSink(ctx context.Context, client *commandbus.Client, logger *slog.Logger) (*eventSink, error) {
	brokers, stopKafka, err := inprocesskafka.Start(orchestration.DefaultEventTopic)
	if err != nil {
		return nil, err
	}
	metrics, err := outbox.NewMetrics(nil)
	if err != nil {
		stopKafka()
		return nil, err
	}
	s := &eventSink{stopKafka: stopKafka, metrics: metrics}
	if s.publisher, err = kafka.NewPublisher(kafka.Config{Brokers: brokers}); err != nil {
		stopKafka()
		return nil, err
	}
	s.relay, err = outbox.NewRelay(client.Driver().Executor(), outbox.RelayConfig{
		Publishers: []outbox.Publisher{s.publisher}, BatchSize: 2000, Logger: logger, Metrics: metrics,
		Subscribe: plumbing.Subscriber(client), Now: plumbing.DriverClock(client),
		OnPublished: func(msgs []*driver.OutboxRow, at time.Time) {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, m := range msgs {
				s.latencies = append(s.latencies, at.Sub(m.CreatedAt))
			}
		},
	})
	if err == nil {
		err = s.relay.Start(ctx)
	}
	if err != nil {
		s.publisher.Close()
		stopKafka()
		return nil, err
	}
	return s, nil
}

// drain waits until no event waits in the outbox and returns the latencies.
func (s *eventSink) drain(ctx context.Context, exec driver.Executor) ([]time.Duration, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		backlog, err := exec.OutboxBacklog(ctx)
		if err != nil {
			return nil, err
		}
		pending := int64(0)
		for _, b := range backlog {
			pending += b.New
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			return nil, errors.New("bench: lifecycle events still unpublished after 2 minutes")
		}
		time.Sleep(20 * time.Millisecond) // polling the backlog with a deadline
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.latencies), nil
}

// claims returns how many claims the relay made, and how many of them found nothing.
func (s *eventSink) claims() (all, empty int64) { return relayClaims(s.metrics) }

// handedOff returns how many messages were handed to the relays counting into metrics after
// their commit, and how many of them they left to their claims.
func handedOff(metrics ...*outbox.Metrics) (all, left int64) {
	for _, m := range metrics {
		l := counterValue(m.HandedOff, "left")
		all, left = all+l+counterValue(m.HandedOff, "taken"), left+l
	}
	return all, left
}

// relayClaims returns how many outbox claims the relays counting into metrics made, and how many
// of them found nothing.
func relayClaims(metrics ...*outbox.Metrics) (all, empty int64) {
	for _, m := range metrics {
		e := counterValue(m.Claims, "empty")
		all, empty = all+e+counterValue(m.Claims, "claimed"), empty+e
	}
	return all, empty
}

// counterValue reads the counter of vec with label value label.
func counterValue(vec *prometheus.CounterVec, label string) int64 {
	var v dto.Metric
	if err := vec.WithLabelValues(label).Write(&v); err != nil {
		return 0
	}
	return int64(v.GetCounter().GetValue())
}

func (s *eventSink) close() {
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.relay.Stop(stopCtx)
	s.publisher.Close()
	s.stopKafka()
}
