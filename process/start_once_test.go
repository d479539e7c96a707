package process_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/process"
	"github.com/commandbus/commandbus/tracecontext"
)

// neverCalled is an fx handler for tests whose client never starts its workers.
func neverCalled(context.Context, *commandbus.Command[bookFxArgs]) (any, error) {
	panic("the fx handler must not run")
}

func TestStartTwiceWithSameIDStartsOnce(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		client, m, calls := fxFixture(t, drv, clock.NewFake(testStart), neverCalled)
		ctx := context.Background()
		id := uuid.Must(uuid.NewV7())
		got, err := m.Start(ctx, fxState{PaymentID: "P1", Amount: "1.00"}, process.WithID(id))
		require.NoError(t, err)
		require.Equal(t, id, got)
		first, err := m.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionWaitingForAsync, first.Status)

		// Again, immediately and deferred, with another state: nothing is created or run.
		got, err = m.Start(ctx, fxState{PaymentID: "P2", Amount: "2.00"}, process.WithID(id))
		require.NoError(t, err)
		require.Equal(t, id, got)
		other := uuid.Must(uuid.NewV7())
		ids, err := m.StartBatch(ctx, []fxState{{PaymentID: "P3"}, {PaymentID: "P4"}}, process.WithIDs(id, other))
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{id, other}, ids)

		require.Equal(t, 1, calls.get("reserve"), "the execution ran once")
		again, err := m.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, "P1", again.State.PaymentID, "the first start's state stays")
		require.Equal(t, first.Fence, again.Fence, "nobody leased it again")
		require.Equal(t, logLines(first.Log), logLines(again.Log))
		commands, err := client.ListCommands(ctx, &commandbus.ListParams{Domain: "fx"})
		require.NoError(t, err)
		require.Len(t, commands, 1, "one command step sent once")
		fresh, err := m.Get(ctx, other)
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionPending, fresh.Status, "the new id of the batch is created")
	})
}

func TestCommandStepCarriesTheExecutionsTraceparent(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		client, m, _ := fxFixture(t, drv, clock.NewFake(testStart), func(context.Context, *commandbus.Command[bookFxArgs]) (any, error) {
			return bookFxResult{Contract: "FX"}, nil
		})
		sc, err := tracecontext.ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		require.NoError(t, err)
		traced := tracecontext.ContextWith(context.Background(), sc)
		ctx := context.Background()

		// Run at once in the starting request, and run later by a poller from the stored row:
		// both commands carry the starting request's trace, though the poller's context has none.
		immediate, err := m.Start(traced, fxState{PaymentID: "NOW"})
		require.NoError(t, err)
		deferred, err := m.StartBatch(traced, []fxState{{PaymentID: "LATER"}})
		require.NoError(t, err)
		untraced, err := m.Start(ctx, fxState{PaymentID: "NONE"})
		require.NoError(t, err)
		start(t, client)
		for _, id := range []uuid.UUID{immediate, deferred[0], untraced} {
			waitStatus(t, m, id, driver.ExecutionCompleted)
		}

		commands, err := client.ListCommands(ctx, &commandbus.ListParams{Domain: "fx"})
		require.NoError(t, err)
		require.Len(t, commands, 3)
		byExecution := map[uuid.UUID]*commandbus.CommandRow{}
		for _, c := range commands {
			byExecution[c.CorrelationID] = c
		}
		for _, id := range []uuid.UUID{immediate, deferred[0]} {
			inst, err := m.Get(ctx, id)
			require.NoError(t, err)
			require.Equal(t, sc.Traceparent(), inst.Traceparent, "stored on the execution")
			require.Equal(t, sc.Traceparent(), byExecution[id].Headers[tracecontext.Header])
		}
		_, set := byExecution[untraced].Headers[tracecontext.Header]
		require.False(t, set, "an execution started without a trace sends none")
	})
}
