package workflow_test

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
	"github.com/commandbus/commandbus/workflow"
)

// StartManyJSON with NotBefore creates the executions at once, PENDING and runnable from then;
// without it they are runnable at once.
func TestStartManyJSONNotBefore(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		off := false
		cfg := &commandbus.Config{Logger: slog.New(slog.DiscardHandler)}
		cfg.Features.ProcessExecution = &off
		client, err := commandbus.NewClient(drv, cfg)
		require.NoError(t, err)
		rt, err := orchestration.New(client, orchestration.Config{})
		require.NoError(t, err)
		noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
		m, err := workflow.Register(rt, workflow.New("Later", 1).Step("a", noop))
		require.NoError(t, err)

		at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		later, now := uuid.New(), uuid.New()
		_, err = m.StartManyJSON(ctx, []orchestration.StartRequest{
			{ID: later, Input: json.RawMessage(`{}`), NotBefore: at},
			{ID: now, Input: json.RawMessage(`{}`)},
		})
		require.NoError(t, err)
		row, err := drv.Executor().ExecutionGet(ctx, later)
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionPending, row.Status)
		require.NotNil(t, row.WakeAt)
		require.True(t, row.WakeAt.Equal(at), "wakes at its not-before time, got %s", row.WakeAt)
		row, err = drv.Executor().ExecutionGet(ctx, now)
		require.NoError(t, err)
		require.NotNil(t, row.WakeAt)
		require.WithinDuration(t, time.Now(), *row.WakeAt, time.Minute, "runnable at once")
	})
}
