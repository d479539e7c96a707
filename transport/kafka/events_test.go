package kafka_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/transport/kafka"
	"github.com/commandbus/commandbus/workflow"
)

// inboundEvents reads commandbus_inbound_events_total{transport="kafka", outcome} from reg.
func inboundEvents(t testing.TB, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "commandbus_inbound_events_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["transport"] == "kafka" && labels["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// waitHandled polls the counters until the consumer handled total events.
func waitHandled(t testing.TB, reg *prometheus.Registry, total float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := inboundEvents(t, reg, "started") + inboundEvents(t, reg, "duplicate") + inboundEvents(t, reg, "unknown") + inboundEvents(t, reg, "malformed")
		if got >= total {
			return
		}
		require.False(t, time.Now().After(deadline), "the consumer handled %v of %v events", got, total)
		time.Sleep(20 * time.Millisecond) // polling the counters
	}
}

// TestEventConsumer: events on a topic, consumed in a consumer group (kfake), start the
// workflow their type triggers once (a redelivered event starts nothing new); an unknown type is
// committed and counted, never retried (a consumer that rejoins the group does not see it
// again); a malformed event goes to <topic>.DLQ with its reason. Both drivers.
func TestEventConsumer(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		brokers := newCluster(t, "orders", "orders.DLQ")
		reg := prometheus.NewRegistry()
		client, err := commandbus.NewClient(drv, &commandbus.Config{Logger: slog.New(slog.DiscardHandler), MetricsRegisterer: reg})
		require.NoError(t, err)
		rt, err := orchestration.New(client, orchestration.Config{})
		require.NoError(t, err)
		noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
		_, err = workflow.Register(rt, workflow.New("fulfil-order", 1).TriggeredBy("OrderPlaced").Step("ship", noop))
		require.NoError(t, err)

		producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
		require.NoError(t, err)
		t.Cleanup(producer.Close)
		produce := func(key, value string) {
			require.NoError(t, producer.ProduceSync(ctx, &kgo.Record{Topic: "orders", Key: []byte(key), Value: []byte(value)}).FirstErr())
		}
		event := `{"specversion":"1.0","id":"ord-1","type":"OrderPlaced","source":"shop","data":{"order":"O-1"}}`
		produce("O-1", event)
		produce("O-1", event) // produced twice: a retrying producer
		produce("X-1", `{"id":"x-1","type":"OrderShipped","source":"shop"}`)
		produce("B-1", `{"id":"bad-1","type":"OrderPlaced","source":"shop","time":"tomorrow"}`)

		start := func() *kafka.EventConsumer {
			consumer, err := kafka.NewEventConsumer(kafka.EventConsumerConfig{Brokers: brokers, Topics: []string{"orders"}, Group: "orders-svc",
				Receiver: rt, RetryDelay: 20 * time.Millisecond})
			require.NoError(t, err)
			require.NoError(t, consumer.Start(ctx))
			return consumer
		}
		stop := func(c *kafka.EventConsumer) {
			stopCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			require.NoError(t, c.Stop(stopCtx))
		}
		first := start()
		waitHandled(t, reg, 4)
		// The malformed event is counted before it is produced to the dead-letter topic: wait for
		// the dead letter before stopping, or a stop during that produce leaves the record
		// unmarked (correctly: it is delivered again to the next consumer).
		dead := consume(t, brokers, "orders.DLQ", 1)[0]
		require.Equal(t, "B-1", string(dead.Key))
		require.Contains(t, kafka.Header(dead, kafka.HeaderError), "time: must be an RFC 3339 time", "the dead letter carries its reason")
		require.Equal(t, "orders", kafka.Header(dead, "x-commandbus-original-topic"))
		stop(first)
		require.Equal(t, 1.0, inboundEvents(t, reg, "started"))
		require.Equal(t, 1.0, inboundEvents(t, reg, "duplicate"))
		require.Equal(t, 1.0, inboundEvents(t, reg, "unknown"), "an unknown type is committed and counted")
		require.Equal(t, 1.0, inboundEvents(t, reg, "malformed"))

		rows, err := drv.Executor().ExecutionList(ctx, &driver.ExecutionListParams{Limit: 10})
		require.NoError(t, err)
		require.Len(t, rows, 1, "the duplicate started nothing new")
		require.Equal(t, orchestration.TriggeredExecutionID("shop", "ord-1", workflow.Model, "fulfil-order"), rows[0].ID)

		// A consumer of the same group resumes after the committed offsets: nothing handled
		// before comes again, the unknown event included.
		second := start()
		t.Cleanup(func() { stop(second) })
		produce("O-2", `{"id":"ord-2","type":"OrderPlaced","source":"shop","data":{"order":"O-2"}}`)
		waitHandled(t, reg, 5)
		require.Equal(t, 2.0, inboundEvents(t, reg, "started"))
		require.Equal(t, 1.0, inboundEvents(t, reg, "duplicate"))
		require.Equal(t, 1.0, inboundEvents(t, reg, "unknown"))
		require.Equal(t, 1.0, inboundEvents(t, reg, "malformed"))
	})
}

// failingReceiver fails the first failures calls as a database outage would, then hands events
// to the runtime.
type failingReceiver struct {
	kafka.EventReceiver
	mu       sync.Mutex
	failures int
	calls    int
}

func (f *failingReceiver) ReceiveEvent(ctx context.Context, transport string, body []byte) (*orchestration.EventReceipt, error) {
	f.mu.Lock()
	f.calls++
	fail := f.calls <= f.failures
	f.mu.Unlock()
	if fail {
		return nil, errors.New("database unavailable")
	}
	return f.EventReceiver.ReceiveEvent(ctx, transport, body)
}

// TestEventConsumerDatabaseFailure: an event whose handling fails in the database is tried
// again after a delay, and the events after it in its partition wait their turn: both start,
// in order.
func TestEventConsumerDatabaseFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	brokers := newCluster(t, "orders")
	drv := dbtest.SQLite(t)
	client, err := commandbus.NewClient(drv, &commandbus.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	rt, err := orchestration.New(client, orchestration.Config{})
	require.NoError(t, err)
	noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
	_, err = workflow.Register(rt, workflow.New("fulfil-order", 1).TriggeredBy("OrderPlaced").Step("ship", noop))
	require.NoError(t, err)
	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	t.Cleanup(producer.Close)
	for _, id := range []string{"ord-1", "ord-2"} {
		require.NoError(t, producer.ProduceSync(ctx, &kgo.Record{Topic: "orders", Key: []byte("one-key"),
			Value: []byte(`{"id":"` + id + `","type":"OrderPlaced","source":"shop"}`)}).FirstErr())
	}
	receiver := &failingReceiver{EventReceiver: rt, failures: 2}
	consumer, err := kafka.NewEventConsumer(kafka.EventConsumerConfig{Brokers: brokers, Topics: []string{"orders"}, Receiver: receiver,
		RetryDelay: 10 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, consumer.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(t, consumer.Stop(stopCtx))
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		rows, err := drv.Executor().ExecutionList(ctx, &driver.ExecutionListParams{Limit: 10})
		require.NoError(t, err)
		if len(rows) == 2 {
			first, err := drv.Executor().ExecutionGet(ctx, orchestration.TriggeredExecutionID("shop", "ord-1", workflow.Model, "fulfil-order"))
			require.NoError(t, err)
			second, err := drv.Executor().ExecutionGet(ctx, orchestration.TriggeredExecutionID("shop", "ord-2", workflow.Model, "fulfil-order"))
			require.NoError(t, err)
			require.False(t, second.CreatedAt.Before(first.CreatedAt), "the partition's order is kept")
			break
		}
		require.False(t, time.Now().After(deadline), "both events start once the database answers (%d started)", len(rows))
		time.Sleep(20 * time.Millisecond) // polling the executions
	}
	receiver.mu.Lock()
	defer receiver.mu.Unlock()
	require.Equal(t, 4, receiver.calls, "the first event was tried three times, the second once")
}
