package amqp_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/transport/amqp"
	"github.com/commandbus/commandbus/workflow"
)

// inboundEvents reads commandbus_inbound_events_total{transport, outcome} from reg.
func inboundEvents(t testing.TB, reg *prometheus.Registry, transport, outcome string) float64 {
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
			if labels["transport"] == transport && labels["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestEventConsumer: events published to an event queue start the workflow their type
// triggers once (a redelivered event starts nothing new); an unknown type is acknowledged and
// counted; a malformed event is moved to the dead-letter queue with its reason. Both drivers,
// real RabbitMQ.
func TestEventConsumer(t *testing.T) {
	t.Parallel()
	url := rabbitURL(t)
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		reg := prometheus.NewRegistry()
		client, err := commandbus.NewClient(drv, &commandbus.Config{Logger: slog.New(slog.DiscardHandler), MetricsRegisterer: reg})
		require.NoError(t, err)
		rt, err := orchestration.New(client, orchestration.Config{})
		require.NoError(t, err)
		noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
		_, err = workflow.Register(rt, workflow.New("fulfil-order", 1).TriggeredBy("OrderPlaced").Step("ship", noop))
		require.NoError(t, err)

		topology := amqp.Topology{Prefix: uniquePrefix(t, url), BackoutThreshold: 3}
		queue := topology.Prefix + ".EVENTS.ORDERS.Q"
		consumer, err := amqp.NewEventConsumer(amqp.EventConsumerConfig{URL: url, Queues: []string{queue}, Receiver: rt, Topology: topology,
			RequeueDelay: 20 * time.Millisecond})
		require.NoError(t, err)
		require.NoError(t, consumer.Start(ctx))
		t.Cleanup(func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, consumer.Stop(stopCtx))
		})
		select {
		case <-consumer.Ready():
		case <-time.After(30 * time.Second):
			t.Fatal("the event consumer did not subscribe its queue")
		}

		conn, err := amqp091.Dial(url)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		ch, err := conn.Channel()
		require.NoError(t, err)
		publish := func(messageID, body string) {
			require.NoError(t, ch.PublishWithContext(ctx, "", queue, false, false, amqp091.Publishing{
				ContentType: "application/cloudevents+json", DeliveryMode: amqp091.Persistent, MessageId: messageID, Body: []byte(body)}))
		}
		event := `{"specversion":"1.0","id":"ord-1","type":"OrderPlaced","source":"shop","data":{"order":"O-1"}}`
		publish("m-1", event)
		publish("m-2", event) // the broker redelivers, or the publisher sent it twice
		publish("m-3", `{"id":"x-1","type":"OrderShipped","source":"shop"}`)
		publish("m-4", `{"id":"bad-1","type":"OrderPlaced"}`)

		deadline := time.Now().Add(30 * time.Second)
		for inboundEvents(t, reg, "amqp", "started")+inboundEvents(t, reg, "amqp", "duplicate")+
			inboundEvents(t, reg, "amqp", "unknown")+inboundEvents(t, reg, "amqp", "malformed") < 4 {
			require.False(t, time.Now().After(deadline), "the consumer handles the four events")
			time.Sleep(20 * time.Millisecond) // polling the counters
		}
		require.Equal(t, 1.0, inboundEvents(t, reg, "amqp", "started"))
		require.Equal(t, 1.0, inboundEvents(t, reg, "amqp", "duplicate"))
		require.Equal(t, 1.0, inboundEvents(t, reg, "amqp", "unknown"), "an unknown type is acknowledged and counted")
		require.Equal(t, 1.0, inboundEvents(t, reg, "amqp", "malformed"))

		rows, err := drv.Executor().ExecutionList(ctx, &driver.ExecutionListParams{Limit: 10})
		require.NoError(t, err)
		require.Len(t, rows, 1, "the duplicate started nothing new")
		require.Equal(t, orchestration.TriggeredExecutionID("shop", "ord-1", workflow.Model, "fulfil-order"), rows[0].ID)
		require.JSONEq(t, `{"order":"O-1"}`, string(rows[0].State))

		dead := readQueue(t, url, topology.DeadLetterQueue(), 1)[0]
		require.Equal(t, "m-4", dead.MessageId)
		require.Contains(t, dead.Headers[amqp.HeaderError], "source: is required", "the dead letter carries its reason")
		require.JSONEq(t, `{"id":"bad-1","type":"OrderPlaced"}`, string(dead.Body))

		// Nothing is left to redeliver: every event was acknowledged (the unknown one too).
		deadline = time.Now().Add(30 * time.Second)
		for {
			q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
			require.NoError(t, err)
			if q.Messages == 0 {
				break
			}
			require.False(t, time.Now().After(deadline), "%d messages left on %s", q.Messages, queue)
			time.Sleep(20 * time.Millisecond) // polling the queue
		}
	})
}

// failingReceiver fails the first failures deliveries as a database outage would, then hands
// events to the runtime.
type failingReceiver struct {
	amqp.EventReceiver
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

// TestEventConsumerDatabaseFailure: an event whose handling fails in the database is requeued
// after a delay and started once it succeeds; one that keeps failing is moved by the broker to
// <queue>.BACKOUT after the backout threshold, not retried forever.
func TestEventConsumerDatabaseFailure(t *testing.T) {
	t.Parallel()
	url := rabbitURL(t)
	ctx := context.Background()
	drv := dbtest.SQLite(t)
	client, err := commandbus.NewClient(drv, &commandbus.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	rt, err := orchestration.New(client, orchestration.Config{})
	require.NoError(t, err)
	noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
	_, err = workflow.Register(rt, workflow.New("fulfil-order", 1).TriggeredBy("OrderPlaced").Step("ship", noop))
	require.NoError(t, err)

	run := func(failures int) (amqp.Topology, string, *failingReceiver) {
		topology := amqp.Topology{Prefix: uniquePrefix(t, url), BackoutThreshold: 3}
		queue := topology.Prefix + ".EVENTS.Q"
		receiver := &failingReceiver{EventReceiver: rt, failures: failures}
		consumer, err := amqp.NewEventConsumer(amqp.EventConsumerConfig{URL: url, Queues: []string{queue}, Receiver: receiver,
			Topology: topology, RequeueDelay: 10 * time.Millisecond})
		require.NoError(t, err)
		require.NoError(t, consumer.Start(ctx))
		t.Cleanup(func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, consumer.Stop(stopCtx))
		})
		select {
		case <-consumer.Ready():
		case <-time.After(30 * time.Second):
			t.Fatal("the event consumer did not subscribe its queue")
		}
		conn, err := amqp091.Dial(url)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		ch, err := conn.Channel()
		require.NoError(t, err)
		require.NoError(t, ch.PublishWithContext(ctx, "", queue, false, false, amqp091.Publishing{MessageId: "m-" + topology.Prefix,
			Body: []byte(`{"id":"` + topology.Prefix + `","type":"OrderPlaced","source":"shop"}`)}))
		return topology, queue, receiver
	}

	// Fails twice, then succeeds on the third delivery.
	recovered, _, _ := run(2)
	id := orchestration.TriggeredExecutionID("shop", recovered.Prefix, workflow.Model, "fulfil-order")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := drv.Executor().ExecutionGet(ctx, id); err == nil {
			break
		}
		require.False(t, time.Now().After(deadline), "the event starts its workflow once the database answers")
		time.Sleep(20 * time.Millisecond) // polling the execution
	}

	// Keeps failing: the broker backs it out after the threshold.
	topology, queue, receiver := run(1000)
	backedOut := readQueue(t, url, topology.BackoutQueue(queue), 1)[0]
	require.Equal(t, "m-"+topology.Prefix, backedOut.MessageId)
	receiver.mu.Lock()
	calls := receiver.calls
	receiver.mu.Unlock()
	require.LessOrEqual(t, calls, topology.BackoutThreshold+1, "delivered at most the backout threshold and once more")
	_, err = drv.Executor().ExecutionGet(ctx, orchestration.TriggeredExecutionID("shop", topology.Prefix, workflow.Model, "fulfil-order"))
	require.ErrorIs(t, err, driver.ErrNotFound)
}
