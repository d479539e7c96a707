package execution

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// TestLeaseSeesSuspendRequestAndLosesItsHeartbeatToANewFence drives a lease by hand: the
// heartbeat and checkpoints report an operator's suspend request, the release stores SUSPENDED
// (mirrored into Row), the resume makes it runnable again, and a heartbeat of a lease whose fence
// moved reports ErrFenced.
func TestLeaseSeesSuspendRequestAndLosesItsHeartbeatToANewFence(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		e := New(Config{Exec: drv.Executor(), WorkerID: "w1", Lease: time.Minute})
		id := uuid.Must(uuid.NewV7())
		leases, err := e.Insert(ctx, []*driver.ExecutionInsertParams{{
			ID: id, Model: "process", Type: "T", Domain: "d", State: json.RawMessage(`{}`), Lease: time.Minute, WorkerID: "w1",
		}})
		require.NoError(t, err)
		lease := leases[0]
		require.NoError(t, lease.Heartbeat(ctx))
		require.False(t, lease.SuspendRequested())

		row, err := e.Suspend(ctx, id, "ops", "look")
		require.NoError(t, err)
		require.True(t, row.SuspendRequested)
		require.NoError(t, lease.Heartbeat(ctx))
		require.True(t, lease.SuspendRequested(), "the heartbeat reports the request")

		cp := lease.Base()
		cp.Status, cp.Step = driver.ExecutionExecuting, "a"
		require.NoError(t, lease.Checkpoint(ctx, cp))
		require.True(t, lease.SuspendRequested(), "a checkpoint that keeps running leaves it pending")
		require.NoError(t, lease.Release(ctx))
		require.False(t, lease.SuspendRequested())
		require.Equal(t, driver.ExecutionSuspended, lease.Row.Status)
		require.Equal(t, driver.ExecutionPending, lease.Row.SuspendedFrom)
		require.ErrorIs(t, lease.Heartbeat(ctx), ErrFenced, "released")

		row, err = e.Resume(ctx, id, "ops", "go")
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionPending, row.Status)
		require.NotNil(t, row.WakeAt)

		// Another instance takes it: this lease's heartbeat fails for good.
		other, err := e.Acquire(ctx, id)
		require.NoError(t, err)
		require.ErrorIs(t, lease.Heartbeat(ctx), ErrFenced)
		stop := other.KeepAlive(ctx)
		stop()
		stop() // stopping twice is harmless
		require.NoError(t, other.Release(ctx))
	})
}
