package amqp_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/commandbus/commandbus/internal/brokerclean"
	"github.com/commandbus/commandbus/internal/brokerlock"
	"github.com/commandbus/commandbus/transport/internal/brokertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(brokerclean.Main(m), brokertest.LeakOptions()...)
}

// rabbitURL returns the test broker's URL, or skips (fails under COMMANDBUS_REQUIRE_RABBITMQ=1)
// when it is unreachable.
func rabbitURL(t testing.TB) string {
	t.Helper()
	return brokertest.URL(t, "COMMANDBUS_TEST_AMQP_URL", func(url string) error {
		conn, err := amqp091.Dial(url)
		if err == nil {
			_ = conn.Close()
		}
		return err
	}, "start it with rabbitmq-server -detached")
}

// uniquePrefix isolates a test's queues; they are deleted from the broker at url when t ends.
func uniquePrefix(t testing.TB, url string) string { return brokertest.Prefix(t, url, "T") }

// readQueue takes up to n messages from queue, waiting up to the deadline for them (the queue
// may not be declared yet: a failed get closes the channel, and the next try opens another).
func readQueue(t testing.TB, url, queue string, n int) []amqp091.Delivery {
	t.Helper()
	var out []amqp091.Delivery
	var conn *amqp091.Connection
	var ch *amqp091.Channel
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for len(out) < n {
		require.Falsef(t, time.Now().After(deadline), "waiting for %d messages on %s, got %d", n, queue, len(out))
		if conn == nil || conn.IsClosed() {
			var err error
			if conn, err = amqp091.Dial(url); err != nil {
				conn = nil
				time.Sleep(50 * time.Millisecond)
				continue
			}
			ch = nil
		}
		if ch == nil || ch.IsClosed() {
			var err error
			if ch, err = conn.Channel(); err != nil {
				_ = conn.Close()
				conn = nil
				continue
			}
		}
		d, ok, err := ch.Get(queue, true)
		if err == nil && ok {
			out = append(out, d)
			continue
		}
		time.Sleep(20 * time.Millisecond) // polling the queue
	}
	return out
}

// stopBroker stops the RabbitMQ application and returns a function that starts it again; the
// function also runs at cleanup, so the broker is restored even when the test fails.
func stopBroker(t *testing.T, url string) func() {
	t.Helper()
	if _, err := exec.LookPath("rabbitmqctl"); err != nil {
		t.Skip("rabbitmqctl not installed")
	}
	// Other packages' broker tests (transport/amqp10, cmd/commandbus) finish first, and wait
	// until the broker is back.
	release := brokerlock.Exclusive(t)
	started := false
	start := func() {
		if started {
			return
		}
		started = true
		defer release()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "rabbitmqctl", "start_app").CombinedOutput(); err != nil {
			t.Errorf("rabbitmqctl start_app: %v\n%s", err, out)
		}
		deadline := time.Now().Add(time.Minute)
		for {
			if conn, err := amqp091.Dial(url); err == nil {
				_ = conn.Close()
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("RabbitMQ did not come back within a minute")
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	t.Cleanup(start)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "rabbitmqctl", "stop_app").CombinedOutput()
	require.NoError(t, err, "rabbitmqctl stop_app: %s", out)
	return start
}
