package amqp_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/transport/amqp"
	"github.com/commandbus/commandbus/transport/internal/brokertest"
)

// TestDeadLettersListedAndRedriven: a message naming a command this database does not hold is
// dead-lettered; ListDeadLetters counts and shows it (reason, original queue) without removing
// it, and RedriveDeadLetters puts it back on its queue, where the consumer takes it again (and,
// the command still missing, dead-letters it again).
func TestDeadLettersListedAndRedriven(t *testing.T) {
	t.Parallel()
	p := newPlatform(t, platformOpts{})
	ctx := context.Background()
	topology := amqp.Topology{Prefix: p.prefix, BackoutThreshold: 5}
	queue := outbox.CommandQueueName(p.prefix, "fx", "BookFx")
	commandID := uuid.Must(uuid.NewV7())
	env := &outbox.Envelope{MessageID: uuid.Must(uuid.NewV7()), Type: outbox.TypeCommandRequested, Name: "BookFx", CommandID: commandID,
		OccurredAt: p.Client.Now(), Headers: outbox.Headers{SchemaVersion: outbox.SchemaVersion}, Payload: []byte(`{"paymentId":"P-GONE"}`)}
	body, err := env.Encode()
	require.NoError(t, err)
	publishRaw(t, p.url, amqp091.Publishing{MessageId: env.MessageID.String(), CorrelationId: commandID.String(), Body: body}, queue)
	deadLettered := func() float64 {
		return brokertest.CounterValue(p.metrics.Consumed.WithLabelValues(queue, "dead_lettered"))
	}
	brokertest.WaitFor(t, "the message to be dead-lettered", func() bool { return deadLettered() == 1 })

	var report *amqp.DeadLetterReport
	brokertest.WaitFor(t, "the dead-letter queue to count it", func() bool {
		report, err = amqp.ListDeadLetters(ctx, p.url, topology, 10)
		require.NoError(t, err)
		return report.Counts[topology.DeadLetterQueue()] == 1
	})
	require.Equal(t, 0, report.Counts[topology.ParkingQueue()])
	require.Len(t, report.Messages, 1)
	dead := report.Messages[0]
	require.Equal(t, queue, dead.OriginalQueue)
	require.Equal(t, commandID.String(), dead.CommandID)
	require.Contains(t, dead.Error, "does not exist in this database")
	again, err := amqp.ListDeadLetters(ctx, p.url, topology, 10)
	require.NoError(t, err)
	require.Equal(t, 1, again.Counts[topology.DeadLetterQueue()], "listing removes nothing")

	// The listings give their message back asynchronously: a redrive right after them may find
	// none ready yet.
	moved := 0
	brokertest.WaitFor(t, "the redrive to move the message", func() bool {
		n, err := amqp.RedriveDeadLetters(ctx, p.url, topology, false, 0)
		require.NoError(t, err)
		moved += n
		return moved > 0
	})
	require.Equal(t, 1, moved)
	brokertest.WaitFor(t, "the redriven message to be consumed again", func() bool { return deadLettered() == 2 })
}

// TestDeadLetterCollector: the collector reports the dead-letter and parking queues' depths.
func TestDeadLetterCollector(t *testing.T) {
	t.Parallel()
	url := rabbitURL(t)
	prefix := uniquePrefix(t, url)
	topology := amqp.Topology{Prefix: prefix}
	t.Cleanup(func() { brokertest.DeleteQueues(t, url, topology.DeadLetterQueue(), topology.ParkingQueue()) })
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(amqp.DeadLetterCollector(url, topology)))
	depth := func(queue string) float64 {
		families, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range families {
			for _, m := range f.GetMetric() {
				if m.GetLabel()[0].GetValue() == queue {
					return m.GetGauge().GetValue()
				}
			}
		}
		return -1
	}
	require.Equal(t, 0.0, depth(topology.DeadLetterQueue()))
	publishRaw(t, url, amqp091.Publishing{MessageId: "dead-1", Body: []byte(`x`)}, topology.DeadLetterQueue())
	brokertest.WaitFor(t, "the gauge to count the dead letter", func() bool { return depth(topology.DeadLetterQueue()) == 1 })
	require.Equal(t, 0.0, depth(topology.ParkingQueue()))
}
