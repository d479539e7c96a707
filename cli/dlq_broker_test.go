package cli_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/cli"
	"github.com/commandbus/commandbus/internal/brokerclean"
	"github.com/commandbus/commandbus/internal/rabbittest"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/transport/amqp"
)

// TestDLQBrokerListAndRedrive: `dlq list --broker` counts and shows the broker's dead letters
// and `dlq redrive` moves them back to the queue they came from.
func TestDLQBrokerListAndRedrive(t *testing.T) {
	t.Parallel()
	url, conn := rabbittest.Dial(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	prefix := "CLI" + strings.ToUpper(hex.EncodeToString(b))
	topology := amqp.Topology{Prefix: prefix}
	work := outbox.CommandQueueName(prefix, "fx", "BookFx")
	brokerclean.Track(t, url, prefix)
	flags := []string{"--amqp-url", url, "--amqp-prefix", prefix}

	out, err := runCLI(cli.Config{}, append([]string{"dlq", "list", "--broker"}, flags...)...)
	require.NoError(t, err, out)
	require.Contains(t, out, topology.DeadLetterQueue()+": 0 message(s)")

	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.PublishWithContext(context.Background(), "", topology.DeadLetterQueue(), true, false, amqp091.Publishing{
		MessageId: "m-1", CorrelationId: "c-1", DeliveryMode: amqp091.Persistent, Body: []byte(`{}`),
		Headers: amqp091.Table{amqp.HeaderError: "INVALID_ENVELOPE: test", amqp.HeaderOriginalQueue: work},
	}))
	require.Eventually(t, func() bool {
		out, err = runCLI(cli.Config{}, append([]string{"dlq", "list", "--broker"}, flags...)...)
		return err == nil && strings.Contains(out, topology.DeadLetterQueue()+": 1 message(s)")
	}, 10*time.Second, 50*time.Millisecond, out)
	require.Contains(t, out, "m-1")
	require.Contains(t, out, "INVALID_ENVELOPE: test")
	require.Contains(t, out, work)

	var report amqp.DeadLetterReport
	require.Eventually(t, func() bool { // the listing above gives its message back asynchronously
		out, err = runCLI(cli.Config{}, append([]string{"dlq", "list", "--broker", "-o", "json"}, flags...)...)
		require.NoError(t, err, out)
		require.NoError(t, json.Unmarshal([]byte(out), &report), out)
		return report.Counts[topology.DeadLetterQueue()] == 1
	}, 10*time.Second, 50*time.Millisecond, out)
	require.Len(t, report.Messages, 1)
	require.Equal(t, work, report.Messages[0].OriginalQueue)

	// The listing gives its message back asynchronously: a redrive right after it may find none
	// ready yet, and moves it on a later run.
	require.Eventually(t, func() bool {
		out, err = runCLI(cli.Config{}, append([]string{"dlq", "redrive"}, flags...)...)
		require.NoError(t, err, out)
		return strings.Contains(out, "1 message(s) moved back")
	}, 10*time.Second, 50*time.Millisecond, out)
	q, err := ch.QueueDeclarePassive(work, true, false, false, false, amqp091.Table{"x-queue-type": "quorum"})
	require.NoError(t, err)
	require.Equal(t, 1, q.Messages, "the message is back on its queue")
}
