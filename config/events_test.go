package config_test

import (
	"testing"

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
