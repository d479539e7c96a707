package process_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/process"
)

type tally struct {
	N int `json:"n"`
}

type tallyProcess struct{}

func (tallyProcess) Type() string   { return "tally" }
func (tallyProcess) Domain() string { return "tallies" }
func (tallyProcess) Execute(x *process.Execution[tally]) error {
	_, err := process.Step(x, "count", func(context.Context) (int, error) { return x.State.N, nil })
	return err
}

// idleTallies is the tally process's manager on a client that runs no executions: what the
// starts create stays as they left it.
func idleTallies(t *testing.T, drv driver.Driver) *process.Manager[tally] {
	t.Helper()
	off := false
	cfg := &commandbus.Config{Logger: slog.New(slog.DiscardHandler)}
	cfg.Features.ProcessExecution = &off
	client, err := commandbus.NewClient(drv, cfg)
	require.NoError(t, err)
	rt, err := orchestration.New(client, orchestration.Config{})
	require.NoError(t, err)
	m, err := process.NewManager(rt, process.Process[tally](tallyProcess{}))
	require.NoError(t, err)
	return m
}

// StartManyJSON creates every execution in one call with the ids and business keys given, starts
// nothing for an id that exists, and writes nothing when one input does not fit the state.
func TestStartManyJSON(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		m := idleTallies(t, drv)

		a, b := uuid.New(), uuid.New()
		ids, err := m.StartManyJSON(ctx, []orchestration.StartRequest{
			{ID: a, Input: json.RawMessage(`{"n":1}`), BusinessKey: "first"},
			{ID: b, Input: json.RawMessage(`{"n":2}`), BusinessKey: "second"},
		})
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{a, b}, ids)
		row, err := drv.Executor().ExecutionGet(ctx, b)
		require.NoError(t, err)
		require.Equal(t, "second", row.BusinessKey)
		require.JSONEq(t, `{"n":2}`, string(row.State))

		c := uuid.New()
		_, err = m.StartManyJSON(ctx, []orchestration.StartRequest{{ID: a, Input: json.RawMessage(`{"n":9}`)}, {ID: c, Input: json.RawMessage(`{"n":3}`)}})
		require.NoError(t, err)
		row, err = drv.Executor().ExecutionGet(ctx, a)
		require.NoError(t, err)
		require.JSONEq(t, `{"n":1}`, string(row.State), "an id that exists starts nothing")

		d := uuid.New()
		_, err = m.StartManyJSON(ctx, []orchestration.StartRequest{{ID: d, Input: json.RawMessage(`{"n":4}`)}, {Input: json.RawMessage(`{"m":5}`)}})
		var invalid *commandbus.ValidationError
		require.ErrorAs(t, err, &invalid)
		require.Equal(t, "requests[1].input", invalid.Field)
		_, err = drv.Executor().ExecutionGet(ctx, d)
		require.ErrorIs(t, err, driver.ErrNotFound, "nothing is written when one input is refused")
	})
}

// A request's NotBefore creates the execution at once, runnable from then; requests with
// different not-before times are refused together (start them alone).
func TestStartManyJSONNotBefore(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		m := idleTallies(t, drv)

		at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		a := uuid.New()
		_, err := m.StartManyJSON(ctx, []orchestration.StartRequest{{ID: a, Input: json.RawMessage(`{"n":1}`), NotBefore: at}})
		require.NoError(t, err)
		row, err := drv.Executor().ExecutionGet(ctx, a)
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionPending, row.Status)
		require.NotNil(t, row.WakeAt)
		require.True(t, row.WakeAt.Equal(at), "wakes at its not-before time, got %s", row.WakeAt)

		b := uuid.New()
		_, err = m.StartManyJSON(ctx, []orchestration.StartRequest{{ID: b, NotBefore: at}, {NotBefore: at.Add(time.Second)}})
		var invalid *commandbus.ValidationError
		require.ErrorAs(t, err, &invalid)
		require.Equal(t, "requests[1]", invalid.Field)
		_, err = drv.Executor().ExecutionGet(ctx, b)
		require.ErrorIs(t, err, driver.ErrNotFound)
	})
}
