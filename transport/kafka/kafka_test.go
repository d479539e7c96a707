package kafka_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/transport/kafka"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"))
}

// newCluster starts an in-process Kafka (kfake) with the given topics.
func newCluster(t testing.TB, topics ...string) []string {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topics...))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	return cluster.ListenAddrs()
}

// consume reads n records of topic from the start.
func consume(t testing.TB, brokers []string, topic string, n int) []*kgo.Record {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fetches := client.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "waiting for %d records of %s, got %d", n, topic, len(out))
		fetches.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

func TestPublisher(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		brokers := newCluster(t, "events.Fx")
		pub, err := kafka.NewPublisher(kafka.Config{Brokers: brokers})
		require.NoError(t, err)
		defer pub.Close()

		const n = 50
		var msgs []*outbox.Message
		for i := range n {
			msgs = append(msgs, &outbox.Message{Category: outbox.CategoryEvent, Transport: outbox.TransportKafka, Topic: "events.Fx",
				Envelope: &outbox.Envelope{
					MessageID: uuid.Must(uuid.NewV7()), Type: outbox.TypeCommandCompleted, Name: "BookFx", CommandID: uuid.Must(uuid.NewV7()),
					CorrelationID: uuid.Must(uuid.NewV7()), OccurredAt: time.Now(), Key: fmt.Sprintf("payment-%d", i%4),
					Headers: outbox.Headers{SchemaVersion: "1", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7"},
					Payload: json.RawMessage(fmt.Sprintf(`{"seq":%d}`, i)),
				}})
		}
		require.NoError(t, outbox.Enqueue(ctx, drv.Executor(), msgs...))
		relay, err := outbox.NewRelay(drv.Executor(), outbox.RelayConfig{Publishers: []outbox.Publisher{pub}, BatchSize: 16})
		require.NoError(t, err)
		for published := 0; published < n; {
			got, err := relay.RunOnce(ctx)
			require.NoError(t, err)
			published += got
		}

		records := consume(t, brokers, "events.Fx", n)
		lastSeq := map[string]int{}
		for _, r := range records {
			env, err := outbox.Decode(r.Value)
			require.NoError(t, err)
			require.Equal(t, env.Key, string(r.Key), "keyed by business key")
			require.Equal(t, env.MessageID.String(), kafka.Header(r, outbox.HeaderMessageID))
			require.Equal(t, env.CorrelationID.String(), kafka.Header(r, outbox.HeaderCorrelationID))
			require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", kafka.Header(r, outbox.HeaderTraceparent))
			var payload struct{ Seq int }
			require.NoError(t, json.Unmarshal(env.Payload, &payload))
			if last, ok := lastSeq[env.Key]; ok {
				require.Greater(t, payload.Seq, last, "one key's events in order")
			}
			lastSeq[env.Key] = payload.Seq
		}
	})
}
