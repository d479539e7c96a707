package maintenance_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/maintenance"
)

func TestExecutionRetentionDeletesEndedExecutionsInBatches(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		exec := drv.Executor()
		now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
		// ended inserts an execution and checkpoints it into status at endedAt.
		ended := func(status driver.ExecutionStatus, endedAt time.Time) uuid.UUID {
			t.Helper()
			id := uuid.Must(uuid.NewV7())
			_, insertErr := exec.ExecutionInsertMany(ctx, &driver.ExecutionInsertManyParams{Now: &endedAt, Executions: []*driver.ExecutionInsertParams{{
				ID: id, Model: "process", Type: "Pay", Domain: "d", Lease: time.Hour, WorkerID: "w",
				Attributes: map[string]string{"customer": "c-1"},
			}}})
			require.NoError(t, insertErr)
			applied, err := exec.ExecutionCheckpointMany(ctx, &driver.ExecutionCheckpointManyParams{Now: &endedAt, Checkpoints: []*driver.ExecutionCheckpoint{
				{ID: id, Fence: 1, Status: status, Release: true},
			}})
			require.NoError(t, err)
			require.Equal(t, []uuid.UUID{id}, applied)
			return id
		}
		var old []uuid.UUID
		for range 7 {
			old = append(old, ended(driver.ExecutionCompleted, now.Add(-48*time.Hour)))
		}
		recent := ended(driver.ExecutionCompleted, now.Add(-time.Hour))
		waiting := ended(driver.ExecutionWaitingForAsync, now.Add(-48*time.Hour))

		r := maintenance.ExecutionRetention{
			Exec: exec, Retention: 24 * time.Hour, Interval: time.Hour, BatchSize: 3,
			Now: func() time.Time { return now }, Logger: slog.New(slog.DiscardHandler),
		}
		deleted, err := r.Run(ctx)
		require.NoError(t, err)
		require.Equal(t, len(old), deleted, "one run deletes every batch due")
		for _, id := range old {
			_, err := exec.ExecutionGet(ctx, id)
			require.ErrorIs(t, err, driver.ErrNotFound)
			attrs, err := exec.ExecutionAttributes(ctx, id)
			require.NoError(t, err)
			require.Empty(t, attrs)
		}
		for _, id := range []uuid.UUID{recent, waiting} {
			_, err := exec.ExecutionGet(ctx, id)
			require.NoError(t, err, "a recent or unfinished execution is kept")
		}

		// The runner runs the task once at start.
		again := ended(driver.ExecutionFailed, now.Add(-25*time.Hour))
		runner := maintenance.New(slog.New(slog.DiscardHandler), r.Task())
		runner.Start(ctx)
		require.Eventually(t, func() bool {
			_, err := exec.ExecutionGet(ctx, again)
			return err != nil
		}, 10*time.Second, 10*time.Millisecond, "the retention task did not run")
		runner.Stop()

		_, err = maintenance.ExecutionRetention{Exec: exec}.Run(ctx)
		require.Error(t, err, "a retention must be positive")
	})
}
