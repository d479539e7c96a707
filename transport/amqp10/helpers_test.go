package amqp10_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	neturl "net/url"
	"os"
	"strings"
	"testing"
	"time"

	amqp "github.com/Azure/go-amqp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/commandbus/commandbus/internal/brokerlock"

	"github.com/commandbus/commandbus/transport/amqp10"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"),
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).triggerHealthCheck.func1"),
		// A pooled connection whose write was slow (a loaded machine) keeps its background
		// reader blocked in a read until the connection is next used: the shared test pool's.
		goleak.IgnoreAnyFunction("github.com/jackc/pgx/v5/pgconn/internal/bgreader.(*BGReader).bgRead"))
}

// brokerURL returns the test broker's URL once it accepts an AMQP 1.0 connection, or skips
// (fails under COMMANDBUS_REQUIRE_RABBITMQ=1) when it does not.
func brokerURL(t testing.TB) string {
	t.Helper()
	brokerlock.Shared(t) // transport/amqp's broker restart test waits for this test
	url := os.Getenv("COMMANDBUS_TEST_AMQP10_URL")
	if url == "" {
		url = "amqp://guest:guest@127.0.0.1:5672/"
	}
	conn, err := dial(url)
	if err != nil {
		msg := "RabbitMQ's AMQP 1.0 is unreachable at " + url + " (" + err.Error() + "); start RabbitMQ (rabbitmq-server -detached) and, on 3.x, run rabbitmq-plugins enable rabbitmq_amqp1_0"
		if os.Getenv("COMMANDBUS_REQUIRE_RABBITMQ") == "1" {
			t.Fatalf("RabbitMQ is required (COMMANDBUS_REQUIRE_RABBITMQ=1): %s", msg)
		}
		t.Skipf("skipping: %s", msg)
	}
	_ = conn.Close()
	return url
}

func dial(rawURL string) (*amqp.Conn, error) {
	u, err := neturl.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	password, _ := u.User.Password()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return amqp.Dial(ctx, u.Scheme+"://"+u.Host, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(u.User.Username(), password)})
}

// uniquePrefix isolates a test's queues.
func uniquePrefix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "T10" + strings.ToUpper(hex.EncodeToString(b))
}

// deleteQueues removes a test's queues (over AMQP 0-9-1: AMQP 1.0 cannot).
func deleteQueues(t testing.TB, url string, queues ...string) {
	t.Helper()
	conn, err := amqp091.Dial(url)
	if err != nil {
		t.Logf("deleting queues: %v", err)
		return
	}
	defer conn.Close()
	for _, q := range queues {
		ch, err := conn.Channel()
		if err != nil {
			return
		}
		_, _ = ch.QueueDelete(q, false, false, false)
		_ = ch.Close()
	}
}

// receiver attaches to queue over AMQP 1.0 with the broker's address form.
func receiver(t testing.TB, url, queue string) *amqp.Receiver {
	t.Helper()
	conn, err := dial(url)
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
	waitFor(t, "queue "+queue, func() bool {
		conn, err := dial(url)
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

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
