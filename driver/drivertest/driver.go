package drivertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
)

func exerciseDriver(t *testing.T, setup setupFunc) {
	t.Run("Identity", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		switch b.drv.Name() {
		case "postgres":
			require.True(t, b.drv.SupportsListenNotify())
			require.NotEmpty(t, b.drv.Schema())
		case "sqlite":
			require.False(t, b.drv.SupportsListenNotify())
			require.Empty(t, b.drv.Schema())
		default:
			t.Fatalf("unexpected driver name %q", b.drv.Name())
		}
	})

	t.Run("MigrationsAreNumberedAndSubstituted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		migrations := b.drv.Migrations()
		require.NotEmpty(t, migrations)
		require.Equal(t, 1, migrations[0].Version)
		require.Equal(t, "command_bus", migrations[0].Name)
		for i, m := range migrations {
			require.Equal(t, i+1, m.Version)
			require.NotEmpty(t, m.Up)
			require.NotEmpty(t, m.Down)
			require.NotContains(t, m.Up, "{schema}")
			require.NotContains(t, m.Down, "{schema}")
		}
	})

	t.Run("UnwrapTxRejectsWrongType", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, tx := range []any{nil, struct{}{}, "tx", b.exec} {
			exec, err := b.drv.UnwrapTx(tx)
			require.ErrorIs(t, err, driver.ErrWrongTxType, "%T", tx)
			require.Nil(t, exec)
		}
	})

	t.Run("Exec", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := context.Background()
		require.NoError(t, b.exec.Exec(ctx, `CREATE TABLE {schema}.drivertest_exec (id integer PRIMARY KEY)`))
		require.NoError(t, b.exec.Exec(ctx, `INSERT INTO {schema}.drivertest_exec (id) VALUES (1)`))
		// The row is there: inserting it again violates the primary key.
		require.Error(t, b.exec.Exec(ctx, `INSERT INTO {schema}.drivertest_exec (id) VALUES (1)`))
		// Several statements in one call, as migrations need.
		require.NoError(t, b.exec.Exec(ctx, `INSERT INTO {schema}.drivertest_exec (id) VALUES (2);
			INSERT INTO {schema}.drivertest_exec (id) VALUES (3)`))
		require.Error(t, b.exec.Exec(ctx, `INSERT INTO {schema}.drivertest_exec (id) VALUES (3)`))
		require.NoError(t, b.exec.Exec(ctx, `DROP TABLE {schema}.drivertest_exec`))
		require.Error(t, b.exec.Exec(ctx, `DROP TABLE {schema}.drivertest_exec`))
		require.Error(t, b.exec.Exec(ctx, `THIS IS NOT SQL`))
	})
}

func exerciseTransaction(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("CommitPublishesWrites", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tx, err := b.exec.Begin(ctx)
		require.NoError(t, err)
		cmd := newCommand("d", "q", "T")
		insert(t, tx, &t0, cmd)
		require.Equal(t, cmd.ID, get(t, tx, cmd.ID).ID, "the transaction reads its own writes")
		requireNotFound(t, b.exec, cmd.ID)
		require.NoError(t, tx.Commit(ctx))
		require.Equal(t, cmd.ID, get(t, b.exec, cmd.ID).ID)
		require.Error(t, tx.Commit(ctx), "a transaction commits once")
	})

	t.Run("RollbackDiscardsWrites", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tx, err := b.exec.Begin(ctx)
		require.NoError(t, err)
		cmd := newCommand("d", "q", "T")
		insert(t, tx, &t0, cmd)
		require.NoError(t, tx.Rollback(ctx))
		requireNotFound(t, b.exec, cmd.ID)
		// The connection is usable afterwards.
		other := newCommand("d", "q", "T")
		insert(t, b.exec, &t0, other)
		get(t, b.exec, other.ID)
	})

	t.Run("Nested", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		outer, err := b.exec.Begin(ctx)
		require.NoError(t, err)
		kept, discarded, committed := newCommand("d", "q", "T"), newCommand("d", "q", "T"), newCommand("d", "q", "T")
		insert(t, outer, &t0, kept)

		inner, err := outer.Begin(ctx)
		require.NoError(t, err)
		insert(t, inner, &t0, discarded)
		get(t, inner, kept.ID)
		require.NoError(t, inner.Rollback(ctx))
		requireNotFound(t, outer, discarded.ID)
		get(t, outer, kept.ID)

		inner, err = outer.Begin(ctx)
		require.NoError(t, err)
		insert(t, inner, &t0, committed)
		innermost, err := inner.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, innermost.Commit(ctx))
		require.NoError(t, inner.Commit(ctx))
		get(t, outer, committed.ID)
		requireNotFound(t, b.exec, committed.ID)

		require.NoError(t, outer.Commit(ctx))
		get(t, b.exec, kept.ID)
		get(t, b.exec, committed.ID)
		requireNotFound(t, b.exec, discarded.ID)
	})

	t.Run("NestedCommitUndoneByOuterRollback", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		outer, err := b.exec.Begin(ctx)
		require.NoError(t, err)
		inner, err := outer.Begin(ctx)
		require.NoError(t, err)
		cmd := newCommand("d", "q", "T")
		insert(t, inner, &t0, cmd)
		require.NoError(t, inner.Commit(ctx))
		require.NoError(t, outer.Rollback(ctx))
		requireNotFound(t, b.exec, cmd.ID)
	})

	t.Run("WithTx", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		failed := newCommand("d", "q", "T")
		errBoom := errors.New("boom")
		err := driver.WithTx(ctx, b.exec, func(tx driver.ExecutorTx) error {
			insert(t, tx, &t0, failed)
			return errBoom
		})
		require.ErrorIs(t, err, errBoom)
		requireNotFound(t, b.exec, failed.ID)

		succeeded := newCommand("d", "q", "T")
		require.NoError(t, driver.WithTx(ctx, b.exec, func(tx driver.ExecutorTx) error {
			insert(t, tx, &t0, succeeded)
			return nil
		}))
		get(t, b.exec, succeeded.ID)
	})

	t.Run("FailedMethodLeavesTransactionUsable", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tx, err := b.exec.Begin(ctx)
		require.NoError(t, err)
		cmd := newCommand("d", "q", "T")
		insert(t, tx, &t0, cmd)
		// A not-found operator action is an answer, not a failed statement.
		_, err = tx.CommandOperatorAction(ctx, &driver.CommandOperatorParams{
			ID: uuid.New(), FromStatuses: []driver.CommandStatus{driver.CommandStatusPending},
			ToStatus: driver.CommandStatusCancelled, Event: "CANCELLED", Actor: "op", Now: &t0,
		})
		require.ErrorIs(t, err, driver.ErrNotFound)
		_, err = tx.CommandOperatorAction(ctx, &driver.CommandOperatorParams{
			ID: cmd.ID, FromStatuses: []driver.CommandStatus{driver.CommandStatusInTSQ},
			ToStatus: driver.CommandStatusCancelled, Event: "CANCELLED", Actor: "op", Now: &t0,
		})
		require.ErrorIs(t, err, driver.ErrConflict)
		get(t, tx, cmd.ID)
		require.NoError(t, tx.Commit(ctx))
		get(t, b.exec, cmd.ID)
	})
}

func exerciseNotify(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	listen := func(t *testing.T, drv driver.Driver) driver.Listener {
		t.Helper()
		l := drv.Listener()
		require.NoError(t, l.Connect(ctx))
		t.Cleanup(func() { _ = l.Close(context.Background()) })
		require.NoError(t, l.Listen(ctx))
		return l
	}
	// wait returns the next topic; the timeout only bounds a failing test.
	wait := func(t *testing.T, l driver.Listener) string {
		t.Helper()
		waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		topic, err := l.WaitForNotification(waitCtx)
		require.NoError(t, err)
		return topic
	}

	t.Run("EveryListenerReceivesEveryTopic", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first, second := listen(t, b.drv), listen(t, b.drv)
		require.NoError(t, b.exec.Notify(ctx, nil))
		require.NoError(t, b.exec.Notify(ctx, []string{"queue:a", "queue:b"}))
		for _, l := range []driver.Listener{first, second} {
			require.ElementsMatch(t, []string{"queue:a", "queue:b"}, []string{wait(t, l), wait(t, l)})
		}
		require.NoError(t, b.exec.Notify(ctx, []string{"queue:c"}))
		require.Equal(t, "queue:c", wait(t, first))
		require.Equal(t, "queue:c", wait(t, second))
	})

	t.Run("TransactionDeliversOnCommitOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := listen(t, b.drv)

		rolledBack, err := b.exec.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, rolledBack.Notify(ctx, []string{"tx:rolled-back"}))
		require.NoError(t, rolledBack.Rollback(ctx))

		committed, err := b.exec.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, committed.Notify(ctx, []string{"tx:committed"}))
		nested, err := committed.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, nested.Notify(ctx, []string{"tx:nested-rolled-back"}))
		require.NoError(t, nested.Rollback(ctx))
		nested, err = committed.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, nested.Notify(ctx, []string{"tx:nested-committed"}))
		require.NoError(t, nested.Commit(ctx))
		// Sent outside the transaction after its notifications but before its commit: it
		// arrives first, which shows the transaction's topics wait for the commit.
		require.NoError(t, b.exec.Notify(ctx, []string{"plain"}))
		require.Equal(t, "plain", wait(t, l))
		require.NoError(t, committed.Commit(ctx))

		require.ElementsMatch(t, []string{"tx:committed", "tx:nested-committed"}, []string{wait(t, l), wait(t, l)})
		// Nothing from the rolled-back transactions is queued behind them.
		require.NoError(t, b.exec.Notify(ctx, []string{"last"}))
		require.Equal(t, "last", wait(t, l))
	})

	t.Run("WaitEndsWithContext", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		l := listen(t, b.drv)
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		_, err := l.WaitForNotification(cancelled)
		require.Error(t, err)
	})
}

func exerciseMigration(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("VersionTable", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rows, err := b.exec.MigrationGetAll(ctx)
		require.NoError(t, err)
		require.Len(t, rows, len(b.drv.Migrations()))
		require.Equal(t, 1, rows[0].Version)
		require.Equal(t, "command_bus", rows[0].Name)
		require.WithinDuration(t, time.Now(), rows[0].AppliedAt, within)

		require.NoError(t, b.exec.MigrationInsert(ctx, &driver.MigrationInsertParams{Version: 99, Name: "drivertest_extra"}))
		require.Error(t, b.exec.MigrationInsert(ctx, &driver.MigrationInsertParams{Version: 99, Name: "again"}))
		rows, err = b.exec.MigrationGetAll(ctx)
		require.NoError(t, err)
		require.Equal(t, 99, rows[len(rows)-1].Version)
		require.Equal(t, "drivertest_extra", rows[len(rows)-1].Name)
		for i := 1; i < len(rows); i++ {
			require.Less(t, rows[i-1].Version, rows[i].Version, "ascending versions")
		}

		require.NoError(t, b.exec.MigrationDelete(ctx, "", 99))
		rows, err = b.exec.MigrationGetAll(ctx)
		require.NoError(t, err)
		require.Len(t, rows, len(b.drv.Migrations()))
	})

	t.Run("LockAndEnsureInTransaction", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, driver.WithTx(ctx, b.exec, func(tx driver.ExecutorTx) error {
			require.NoError(t, tx.MigrationLock(ctx))
			require.NoError(t, tx.MigrationTableEnsure(ctx))
			require.NoError(t, tx.MigrationTableEnsure(ctx))
			rows, err := tx.MigrationGetAll(ctx)
			require.NoError(t, err)
			require.Len(t, rows, len(b.drv.Migrations()), "ensuring keeps the rows")
			return nil
		}))
	})

	t.Run("MissingTable", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.exec.Exec(ctx, `DROP TABLE {schema}.migration`))
		rows, err := b.exec.MigrationGetAll(ctx)
		require.NoError(t, err)
		require.Empty(t, rows)
		require.NoError(t, b.exec.MigrationTableEnsure(ctx))
		rows, err = b.exec.MigrationGetAll(ctx)
		require.NoError(t, err)
		require.Empty(t, rows)
		require.NoError(t, b.exec.MigrationInsert(ctx, &driver.MigrationInsertParams{Version: 1, Name: "command_bus"}))
		rows, err = b.exec.MigrationGetAll(ctx)
		require.NoError(t, err)
		require.Len(t, rows, 1)
	})

	t.Run("DownAndUpAgain", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		migrations := b.drv.Migrations()
		for i := len(migrations) - 1; i >= 0; i-- {
			require.NoError(t, b.exec.Exec(ctx, migrations[i].Down))
		}
		_, err := b.exec.CommandGetByID(ctx, uuid.New())
		require.Error(t, err)
		require.False(t, errors.Is(err, driver.ErrNotFound), "the command table is gone")
		for _, m := range migrations {
			require.NoError(t, b.exec.Exec(ctx, m.Up), "migration %03d", m.Version)
		}
		requireNotFound(t, b.exec, uuid.New())
	})
}
