package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/brokerclean"
	"github.com/commandbus/commandbus/internal/brokerlock"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/rabbittest"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/server/console"
)

type wiredBookFx struct {
	PaymentID string `json:"paymentId"`
}

func (wiredBookFx) Kind() string { return "BookFx" }

// TestWireTransportsAMQP10: a domain configured with transport: amqp10 is served the way
// commandbus serve and worker wire it: its command goes out through the outbox over AMQP 1.0,
// the wired consumer runs its handler, and it completes.
func TestWireTransportsAMQP10(t *testing.T) {
	t.Parallel()
	brokerlock.Shared(t) // transport/amqp's broker restart test waits for this test
	url := rabbittest.AMQP10(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	prefix := "TW" + hex.EncodeToString(b)
	brokerclean.Track(t, url, prefix)

	handlers := commandbus.NewHandlers()
	commandbus.AddHandler(handlers, "fx", commandbus.HandlerFunc[wiredBookFx](func(_ context.Context, cmd *commandbus.Command[wiredBookFx]) (any, error) {
		return map[string]string{"contract": "FX-" + cmd.Args.PaymentID}, nil
	}))
	logger := slog.New(slog.DiscardHandler)
	drv := dbtest.Postgres(t)
	client, err := commandbus.NewClient(drv, &commandbus.Config{
		Handlers: handlers, Logger: logger,
		Domains: map[string]*commandbus.DomainConfig{"fx": {Transport: commandbus.TransportAMQP10}},
		AMQP10:  commandbus.AMQPConfig{URL: url, Prefix: prefix},
	})
	require.NoError(t, err)
	closeTransports, err := wireTransports(client, nil, logger)
	require.NoError(t, err)
	defer closeTransports()
	require.NoError(t, client.Start(context.Background()))
	queue := outbox.CommandQueueName(prefix, "fx", "BookFx")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(ctx))
		if conn, err := amqp091.Dial(url); err == nil {
			ch, _ := conn.Channel()
			for _, q := range []string{queue, outbox.BackoutQueueName(queue), outbox.ReplyQueueName(prefix),
				outbox.DeadLetterQueueName(prefix), outbox.ParkingQueueName(prefix)} {
				_, _ = ch.QueueDelete(q, false, false, false)
			}
			_ = conn.Close()
		}
	})

	res, err := client.Send(context.Background(), "fx", wiredBookFx{PaymentID: "w-1"}, nil)
	require.NoError(t, err)
	deadline := time.Now().Add(30 * time.Second)
	for {
		row, err := client.GetCommand(context.Background(), res.ID)
		require.NoError(t, err)
		if row.Status == commandbus.StatusCompleted {
			require.JSONEq(t, `{"contract":"FX-w-1"}`, string(row.Result))
			break
		}
		require.False(t, time.Now().After(deadline), "the command did not complete over amqp10: %s", row.Status)
		time.Sleep(20 * time.Millisecond) // polling the command row
	}
	published, err := drv.Executor().OutboxList(context.Background(), &driver.OutboxListParams{Transport: outbox.TransportAMQP10})
	require.NoError(t, err)
	require.NotEmpty(t, published)
	require.Equal(t, outbox.TransportAMQP10, published[0].Transport)
}

// TestWireTransportsAMQPDeadLetters: with an amqp domain, the wiring registers the broker's
// dead-letter gauge with the client's registerer and gives the console a reader of the broker's
// dead letters; without one, neither.
func TestWireTransportsAMQPDeadLetters(t *testing.T) {
	t.Parallel()
	brokerlock.Shared(t)
	url := "amqp://guest:guest@127.0.0.1:5672/"
	conn, err := amqp091.Dial(url)
	if err != nil {
		if os.Getenv("COMMANDBUS_REQUIRE_RABBITMQ") == "1" {
			t.Fatalf("RabbitMQ is required (COMMANDBUS_REQUIRE_RABBITMQ=1) but unreachable at %s: %v", url, err)
		}
		t.Skipf("skipping: RabbitMQ unreachable at %s (%v)", url, err)
	}
	_ = conn.Close()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	prefix := "TD" + hex.EncodeToString(b)
	brokerclean.Track(t, url, prefix)

	plain, err := commandbus.NewClient(dbtest.SQLite(t), &commandbus.Config{Domains: map[string]*commandbus.DomainConfig{"fx": {}}})
	require.NoError(t, err)
	require.Nil(t, brokerDeadLetterReader(plain), "no amqp domain, no reader")

	registry := prometheus.NewRegistry()
	client, err := commandbus.NewClient(dbtest.SQLite(t), &commandbus.Config{MetricsRegisterer: registry,
		Domains: map[string]*commandbus.DomainConfig{"fx": {Transport: commandbus.TransportAMQP}},
		AMQP:    commandbus.AMQPConfig{URL: url, Prefix: prefix}})
	require.NoError(t, err)
	closeTransports, err := wireTransports(client, nil, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer closeTransports()
	reader := brokerDeadLetterReader(client)
	require.NotNil(t, reader)
	report, err := reader(context.Background(), 5)
	require.NoError(t, err)
	require.Equal(t, []console.BrokerQueueCount{{Queue: prefix + ".DLQ"}, {Queue: prefix + ".PARKED.Q"}}, report.Counts)
	families, err := registry.Gather()
	require.NoError(t, err)
	var gauge bool
	for _, f := range families {
		gauge = gauge || f.GetName() == "commandbus_transport_dead_letter_depth"
	}
	require.True(t, gauge, "the dead-letter gauge is registered")
}
