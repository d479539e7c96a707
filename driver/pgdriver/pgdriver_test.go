package pgdriver_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/driver/drivertest"
	"github.com/commandbus/commandbus/internal/dbtest"
)

func TestDriver(t *testing.T) {
	t.Parallel()
	drivertest.Exercise(t, func(t *testing.T) driver.Driver { return dbtest.Postgres(t) })
}

func TestUnwrapTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	drv := dbtest.Postgres(t)

	insertIn := func(t *testing.T, exec driver.Executor) uuid.UUID {
		t.Helper()
		id := uuid.New()
		_, err := exec.CommandInsertMany(ctx, &driver.CommandInsertManyParams{Commands: []*driver.CommandInsertParams{{
			ID: id, Domain: "d", Queue: "q", Type: "T", MaxAttempts: 1,
		}}})
		require.NoError(t, err)
		return id
	}

	t.Run("RollbackDiscardsCommandbusWrites", func(t *testing.T) {
		t.Parallel()
		tx, err := drv.Pool().Begin(ctx)
		require.NoError(t, err)
		exec, err := drv.UnwrapTx(tx)
		require.NoError(t, err)
		id := insertIn(t, exec)
		_, err = exec.CommandGetByID(ctx, id)
		require.NoError(t, err)
		require.NoError(t, tx.Rollback(ctx))
		_, err = drv.Executor().CommandGetByID(ctx, id)
		require.ErrorIs(t, err, driver.ErrNotFound)
	})

	t.Run("CommitPublishesCommandbusWrites", func(t *testing.T) {
		t.Parallel()
		tx, err := drv.Pool().Begin(ctx)
		require.NoError(t, err)
		exec, err := drv.UnwrapTx(tx)
		require.NoError(t, err)
		id := insertIn(t, exec)
		require.NoError(t, tx.Commit(ctx))
		_, err = drv.Executor().CommandGetByID(ctx, id)
		require.NoError(t, err)
	})
}
