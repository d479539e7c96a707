package amqp_test

import (
	"context"
	"log/slog"
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

		topology := amqp.Topology{Prefix: uniquePrefix(), BackoutThreshold: 3}
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
