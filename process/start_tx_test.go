package process_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/process"
)

// callerTx begins a transaction of the kind drv's UnwrapTx takes and returns it with its commit
// and rollback.
func callerTx(t *testing.T, drv driver.Driver) (tx any, commit, rollback func() error) {
	t.Helper()
	ctx := context.Background()
	switch d := drv.(type) {
	case interface{ Pool() *pgxpool.Pool }:
		pgTx, err := d.Pool().Begin(ctx)
		require.NoError(t, err)
		return pgTx, func() error { return pgTx.Commit(ctx) }, func() error { return pgTx.Rollback(ctx) }
	case interface{ DB() *sql.DB }:
		sqlTx, err := d.DB().BeginTx(ctx, nil)
		require.NoError(t, err)
		return sqlTx, sqlTx.Commit, sqlTx.Rollback
	}
	t.Fatalf("unknown driver %T", drv)
	return nil, nil, nil
}

// Executions started InTx exist only if the caller's transaction commits; then the runners take
// them up.
func TestStartInCallersTransaction(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		b := setupOrder(t, drv, &orderProcess{})
		ctx := context.Background()

		tx, _, rollback := callerTx(t, drv)
		id, err := b.manager.Start(ctx, orderState{OrderID: "rolled back"}, process.InTx(tx))
		require.NoError(t, err)
		require.NoError(t, rollback())
		_, err = b.manager.Get(ctx, id)
		require.True(t, errors.Is(err, driver.ErrNotFound), "a rolled-back start leaves no execution: %v", err)

		tx, commit, _ := callerTx(t, drv)
		ids, err := b.manager.StartBatch(ctx, []orderState{{OrderID: "7"}, {OrderID: "8"}}, process.InTx(tx))
		require.NoError(t, err)
		require.NoError(t, commit())
		for _, id := range ids {
			inst := waitStatus(t, b.manager, id, driver.ExecutionWaitingForAsync)
			require.Equal(t, "R-"+inst.State.OrderID, inst.State.Reserved)
		}

		tx, _, rollback = callerTx(t, drv)
		_, err = b.manager.Start(ctx, orderState{OrderID: "9"}, process.InTx(tx), process.Immediate())
		require.ErrorContains(t, err, "RunNow after the commit")
		require.NoError(t, rollback())
		_, err = b.manager.Start(ctx, orderState{OrderID: "9"}, process.InTx("not a transaction"))
		require.ErrorIs(t, err, driver.ErrWrongTxType)
	})
}
