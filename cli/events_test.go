package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/internal/brokerclean"
	"github.com/commandbus/commandbus/internal/brokerlock"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/workflow"
)

// TestWireEventSources: amqp.event-queues and kafka.event-topics are wired the way serve and
// worker wire them: an event on the queue and one on the topic each start the workflow their
// type triggers.
func TestWireEventSources(t *testing.T) {
	t.Parallel()
	brokerlock.Shared(t)
	url := "amqp://guest:guest@127.0.0.1:5672/"
	conn, err := amqp091.Dial(url)
	if err != nil {
		if os.Getenv("COMMANDBUS_REQUIRE_RABBITMQ") == "1" {
			t.Fatalf("RabbitMQ is required (COMMANDBUS_REQUIRE_RABBITMQ=1) but unreachable at %s: %v", url, err)
		}
		t.Skipf("skipping: RabbitMQ unreachable at %s (%v)", url, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	prefix := "TE" + hex.EncodeToString(b)
	queue := prefix + ".EVENTS.Q"
	brokerclean.Track(t, url, prefix)

	ctx := context.Background()
	drv := dbtest.SQLite(t)
	logger := slog.New(slog.DiscardHandler)
	client, err := commandbus.NewClient(drv, &commandbus.Config{Logger: logger,
		AMQP:  commandbus.AMQPConfig{URL: url, Prefix: prefix, EventQueues: queue},
		Kafka: commandbus.KafkaConfig{Brokers: cluster.ListenAddrs()[0], EventTopics: "orders", EventGroup: "orders-svc"}})
	require.NoError(t, err)
	rt, err := orchestration.New(client, orchestration.Config{})
	require.NoError(t, err)
	noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
	flow, err := workflow.Register(rt, workflow.New("fulfil-order", 1).TriggeredBy("OrderPlaced").Step("ship", noop))
	require.NoError(t, err)
	closeTransports, err := wireTransports(client, rt, logger)
	require.NoError(t, err)
	t.Cleanup(closeTransports)
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(stopCtx))
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(queue, false, false, false)
			_, _ = ch.QueueDelete(queue+".BACKOUT", false, false, false)
		}
	})

	ch, err := conn.Channel()
	require.NoError(t, err)
	// The consumer declares the queue; publish once it exists.
	deadline := time.Now().Add(30 * time.Second)
	for {
		probe, err := conn.Channel()
		require.NoError(t, err)
		if _, err := probe.QueueDeclarePassive(queue, true, false, false, false, nil); err == nil {
			_ = probe.Close()
			break
		}
		require.False(t, time.Now().After(deadline), "the event consumer declares %s", queue)
		time.Sleep(20 * time.Millisecond) // polling the broker
	}
	require.NoError(t, ch.PublishWithContext(ctx, "", queue, false, false, amqp091.Publishing{
		Body: []byte(`{"id":"a-1","type":"OrderPlaced","source":"shop-amqp","data":{}}`)}))
	producer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	require.NoError(t, err)
	t.Cleanup(producer.Close)
	require.NoError(t, producer.ProduceSync(ctx, &kgo.Record{Topic: "orders",
		Value: []byte(`{"id":"k-1","type":"OrderPlaced","source":"shop-kafka","data":{}}`)}).FirstErr())

	for _, source := range []string{"shop-amqp", "shop-kafka"} {
		id := orchestration.TriggeredExecutionID(source, map[string]string{"shop-amqp": "a-1", "shop-kafka": "k-1"}[source], workflow.Model, "fulfil-order")
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, err := flow.Get(ctx, id); err == nil {
				break
			}
			require.False(t, time.Now().After(deadline), "the event from %s started its workflow", source)
			time.Sleep(20 * time.Millisecond) // polling the execution
		}
	}
}
