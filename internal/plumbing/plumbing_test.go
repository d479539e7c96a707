package plumbing_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/plumbing"
	"github.com/commandbus/commandbus/outbox"
)

type ping struct {
	N int `json:"n"`
}

func (ping) Kind() string { return "Ping" }

func newClient(t *testing.T, drv driver.Driver, clk clock.Clock) *commandbus.Client {
	t.Helper()
	handlers := commandbus.NewHandlers()
	commandbus.AddHandler(handlers, "fx", commandbus.HandlerFunc[ping](
		func(ctx context.Context, cmd *commandbus.Command[ping]) (any, error) { return nil, nil }))
	client, err := commandbus.NewClient(drv, &commandbus.Config{
		Handlers: handlers, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	return client
}

// The wrappers reach the client's unexported plumbing through the hooks the root package sets.
func TestPlumbingReachesClient(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		client := newClient(t, drv, nil)

		created := 0
		create := func() any { created++; return &created }
		first := plumbing.Extension(client, "key", create)
		require.Same(t, first, plumbing.Extension(client, "key", create))
		require.Equal(t, 1, created, "an extension is created once per key")

		require.Nil(t, plumbing.DriverNow(client), "the real clock leaves the time to the database")
		fake := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		faked := newClient(t, drv, fake)
		require.Equal(t, fake.Now(), *plumbing.DriverNow(faked))
		require.Equal(t, fake.Now(), *plumbing.DriverClock(faked)())

		row, err := plumbing.BuildCommand(client, commandbus.SendParams{Domain: "fx", Args: ping{N: 1}})
		require.NoError(t, err)
		require.Equal(t, "fx", row.Domain)
		require.Equal(t, "Ping", row.Type)
		_, err = plumbing.BuildCommand(client, commandbus.SendParams{Args: ping{}})
		require.Error(t, err, "a command without a domain is rejected")

		require.Equal(t, []string{"Ping"}, plumbing.CommandTypes(client, "fx"))
		require.Empty(t, plumbing.AMQPDomains(client))
		require.Empty(t, plumbing.AMQP10Domains(client))
		require.NotNil(t, plumbing.MessagingMetrics(client))
		require.Same(t, plumbing.MessagingMetrics(client), plumbing.MessagingMetrics(client))

		_, err = plumbing.ExecuteDelivered(ctx, client, commandbus.Delivery{
			MessageID: uuid.NewString(), Consumer: "test", CommandID: uuid.New(), Domain: "fx",
		})
		require.True(t, errors.Is(err, commandbus.ErrNotFound), "an unknown command: %v", err)
		_, err = plumbing.DeliverReply(ctx, client, &outbox.Envelope{MessageID: uuid.New(), Type: outbox.TypeCommandRequested}, "test")
		var decodeErr *outbox.DecodeError
		require.ErrorAs(t, err, &decodeErr, "a reply queue rejects a command request")

		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() { require.NoError(t, client.Stop(context.Background())) })
		wake, unsubscribe := plumbing.Subscriber(client)("plumbing_test")
		defer unsubscribe()
		deadline := time.After(10 * time.Second)
		tick := time.NewTicker(50 * time.Millisecond) // the listener may connect after Start returns
		defer tick.Stop()
		for woken := false; !woken; {
			select {
			case <-wake:
				woken = true
			case <-tick.C:
				require.NoError(t, drv.Executor().Notify(ctx, []string{"plumbing_test"}))
			case <-deadline:
				t.Fatal("a notification on the subscribed topic did not wake the subscriber")
			}
		}
	})
}
