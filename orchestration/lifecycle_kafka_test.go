package orchestration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/transport/kafka"
	"github.com/commandbus/commandbus/workflow"
)

// crashingPublisher publishes its first batches, then, at batch crashAt, hands the batch to the
// broker and dies before the relay can record it: it holds on until its context ends and reports
// nothing published, as a process killed between the broker's acknowledgement and the mark.
type crashingPublisher struct {
	inner   outbox.Publisher
	crashAt int
	mu      sync.Mutex
	batches int
	crashed chan struct{}
}

func (p *crashingPublisher) Transport() string { return p.inner.Transport() }

func (p *crashingPublisher) Publish(ctx context.Context, msgs []*driver.OutboxRow) []error {
	p.mu.Lock()
	p.batches++
	n := p.batches
	p.mu.Unlock()
	errs := p.inner.Publish(ctx, msgs)
	if n < p.crashAt {
		return errs
	}
	if n == p.crashAt {
		close(p.crashed)
	}
	<-ctx.Done()
	for i := range errs {
		errs[i] = ctx.Err()
	}
	return errs
}

// Lifecycle events reach Kafka per execution in order, none lost, when the relay publishing them
// dies mid-stream and another takes over; the duplicates the crash causes share their event ids.
func TestLifecycleEventsToKafkaAcrossRelayCrash(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		brokers := eventsCluster(t)

		client, rt := kafkaEventsRuntime(t, drv)
		noop := func(context.Context, *workflow.StepContext) (any, error) { return "ok", nil }
		ids := runCompleted(t, client, rt, workflow.New("relayed", 1).Step("a", noop).Step("b", noop, workflow.DependsOn("a")).
			Step("c", noop, workflow.DependsOn("b")).Step("d", noop, workflow.DependsOn("c")))

		pub1 := kafkaPublisher(t, brokers)
		crashing := &crashingPublisher{inner: pub1, crashAt: 3, crashed: make(chan struct{})}
		lease := 400 * time.Millisecond
		relay1, err := outbox.NewRelay(drv.Executor(), outbox.RelayConfig{Publishers: []outbox.Publisher{crashing}, RelayID: "relay-1",
			BatchSize: 16, Workers: 1, Lease: lease, PollInterval: 20 * time.Millisecond, InitialBackoff: 10 * time.Millisecond})
		require.NoError(t, err)
		require.NoError(t, relay1.Start(ctx))
		relay1.Kick()
		select {
		case <-crashed(crashing):
		case <-time.After(20 * time.Second):
			t.Fatal("the relay never reached its crash")
		}
		stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_ = relay1.Stop(stopCtx)
		cancel()

		pub2 := kafkaPublisher(t, brokers)
		relay2, err := outbox.NewRelay(drv.Executor(), outbox.RelayConfig{Publishers: []outbox.Publisher{pub2}, RelayID: "relay-2",
			BatchSize: 16, Lease: lease, PollInterval: 20 * time.Millisecond, InitialBackoff: 10 * time.Millisecond})
		require.NoError(t, err)
		require.NoError(t, relay2.Start(ctx))
		t.Cleanup(func() { require.NoError(t, relay2.Stop(context.Background())) })
		relay2.Kick()
		waitFor(t, "the outbox drained", func() bool {
			rows, err := drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Statuses: []driver.OutboxStatus{driver.OutboxStatusNew}, Limit: 1})
			require.NoError(t, err)
			return len(rows) == 0
		})

		records := consumeAll(t, brokers, orchestration.DefaultEventTopic, executions*perExecution)
		seen := map[uuid.UUID]bool{}
		perKey := map[string][]orchestration.LifecycleEvent{}
		duplicates := 0
		for _, r := range records {
			var ev orchestration.LifecycleEvent
			require.NoError(t, json.Unmarshal(r.Value, &ev))
			require.Equal(t, ev.ExecutionID.String(), string(r.Key), "keyed by execution")
			require.Equal(t, ev.ID.String(), kafka.Header(r, outbox.HeaderMessageID))
			if seen[ev.ID] {
				duplicates++
				continue // the consumer dedupes by event id
			}
			seen[ev.ID] = true
			perKey[string(r.Key)] = append(perKey[string(r.Key)], ev)
		}
		require.Positive(t, duplicates, "the crash republished what the broker had taken")
		require.Len(t, perKey, executions)
		requireEachInOrder(t, ids, perKey)
	})
}

func crashed(p *crashingPublisher) <-chan struct{} { return p.crashed }

// eventsCluster starts an in-process Kafka with the lifecycle events topic and returns its brokers.
func eventsCluster(t *testing.T) []string {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, orchestration.DefaultEventTopic))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	return cluster.ListenAddrs()
}

// kafkaPublisher returns a publisher to brokers, closed when the test ends.
func kafkaPublisher(t *testing.T, brokers []string) *kafka.Publisher {
	t.Helper()
	pub, err := kafka.NewPublisher(kafka.Config{Brokers: brokers})
	require.NoError(t, err)
	t.Cleanup(pub.Close)
	return pub
}

// executions and perExecution are what runCompleted runs: 12 executions of a four-step workflow,
// 10 lifecycle events each (started, 4 × step started and succeeded, completed).
const executions, perExecution = 12, 10

// runCompleted registers def (four steps), starts the client and executions of def, and waits
// until all have completed.
func runCompleted(t *testing.T, client *commandbus.Client, rt *orchestration.Runtime, def *workflow.Definition) []uuid.UUID {
	t.Helper()
	ctx := context.Background()
	m, err := workflow.Register(rt, def)
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() { require.NoError(t, client.Stop(context.Background())) })
	var ids []uuid.UUID
	for range executions {
		id, err := m.Start(ctx, nil)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	for _, id := range ids {
		waitStatus(t, m, id, driver.ExecutionCompleted)
	}
	return ids
}

// requireEachInOrder checks the events of each execution of ids, by key: all there, from started
// to completed, in order.
func requireEachInOrder(t *testing.T, ids []uuid.UUID, perKey map[string][]orchestration.LifecycleEvent) {
	t.Helper()
	for _, id := range ids {
		evs := perKey[id.String()]
		require.Len(t, evs, perExecution, "execution %s: none lost", id)
		require.Equal(t, "EXECUTION_STARTED", string(evs[0].Type))
		require.Equal(t, "EXECUTION_COMPLETED", string(evs[len(evs)-1].Type))
		for i := 1; i < len(evs); i++ {
			require.Greater(t, evs[i].Position, evs[i-1].Position, "execution %s: in order", id)
		}
	}
}

// consumeAll reads the topic from the start until at least n records came and no more arrive.
func consumeAll(t *testing.T, brokers []string, topic string, n int) []*kgo.Record {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer client.Close()
	var out []*kgo.Record
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fetches := client.PollFetches(ctx)
		cancel()
		got := 0
		fetches.EachRecord(func(r *kgo.Record) { out = append(out, r); got++ })
		if got == 0 && len(out) >= n {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("read %d records of %s, want at least %d", len(out), topic, n)
		}
	}
}

// Handed to the relay right after each checkpoint's commit (Runtime.HandOffOutbox), lifecycle
// events reach Kafka per execution in order, none lost, and nearly all without a claim.
func TestLifecycleEventsHandedOffInOrder(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		brokers := eventsCluster(t)
		pub := kafkaPublisher(t, brokers)
		metrics, err := outbox.NewMetrics(nil)
		require.NoError(t, err)
		// The claims poll once an hour: what they publish, they were woken for by the hand-off.
		relay, err := outbox.NewRelay(drv.Executor(), outbox.RelayConfig{Publishers: []outbox.Publisher{pub}, PollInterval: time.Hour, Metrics: metrics})
		require.NoError(t, err)
		require.NoError(t, relay.Start(ctx))
		t.Cleanup(func() { require.NoError(t, relay.Stop(context.Background())) })

		client, rt := kafkaEventsRuntime(t, drv)
		rt.HandOffOutbox(relay)
		ids := runCompleted(t, client, rt, diamond("handed-off"))
		requireHandedOffOnceInOrder(t, drv, brokers, ids, metrics)
	})
}

// Two engines on one PostgreSQL database, each handing its checkpoints' events to its own relay:
// executions run on either (and may move between them), and each event reaches Kafka once, per
// execution in order.
func TestLifecycleEventsHandedOffByTwoEngines(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	drv := dbtest.Postgres(t)
	brokers := eventsCluster(t)
	def := diamond("handed-off-twice")
	var managers []*workflow.Manager
	var metricsOf []*outbox.Metrics
	for i := range 2 {
		metrics, err := outbox.NewMetrics(nil)
		require.NoError(t, err)
		metricsOf = append(metricsOf, metrics)
		relay, err := outbox.NewRelay(drv.Executor(), outbox.RelayConfig{Publishers: []outbox.Publisher{kafkaPublisher(t, brokers)},
			RelayID: fmt.Sprintf("engine-%d", i), PollInterval: 100 * time.Millisecond, Metrics: metrics})
		require.NoError(t, err)
		require.NoError(t, relay.Start(ctx))
		t.Cleanup(func() { require.NoError(t, relay.Stop(context.Background())) })
		client, rt := kafkaEventsRuntime(t, drv)
		rt.HandOffOutbox(relay)
		m, err := workflow.Register(rt, def)
		require.NoError(t, err)
		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() { require.NoError(t, client.Stop(context.Background())) })
		managers = append(managers, m)
	}
	var ids []uuid.UUID
	for i := range executions {
		id, err := managers[i%2].Start(ctx, nil)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	for _, id := range ids {
		waitStatus(t, managers[0], id, driver.ExecutionCompleted)
	}
	requireHandedOffOnceInOrder(t, drv, brokers, ids, metricsOf...)
}

// diamond is a four-step workflow a → {b, c} → d of no-op steps: perExecution events each.
func diamond(name string) *workflow.Definition {
	noop := func(context.Context, *workflow.StepContext) (any, error) { return "ok", nil }
	return workflow.New(name, 1).Step("a", noop).Step("b", noop, workflow.DependsOn("a")).
		Step("c", noop, workflow.DependsOn("a")).Step("d", noop, workflow.DependsOn("b", "c"))
}

// requireHandedOffOnceInOrder waits until the outbox is drained and checks that Kafka holds each
// lifecycle event of the executions ids once, per execution in order, and that the relays
// counting into metrics took some of them by the hand-off.
func requireHandedOffOnceInOrder(t *testing.T, drv driver.Driver, brokers []string, ids []uuid.UUID, metrics ...*outbox.Metrics) {
	t.Helper()
	waitFor(t, "the outbox drained", func() bool {
		rows, err := drv.Executor().OutboxList(context.Background(), &driver.OutboxListParams{Statuses: []driver.OutboxStatus{driver.OutboxStatusNew}, Limit: 1})
		require.NoError(t, err)
		return len(rows) == 0
	})
	records := consumeAll(t, brokers, orchestration.DefaultEventTopic, executions*perExecution)
	require.Len(t, records, executions*perExecution, "each event once: no lease expired")
	perKey := map[string][]orchestration.LifecycleEvent{}
	for _, r := range records {
		var ev orchestration.LifecycleEvent
		require.NoError(t, json.Unmarshal(r.Value, &ev))
		perKey[string(r.Key)] = append(perKey[string(r.Key)], ev)
	}
	requireEachInOrder(t, ids, perKey)
	taken := 0.0
	for _, m := range metrics {
		var c dto.Metric
		require.NoError(t, m.HandedOff.WithLabelValues("taken").Write(&c))
		taken += c.GetCounter().GetValue()
	}
	require.Positive(t, taken, "the hand-off published them")
}
