package broker_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/transport/amqp"
	"github.com/commandbus/commandbus/transport/amqp10"
	"github.com/commandbus/commandbus/transport/internal/broker"
)

// TestConsumerConfigErrorsNameTheTransport: each transport's consumer refuses a configuration
// without a URL or a client, naming its own transport and setting.
func TestConsumerConfigErrorsNameTheTransport(t *testing.T) {
	t.Parallel()
	_, err := amqp.NewConsumer(amqp.ConsumerConfig{})
	require.EqualError(t, err, "amqp: no broker URL; set amqp.url")
	_, err = amqp.NewConsumer(amqp.ConsumerConfig{URL: "amqp://x"})
	require.EqualError(t, err, "amqp: the consumer needs the client whose handlers it runs")
	_, err = amqp10.NewConsumer(amqp10.ConsumerConfig{})
	require.EqualError(t, err, "amqp10: no broker URL; set amqp10.url")
	_, err = amqp10.NewConsumer(amqp10.ConsumerConfig{URL: "amqp://x"})
	require.EqualError(t, err, "amqp10: the consumer needs the client whose handlers it runs")
}

func TestTopologyDefaults(t *testing.T) {
	t.Parallel()
	prefix, threshold := broker.TopologyDefaults("", 0)
	require.Equal(t, outbox.DefaultPrefix, prefix)
	require.Equal(t, 5, threshold)
	prefix, threshold = broker.TopologyDefaults("X", 3)
	require.Equal(t, "X", prefix)
	require.Equal(t, 3, threshold)
	require.Equal(t, "X.DLQ", amqp.Topology{Prefix: "X"}.DeadLetterQueue())
	require.Equal(t, "APP.PARKED.Q", amqp10.Topology{}.ParkingQueue())
}

// TestBackoff: the requeue delay doubles with each earlier failed delivery, up to the cap.
func TestBackoff(t *testing.T) {
	t.Parallel()
	require.Equal(t, time.Second, broker.Backoff(time.Second, 30*time.Second, 0))
	require.Equal(t, 8*time.Second, broker.Backoff(time.Second, 30*time.Second, 3))
	require.Equal(t, 30*time.Second, broker.Backoff(time.Second, 30*time.Second, 5))
	require.Equal(t, 30*time.Second, broker.Backoff(time.Second, 30*time.Second, 1000))
}

func TestWorkQueues(t *testing.T) {
	t.Parallel()
	require.Equal(t, "A.Q", broker.WorkQueue("A.Q.BACKOUT"))
	require.Equal(t, "A.Q", broker.WorkQueue("A.Q"))
	sub := broker.Subscription{Queues: []string{"A.Q.BACKOUT", "B.Q.BACKOUT"}, Backout: true}
	require.Equal(t, []string{"A.Q", "B.Q"}, sub.WorkQueues())
	sub = broker.Subscription{Queues: []string{"A.Q"}}
	require.Equal(t, []string{"A.Q"}, sub.WorkQueues())
}
