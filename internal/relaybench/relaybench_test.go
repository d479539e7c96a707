package relaybench_test

import (
	"context"
	"os"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/relaybench"
)

func TestRunKafka(t *testing.T) {
	t.Parallel()
	res, err := relaybench.Run(context.Background(), dbtest.Postgres(t), relaybench.Config{Target: relaybench.TargetKafka, Messages: 2000})
	require.NoError(t, err)
	require.Equal(t, 2000, res.Messages)
	require.Positive(t, res.MessagesPerS)
	res, err = relaybench.Run(context.Background(), dbtest.Postgres(t), relaybench.Config{Target: relaybench.TargetKafka, Messages: 50, Rate: 500})
	require.NoError(t, err)
	require.Positive(t, res.P99Ms)
}

func BenchmarkRelayKafka(b *testing.B) {
	benchmarkRelay(b, relaybench.TargetKafka)
}

func BenchmarkRelayAMQP(b *testing.B) {
	url := "amqp://guest:guest@127.0.0.1:5672/"
	conn, err := amqp091.Dial(url)
	if err != nil {
		if os.Getenv("COMMANDBUS_REQUIRE_RABBITMQ") == "1" {
			b.Fatal(err)
		}
		b.Skipf("RabbitMQ unreachable: %v", err)
	}
	_ = conn.Close()
	benchmarkRelay(b, relaybench.TargetAMQP)
}

// benchmarkRelay drains b.N messages from the outbox; ns/op is the relay's cost per message.
func benchmarkRelay(b *testing.B, target string) {
	drv := dbtest.Postgres(b)
	b.ResetTimer()
	res, err := relaybench.Run(context.Background(), drv, relaybench.Config{Target: target, Messages: max(b.N, 1)})
	require.NoError(b, err)
	b.ReportMetric(res.MessagesPerS, "msgs/s")
}
