package amqp_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/transport/amqp"
)

// TestBackoutCount: a message that keeps coming back (a consumer that fails on it and requeues
// it) is moved to the dead-letter queue by the broker after BackoutThreshold deliveries.
func TestBackoutCount(t *testing.T) {
	t.Parallel()
	url := rabbitURL(t)
	topology := amqp.Topology{Prefix: uniquePrefix(), BackoutThreshold: 3}
	queue := outbox.CommandQueueName(topology.Prefix, "fx", "BookFx")
	t.Cleanup(func() { deleteQueues(t, url, queue, topology.DeadLetterQueue(), topology.ParkingQueue()) })
	pub, err := amqp.NewPublisher(amqp.PublisherConfig{URL: url, Topology: topology})
	require.NoError(t, err)
	defer pub.Close()
	msg := &driver.OutboxRow{ID: 1, Topic: queue, Type: "CommandRequested", MessageID: "poison-1",
		Payload: json.RawMessage(`{}`), Headers: map[string]string{outbox.HeaderCommandID: "c-1"}}
	errs := pub.Publish(context.Background(), []*driver.OutboxRow{msg})
	require.NoError(t, errs[0])

	conn, err := amqp091.Dial(url)
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	deliveries := 0
	deadline := time.Now().Add(30 * time.Second)
	for deliveries < 10 && time.Now().Before(deadline) {
		d, ok, err := ch.Get(queue, false)
		require.NoError(t, err)
		if !ok {
			if deliveries >= 3 {
				break // gone: dead-lettered
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		deliveries++
		require.NoError(t, d.Nack(false, true))
	}
	require.LessOrEqual(t, deliveries, 4, "the broker stops redelivering after the backout threshold")
	dead := readQueue(t, url, topology.DeadLetterQueue(), 1)[0]
	require.Equal(t, "poison-1", dead.MessageId)
	require.Equal(t, "c-1", dead.CorrelationId)
}
