package commandbus

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// TestClientExecutionRetention starts a client with process.retention set: its maintenance
// deletes the execution that ended longer ago than the retention and keeps the recent one.
func TestClientExecutionRetention(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		now := time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)
		exec := drv.Executor()
		ended := func(at time.Time) uuid.UUID {
			t.Helper()
			id := uuid.Must(uuid.NewV7())
			_, insertErr := exec.ExecutionInsertMany(ctx, &driver.ExecutionInsertManyParams{Now: &at, Executions: []*driver.ExecutionInsertParams{
				{ID: id, Model: "process", Type: "T", Domain: "d", Lease: time.Minute, WorkerID: "w"},
			}})
			require.NoError(t, insertErr)
			_, err := exec.ExecutionCheckpointMany(ctx, &driver.ExecutionCheckpointManyParams{Now: &at, Checkpoints: []*driver.ExecutionCheckpoint{
				{ID: id, Fence: 1, Status: driver.ExecutionCompleted, Release: true},
			}})
			require.NoError(t, err)
			return id
		}
		old, recent := ended(now.Add(-8*24*time.Hour)), ended(now.Add(-6*24*time.Hour))

		client := newTestClient(t, drv, &Config{Clock: clock.NewFake(now), Process: ProcessConfig{Retention: Duration(7 * 24 * time.Hour)}})
		startClient(t, client)
		eventually(t, 10*time.Second, "the expired execution to be deleted", func() bool {
			_, err := exec.ExecutionGet(ctx, old)
			return err != nil
		})
		_, err := exec.ExecutionGet(ctx, old)
		require.ErrorIs(t, err, driver.ErrNotFound)
		_, err = exec.ExecutionGet(ctx, recent)
		require.NoError(t, err)
	})
}
