package orchestration_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/brokerclean"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/transport/amqp"
	"github.com/commandbus/commandbus/workflow"
)

// configuredClient is fastClient with the lifecycle-events keys of a configuration file.
func configuredClient(t *testing.T, drv driver.Driver, set func(*commandbus.Config)) *commandbus.Client {
	t.Helper()
	ms := func(n int) commandbus.Duration { return commandbus.Duration(time.Duration(n) * time.Millisecond) }
	cfg := &commandbus.Config{Logger: slog.New(slog.DiscardHandler),
		Process: commandbus.ProcessConfig{PendingPollInterval: ms(20), RetryPollInterval: ms(20), TimeoutCheckInterval: ms(20), DeadlineCheckInterval: ms(20)}}
	set(cfg)
	client, err := commandbus.NewClient(drv, cfg)
	require.NoError(t, err)
	return client
}

// lifecycle-events: webhook, with the endpoint's secret, timeout and retries from the
// configuration: every event of an execution is POSTed, signed, in order, through a failure of
// the endpoint.
func TestLifecycleWebhookSinkFromConfig(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		var mu sync.Mutex
		failures := 1
		var got []orchestration.LifecycleEvent
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if err := outbox.VerifyWebhook("from-config", r.Header, body, time.Now(), time.Minute); err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if failures > 0 {
				failures--
				http.Error(w, "restarting", http.StatusServiceUnavailable)
				return
			}
			var ev orchestration.LifecycleEvent
			if err := json.Unmarshal(body, &ev); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			got = append(got, ev)
		}))
		t.Cleanup(srv.Close)

		client := configuredClient(t, drv, func(cfg *commandbus.Config) {
			cfg.LifecycleEvents = commandbus.EventsWebhook
			cfg.Webhooks = commandbus.WebhooksConfig{MaxAttempts: 5, Endpoints: map[string]*commandbus.WebhookEndpointConfig{
				"ops": {URL: srv.URL, Secret: "from-config", Timeout: commandbus.Duration(5 * time.Second)}}}
		})
		rt, err := orchestration.New(client, orchestration.Config{})
		require.NoError(t, err)
		noop := func(context.Context, *workflow.StepContext) (any, error) { return "ok", nil }
		m, err := workflow.Register(rt, workflow.New("configured", 1).Step("a", noop))
		require.NoError(t, err)
		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() { require.NoError(t, client.Stop(context.Background())) })

		id, err := m.Start(ctx, nil, workflow.Immediate())
		require.NoError(t, err)
		waitStatus(t, m, id, driver.ExecutionCompleted)
		waitFor(t, "the completion delivered", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) > 0 && got[len(got)-1].Type == "EXECUTION_COMPLETED"
		})
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, []string{"EXECUTION_STARTED", "STEP_STARTED a", "STEP_SUCCEEDED a", "EXECUTION_COMPLETED"}, types(got))
		for _, ev := range got {
			require.Equal(t, id, ev.ExecutionID)
		}
	})
}

// lifecycle-events: amqp with lifecycle-events-exchange: the events go to a topic exchange,
// routed by type, and reach every queue bound to it.
func TestLifecycleAMQPExchangeSinkFromConfig(t *testing.T) {
	t.Parallel()
	url := rabbitURL(t)
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		prefix := "T" + uuid.NewString()[:8]
		brokerclean.Track(t, url, prefix)
		exchange := prefix + ".executions"
		all, completions := exchange+".all", exchange+".completed"
		conn, err := amqp091.Dial(url)
		require.NoError(t, err)
		t.Cleanup(func() {
			if ch, err := conn.Channel(); err == nil {
				_, _ = ch.QueueDelete(all, false, false, false)
				_, _ = ch.QueueDelete(completions, false, false, false)
				_ = ch.ExchangeDelete(exchange, false, false)
			}
			_ = conn.Close()
		})
		ch, err := conn.Channel()
		require.NoError(t, err)
		require.NoError(t, ch.ExchangeDeclare(exchange, amqp091.ExchangeTopic, true, false, false, false, nil))
		for queue, pattern := range map[string]string{all: "#", completions: "EXECUTION_COMPLETED"} {
			_, err := ch.QueueDeclare(queue, true, false, false, false, nil)
			require.NoError(t, err)
			require.NoError(t, ch.QueueBind(queue, pattern, exchange, false, nil))
		}

		client := configuredClient(t, drv, func(cfg *commandbus.Config) {
			cfg.AMQP.URL = url
			cfg.LifecycleEvents, cfg.LifecycleEventsTopic, cfg.LifecycleEventsExchange = commandbus.EventsAMQP, exchange, true
		})
		rt, err := orchestration.New(client, orchestration.Config{})
		require.NoError(t, err)
		noop := func(context.Context, *workflow.StepContext) (any, error) { return "ok", nil }
		m, err := workflow.Register(rt, workflow.New("fanned", 1).Step("a", noop))
		require.NoError(t, err)
		pub, err := amqp.NewPublisher(amqp.PublisherConfig{URL: url, Topology: amqp.Topology{Prefix: prefix}})
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

		id, err := m.Start(ctx, nil, workflow.Immediate())
		require.NoError(t, err)
		receive := func(queue string, n int) []orchestration.LifecycleEvent {
			var out []orchestration.LifecycleEvent
			waitFor(t, "events on "+queue, func() bool {
				d, ok, err := ch.Get(queue, true)
				require.NoError(t, err)
				if ok {
					var ev orchestration.LifecycleEvent
					require.NoError(t, json.Unmarshal(d.Body, &ev))
					require.Equal(t, string(ev.Type), d.RoutingKey, "routed by type")
					out = append(out, ev)
				}
				return len(out) >= n
			})
			return out
		}
		require.Equal(t, []string{"EXECUTION_STARTED", "STEP_STARTED a", "STEP_SUCCEEDED a", "EXECUTION_COMPLETED"}, types(receive(all, 4)))
		done := receive(completions, 1)
		require.Equal(t, id, done[0].ExecutionID)
		require.True(t, done[0].Success)
	})
}
