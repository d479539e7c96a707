package amqp_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/driver/pgdriver"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/transport/amqp"
	"github.com/commandbus/commandbus/transport/internal/brokertest"
)

// TestBackoutCount: a message that keeps coming back (a consumer that fails on it and requeues
// it) is moved to its queue's backout queue by the broker once it has been delivered more than
// BackoutThreshold times.
func TestBackoutCount(t *testing.T) {
	t.Parallel()
	url := rabbitURL(t)
	topology := amqp.Topology{Prefix: uniquePrefix(t, url), BackoutThreshold: 3}
	queue := brokertest.CommandQueue(t, url, topology.Prefix)
	pub, err := amqp.NewPublisher(amqp.PublisherConfig{URL: url, Topology: topology})
	require.NoError(t, err)
	defer pub.Close()
	brokertest.PublishPoison(t, pub, queue, "poison-1", "c-1")

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
				break // gone: backed out
			}
			time.Sleep(20 * time.Millisecond) // polling the queue
			continue
		}
		deliveries++
		require.NoError(t, d.Nack(false, true))
	}
	require.LessOrEqual(t, deliveries, 4, "the broker stops redelivering after the backout threshold")
	backedOut := readQueue(t, url, topology.BackoutQueue(queue), 1)[0]
	require.Equal(t, "poison-1", backedOut.MessageId)
	require.Equal(t, "c-1", backedOut.CorrelationId)
	require.Equal(t, uint8(amqp091.Persistent), backedOut.DeliveryMode)
}

// TestDatabaseFailureBacksOffThenParks: a delivery whose processing keeps failing in the database
// is requeued after a growing backoff, never in a tight loop; once the broker has delivered it
// more than the backout threshold, it lands on the queue's backout queue and its command is
// parked: IN_TSQ, with a command_dlq row naming the backout and the last database error, audited,
// counted. It is not left PENDING with its message gone.
func TestDatabaseFailureBacksOffThenParks(t *testing.T) {
	t.Parallel()
	p := newPlatform(t, platformOpts{requeueDelay: 20 * time.Millisecond})
	brokertest.FailClaims(t, p.drv, "poison")
	ctx := context.Background()
	queue := outbox.CommandQueueName(p.prefix, "fx", "BookFx")
	start := time.Now()
	res, err := p.Client.Send(ctx, "fx", BookFx{PaymentID: "poison"}, &commandbus.SendOpts{ReplyTo: "payments"})
	require.NoError(t, err)
	row := p.WaitStatus(res.ID, commandbus.StatusInTSQ)
	took := time.Since(start)

	require.Equal(t, commandbus.CodeBrokerBackout, row.ErrorCode)
	require.Equal(t, int64(0), p.Calls.Load(), "the handler never ran")
	// Six deliveries (threshold 5): five requeued after 20ms × 2^(deliveries before), 620ms in
	// all; the sixth rejected to the backout queue.
	require.Equal(t, float64(5), brokertest.CounterValue(p.metrics.Consumed.WithLabelValues(queue, "requeued")))
	require.Equal(t, float64(1), brokertest.CounterValue(p.metrics.Consumed.WithLabelValues(queue, "backed_out")))
	require.GreaterOrEqual(t, took, 620*time.Millisecond, "requeued after a backoff, not in a tight loop")

	parked, err := p.Client.DLQ().Get(ctx, res.ID)
	require.NoError(t, err)
	require.Contains(t, parked.Error, commandbus.CodeBrokerBackout)
	require.Contains(t, parked.Error, "6 deliveries on "+queue)
	require.Contains(t, parked.Error, "simulated database failure claiming poison", "the reason names the last failure")
	require.Equal(t, float64(1), brokertest.CounterValue(p.metrics.BrokerDeadLetters.WithLabelValues(queue, "parked")))
	log, err := p.Client.AuditLog(ctx, &driver.AuditLogListParams{EntityType: "command", EntityID: res.ID.String()})
	require.NoError(t, err)
	require.Len(t, log, 1)
	require.Equal(t, "DLQ_PARK", log[0].Action)
	require.Equal(t, "amqp:"+queue, log[0].Actor)

	// The backout queue was drained into the troubleshooting queue.
	brokertest.WaitFor(t, "the backout queue drained", func() bool { return queueDepth(t, p.url, amqp.Topology{}.BackoutQueue(queue)) == 0 })
}

// TestDatabaseFailureRecovers: a delivery that fails in the database is redelivered after a
// backoff and completes once the database recovers, before the backout threshold.
func TestDatabaseFailureRecovers(t *testing.T) {
	t.Parallel()
	p := newPlatform(t, platformOpts{requeueDelay: 50 * time.Millisecond})
	lift := brokertest.FailClaims(t, p.drv, "flaky")
	queue := outbox.CommandQueueName(p.prefix, "fx", "BookFx")
	res, err := p.Client.Send(context.Background(), "fx", BookFx{PaymentID: "flaky"}, nil)
	require.NoError(t, err)
	brokertest.WaitFor(t, "two failed deliveries", func() bool {
		return brokertest.CounterValue(p.metrics.Consumed.WithLabelValues(queue, "requeued")) >= 2
	})
	lift()
	row := p.WaitStatus(res.ID, commandbus.StatusCompleted)
	require.Equal(t, 1, row.Attempt)
	require.Equal(t, int64(1), p.Calls.Load())
	require.Equal(t, float64(0), brokertest.CounterValue(p.metrics.BrokerDeadLetters.WithLabelValues(queue, "parked")))
}

// queueDepth is how many messages wait on queue (-1 when it cannot be inspected).
func queueDepth(t testing.TB, url, queue string) int {
	t.Helper()
	conn, err := amqp091.Dial(url)
	if err != nil {
		return -1
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return -1
	}
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		return -1
	}
	return q.Messages
}

// TestBackedOutReplyIsFiled: a reply whose deliveries keep failing (the database refuses to file
// it) is backed out to the reply queue's backout queue; once the database accepts it again, the
// consumer drains that queue and files the reply, so the sender is answered instead of waiting
// out its reply timeout. It failed before the reply backout queue was drained.
func TestBackedOutReplyIsFiled(t *testing.T) {
	t.Parallel()
	p := newPlatform(t, platformOpts{replies: true})
	pg := p.drv.(*pgdriver.Driver)
	ctx := context.Background()
	_, err := pg.Pool().Exec(ctx, fmt.Sprintf(`
		CREATE FUNCTION %[1]s.fail_reply() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.kind = 'reply' THEN
				RAISE EXCEPTION 'simulated database failure filing a reply';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER fail_reply BEFORE INSERT ON %[1]s.command FOR EACH ROW EXECUTE FUNCTION %[1]s.fail_reply();`, pg.Schema()))
	require.NoError(t, err)
	res, err := p.Client.Send(ctx, "fx", BookFx{PaymentID: "P-R"}, &commandbus.SendOpts{ReplyTo: "payments"})
	require.NoError(t, err)
	p.WaitStatus(res.ID, commandbus.StatusCompleted)
	replyQueue := outbox.ReplyQueueName(p.prefix)
	brokertest.WaitFor(t, "the reply to be backed out", func() bool {
		return brokertest.CounterValue(p.metrics.Consumed.WithLabelValues(replyQueue, "backed_out")) >= 1
	})
	select {
	case r := <-p.Replies:
		t.Fatalf("a reply reached the handler while the database refused it: %+v", r)
	default:
	}
	_, err = pg.Pool().Exec(ctx, "DROP TRIGGER fail_reply ON "+pg.Schema()+".command")
	require.NoError(t, err)
	require.Equal(t, commandbus.OutcomeSuccess, p.WaitReply(res.ID).Outcome)
	brokertest.WaitFor(t, "the filed reply to be counted", func() bool {
		return brokertest.CounterValue(p.metrics.BrokerDeadLetters.WithLabelValues(replyQueue, "filed")) == 1
	})
}
