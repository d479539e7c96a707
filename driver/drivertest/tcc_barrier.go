package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
)

func exerciseTccBarrier(t *testing.T, setup setupFunc) {
	ctx := context.Background()
	t.Run("FirstWriteWinsPerPhase", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec := func(phase, origin string, at time.Time) bool {
			t.Helper()
			first, err := b.exec.TccBarrierInsert(ctx, &driver.TccBarrierInsertParams{Transaction: "tx-1", Participant: "flight", Phase: phase, Origin: origin, Now: &at})
			require.NoError(t, err)
			return first
		}
		require.True(t, rec("TRY", "CANCEL", t0), "an empty cancel's TRY record")
		require.False(t, rec("TRY", "TRY", t0.Add(time.Second)), "the late try finds it")
		require.True(t, rec("CANCEL", "CANCEL", t0))
		require.False(t, rec("CANCEL", "CANCEL", t0), "a duplicate cancel")
		row, err := b.exec.TccBarrierGet(ctx, "tx-1", "flight", "TRY")
		require.NoError(t, err)
		require.Equal(t, driver.TccBarrierRow{Transaction: "tx-1", Participant: "flight", Phase: "TRY", Origin: "CANCEL", CreatedAt: row.CreatedAt}, *row,
			"the first write is kept")
		requireTime(t, t0, row.CreatedAt, "created_at")
		_, err = b.exec.TccBarrierGet(ctx, "tx-1", "flight", "CONFIRM")
		require.ErrorIs(t, err, driver.ErrNotFound)
		_, err = b.exec.TccBarrierGet(ctx, "tx-1", "hotel", "TRY")
		require.ErrorIs(t, err, driver.ErrNotFound, "another participant's branch is its own")

		// Rolled back with the participant's effects: the phase was not applied.
		tx, err := b.exec.Begin(ctx)
		require.NoError(t, err)
		first, err := tx.TccBarrierInsert(ctx, &driver.TccBarrierInsertParams{Transaction: "tx-2", Participant: "flight", Phase: "TRY", Origin: "TRY", Now: &t0})
		require.NoError(t, err)
		require.True(t, first)
		require.NoError(t, tx.Rollback(ctx))
		_, err = b.exec.TccBarrierGet(ctx, "tx-2", "flight", "TRY")
		require.ErrorIs(t, err, driver.ErrNotFound)
	})
}
