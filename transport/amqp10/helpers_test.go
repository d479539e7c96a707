package amqp10_test

import (
	"context"
	"testing"
	"time"

	amqp "github.com/Azure/go-amqp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/commandbus/commandbus/internal/brokerclean"
	"github.com/commandbus/commandbus/internal/brokerlock"
	"github.com/commandbus/commandbus/internal/rabbittest"
	"github.com/commandbus/commandbus/transport/amqp10"
	"github.com/commandbus/commandbus/transport/internal/brokertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(brokerclean.Main(m), brokertest.LeakOptions()...)
}

// brokerURL returns the test broker's URL once it accepts an AMQP 1.0 connection, or skips
// (fails under COMMANDBUS_REQUIRE_RABBITMQ=1) when it does not.
func brokerURL(t testing.TB) string {
	t.Helper()
	brokerlock.Shared(t) // transport/amqp's broker restart test waits for this test
	return brokertest.URL(t, "COMMANDBUS_TEST_AMQP10_URL", func(url string) error {
		conn, err := rabbittest.DialAMQP10(url)
		if err == nil {
			_ = conn.Close()
		}
		return err
	}, "start RabbitMQ (rabbitmq-server -detached) and, on 3.x, run rabbitmq-plugins enable rabbitmq_amqp1_0")
}

// uniquePrefix isolates a test's queues; they are deleted from the broker at url when t ends.
func uniquePrefix(t testing.TB, url string) string { return brokertest.Prefix(t, url, "T10") }

// receiver attaches to queue over AMQP 1.0 with the broker's address form.
func receiver(t testing.TB, url, queue string) *amqp.Receiver {
	t.Helper()
	conn, err := rabbittest.DialAMQP10(url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ctx := context.Background()
	sess, err := conn.NewSession(ctx, nil)
	require.NoError(t, err)
	rcv, err := sess.NewReceiver(ctx, amqp10.DetectAddressStyle(conn.Properties()).Address(queue), &amqp.ReceiverOptions{Credit: 10})
	require.NoError(t, err)
	return rcv
}

// readQueue takes n messages from queue over AMQP 1.0, accepting them. The queue may not exist
// yet (its first message is still in the outbox): attaching is retried until the deadline.
func readQueue(t testing.TB, url, queue string, n int) []*amqp.Message {
	t.Helper()
	var rcv *amqp.Receiver
	brokertest.WaitFor(t, "queue "+queue, func() bool {
		conn, err := rabbittest.DialAMQP10(url)
		require.NoError(t, err)
		sess, err := conn.NewSession(context.Background(), nil)
		require.NoError(t, err)
		rcv, err = sess.NewReceiver(context.Background(), amqp10.DetectAddressStyle(conn.Properties()).Address(queue), &amqp.ReceiverOptions{Credit: 10})
		if err != nil {
			_ = conn.Close()
			return false
		}
		t.Cleanup(func() { _ = conn.Close() })
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*amqp.Message
	for len(out) < n {
		msg, err := rcv.Receive(ctx, nil)
		require.NoError(t, err, "waiting for %d messages on %s, got %d", n, queue, len(out))
		require.NoError(t, rcv.AcceptMessage(ctx, msg))
		out = append(out, msg)
	}
	return out
}
