package cli

import (
	"context"
	"encoding/json"
	"log/slog"
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
	"github.com/commandbus/commandbus/internal/plumbing"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/workflow"
)

// TestWireTransportsHandsOffLifecycleEvents: serve and worker wire their relay to take the
// runtime's outbox rows right after each commit (outbox.handoff, on by default), and
// outbox.handoff: false leaves them to the relay's claims; either way each lifecycle event
// reaches Kafka, per execution in order.
func TestWireTransportsHandsOffLifecycleEvents(t *testing.T) {
	t.Parallel()
	for _, handoff := range []bool{true, false} {
		t.Run(map[bool]string{true: "handoff", false: "claims"}[handoff], func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
				cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, orchestration.DefaultEventTopic))
				require.NoError(t, err)
				t.Cleanup(cluster.Close)
				cfg := &commandbus.Config{Logger: slog.New(slog.DiscardHandler), LifecycleEvents: commandbus.EventsKafka,
					Kafka: commandbus.KafkaConfig{Brokers: cluster.ListenAddrs()[0]}}
				if !handoff {
					cfg.Outbox.Handoff = new(bool)
				}
				client, err := commandbus.NewClient(drv, cfg)
				require.NoError(t, err)
				rt, err := orchestration.New(client, orchestration.Config{})
				require.NoError(t, err)
				noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
				flow, err := workflow.Register(rt, workflow.New("handoff-"+uuid.NewString(), 1).Step("a", noop).Step("b", noop))
				require.NoError(t, err)
				closeTransports, err := wireTransports(client, rt, client.Logger())
				require.NoError(t, err)
				t.Cleanup(closeTransports)
				ctx := context.Background()
				require.NoError(t, client.Start(ctx))
				t.Cleanup(func() {
					stopCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					require.NoError(t, client.Stop(stopCtx))
				})

				const runs = 5
				started := map[string]bool{}
				for range runs {
					id, err := flow.Start(ctx, map[string]any{})
					require.NoError(t, err)
					started[id.String()] = true
				}
				// started, 2 × (step started, succeeded), completed
				waitPublished(t, drv)
				perKey := consumeEvents(t, cluster.ListenAddrs(), runs*6)
				require.Len(t, perKey, runs)
				for key, events := range perKey {
					require.True(t, started[key], "keyed by execution")
					require.Len(t, events, 6)
					for i := 1; i < len(events); i++ {
						require.Greater(t, events[i].Position, events[i-1].Position, "in order: %v", events)
					}
				}

				taken := counter(t, plumbing.MessagingMetrics(client).HandedOff.WithLabelValues("taken"))
				if handoff {
					require.Positive(t, taken, "the relay took the rows after their commit")
				} else {
					require.Zero(t, taken, "outbox.handoff: false leaves every row to the claims")
				}
			})
		})
	}
}

// waitPublished waits until the outbox holds nothing unpublished: every event is in Kafka.
func waitPublished(t *testing.T, drv driver.Driver) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		backlog, err := drv.Executor().OutboxBacklog(context.Background())
		require.NoError(t, err)
		pending := int64(0)
		for _, b := range backlog {
			pending += b.New
		}
		if pending == 0 {
			return
		}
		require.False(t, time.Now().After(deadline), "%d outbox rows still unpublished", pending)
		time.Sleep(20 * time.Millisecond) // polling the outbox
	}
}

// consumeEvents reads at least n lifecycle events from the start of the topic and returns them
// by record key.
func consumeEvents(t *testing.T, brokers []string, n int) map[string][]orchestration.LifecycleEvent {
	t.Helper()
	consumer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(orchestration.DefaultEventTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer consumer.Close()
	out := map[string][]orchestration.LifecycleEvent{}
	got := 0
	deadline := time.Now().Add(30 * time.Second)
	for got < n {
		require.False(t, time.Now().After(deadline), "read %d lifecycle events, want %d: %v", got, n, types(out))
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fetches := consumer.PollFetches(ctx)
		cancel()
		fetches.EachRecord(func(r *kgo.Record) {
			var ev orchestration.LifecycleEvent
			require.NoError(t, json.Unmarshal(r.Value, &ev))
			out[string(r.Key)] = append(out[string(r.Key)], ev)
			got++
		})
	}
	return out
}

// counter reads a Prometheus counter.
func counter(t *testing.T, c interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, c.Write(&m))
	return m.GetCounter().GetValue()
}

// types lists the events read, per key, by type and status, for a failure's message.
func types(perKey map[string][]orchestration.LifecycleEvent) map[string][]string {
	out := map[string][]string{}
	for k, evs := range perKey {
		for _, ev := range evs {
			out[k] = append(out[k], string(ev.Type)+"/"+string(ev.Status))
		}
	}
	return out
}
