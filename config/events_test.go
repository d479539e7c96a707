package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The inbound event sources: amqp.event-queues, kafka.event-topics and kafka.event-group, from
// the file or the environment, and refused where they cannot work.
func TestEventSourceKeys(t *testing.T) {
	t.Parallel()
	cfg := mustParseConfig(t, "amqp:\n  url: amqp://guest:guest@127.0.0.1:5672/\n  event-queues: EVENTS.ORDERS.Q, EVENTS.PAYMENTS.Q\n"+
		"kafka:\n  brokers: 127.0.0.1:9092\n  event-topics: orders\n",
		"COMMANDBUS_KAFKA_EVENT_GROUP=orders-svc")
	require.Equal(t, []string{"EVENTS.ORDERS.Q", "EVENTS.PAYMENTS.Q"}, cfg.AMQP.EventQueueList())
	require.Equal(t, []string{"orders"}, cfg.Kafka.EventTopicList())
	require.Equal(t, "orders-svc", cfg.Kafka.EventGroup)

	for yaml, want := range map[string]string{
		"amqp:\n  event-queues: EVENTS.Q\n":                    "amqp.event-queues: needs amqp.url",
		"amqp10:\n  url: amqp://x\n  event-queues: EVENTS.Q\n": "amqp10.event-queues: inbound events are consumed over AMQP 0-9-1 only",
		"kafka:\n  event-topics: orders\n":                     "kafka.event-topics: needs kafka.brokers",
		"kafka:\n  brokers: b:9092\n  event-group: g\n":        "kafka.event-group: needs kafka.event-topics",
	} {
		require.ErrorContains(t, parseConfigError(t, yaml), want, yaml)
	}
}

// Every lifecycle-events sink is configured from the file: Kafka, an AMQP queue or exchange,
// AMQP 1.0, and a webhook with its secret, timeout and retries (the secret from the environment).
func TestLifecycleEventSinkKeys(t *testing.T) {
	t.Parallel()
	kafka := mustParseConfig(t, "kafka:\n  brokers: 127.0.0.1:9092\nlifecycle-events: kafka\nlifecycle-events-topic: audit.Executions\n")
	require.Equal(t, "kafka", kafka.Config.LifecycleEvents)
	require.Equal(t, "audit.Executions", kafka.Config.LifecycleEventsTopic)

	rabbit := mustParseConfig(t, "amqp:\n  url: amqp://guest:guest@127.0.0.1:5672/\nlifecycle-events: amqp\n"+
		"lifecycle-events-topic: executions\nlifecycle-events-exchange: true\n")
	require.Equal(t, "amqp", rabbit.Config.LifecycleEvents)
	require.Equal(t, "executions", rabbit.Config.LifecycleEventsTopic)
	require.True(t, rabbit.Config.LifecycleEventsExchange)

	mq := mustParseConfig(t, "amqp10:\n  url: amqp://mq:5672\nlifecycle-events: amqp10\n")
	require.Equal(t, "amqp10", mq.Config.LifecycleEvents)

	hook := mustParseConfig(t, "lifecycle-events: webhook\nwebhooks:\n  max-attempts: 4\n  endpoints:\n"+
		"    ops:\n      url: https://ops.example/hooks\n      timeout: 3s\n",
		"COMMANDBUS_WEBHOOKS_ENDPOINTS_OPS_SECRET=s3cret")
	require.Equal(t, "webhook", hook.Config.LifecycleEvents)
	require.Equal(t, "ops", hook.Config.LifecycleWebhook(), "the only endpoint")
	require.Equal(t, 4, hook.Config.Webhooks.MaxAttempts)
	ep := hook.Config.Webhooks.Endpoints["ops"]
	require.NotNil(t, ep)
	require.Equal(t, "https://ops.example/hooks", ep.URL)
	require.Equal(t, "s3cret", ep.Secret)
	require.Equal(t, 3*time.Second, ep.Timeout.Std())

	for yaml, want := range map[string]string{
		"lifecycle-events: kafka\n":   "lifecycle-events: kafka needs kafka.brokers",
		"lifecycle-events: amqp\n":    "lifecycle-events: amqp needs amqp.url",
		"lifecycle-events: amqp10\n":  "lifecycle-events: amqp10 needs amqp10.url",
		"lifecycle-events: sqs\n":     "lifecycle-events: must be none, kafka, amqp, amqp10 or webhook",
		"lifecycle-events: webhook\n": "lifecycle-events-topic: webhook needs the name of an endpoint",
		"lifecycle-events: webhook\nlifecycle-events-topic: pager\nwebhooks:\n  endpoints:\n    ops: {url: 'https://x', secret: s}\n": "no webhook endpoint \"pager\"",
		"kafka:\n  brokers: b:9092\nlifecycle-events: kafka\nlifecycle-events-exchange: true\n":                                       "lifecycle-events-exchange: only lifecycle-events: amqp",
		"webhooks:\n  endpoints:\n    ops: {url: 'ftp://x', secret: s}\n":                                                             "webhooks.endpoints.ops.url: must be an http(s) URL",
		"webhooks:\n  endpoints:\n    ops: {url: 'https://x'}\n":                                                                      "webhooks.endpoints.ops.secret: required",
		"webhooks:\n  endpoints:\n    ops: {url: 'https://x', secret: s, timeout: -1s}\n":                                             "webhooks.endpoints.ops.timeout: duration \"-1s\" must not be negative",
		"webhooks:\n  max-attempts: -2\n":                                                                                             "webhooks.max-attempts: must not be negative",
	} {
		require.ErrorContains(t, parseConfigError(t, yaml), want, yaml)
	}
}
