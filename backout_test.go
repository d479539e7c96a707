package commandbus

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// TestParkBackedOut: a command whose broker message was backed out is parked on both drivers:
// IN_TSQ with a command_dlq row (BROKER_BACKOUT and the reason), audited as DLQ_PARK by the
// consumer; parking it again, or parking a command that already ended, changes nothing; an
// unknown command is ErrNotFound. The parked command is resubmitted like any other.
func TestParkBackedOut(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		client := newTestClient(t, drv, &Config{Handlers: NewHandlers()}) // not started: the command stays PENDING
		res, err := client.Send(ctx, "fx", testArgs{N: 1}, nil)
		require.NoError(t, err)

		parked, err := client.ParkBackedOut(ctx, res.ID, "amqp:APP.CMD.FX.Test.Q", "backed out after 6 deliveries; last error: db down")
		require.NoError(t, err)
		require.True(t, parked)
		row, err := client.GetCommand(ctx, res.ID)
		require.NoError(t, err)
		require.Equal(t, StatusInTSQ, row.Status)
		require.Equal(t, CodeBrokerBackout, row.ErrorCode)
		entry, err := client.DLQ().Get(ctx, res.ID)
		require.NoError(t, err)
		require.Equal(t, "BROKER_BACKOUT: backed out after 6 deliveries; last error: db down", entry.Error)
		require.Equal(t, "amqp:APP.CMD.FX.Test.Q", entry.ParkedBy)
		log, err := client.AuditLog(ctx, &driver.AuditLogListParams{EntityType: "command", EntityID: res.ID.String()})
		require.NoError(t, err)
		require.Len(t, log, 1)
		require.Equal(t, "DLQ_PARK", log[0].Action)

		again, err := client.ParkBackedOut(ctx, res.ID, "amqp:APP.CMD.FX.Test.Q", "again")
		require.NoError(t, err)
		require.False(t, again, "already parked")

		_, err = client.DLQ().Resubmit(ctx, res.ID, OperatorAction{Actor: "ops", Reason: "broker fixed"})
		require.NoError(t, err)
		_, err = client.TSQ().Cancel(ctx, res.ID, OperatorAction{Actor: "ops", Reason: "x"})
		require.ErrorIs(t, err, ErrInvalidState, "resubmitted: PENDING again")

		parked, err = client.ParkBackedOut(ctx, res.ID, "amqp:q", "backed out again")
		require.NoError(t, err)
		require.True(t, parked)
		_, err = client.TSQ().Cancel(ctx, res.ID, OperatorAction{Actor: "ops", Reason: "give up"})
		require.NoError(t, err)
		parked, err = client.ParkBackedOut(ctx, res.ID, "amqp:q", "a late backout")
		require.NoError(t, err)
		require.False(t, parked, "an ended command stays ended")
		row, err = client.GetCommand(ctx, res.ID)
		require.NoError(t, err)
		require.Equal(t, StatusCancelled, row.Status)

		_, err = client.ParkBackedOut(ctx, uuid.Must(uuid.NewV7()), "amqp:q", "r")
		require.ErrorIs(t, err, ErrNotFound)
	})
}
