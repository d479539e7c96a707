package bench

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
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
	// transaction (the row's created_at, the time of the statement that wrote it) to Kafka's
	// acknowledgement. CommitP50Ms, CommitP99Ms and CommitMaxMs are from the commit, as the
	// writer saw it return, for the CommitTimed events whose writer reported it (all of them,
	// with every checkpoint and start reporting its rows).
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
	CommitP50Ms   float64      `json:"commit_p50_ms"`
	CommitP99Ms   float64      `json:"commit_p99_ms"`
	CommitMaxMs   float64      `json:"commit_max_ms"`
	CommitTimed   int          `json:"commit_timed"`
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
	ms := func(d time.Duration) float64 { return round(float64(d.Microseconds())/1000, 1) }
	fromWrite, fromCommit := latencies.fromWrite, latencies.fromCommit
	slices.Sort(fromWrite)
	slices.Sort(fromCommit)
	out := &EventsResult{
		Driver: res.Driver, Workflows: res.Workflows, Shape: res.Shape, Events: res.Events, ElapsedS: res.ElapsedS,
		WorkflowsPerS: res.WorkflowsPerS, EventsPerS: round(float64(res.Events)/res.ElapsedS, 0),
		Claims: res.RelayClaims, EmptyClaims: res.EmptyRelayClaims, HandedOff: res.HandedOff, HandedOffLeft: res.HandedOffLeft,
		P50Ms: ms(percentile(fromWrite, 0.50)), P99Ms: ms(percentile(fromWrite, 0.99)),
		CommitP50Ms: ms(percentile(fromCommit, 0.50)), CommitP99Ms: ms(percentile(fromCommit, 0.99)), CommitTimed: len(fromCommit),
		Config: cfg, GoMaxProcs: runtime.GOMAXPROCS(0),
	}
	if len(fromWrite) > 0 {
		out.MaxMs = ms(fromWrite[len(fromWrite)-1])
	}
	if len(fromCommit) > 0 {
		out.CommitMaxMs = ms(fromCommit[len(fromCommit)-1])
	}
	return out, nil
}

// eventLatencies are the publication latencies of the events: fromWrite from the row's write in
// its transaction (created_at, the statement's time), fromCommit from the commit as the writer
// saw it return (for the rows whose writer reported them: the checkpoints and the starts).
type eventLatencies struct {
	fromWrite, fromCommit []time.Duration
}

// commitClock records when the transaction that wrote each outbox row committed, as its writer
// reports it (driver.OutboxHandoff's Written, called right after the commit returned).
type commitClock struct {
	mu sync.Mutex
	at map[int64]time.Time
}

func newCommitClock() *commitClock { return &commitClock{at: map[int64]time.Time{}} }

func (c *commitClock) record(written []driver.WrittenMessage) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range written {
		c.at[m.ID] = now
	}
}

// committed returns when row id's transaction committed, if its writer reported it.
func (c *commitClock) committed(id int64) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.at[id]
	return at, ok
}

// wrap returns drv with the executions' checkpoints and inserts reporting their outbox rows to c
// (besides whoever else asked for them).
func (c *commitClock) wrap(drv driver.Driver) driver.Driver {
	return &clockedDriver{Driver: drv, exec: &clockedExecutor{Executor: drv.Executor(), clock: c}}
}

type clockedDriver struct {
	driver.Driver
	exec *clockedExecutor
}

func (d *clockedDriver) Executor() driver.Executor { return d.exec }

type clockedExecutor struct {
	driver.Executor
	clock *commitClock
}

// also returns handoff (nil: none, only reporting) with its report recording the rows' commit
// first.
func (e *clockedExecutor) also(handoff *driver.OutboxHandoff) *driver.OutboxHandoff {
	h := &driver.OutboxHandoff{}
	if handoff != nil {
		*h = *handoff
	}
	then := h.Written
	h.Written = func(written []driver.WrittenMessage) {
		e.clock.record(written)
		if then != nil {
			then(written)
		}
	}
	return h
}

func (e *clockedExecutor) ExecutionCheckpointMany(ctx context.Context, params *driver.ExecutionCheckpointManyParams) ([]uuid.UUID, error) {
	p := *params
	p.OutboxHandoff = e.also(params.OutboxHandoff)
	return e.Executor.ExecutionCheckpointMany(ctx, &p)
}

func (e *clockedExecutor) ExecutionInsertMany(ctx context.Context, params *driver.ExecutionInsertManyParams) ([]uuid.UUID, error) {
	p := *params
	p.OutboxHandoff = e.also(params.OutboxHandoff)
	return e.Executor.ExecutionInsertMany(ctx, &p)
}

// eventSink is an in-process Kafka and the relay publishing the lifecycle events to it, recording
// each event's latency.
type eventSink struct {
	stopKafka func()
	publisher *kafka.Publisher
	relay     *outbox.Relay
	metrics   *outbox.Metrics

	mu        sync.Mutex
	commits   *commitClock
	latencies eventLatencies
}

func startEventSink(ctx context.Context, client *commandbus.Client, logger *slog.Logger, commits *commitClock) (*eventSink, error) {
	brokers, stopKafka, err := inprocesskafka.Start(orchestration.DefaultEventTopic)
	if err != nil {
		return nil, err
	}
	metrics, err := outbox.NewMetrics(nil)
	if err != nil {
		stopKafka()
		return nil, err
	}
	s := &eventSink{stopKafka: stopKafka, metrics: metrics, commits: commits}
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
				s.latencies.fromWrite = append(s.latencies.fromWrite, at.Sub(m.CreatedAt))
				if committed, ok := s.commits.committed(m.ID); ok {
					s.latencies.fromCommit = append(s.latencies.fromCommit, at.Sub(committed))
				}
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
func (s *eventSink) drain(ctx context.Context, exec driver.Executor) (*eventLatencies, error) {
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
	return &eventLatencies{fromWrite: slices.Clone(s.latencies.fromWrite), fromCommit: slices.Clone(s.latencies.fromCommit)}, nil
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
