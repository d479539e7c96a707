package orchestration_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/brokerclean"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/rabbittest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/transport/amqp"
	"github.com/commandbus/commandbus/workflow"
)

// rabbitURL returns the test RabbitMQ, or skips when it does not answer (fails instead under
// COMMANDBUS_REQUIRE_RABBITMQ=1).
func rabbitURL(t *testing.T) string {
	t.Helper()
	return rabbittest.URL(t)
}

// Lifecycle events published to a RabbitMQ queue arrive per execution in order.
func TestLifecycleEventsToRabbitMQ(t *testing.T) {
	t.Parallel()
	url := rabbitURL(t)
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		topology := amqp.Topology{Prefix: "T" + uuid.NewString()[:8]}
		queue := topology.Prefix + ".events.Orchestrations"
		brokerclean.Track(t, url, topology.Prefix)

		client := fastClient(t, drv)
		rt, err := orchestration.New(client, orchestration.Config{Events: &orchestration.EventSink{Transport: outbox.TransportAMQP, Topic: queue}})
		require.NoError(t, err)
		noop := func(context.Context, *workflow.StepContext) (any, error) { return "ok", nil }
		m, err := workflow.Register(rt, workflow.New("rabbit", 1).Step("a", noop).Step("b", noop, workflow.DependsOn("a")))
		require.NoError(t, err)
		pub, err := amqp.NewPublisher(amqp.PublisherConfig{URL: url, Topology: topology})
		require.NoError(t, err)
		t.Cleanup(func() { _ = pub.Close() })
		relay, err := outbox.NewRelay(drv.Executor(), outbox.RelayConfig{Publishers: []outbox.Publisher{pub}, PollInterval: 20 * time.Millisecond})
		require.NoError(t, err)
		require.NoError(t, client.Start(ctx))
		require.NoError(t, relay.Start(ctx))
		t.Cleanup(func() {
			require.NoError(t, relay.Stop(context.Background()))
			require.NoError(t, client.Stop(context.Background()))
		})

		const executions, perExecution = 3, 6 // started, 2 × (step started, succeeded), completed
		var ids []uuid.UUID
		for range executions {
			id, err := m.Start(ctx, nil)
			require.NoError(t, err)
			ids = append(ids, id)
		}
		conn, err := amqp091.Dial(url)
		require.NoError(t, err)
		defer func() { conn.Close() }() // the last connection opened
		ch, err := conn.Channel()
		require.NoError(t, err)
		perExec := map[string][]orchestration.LifecycleEvent{}
		total := 0
		deadline := time.Now().Add(30 * time.Second)
		for total < executions*perExecution {
			require.False(t, time.Now().After(deadline), "got %d events of %d", total, executions*perExecution)
			d, ok, err := ch.Get(queue, true)
			if err != nil { // not declared yet: the channel closed; open another
				if ch, err = conn.Channel(); err != nil {
					// The broker may close the connection too: open another.
					conn.Close()
					conn, err = amqp091.Dial(url)
					require.NoError(t, err)
					ch, err = conn.Channel()
					require.NoError(t, err)
				}
				time.Sleep(50 * time.Millisecond) // polling the broker with a deadline
				continue
			}
			if !ok {
				time.Sleep(20 * time.Millisecond) // polling the broker with a deadline
				continue
			}
			var ev orchestration.LifecycleEvent
			require.NoError(t, json.Unmarshal(d.Body, &ev))
			require.Equal(t, ev.ID.String(), d.MessageId)
			perExec[ev.ExecutionID.String()] = append(perExec[ev.ExecutionID.String()], ev)
			total++
		}
		for _, id := range ids {
			evs := perExec[id.String()]
			require.Len(t, evs, perExecution)
			require.Equal(t, "EXECUTION_STARTED", string(evs[0].Type))
			require.Equal(t, "EXECUTION_COMPLETED", string(evs[len(evs)-1].Type))
			for i := 1; i < len(evs); i++ {
				require.Greater(t, evs[i].Position, evs[i-1].Position, "in order")
			}
		}
	})
}
